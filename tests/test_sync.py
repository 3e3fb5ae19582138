"""Several machines sharing one store through git: `gc remote`, `gc clone`, `gc sync`.

Machines are stores in temp dirs; remotes are real bare repositories (`git init --bare`) and
a real `git daemon`; the remote is checked with real git (`fsck --strict`, `log`) after.
The soak's writers make 4 writes each here (one of each kind), and write for 10 s in CI (the
`ci` profile; `GC_SYNC_SOAK_SECONDS=30` for the issue's full 30 s).
"""

from __future__ import annotations

import http.server
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from beads.errors import StorageError
from beads.records.codec import dump_bead
from beads.records.record import Bead
from beads.store import Store
from beads.sync.merge import merge_bead
from tests.conftest import THOROUGH, GcRunner, copy_store, copy_tree, gc_program


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def bare(path: Path) -> Path:
    git("init", "-q", "--bare", "-b", "main", str(path))
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[str]:
    """A real `git daemon` serving `tmp_path/srv` (push enabled); yields its base URL."""
    base = tmp_path / "srv"
    base.mkdir()
    bare(base / "shared.git")
    port = free_port()
    process = subprocess.Popen(
        ["git", "daemon", "--export-all", "--enable=receive-pack", "--reuseaddr",
         f"--base-path={base}", "--listen=127.0.0.1", f"--port={port}", str(base)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60  # bounds a hang only
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "git daemon did not start"
                time.sleep(0.05)
        yield f"git://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def machine(tmp_path: Path, name: str) -> GcRunner:
    where = tmp_path / name
    where.mkdir()
    return GcRunner(where)


def head(runner: GcRunner) -> str:
    return git("-C", str(runner.cwd / ".beads" / ".git"), "rev-parse", "main")


def tree(runner: GcRunner) -> str:
    return git("-C", str(runner.cwd / ".beads" / ".git"), "rev-parse", "main^{tree}")


def make_id(runner: GcRunner, *args: str) -> str:
    return runner.json("bead", "create", "--type", "task", *args)["bead"]["id"]


def quarantines(runner: GcRunner) -> list[Path]:
    """The fetch quarantines in the store's objects directory (`beads.git.quarantine`)."""
    return sorted((runner.cwd / ".beads" / ".git" / "objects").glob("incoming-*"))


def objects_held(runner: GcRunner) -> tuple[int, int]:
    """The files of the store's objects directory, outside any fetch quarantine, and their
    bytes in all: read while no background repack runs (its lock held)."""
    from beads.git.maintenance import locked

    git_dir = runner.cwd / ".beads" / ".git"
    objects = git_dir / "objects"
    with locked(git_dir):
        sizes = [
            path.stat().st_size
            for path in objects.rglob("*")
            if path.is_file() and not path.relative_to(objects).parts[0].startswith("incoming-")
        ]
    return len(sizes), sum(sizes)


def holds_no_more(runner: GcRunner, before: tuple[int, int]) -> bool:
    """Whether the store holds no more object files nor bytes than `before`, and no fetch
    quarantine."""
    files, size = objects_held(runner)
    return files <= before[0] and size <= before[1] and not quarantines(runner)


def copy_template(template: Path, into: Path) -> None:
    """Copy what a template fixture made (a bare `remote.git`, machines) into `into`, each
    store's remote moved with it. Approvals, kept outside a store by its path, are not
    copied: a copy's first command records its first run, as with `gc_store`'s copies. For
    b that approves what its clone did (nothing): gc init's config.yaml holds no guarded
    setting."""
    for part in template.iterdir():
        copy_tree(part, into / part.name)
    for config in into.glob("*/.beads/.git/config"):
        config.write_text(config.read_text().replace(str(template), str(into)))


@pytest.fixture(scope="session")
def pair_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A remote, machine a (made with `gc init`, pushed) and machine b (made with `gc
    clone`), made once a session (per xdist worker): `pair` copies them."""
    root = tmp_path_factory.mktemp("pair-template")
    remote = bare(root / "remote.git")
    a, b = machine(root, "a"), machine(root, "b")
    assert a("init").returncode == 0
    assert a("remote", "add", "origin", str(remote)).returncode == 0
    assert a("sync").returncode == 0
    assert b("clone", str(remote)).returncode == 0
    return root


def served_pair(
    tmp_path: Path, pair_template: Path, daemon_url: str | None, name: str
) -> tuple[Path, str, GcRunner, GcRunner]:
    """The pair `pair_template` made, copied into `tmp_path` with its remote moved to where a
    remote of `name` is reached: served by the `git daemon` of `daemon_url` (its base is
    `tmp_path/srv`) or, for None, a local path. Returns the remote, its URL, machine a (made
    with `gc init`, pushed) and b (made with `gc clone`), both pointed at that URL."""
    copy_template(pair_template, tmp_path)
    remote = tmp_path / "srv" / f"{name}.git" if daemon_url else tmp_path / f"{name}.git"
    (tmp_path / "remote.git").rename(remote)
    url = f"{daemon_url}/{name}.git" if daemon_url else str(remote)
    for side in ("a", "b"):
        config = tmp_path / side / ".beads" / ".git" / "config"
        text = config.read_text().replace(f"url = {tmp_path / 'remote.git'}\n", f"url = {url}\n")
        assert f"url = {url}\n" in text
        config.write_text(text)
    return remote, url, GcRunner(tmp_path / "a"), GcRunner(tmp_path / "b")


@pytest.fixture
def pair(tmp_path: Path, pair_template: Path) -> tuple[GcRunner, GcRunner, Path]:
    """Machine a (made with `gc init`, pushed) and machine b (made with `gc clone`)."""
    copy_template(pair_template, tmp_path)
    return GcRunner(tmp_path / "a"), GcRunner(tmp_path / "b"), tmp_path / "remote.git"


def test_a_remote_that_is_a_fifo_or_a_device_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for source in (str(fifo), f"file://{fifo}", "/dev/zero"):
        result = subprocess.run(
            [gc_program(), "clone", source, str(tmp_path / "copy")],
            capture_output=True,
            text=True,
            timeout=30,  # before, the clone opened the FIFO and waited for ever
        )
        assert result.returncode == 30, result.stderr
        assert result.stderr.endswith("it is not a directory (a remote is a git repository)\n")
        assert not (tmp_path / "copy").exists()


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/x", "ssh://[::1", "git://[::1]:70000/x"])
def test_a_url_whose_address_does_not_parse_is_refused_as_such(gc: GcRunner, url: str) -> None:
    # Not taken for an scp-like ssh address, whose host would be the scheme's name.
    result = gc("clone", url, "copy")
    assert result.returncode == 30, result.stderr
    assert result.stderr.startswith(f"gc: cannot use remote '{url}': ")
    assert "ssh" not in result.stderr.removeprefix(f"gc: cannot use remote '{url}': ")


NO_BUNDLE = "it is a file that is neither a git repository nor a git bundle"


@pytest.mark.parametrize(
    "content",
    [b"# v2 git bundle\n", b"# v3 git bundle\n@object-format=sha1\n", b"", b"junk\n"],
    ids=["bundle-header-only", "v3-header-only", "empty", "junk"],
)
def test_a_remote_that_is_a_file_but_no_bundle_is_refused_in_one_line(
    gc_store: GcRunner, tmp_path: Path, content: bytes
) -> None:
    (tmp_path / "fake").write_bytes(content)
    cloned = gc_store("clone", "fake", "copy")
    assert cloned.returncode == 30, cloned.stderr
    assert cloned.stderr.startswith(f"gc: cannot use remote 'fake': {NO_BUNDLE}")
    assert len(cloned.stderr.splitlines()) == 1
    assert not (tmp_path / "copy").exists()
    before = head(gc_store)
    assert gc_store("remote", "add", "origin", str(tmp_path / "fake")).returncode == 0
    synced = gc_store("sync")
    assert synced.returncode == 30, synced.stderr
    assert synced.stderr.endswith(cloned.stderr.removeprefix("gc: cannot use remote 'fake'"))
    assert head(gc_store) == before
    assert not (tmp_path / ".beads" / ".git" / "refs" / "remotes").exists()


def test_a_truncated_bundle_is_refused_in_one_line_and_nothing_is_made(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    _a, _b, remote = pair
    whole = tmp_path / "whole.bundle"
    git("bundle", "create", str(whole), "main", cwd=remote)
    data = whole.read_bytes()
    pack = data.index(b"PACK")
    assert GcRunner(tmp_path)("clone", str(whole), "from-whole").returncode == 0
    (tmp_path / "header-cut").write_bytes(data[: pack // 2])  # within its line of refs
    (tmp_path / "pack-cut").write_bytes(data[: pack + (len(data) - pack) // 2])
    for cut, code, words in [
        ("header-cut", 30, f"cannot use remote 'header-cut': {NO_BUNDLE}"),
        ("pack-cut", 50, "the remote pack-cut sent a pack that does not read"),
    ]:
        result = GcRunner(tmp_path)("clone", cut, "copy")
        assert result.returncode == code, result.stderr
        assert result.stderr.startswith(f"gc: {words}") and len(result.stderr.splitlines()) == 1
        assert not (tmp_path / "copy").exists()


def test_a_bundle_named_by_a_file_url_is_refused_in_words(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    _a, _b, remote = pair
    bundle = tmp_path / "whole.bundle"
    git("bundle", "create", str(bundle), "main", cwd=remote)
    result = GcRunner(tmp_path)("clone", f"file://{bundle}", "copy")
    assert result.returncode == 30, result.stderr
    assert result.stderr.endswith("it is a git bundle: name it by its path, not a file:// URL\n")
    assert not (tmp_path / "copy").exists()


def test_a_bundle_remote_is_fetched_from_and_a_push_to_it_is_refused_in_words(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    _a, _b, remote = pair
    git("bundle", "create", str(tmp_path / "store.bundle"), "main", cwd=remote)
    side = machine(tmp_path, "c")
    assert side("clone", str(tmp_path / "store.bundle")).returncode == 0
    assert side.json("sync")["sync"]["action"] == "none"
    made = make_id(side, "--title", "kept here")
    result = side("sync")
    assert result.returncode == 30, result.stderr
    assert result.stderr.startswith(f"gc: the remote {tmp_path / 'store.bundle'} is a git bundle")
    assert "nothing was pushed" in result.stderr and len(result.stderr.splitlines()) == 1
    assert side.json("bead", "show", made)["bead"]["title"] == "kept here"


def test_a_bundle_over_the_fetch_limit_is_refused_by_its_size_before_it_is_read(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    a, b, remote = pair
    make_id(a, "--title", "big", "--body", os.urandom(300_000).hex())  # 600 KB of no pattern
    assert a("sync").returncode == 0
    bundle = tmp_path / "store.bundle"
    git("bundle", "create", str(bundle), "main", cwd=remote)
    assert b("config", "set", "--local", "sync.max_fetch_bytes", "64KiB").returncode == 0
    assert b("remote", "add", "usb", str(bundle)).returncode == 0
    before = head(b)
    result = b("sync", "usb")
    assert result.returncode == 30, result.stderr
    size = bundle.stat().st_size
    assert result.stderr == (
        f"gc: the remote {bundle} is a bundle of {size} bytes, over the 65536 one fetch may "
        "bring (sync.max_fetch_bytes); nothing was merged\n"
    )
    assert head(b) == before


def test_a_clone_from_a_relative_path_syncs_from_any_directory_of_the_store(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    a, _b, remote = pair
    side = machine(tmp_path, "c")
    assert side("clone", "../remote.git").returncode == 0
    # Recorded absolute, as git clone records it: the store's commands run from anywhere.
    assert side.json("remote", "list")["remotes"] == [{"name": "origin", "url": str(remote)}]
    made = make_id(a, "--title", "from a")
    assert a("sync").returncode == 0
    (side.cwd / "deeper").mkdir()
    assert side("sync", cwd=side.cwd / "deeper").returncode == 0
    assert side.json("bead", "show", made)["bead"]["title"] == "from a"


def test_a_clone_killed_mid_fetch_leaves_nothing_after_the_next_clone(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    _a, _b, remote = pair
    side = machine(tmp_path, "c")
    killed = side.subprocess("clone", str(remote), env={"GC_FAULT_POINT": "fetch-half-stored"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    root = side.cwd / ".beads"
    [left] = root.iterdir()
    assert left.name.startswith(".git-init-")  # the repository it was building
    assert side("clone", str(remote)).returncode == 0
    # The killed clone's repository is gone with the next clone, as with the next init.
    assert not list(root.glob(".git-init-*"))
    assert side("doctor").stdout.strip() == "store is healthy"


def test_a_remote_added_by_a_relative_path_syncs_from_any_directory_of_the_store(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    a, _b, remote = pair
    added = a.json("remote", "add", "spare", "../remote.git")
    assert added["remote"]["url"] == str(remote)  # recorded absolute, as a clone records it
    (a.cwd / "deeper").mkdir()
    assert a("sync", "spare", cwd=a.cwd / "deeper").returncode == 0
    assert {"name": "spare", "url": str(remote)} in a.json("remote", "list")["remotes"]
    # A URL is kept as written; so is a path whose directory is not there yet.
    assert a.json("remote", "add", "web", "git://127.0.0.1/x")["remote"]["url"] == (
        "git://127.0.0.1/x"
    )


def test_a_remote_removed_and_added_again_starts_with_no_status_of_the_old_one(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    a, _b, remote = pair
    assert a("remote", "add", "spare", str(tmp_path / "nothing.git")).returncode == 0
    assert a("sync", "spare").returncode != 0
    assert a.json("sync", "--status", "spare")["status"]["last_error"]
    state = a.cwd / ".beads" / ".runtime" / "sync" / "state.json"
    last_attempt = state.stat().st_mtime
    assert a("remote", "remove", "spare").returncode == 0
    assert state.stat().st_mtime == last_attempt  # what `sync.auto` times its next sync by
    assert a("remote", "add", "spare", str(remote)).returncode == 0
    status = a.json("sync", "--status", "spare")["status"]
    assert (status["last_error"], status["last_attempt"], status["synced"]) == (None, None, False)
    assert a.json("sync", "--status")["status"]["remote"] == "origin"  # the others kept


@pytest.mark.parametrize("url", ["git://127.0.0.1:70000/x", "ssh://[::1", "http://[::1/x"])
def test_remote_add_refuses_an_address_that_does_not_parse_as_a_sync_would(
    gc_store: GcRunner, url: str
) -> None:
    config = gc_store.cwd / ".beads" / ".git" / "config"
    before = config.read_bytes()
    added = gc_store("remote", "add", "spare", url)
    assert added.returncode == 30, added.stderr
    assert added.stderr == gc_store("clone", url, "copy").stderr  # a sync's check and words
    assert added.stderr.startswith(f"gc: cannot use remote '{url}': ")
    assert len(added.stderr.splitlines()) == 1
    assert config.read_bytes() == before


@pytest.mark.parametrize("url", ["ext::sh -c id", "fd::0", "ext::ssh -o ProxyCommand=id x"])
def test_a_remote_helper_url_is_refused_in_one_line_and_never_looked_up(
    gc_store: GcRunner, url: str
) -> None:
    # It was recorded, and a sync took it for an ssh address on a host named "ext".
    said = f"gc: cannot use remote '{url}': git's remote helpers (TRANSPORT::ADDRESS) are not used"
    added = gc_store("remote", "add", "spare", url)
    assert added.returncode == 30 and added.stderr.startswith(said), added.stderr
    assert "spare" not in gc_store.json("remote", "list")["remotes"]
    cloned = gc_store("clone", url, "copy")
    assert cloned.returncode == 30 and cloned.stderr.startswith(said), cloned.stderr
    assert not (gc_store.cwd / "copy").exists()


def test_an_empty_remote_url_is_refused_as_bad_input(gc_store: GcRunner) -> None:
    said = "gc: cannot use remote '': it is empty: name a path or URL\n"
    cloned = gc_store("clone", "", "copy")
    assert (cloned.returncode, cloned.stderr) == (30, said)
    assert not (gc_store.cwd / "copy").exists()
    added = gc_store("remote", "add", "spare", "")
    assert (added.returncode, added.stderr) == (30, said)
    blank = gc_store("remote", "add", "spare", " ")
    assert (blank.returncode, blank.stderr) == (30, said.replace("''", "' '"))
    # A remote whose URL someone emptied in the git config is refused by the sync alike.
    git("config", "remote.origin.url", "", cwd=gc_store.cwd / ".beads" / ".git")
    synced = gc_store("sync", "origin")
    assert (synced.returncode, synced.stderr) == (30, said)


def test_remote_remove_removes_its_remote_tracking_refs_and_their_directory(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    a, _b, remote = pair
    git_dir = a.cwd / ".beads" / ".git"
    assert a("remote", "add", "spare", str(remote)).returncode == 0
    assert a("remote", "add", "spare2", str(remote)).returncode == 0
    assert a("sync", "spare").returncode == 0 and a("sync", "spare2").returncode == 0
    git("update-ref", "refs/remotes/spare/other", head(a), cwd=git_dir)  # as a `git fetch`
    git("pack-refs", "--all", cwd=git_dir)  # one packed, as git gc leaves them
    git("update-ref", "refs/remotes/spare/main", head(a), cwd=git_dir)  # and one loose
    assert a("remote", "remove", "spare").returncode == 0
    assert git("for-each-ref", "refs/remotes/spare/", cwd=git_dir) == ""
    assert not (git_dir / "refs" / "remotes" / "spare").exists()
    assert git("for-each-ref", "--format=%(refname)", "refs/remotes/", cwd=git_dir).split() == [
        "refs/remotes/origin/main", "refs/remotes/spare2/main",
    ]  # fmt: skip
    git("fsck", "--strict", cwd=git_dir)
    assert a("remote", "add", "spare", str(remote)).returncode == 0
    assert a.json("sync", "--status", "spare")["status"]["remote_head"] is None


def test_remote_commands_and_clone(tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]) -> None:
    a, b, remote = pair
    assert a.json("remote", "list")["remotes"] == [{"name": "origin", "url": str(remote)}]
    assert a("remote", "add", "origin", "/elsewhere").returncode == 30
    assert a("remote", "add", "spare", "/elsewhere").returncode == 0
    assert a("remote", "remove", "spare").returncode == 0
    assert a("remote", "remove", "spare").returncode == 40
    # Remotes live in the store's git config, never in the synced config.yaml.
    assert "remote" not in (a.cwd / ".beads" / "config.yaml").read_text()
    assert b.json("remote", "list")["remotes"][0]["url"] == str(remote)
    assert head(a) == head(b)
    made = make_id(a, "--title", "first")
    assert a("sync").returncode == 0
    assert b.json("sync")["sync"]["action"] == "fast-forward"
    assert b.json("bead", "show", made)["bead"]["title"] == "first"
    assert (b.cwd / ".beads" / "config.yaml").exists()  # the view is built
    assert b("clone", str(remote)).returncode == 30  # a store is there already
    git("fsck", "--strict", cwd=remote)


@pytest.mark.parametrize("name", ["a.lock", "a..b", "origin."])
def test_remote_add_refuses_a_name_git_cannot_use_in_a_ref(gc_store: GcRunner, name: str) -> None:
    gc = gc_store
    result = gc("remote", "add", name, "/elsewhere")
    assert result.returncode == 30, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and repr(name) in result.stderr
    assert gc.json("remote", "list")["remotes"] == []
    assert gc("config", "set", "--local", "sync.remote", name).returncode == 30
    assert gc("remote", "add", "o.k", "/elsewhere").returncode == 0  # a dot inside is fine


def test_same_bead_changed_on_both_sides_merges_by_the_rules(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    a, b, remote = pair
    shared = make_id(a, "--title", "shared", "--label", "keep", "--label", "drop")
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    # Different fields: title on a, labels on b; both survive.
    assert a("bead", "update", shared, "--title", "from a").returncode == 0
    assert (
        b("bead", "update", shared, "--add-label", "new", "--remove-label", "drop").returncode == 0
    )
    only_b = make_id(b, "--title", "b only")
    assert a("sync").returncode == 0
    result = b.json("sync")["sync"]
    assert result["action"] == "merge" and result["pushed"] and result["conflicts"] == []
    merged = b.json("bead", "show", shared)["bead"]
    assert merged["title"] == "from a" and merged["labels"] == ["keep", "new"]
    assert "merge_conflicts" not in merged["meta"]
    # The same field on both: the later updated_at wins; the loser is kept.
    assert a("sync").returncode == 0
    assert b("bead", "update", shared, "--title", "b's title").returncode == 0
    time.sleep(0.01)
    assert a("bead", "update", shared, "--title", "a's title").returncode == 0
    assert b("sync").returncode == 0
    result = a.json("sync")["sync"]
    assert result["action"] == "merge"
    assert 'title: kept "a\'s title", dropped "b\'s title"' in result["conflicts"][0]
    assert b("sync").returncode == 0
    for side in (a, b):
        bead = side.json("bead", "show", shared)["bead"]
        assert bead["title"] == "a's title"
        assert bead["meta"]["merge_conflicts"][-1]["dropped"] == "b's title"
        assert side.json("bead", "show", only_b)["bead"]["title"] == "b only"
    assert tree(a) == tree(b)
    # Closed beats open: a read (meta) on one side does not undo a close on the other.
    assert a("bead", "close", shared).returncode == 0
    assert b("bead", "update", shared, "--meta", "read=true").returncode == 0
    assert a("sync").returncode == 0 and b("sync").returncode == 0 and a("sync").returncode == 0
    for side in (a, b):
        bead = side.json("bead", "show", shared)["bead"]
        assert bead["status"] == "closed" and bead["meta"]["read"] == "true"
    # Git reads the result: a merge commit with two parents, readable messages, no markers.
    git("fsck", "--strict", cwd=remote)
    merges = git("log", "--merges", "--format=%P%x09%s", "main", cwd=remote).splitlines()
    assert merges and all(len(m.split("\t")[0].split()) == 2 for m in merges)
    assert "sync: merge origin/main" in merges[0]
    assert "<<<<<<<" not in git("log", "-p", "main", cwd=remote)
    assert git("log", "--merges", "--oneline", "main", cwd=remote)  # the histories did diverge
    assert "sync: merge origin/main" in a("log").stdout


def bead(updated: str, **fields: object) -> Bead:
    base = {"id": "gc-aaaaaaaa", "type": "thread", "title": "t", "sender": "x",
            "created_at": "2026-01-01T00:00:00.000000Z", "updated_at": updated}  # fmt: skip
    return Bead(**{**base, **fields})  # type: ignore[arg-type]


def lease(agent: str, claimed: str) -> dict[str, str]:
    return {"agent": agent, "token": agent, "claimed_at": claimed,
            "expires_at": "2099-01-01T00:00:00.000000Z"}  # fmt: skip


def test_merge_rules_are_symmetric_and_the_remotes_lease_keeps_the_thread() -> None:
    now = "2026-06-01T00:00:00.000000Z"
    t1, t2, t3 = (f"2026-01-01T00:00:0{n}.000000Z" for n in (1, 2, 3))
    base = bead(t1, meta={"status": "pending"}, labels=["x"])
    ann = bead(t2, assignee="ann", labels=["x", "a"], meta={"status": "open", "n": 1})
    bob = bead(t3, assignee="bob", labels=[], meta={"status": "open", "n": 2})
    one, lines = merge_bead(base, ann, bob, now)
    other, _ = merge_bead(base, bob, ann, now)
    assert dump_bead(one) == dump_bead(other)  # whichever machine merges, the same bytes
    assert one.assignee == "bob" and one.meta["n"] == 2  # the later update
    assert one.labels == ["a"]  # x removed on one side, a added on the other
    assert one.updated_at == bob.updated_at
    # Claimed on both sides: the remote's lease (`theirs`, accepted by the remote already)
    # keeps the thread, earlier or not: the local claim was never confirmed.
    early = bead(t2, assignee="ann", meta={"status": "claimed", "lease": lease("ann", t2)})
    late = bead(t3, assignee="bob", meta={"status": "claimed", "lease": lease("bob", t3)})
    kept, lines = merge_bead(base, early, late, now)
    assert kept.assignee == "bob" and kept.meta["lease"]["agent"] == "bob"
    assert any("meta.lease" in line for line in lines)
    assert merge_bead(base, late, early, now)[0].meta["lease"]["agent"] == "ann"
    # An expired lease does not hold: the live claim stands.
    expired = {**lease("ann", t2), "expires_at": "2026-01-02T00:00:00.000000Z"}
    stale = bead(t2, assignee="ann", meta={"status": "claimed", "lease": expired})
    assert merge_bead(base, late, stale, now)[0].assignee == "bob"


def prompt_hook(side: GcRunner, agent: str, event: str = "UserPromptSubmit") -> str:
    """The context `gc hook run` gives `agent`'s session on this machine ("" for none)."""
    payload = {"session_id": f"s-{agent}", "transcript_path": "/tmp/s.jsonl",
               "cwd": str(side.cwd), "hook_event_name": event}  # fmt: skip
    payload.update({"source": "startup"} if event == "SessionStart" else {"prompt": "hi"})
    reply = side("hook", "run", input=json.dumps(payload), env={"GC_AGENT": agent})
    assert reply.returncode == 0, reply.stderr
    return (
        json.loads(reply.stdout)["hookSpecificOutput"]["additionalContext"] if reply.stdout else ""
    )


def test_mail_sent_on_a_reaches_b_inbox_and_hook(pair: tuple[GcRunner, GcRunner, Path]) -> None:
    a, b, _remote = pair
    prompt_hook(b, "dog", "SessionStart")
    prompt_hook(a, "cat", "SessionStart")
    sent = a.json("mail", "send", "dog", "-s", "From A", "-m", "across machines",
                  env={"GC_AGENT": "mayor"})  # fmt: skip
    # b writes too, so its sync is a merge, not a fast-forward.
    back = b.json("mail", "send", "cat", "-m", "from b", env={"GC_AGENT": "dog"})
    assert a("sync").returncode == 0
    assert b.json("sync")["sync"]["action"] == "merge"
    inbox = b.json("mail", "inbox", env={"GC_AGENT": "dog"})["messages"]
    assert [m["id"] for m in inbox] == [sent["message"]["id"]]
    assert "across machines" in prompt_hook(b, "dog")
    assert prompt_hook(b, "dog") == ""  # announced once
    assert a.json("sync")["sync"]["action"] == "fast-forward"
    assert [m["id"] for m in a.json("mail", "inbox", env={"GC_AGENT": "cat"})["messages"]] == [
        back["message"]["id"]
    ]
    assert "from b" in prompt_hook(a, "cat")


def test_plain_git_clones_and_pushes_are_usable(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    a, _b, remote = pair
    made = make_id(a, "--title", "before")
    assert a("sync").returncode == 0
    c = machine(tmp_path, "c")
    git("clone", "-q", "--bare", str(remote), str(c.cwd / ".beads" / ".git"))
    assert c.json("bead", "show", made)["bead"]["title"] == "before"
    assert c("remote", "list").stdout.split() == ["origin", str(remote)]
    made_c = make_id(c, "--title", "made on c")
    assert c("sync").returncode == 0
    # A person edits a bead with plain git and pushes into the remote; a syncs it.
    work = tmp_path / "work"
    git("clone", "-q", str(remote), str(work))
    path = next(work.rglob(f"{made}.yaml"))
    path.write_text(path.read_text().replace("title: before", "title: edited by git"))
    git("-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qam", "edit", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    assert a("sync").returncode == 0
    assert a.json("bead", "show", made)["bead"]["title"] == "edited by git"
    assert a.json("bead", "show", made_c)["bead"]["title"] == "made on c"
    # And a plain `git push` into a store's own repository is read by the store.
    git("pull", "-q", "--ff-only", "origin", "main", cwd=work)
    path.write_text(path.read_text().replace("title: edited by git", "title: pushed in"))
    git("-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qam", "again", cwd=work)
    done = subprocess.run(["git", "push", str(a.cwd / ".beads" / ".git"), "HEAD:main"],
                          cwd=work, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert a.json("bead", "show", made)["bead"]["title"] == "pushed in"


class _Refuse(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_bad_remotes_fail_in_one_line_and_change_nothing(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    a, _b, _remote = pair
    not_store = bare(tmp_path / "other.git")
    work = tmp_path / "plain"
    git("init", "-q", "-b", "main", str(work))
    (work / "README").write_text("not a store\n")
    git("add", ".", cwd=work)
    git("-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qm", "x", cwd=work)
    git("push", "-q", str(not_store), "main", cwd=work)
    other = machine(tmp_path, "other")
    assert other("init", "--prefix", "zz").returncode == 0
    other_remote = bare(tmp_path / "zz.git")
    assert other("remote", "add", "origin", str(other_remote)).returncode == 0
    assert other("sync").returncode == 0
    server = http.server.HTTPServer(("127.0.0.1", 0), _Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        bad = {
            "down": (f"git://127.0.0.1:{free_port()}/x.git", 50),
            "notstore": (str(not_store), 40),
            "missing": (str(tmp_path / "nothing-here"), 40),
            "prefix": (str(other_remote), 40),
            "auth": (f"http://127.0.0.1:{server.server_address[1]}/x.git", 50),
        }
        before = (head(a), sorted(p.name for p in (a.cwd / ".beads").rglob("*.yaml")))
        for name, (url, code) in bad.items():
            assert a("remote", "add", name, url).returncode == 0
            result = a("sync", name)
            assert result.returncode == code, (name, result.stderr)
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert (head(a), sorted(p.name for p in (a.cwd / ".beads").rglob("*.yaml"))) == before
            assert a.json("sync", "--status", name)["status"]["last_error"]
        assert "credentials" in a("sync", "auth").stderr
        assert a("clone", str(not_store), str(tmp_path / "x")).returncode == 40
        assert not (tmp_path / "x").exists()
    finally:
        server.shutdown()


def test_status_shows_ahead_behind(pair: tuple[GcRunner, GcRunner, Path]) -> None:
    a, b, _remote = pair
    make_id(a, "--title", "one")
    make_id(a, "--title", "two")
    status = a.json("sync", "--status")["status"]
    assert (status["ahead"], status["behind"], status["last_error"]) == (2, 0, None)
    assert a("sync").returncode == 0
    assert b("sync").returncode == 0
    assert b.json("sync", "--status")["status"]["ahead"] == 0


# Writers, each a process of its own, forked from one process that loaded what a write
# loads (once, not once a write). Each writes with `gc` in turn (mail send, bead create, update
# and close of a bead it made), `count` writes, or until the time `until` when `count` is 0;
# each write is a process of its own, forked from its writer, that runs what the console
# script runs (`entry.script`) and ends as its process would. Every writer logs each exit and
# each new id. argv[1]: JSON [[machine's directory, agent, log], ...]; argv[2]: until;
# argv[3]: count. Exits 0 once every writer ended without an error of its own.
SOAK_WRITERS = r"""
import importlib, json, os, random, sys, tempfile, time, traceback
from gc_beads import entry

for name in (  # what a write loads: its command, the store, its git objects, what it announces
    "gc_beads.cli", "gc_beads.producers", "gc_beads.settings", "beads.cli.bead", "beads.store",
    "beads.batch", "beads.git.repo", "beads.records.codec", "beads.settings.trust",
    "beads.sync.arrivals", "beads.sync.auto", "mail.cli", "mail.beadmail", "mail.notify",
    "inbox.delivery",
):
    importlib.import_module(name)


def gc(cwd, agent, args):
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:
        os.chdir(cwd)
        os.environ["GC_AGENT"] = agent
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.argv = ["gc", *args]
        entry.script()  # ends the process: sys.exit with gc's exit code
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    out.seek(0)
    err.seek(0)
    return code, out.read().decode(), err.read().decode()


def write(cwd, agent, out, until, count):
    machine = os.path.basename(cwd)
    n = 0
    made = []
    with open(out, "w") as log:
        while n < count if count else time.time() < until:
            n += 1
            kind = n % 4
            if kind == 1 or (kind != 2 and not made):
                args = ["mail", "send", "dog", "-s", f"{machine} {n}", "-m", "soak"]
            elif kind == 2:
                args = ["bead", "create", "--type", "task", "--title", f"{machine} {n}"]
            elif kind == 3:
                args = ["bead", "update", random.choice(made), "--add-label", f"{machine}{n}"]
            else:
                args = ["bead", "close", made.pop(0)]
            code, stdout, stderr = gc(cwd, agent, [*args, "--json"])
            log.write(f"{code}\t{' '.join(args)}\t{stderr.strip()}\n")
            if code == 0 and args[1] in ("send", "create"):
                reply = json.loads(stdout)
                new = (reply.get("message") or reply.get("bead"))["id"]
                log.write(f"ID\t{new}\n")
                if args[1] == "create":
                    made.append(new)
            log.flush()


until, count = float(sys.argv[2]), int(sys.argv[3])
writers = []
for cwd, agent, out in json.loads(sys.argv[1]):
    pid = os.fork()
    if pid == 0:  # a write's own exit (SystemExit) ends its process, never caught here
        try:
            write(cwd, agent, out, until, count)
        except Exception:
            traceback.print_exc()
            sys.exit(1)
        sys.exit(0)
    writers.append(pid)
ended = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in writers]
sys.exit(0 if ended == [0] * len(writers) else f"writers ended {ended}")
"""


@pytest.mark.slow
def test_two_machines_four_writers_each_converge(
    tmp_path: Path, daemon: str, pair_template: Path
) -> None:
    # Bounded by work unless a time is asked for: 4 writes a writer are one of each kind, 32
    # writes from 8 processes at once, which is what the claim needs; a time-bound soak takes
    # whatever CPU the machine has free.
    seconds = float(os.environ.get("GC_SYNC_SOAK_SECONDS", "10" if THOROUGH else "0"))
    count = 0 if seconds else 4
    remote, _url, a, b = served_pair(tmp_path, pair_template, daemon, "soak")
    until = time.time() + seconds
    # Four writers a machine, agents w0 to w3, each with its log.
    writers = [[str(side.cwd), f"w{n}", str(tmp_path / f"{side.cwd.name}-{n}.log")]
               for side in (a, b) for n in range(4)]  # fmt: skip
    writing = subprocess.Popen(
        [sys.executable, "-c", SOAK_WRITERS, json.dumps(writers), str(until), str(count)],
        cwd=tmp_path, env=a.env,
    )  # fmt: skip
    logs = [Path(log) for _cwd, _agent, log in writers]
    # The first syncs start once a write has ended: they run while the other writes go on,
    # not before any of them. (The timeout bounds a hang only.)
    wait_for(lambda: writing.poll() is not None or any(log.stat().st_size for log in logs
                                                       if log.exists()), timeout=120)  # fmt: skip
    sync_codes = []
    while True:  # both machines sync while their writers write
        for side in (a, b):
            result = side("sync")
            sync_codes.append((result.returncode, result.stderr))
        if writing.poll() is not None:
            break
        time.sleep(1.0)
    assert writing.wait(timeout=120) == 0
    for side in (a, b, a):
        result = side("sync")
        sync_codes.append((result.returncode, result.stderr))
    assert all(code == 0 for code, _ in sync_codes), [s for s in sync_codes if s[0]]
    acknowledged, exits = [], []
    for log in logs:
        for line in log.read_text().splitlines():
            first, rest = line.split("\t", 1)
            if first == "ID":
                acknowledged.append(rest)
            else:
                exits.append((int(first), rest))
    assert acknowledged and all(code == 0 for code, _ in exits), [e for e in exits if e[0]]
    kinds = {" ".join(rest.split()[:2]) for _code, rest in exits}
    assert kinds == {"mail send", "bead create", "bead update", "bead close"}, kinds
    assert tree(a) == tree(b)
    for side in (a, b):  # nothing lost: every bead made, label added and close stands
        beads = {x["id"]: x for x in side.json("bead", "list", "--status", "all")["beads"]}
        assert set(acknowledged) <= set(beads)
        for _code, rest in exits:
            words = rest.split("\t")[0].split()
            if words[:2] == ["bead", "update"]:
                assert words[4] in beads[words[2]]["labels"], (side.cwd.name, words)
            elif words[:2] == ["bead", "close"]:
                assert beads[words[2]]["status"] == "closed", (side.cwd.name, words)
    git("fsck", "--strict", cwd=remote)
    assert git("rev-parse", "main^{tree}", cwd=remote) == tree(a)
    assert "<<<<<<<" not in git("log", "-p", "main", cwd=remote)
    assert git("log", "--merges", "--oneline", "main", cwd=remote)  # the histories did diverge


def wait_for(check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_sync_auto_pushes_after_writes_and_hooks_fetch(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    a, b, remote = pair
    for side in (a, b):
        assert side("config", "set", "--local", "sync.auto", "true").returncode == 0
        assert side("config", "set", "--local", "sync.interval", "0.5s").returncode == 0
    assert a.json("config", "get", "--local")["value"] == {"sync": {"auto": True, "interval": 0.5}}
    assert "sync" not in (a.cwd / ".beads" / "config.yaml").read_text()  # never synced
    prompt_hook(b, "dog", "SessionStart")
    # The push runs in the background; that it happens is waited for below.
    sent = a.json("mail", "send", "dog", "-m", "automatic", env={"GC_AGENT": "mayor"})
    wait_for(lambda: git("rev-parse", "main", cwd=remote) == head(a))
    shown: list[str] = []
    wait_for(lambda: shown.append(prompt_hook(b, "dog")) or "automatic" in shown[-1])
    assert sent["message"]["id"] in {
        m["id"] for m in b.json("mail", "inbox", "--agent", "dog")["messages"]
    }
    status = b.json("sync", "--status")["status"]
    assert status["last_error"] is None and status["last_sync"]


def test_sync_watch_keeps_syncing(pair: tuple[GcRunner, GcRunner, Path]) -> None:
    # The watcher is a process of its own, as a person leaves it running; what it is
    # watched with (a's write and push, b's reads) runs in this process.
    a, b, _remote = pair
    from tests.conftest import gc_program

    watcher = subprocess.Popen(
        [gc_program(), "sync", "--watch", "--interval", "0.5"], cwd=b.cwd, env=b.env,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        made = make_id(a, "--title", "watched")
        assert a("sync").returncode == 0
        wait_for(lambda: b("bead", "show", made).returncode == 0)
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)


def test_a_claim_is_confirmed_by_the_remote(pair: tuple[GcRunner, GcRunner, Path]) -> None:
    from beads.store import Store
    from mail.threads import Threads

    a, b, remote = pair
    with Store.open(a.cwd, agent="leader") as store:
        threads = Threads(store)
        thread = threads.send("leader", subject="Only one may work on it")[0].thread_id
        threads.close()
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    won = b.json("thread", "claim", "--thread", thread, "--agent", "bee")
    assert won["thread"]["assigned_to"] == "bee"
    assert git("rev-parse", "main", cwd=remote) == head(b)  # pushed before it said so
    # a has not seen b's claim: its own is committed, then lost in the merge of its sync.
    lost = a("thread", "claim", "--thread", thread, "--agent", "ant", "--json")
    assert lost.returncode == 20, lost.stderr
    error = json.loads(lost.stdout)["error"]
    assert (error["code"], error["holder"]) == ("lease_conflict", "bee")
    assert a.json("thread", "show", "--thread", thread)["thread"]["assigned_to"] == "bee"
    # The loser's next write is refused too, and both machines agree.
    assert a("thread", "release", "--thread", thread, "--agent", "ant").returncode == 20
    assert b("sync").returncode == 0
    assert tree(a) == tree(b)


def test_a_thin_pack_with_deltas_on_our_objects_is_taken(
    tmp_path: Path, daemon: str, pair_template: Path
) -> None:
    # git's upload-pack sends a changed blob as a delta on the old one the fetcher already
    # has (a thin pack, REF_DELTA): its base is named by a binary id, which must be read as
    # one (it was taken for a hex id: "Incorrect length of hexsha", exit 50 mid-soak).
    remote, _url, a, b = served_pair(tmp_path, pair_template, daemon, "thin")
    body = "".join(f"line {n}: the same long text on both machines\n" for n in range(400))
    made = make_id(a, "--title", "big", "--body", body)
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    assert a("bead", "update", made, "--body", body + "one more line\n").returncode == 0
    assert a("sync").returncode == 0
    git("-C", str(remote), "repack", "-adf")  # deltas on the server
    result = b("sync")
    assert result.returncode == 0, result.stderr
    assert b.json("bead", "show", made)["bead"]["body"].endswith("one more line\n")
    assert head(a) == head(b)


def test_a_delta_on_a_base_we_lack_is_fetched_again_whole(store: Store) -> None:
    # dulwich names an external delta base by its binary id and needs a KeyError when we
    # lack it; anything else ended the sync with exit 50 ("Incorrect length of hexsha").
    import hashlib
    import io

    from dulwich import pack
    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.objects import Blob, hex_to_sha

    from beads.git.transport import UnresolvedBase
    from beads.sync import remote

    base = Blob.from_string(b"line\n" * 200)
    target = Blob.from_string(b"line\n" * 200 + b"more\n")
    delta = b"".join(pack.create_delta(base.as_raw_string(), target.as_raw_string()))
    received, digest = io.BytesIO(), hashlib.sha1()

    def write(data: bytes) -> int:
        digest.update(data)
        return received.write(data)

    pack.write_pack_header(write, 1)
    pack.write_pack_object(
        write, pack.REF_DELTA, (hex_to_sha(base.id), [delta]), DEFAULT_OBJECT_FORMAT
    )
    received.write(digest.digest())
    data = received.getvalue()

    def pack_received() -> io.BytesIO:  # as fetch hands it over: written, at its end
        buffer = io.BytesIO(data)
        buffer.seek(0, 2)
        return buffer

    with pytest.raises(UnresolvedBase):  # fetch then asks again for a whole pack
        remote._store_pack(store.git, pack_received(), "test", thin=True)
    with pytest.raises(StorageError, match="deltas on objects it did not send"):
        remote._store_pack(store.git, pack_received(), "test", thin=False)
    store.git.store_objects([base])  # once we hold the base, the same pack is taken
    remote._store_pack(store.git, pack_received(), "test", thin=True)
    assert store.git.has_object(target.id)


# -- the gate for incoming trees (beads/sync/treegate.py) ----------------------------------------


def plumb(repo: Path, *args: str, data: bytes | None = None) -> str:
    """Real git plumbing in `repo` (a bare repository), as a hostile machine would use it."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@x",
           "GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@x"}  # fmt: skip
    return (
        subprocess.run(
            ["git", "-C", str(repo), *args], input=data, capture_output=True, check=True, env=env
        )
        .stdout.decode()
        .strip()
    )


def raw_tree(repo: Path, entries: list[tuple[str, bytes, str]]) -> str:
    """A tree object written as given (mode, name, object id): git's checks are skipped, as
    a hostile machine can skip them; entries sorted as git sorts them."""
    ordered = sorted(entries, key=lambda e: e[1] + (b"/" if e[0] == "40000" else b""))
    data = b"".join(m.encode() + b" " + n + b"\0" + bytes.fromhex(s) for m, n, s in ordered)
    return plumb(repo, "hash-object", "-t", "tree", "--literally", "-w", "--stdin", data=data)


def raw_blob(repo: Path, data: bytes) -> str:
    return plumb(repo, "hash-object", "-w", "--stdin", data=data)


def root_entries(repo: Path, rev: str = "main") -> list[tuple[str, bytes, str]]:
    listed = plumb(repo, "ls-tree", "-z", rev).split("\0")
    out = []
    for line in filter(None, listed):
        info, name = line.split("\t", 1)
        mode, _kind, sha = info.split()
        out.append((mode.lstrip("0"), name.encode(), sha))  # ls-tree shows 40000 as 040000
    return out


def commit_tree(repo: Path, tree_id: str, message: str, ref: str = "main") -> str:
    """Commit `tree_id` on top of `ref` and move `ref` to it (a ref moved by hand)."""
    parent = plumb(repo, "rev-parse", ref)
    sha = plumb(repo, "commit-tree", tree_id, "-p", parent, "-m", message)
    plumb(repo, "update-ref", f"refs/heads/{ref}", sha)
    return sha


def nested(repo: Path, parts: list[bytes], leaf: tuple[str, str]) -> tuple[str, bytes, str]:
    """The root entry of a chain of trees `parts[0]/parts[1]/...` ending in `leaf` (mode,
    object id) named `parts[-1]`."""
    mode, sha = leaf
    for name in reversed(parts[1:]):
        sha = raw_tree(repo, [(mode, name, sha)])
        mode = "40000"
    return (mode, parts[0], sha)


def hostile_entry(repo: Path, kind: str, outside: Path) -> tuple[str, bytes, str]:
    """A root entry of the hostile kind `kind`; `outside`: a file outside the store."""
    payload = raw_blob(repo, b"[core]\n\tfsmonitor = touch pwned\n")
    if kind == "dotdot-name":  # one entry whose name is a path out of the store
        return ("100644", b"../.git/config", payload)
    if kind == "dotdot-parts":  # ../.git/config as trees named ".." and ".git"
        return nested(repo, [b"..", b".git", b"config"], ("100644", payload))
    if kind == "gitlink":
        return ("160000", b"vendor", "1" * 40)
    if kind == "absolute":
        return ("100644", str(outside).encode(), payload)
    if kind == "symlink":
        return ("120000", b"notes", raw_blob(repo, str(outside).encode()))
    if kind == "case-collision":  # beside the store's own `tasks`
        return ("40000", b"Tasks", plumb(repo, "rev-parse", "main:tasks"))
    if kind == "nfd-collision":  # `café.yaml` twice: NFC at the root, NFD beside it
        return ("100644", "cafe\u0301s".encode(), payload)
    if kind == "wrong-shard":
        return nested(repo, [b"tasks", b"00", b"00", b"gc-aaaaaaaa.yaml"], ("100644", payload))
    if kind == "executable":
        return nested(repo, [b"tasks", b"ad", b"7c", b"gc-aaaaaaaa.yaml"], ("100755", payload))
    if kind == "config-tree":
        return nested(repo, [b"config.yaml", b"x"], ("100644", payload))
    raise AssertionError(kind)


def outside_files(top: Path) -> dict[str, bytes]:
    """Every file under `top` that is not inside a store's `.beads/` or a bare remote."""
    found = {}
    for path in top.rglob("*"):
        rel = path.relative_to(top).as_posix()
        if ".beads" in path.parts or ".git/objects" in rel or path.is_dir():
            continue
        if any(part.endswith(".git") and part != ".git" for part in path.parts):
            continue
        found[rel] = path.read_bytes() if not path.is_symlink() else b"link"
    return found


@pytest.fixture(scope="session")
def project_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `project` copies, made once a session (per xdist worker)."""
    root = tmp_path_factory.mktemp("project-template")
    remote = bare(root / "remote.git")
    a = machine(root, "a")
    git("init", "-q", "-b", "main", str(a.cwd))
    assert a("init").returncode == 0
    assert a("remote", "add", "origin", str(remote)).returncode == 0
    assert a("sync").returncode == 0
    return root


@pytest.fixture
def project(tmp_path: Path, project_template: Path) -> tuple[GcRunner, Path]:
    """Machine a: a project's git work tree holding a store, synced to a bare remote."""
    copy_template(project_template, tmp_path)
    return GcRunner(tmp_path / "a"), tmp_path / "remote.git"


def test_the_gate_keeps_a_bounded_number_of_trees_over_a_deep_history(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clone checks every commit of the remote's history: each tree it parsed was kept to
    # the end, and a clone of 10,000 commits held 800 MB of them.
    from dulwich.repo import Repo

    from beads.sync import treegate

    for n in range(30):
        store.create("task", f"deep {n}", "")
    commits = git("rev-list", "main", cwd=Path(store.git.git_dir)).split()
    monkeypatch.setattr(treegate, "KEPT_ENTRIES", 20, raising=False)
    kept: list[int] = []
    tree = treegate._Checker.tree

    def counted(self: Any, sha: bytes) -> Any:
        found = tree(self, sha)
        kept.append(sum(len(entries) for entries in self.trees.values()))
        return found

    monkeypatch.setattr(treegate._Checker, "tree", counted)
    with Repo(store.git.git_dir) as repo:
        assert treegate.find_bad(repo.object_store, [c.encode() for c in commits]) == []
    assert max(kept) <= 20 + 256  # the bound, and the one tree over it
    assert len(kept) > 30 * 3  # each commit's trees were read: the check ran


def test_a_remote_removed_after_a_refusal_is_added_again_with_no_refusal(
    tmp_path: Path, project: tuple[GcRunner, Path]
) -> None:
    # The refusal holds back the commands that need the remote: kept past `remote remove`,
    # it held back a remote added again under the name, whatever its address.
    a, remote = project
    entry = hostile_entry(remote, "dotdot-name", tmp_path / "a" / "victim.txt")
    commit_tree(remote, raw_tree(remote, [*root_entries(remote), entry]), "hostile")
    assert a("sync").returncode == 30
    assert a.json("sync", "--status")["status"]["refused"] is not None
    assert a("remote", "remove", "origin").returncode == 0
    assert a("remote", "add", "origin", str(tmp_path / "elsewhere.git")).returncode == 0
    assert a.json("sync", "--status")["status"]["refused"] is None


@pytest.mark.parametrize("kind", ["dotdot-name", "dotdot-parts", "gitlink", "absolute", "symlink"])
def test_a_hostile_remote_tree_is_refused_by_sync_and_clone_and_nothing_is_written_outside(
    tmp_path: Path, project: tuple[GcRunner, Path], kind: str
) -> None:
    a, remote = project
    outside = tmp_path / "a" / "victim.txt"
    outside.write_text("mine\n")
    entry = hostile_entry(remote, kind, outside)
    bad = commit_tree(remote, raw_tree(remote, [*root_entries(remote), entry]), "hostile")
    before = outside_files(tmp_path)
    ours = head(a)
    result = a("sync")
    assert result.returncode == 30, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert bad[:12] in result.stderr and "nothing was merged" in result.stderr
    assert "a commit that removes the entry" in result.stderr
    assert head(a) == ours
    status = a.json("sync", "--status")["status"]
    assert status["refused"]["commit"] == bad and status["remote_head"] != bad
    assert "refused: commit" in a("sync", "--status").stdout
    # The store keeps working locally: writes, mail, reads.
    made = make_id(a, "--title", "still works")
    assert a("mail", "send", "dog", "-m", "hi", env={"GC_AGENT": "mayor"}).returncode == 0
    assert a.json("bead", "show", made)["bead"]["title"] == "still works"
    assert a("sync").returncode == 30  # still refused: nothing was pushed either
    assert plumb(remote, "rev-parse", "main") == bad
    # A clone of that remote makes nothing at all.
    c = machine(tmp_path, "c")
    cloned = c("clone", str(remote))
    assert cloned.returncode == 30 and bad[:12] in cloned.stderr
    assert not (c.cwd / ".beads").exists()
    assert outside_files(tmp_path) == before
    assert outside.read_text() == "mine\n"


@pytest.mark.parametrize(
    "refusal", ["gitlink", "another-prefix", "not-a-store", "a-config-that-is-not-yaml"]
)
def test_a_refused_remote_leaves_none_of_its_objects_in_the_store(
    tmp_path: Path, project: tuple[GcRunner, Path], refusal: str
) -> None:
    a, remote = project
    make_id(a, "--title", "ours")
    assert a("sync").returncode == 0
    entries = root_entries(remote)
    if refusal == "gitlink":  # the gate for incoming trees refuses it
        entries.append(hostile_entry(remote, "gitlink", tmp_path))
        code, words = 30, "a submodule (gitlink)"
    elif refusal == "another-prefix":  # a store, but of other ids
        config = plumb(remote, "cat-file", "blob", "main:config.yaml")
        assert "prefix: gc" in config
        other = raw_blob(remote, config.replace("prefix: gc", "prefix: zz").encode() + b"\n")
        entries = [e for e in entries if e[1] != b"config.yaml"]
        entries.append(("100644", b"config.yaml", other))
        code, words = 40, "a store of prefix zz"
    elif refusal == "a-config-that-is-not-yaml":  # said as what is wrong, not as missing
        entries = [e for e in entries if e[1] != b"config.yaml"]
        entries.append(("100644", b"config.yaml", raw_blob(remote, b"{{{{ : : [\n")))
        code, words = 40, "not a gc-beads store: on main, config.yaml is not valid YAML"
    else:  # beads, but no config.yaml: not a store at all
        entries = [e for e in entries if e[1] != b"config.yaml"]
        code, words = 40, "not a gc-beads store (no config.yaml on main)"
    commit_tree(remote, raw_tree(remote, entries), "refused")
    before, ours = objects_held(a), head(a)
    for _ in range(2):  # refused on every sync: nothing piles up
        result = a("sync")
        assert result.returncode == code and words in result.stderr, result.stderr
        assert head(a) == ours and holds_no_more(a, before), (before, objects_held(a))


@pytest.mark.parametrize(
    ("ref", "named"),
    [
        ("1111111111111111111111111111111111111111", "'1111111111111111111111111111111111111111'"),
        ("garbage", "'garbage'"),
        ("ref: refs/heads/main", "'ref: refs/heads/main'"),  # a symbolic ref to itself
    ],
)
def test_a_path_remote_whose_branch_names_no_object_is_said_to_be_damaged(
    project: tuple[GcRunner, Path], ref: str, named: str
) -> None:
    # Read as an empty remote, every push was refused and the sync said the remote "kept
    # moving" (exit 20), or failed with "cannot reach the remote: AssertionError".
    a, remote = project
    assert a("sync").returncode == 0
    plumb(remote, "pack-refs", "--all")
    (remote / "refs" / "heads" / "main").write_text(ref + "\n")
    make_id(a, "--title", "local")
    ours = head(a)
    result = a("sync")
    assert result.returncode == 50, result.stderr
    assert result.stderr == (
        f"gc: the remote {remote} is damaged: its branch main names {named}, which is no "
        "object it holds (git fsck there); nothing was merged\n"
    )
    assert head(a) == ours
    assert (remote / "refs" / "heads" / "main").read_text() == ref + "\n"


def test_a_store_whose_prefix_was_changed_is_told_how_to_sync_again_and_that_works(
    project: tuple[GcRunner, Path],
) -> None:
    # "holds a store of prefix gc, not zz; nothing was changed" said nothing of a way out.
    a, remote = project
    assert a("config", "set", "store.prefix", "zz").returncode == 0
    ours = head(a)
    result = a("sync")
    assert result.returncode == 40 and head(a) == ours
    assert result.stderr == (
        f"gc: the remote {remote} holds a store of prefix gc, not zz; nothing was changed: "
        "to sync with it, give this store its prefix: 'gc config set store.prefix gc'\n"
    )
    command = result.stderr.split("'")[-2].split()
    assert command[:1] == ["gc"]
    assert a(*command[1:]).returncode == 0  # the command as said
    made = make_id(a, "--title", "after")
    synced = a("sync")
    assert synced.returncode == 0, synced.stderr
    assert plumb(remote, "rev-parse", "main") == head(a)
    assert "prefix: gc" in plumb(remote, "cat-file", "blob", "main:config.yaml")
    assert made.startswith("gc-")


@pytest.mark.parametrize("kind", ["blob", "annotated tag"])
def test_a_remote_whose_main_names_a_blob_or_a_tag_is_said_to_be_damaged(
    tmp_path: Path, project: tuple[GcRunner, Path], kind: str
) -> None:
    # It was called "not a gc-beads store (no config.yaml on main)", exit 40: the remote is
    # a store whose branch was moved by hand to an object git never puts on a branch.
    a, remote = project
    if kind == "blob":
        named = raw_blob(remote, b"not a commit\n")
    else:
        plumb(remote, "tag", "-a", "-m", "a release", "v1", "main")
        named = plumb(remote, "rev-parse", "refs/tags/v1")
    plumb(remote, "pack-refs", "--all")
    (remote / "refs" / "heads" / "main").write_text(named + "\n")
    make_id(a, "--title", "local")
    ours = head(a)
    said = (
        f"gc: the remote {remote} is damaged: its branch main names {named[:12]}, "
        f"{'a blob' if kind == 'blob' else 'an annotated tag'}, not a commit (git fsck "
        "there); nothing was merged\n"
    )
    result = a("sync")
    assert (result.returncode, result.stderr) == (50, said)
    assert head(a) == ours
    c = machine(tmp_path, "c")
    cloned = c("clone", str(remote))
    assert (cloned.returncode, cloned.stderr) == (50, said)
    assert not (c.cwd / ".beads").exists()


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("case-collision", "collides with 'tasks' after case folding"),
        ("nfd-collision", "collides with 'cafés' after case folding or Unicode normalisation"),
        ("wrong-shard", "a bead at the wrong shard (its id belongs under ad/7c)"),
        ("executable", "an executable file (mode 100755"),
        ("config-tree", "a directory where a file belongs"),
    ],
)
def test_entries_that_break_the_layout_in_subtler_ways_are_refused_by_name(
    project: tuple[GcRunner, Path], kind: str, reason: str
) -> None:
    a, remote = project
    make_id(a, "--title", "one")  # the store's own tasks/ directory
    assert a("sync").returncode == 0
    entries = root_entries(remote)
    if kind == "nfd-collision":
        entries.append(("100644", "caf\u00e9s".encode(), raw_blob(remote, b"x")))
    replaced = {"config-tree": b"config.yaml", "wrong-shard": b"tasks", "executable": b"tasks"}
    entries = [e for e in entries if e[1] != replaced.get(kind)]
    bad = commit_tree(
        remote, raw_tree(remote, [*entries, hostile_entry(remote, kind, remote)]), "x"
    )
    result = a("sync")
    assert result.returncode == 30 and bad[:12] in result.stderr
    assert reason in result.stderr, result.stderr


def test_a_refused_commit_is_refused_even_when_a_later_commit_removes_its_entry(
    tmp_path: Path, project: tuple[GcRunner, Path]
) -> None:
    a, remote = project
    clean = root_entries(remote)
    bad = commit_tree(
        remote, raw_tree(remote, [*clean, hostile_entry(remote, "gitlink", tmp_path)]), "bad"
    )
    commit_tree(remote, raw_tree(remote, clean), "remove it again")
    result = a("sync")
    assert result.returncode == 30 and bad[:12] in result.stderr
    # Repaired as the message says: the history rewritten without it, then synced.
    plumb(remote, "update-ref", "refs/heads/main", plumb(remote, "rev-parse", f"{bad}^"))
    made = make_id(a, "--title", "after the repair")
    assert a("sync").returncode == 0
    assert a.json("sync", "--status")["status"]["refused"] is None
    assert f"{made}.yaml" in plumb(remote, "ls-tree", "-r", "--name-only", "main")


def test_a_store_whose_history_holds_bad_entries_stays_usable_and_touches_nothing_outside(
    tmp_path: Path, project: tuple[GcRunner, Path]
) -> None:
    # A ref moved by hand (or a history from before the gate) holds every hostile kind at
    # once: commands go on with the valid beads; nothing outside `.beads/` is written, and
    # a later commit removing the entries deletes nothing outside.
    a, _remote = project
    repo = a.cwd / ".beads" / ".git"
    made = make_id(a, "--title", "valid")
    victim = a.cwd / ".git" / "config"
    outside = tmp_path / "a" / "victim.txt"
    outside.write_text("mine\n")
    clean = root_entries(repo)
    kinds = ["dotdot-name", "dotdot-parts", "gitlink", "absolute", "symlink"]
    hostile = [hostile_entry(repo, kind, outside) for kind in kinds]
    before = outside_files(tmp_path)
    project_config = victim.read_bytes()
    bad = commit_tree(repo, raw_tree(repo, [*clean, *hostile]), "hostile, by hand")
    assert a.json("bead", "show", made)["bead"]["title"] == "valid"
    other = make_id(a, "--title", "made after")
    assert a("mail", "send", "dog", "-m", "hi", env={"GC_AGENT": "mayor"}).returncode == 0
    assert len(a.json("bead", "list")["beads"]) >= 2
    assert outside_files(tmp_path) == before and victim.read_bytes() == project_config
    # gc doctor names the bad commit and the way back; it never says healthy.
    report = a("doctor")
    assert report.returncode != 0 and "healthy" not in report.stdout.split("\n")[-1]
    assert bad[:12] in report.stdout
    assert f"gc doctor --reset-to {plumb(repo, 'rev-parse', bad + '^')[:12]}" in report.stdout
    repaired = a("doctor", "--rebuild-index", "--restore-view")
    assert "index rebuilt from git" in repaired.stdout, repaired.stderr
    assert a.json("bead", "show", other)["bead"]["title"] == "made after"
    # A commit that removes the entries again deletes nothing outside.
    now = root_entries(repo)
    commit_tree(repo, raw_tree(repo, [e for e in now if e not in hostile]), "remove them")
    assert a.json("bead", "show", made)["bead"]["title"] == "valid"
    assert a("doctor", "--rebuild-index", "--restore-view").returncode in (0, 50)
    assert outside_files(tmp_path) == before and outside.read_text() == "mine\n"


def test_doctor_reset_to_leaves_a_refused_commit_and_the_store_is_healthy_again(
    tmp_path: Path, project: tuple[GcRunner, Path]
) -> None:
    a, remote = project
    repo = a.cwd / ".beads" / ".git"
    kept = make_id(a, "--title", "before")
    good = head(a)
    bad = commit_tree(
        repo, raw_tree(repo, [*root_entries(repo), hostile_entry(repo, "gitlink", tmp_path)]), "x"
    )
    left = make_id(a, "--title", "after the bad commit")
    found = a.json("doctor")
    assert not found["healthy"]
    assert [p["kind"] for p in found["problems"]] == ["history"]
    assert bad[:12] in found["problems"][0]["message"]
    # Not an ancestor, not a commit, a bad commit itself: refused, nothing moves.
    assert a("doctor", "--reset-to", "zz").returncode == 30
    assert a("doctor", "--reset-to", "0" * 40).returncode == 40
    assert a("doctor", "--reset-to", bad[:12]).returncode == 30
    assert head(a) != good
    reset = a.json("doctor", "--reset-to", good[:12])
    assert reset["healthy"], reset
    assert reset["reset"]["to"] == good and len(reset["reset"]["left"]) == 2
    assert head(a) == good
    assert a.json("bead", "show", kept)["bead"]["title"] == "before"
    assert a("bead", "show", left).returncode == 40
    assert "doctor: reset to" in git("-C", str(repo), "reflog", "main")  # reviewable
    assert a.json("doctor")["healthy"]
    assert a("sync").returncode == 0  # nothing refused goes to the remote
    assert plumb(remote, "rev-parse", "main") == good


def test_a_plain_git_push_into_the_store_goes_through_the_same_gate(
    tmp_path: Path, project: tuple[GcRunner, Path]
) -> None:
    a, _remote = project
    store_git = a.cwd / ".beads" / ".git"
    hook = store_git / "hooks" / "pre-receive"
    assert "beads.receivehook" in hook.read_text()
    made = make_id(a, "--title", "before")
    work = tmp_path / "work"
    git("clone", "-q", str(store_git), str(work))
    ours = head(a)

    def push() -> subprocess.CompletedProcess[str]:
        git("-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qam", "x", cwd=work)
        return subprocess.run(["git", "push", "origin", "HEAD:main"], cwd=work,
                              capture_output=True, text=True)  # fmt: skip

    # A symbolic link, then a file outside the layout: each push refused whole.
    (work / "tasks" / "link.yaml").symlink_to("/etc/passwd")
    git("add", "-A", cwd=work)
    refused = push()
    assert refused.returncode != 0 and "pre-receive hook declined" in refused.stderr
    assert "a symbolic link" in refused.stderr and "gc-beads: refused" in refused.stderr
    assert head(a) == ours
    git("reset", "-q", "--hard", "origin/main", cwd=work)
    (work / "notes.txt").write_text("hi\n")
    git("add", "-A", cwd=work)
    assert "outside the store's layout" in push().stderr and head(a) == ours
    # A person's edit of a bead with plain git is taken.
    git("reset", "-q", "--hard", "origin/main", cwd=work)
    path = next(work.rglob(f"{made}.yaml"))
    path.write_text(path.read_text().replace("title: before", "title: by git"))
    accepted = push()
    assert accepted.returncode == 0, accepted.stderr
    assert a.json("bead", "show", made)["bead"]["title"] == "by git"
    # A hook that is not gc's is kept and reported by gc doctor; a missing one is written.
    hook.write_text("#!/bin/sh\nexit 0\n")
    report = a.json("doctor")
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"
    assert [p["kind"] for p in report["problems"]] == ["hook"]
    hook.unlink()
    report = a.json("doctor")
    assert report["healthy"] and "beads.receivehook" in hook.read_text()
    assert any("pre-receive" in line for line in report["fixed"])


def hidden_parent_commit(repo: Path, tree_id: str, parent: str, hidden: str) -> str:
    """A commit of `tree_id` on `parent` with a second `parent` line after `committer`:
    git (and dulwich) take only the parents right after `tree`, so git sees one parent."""
    stamp = f"m <m@x> {int(time.time())} +0000"
    data = (
        f"tree {tree_id}\nparent {parent}\nauthor {stamp}\ncommitter {stamp}\n"
        f"parent {hidden}\n\ninnocent\n"
    ).encode()
    return plumb(repo, "hash-object", "-t", "commit", "--literally", "-w", "--stdin", data=data)


def raw_push(source: Path, dest: Path, old: str, new: str, objects: list[str]) -> str:
    """Push exactly `objects` (a pack made by `git pack-objects`) moving main from `old`
    to `new`, through git's own receive-pack of `dest`: what a hand-made client sends."""
    pack = subprocess.run(
        ["git", "-C", str(source), "pack-objects", "--stdout"],
        input="".join(f"{sha}\n" for sha in objects).encode(),
        capture_output=True,
        check=True,
    ).stdout
    line = f"{old} {new} refs/heads/main\0report-status\n".encode()
    request = b"%04x" % (len(line) + 4) + line + b"0000" + pack
    done = subprocess.run(["git", "receive-pack", str(dest)], input=request, capture_output=True)
    return done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")


def test_a_parent_hidden_after_the_committer_does_not_let_a_bad_tree_through(
    tmp_path: Path, project: tuple[GcRunner, Path]
) -> None:
    # The hidden parent holds the bad entries: a gate diffing against every `parent` line
    # would take them as unchanged, while git sees them as new in the tip.
    a, remote = project
    base = plumb(remote, "rev-parse", "main")
    outside = tmp_path / "a" / "victim.txt"
    bad_tree = raw_tree(
        remote,
        [*root_entries(remote), hostile_entry(remote, "symlink", outside),
         ("100644", b"city.toml", raw_blob(remote, b"[mail]\nprovider = 'exec:x'\n"))],
    )  # fmt: skip
    plain = commit_tree(remote, bad_tree, "plainly bad")
    assert a("sync").returncode == 30  # refused; its objects stay in the store's objects
    hidden = hidden_parent_commit(remote, bad_tree, base, plain)
    plumb(remote, "update-ref", "refs/heads/main", hidden)
    ours = head(a)
    result = a("sync")
    assert result.returncode == 30, result.stdout + result.stderr
    assert hidden[:12] in result.stderr and "out of git's order" in result.stderr
    assert head(a) == ours
    store = a.cwd / ".beads"
    assert not (store / "notes").exists() and not (store / "city.toml").exists()
    # The same commit in one push into the store itself: the pre-receive hook refuses it.
    store_git = store / ".git"
    objects = [hidden, plain, bad_tree, *(e[2] for e in root_entries(remote, hidden))]
    said = raw_push(remote, store_git, ours, hidden, [*dict.fromkeys(objects)])
    assert "gc-beads: refused" in said and "out of git's order" in said, said
    assert head(a) == ours


def test_a_name_outside_the_layout_in_head_is_never_written_to_the_view(
    project: tuple[GcRunner, Path],
) -> None:
    # A ref moved by hand past the gate: the view writes only config.yaml and bead files.
    a, _remote = project
    repo = a.cwd / ".beads" / ".git"
    made = make_id(a, "--title", "valid")
    city = ("100644", b"city.toml", raw_blob(repo, b"[mail]\nprovider = 'exec:/tmp/x'\n"))
    notes = ("100644", b"notes.txt", raw_blob(repo, b"hi\n"))
    commit_tree(repo, raw_tree(repo, [*root_entries(repo), city, notes]), "by hand")
    other = make_id(a, "--title", "after")  # brings the view up to HEAD
    assert a.json("bead", "show", made)["bead"]["title"] == "valid"
    restored = a("doctor", "--rebuild-index", "--restore-view")
    assert "restored city.toml" not in restored.stdout, restored.stdout
    assert "holds it: outside the store's layout" in restored.stdout
    for name in ("city.toml", "notes.txt"):
        assert not (a.cwd / ".beads" / name).exists()
    assert a.json("bead", "show", other)["bead"]["title"] == "after"


# Runs rounds of `gc` racers, each racer in a process of its own and in its own directory, the
# racers of a round let go at once: forked from one process that loaded what a claim loads
# (once for every round, not once a racer or a round), each runs what the console script runs
# (`entry.script`) and ends as its process would. Each line of stdin is a round, JSON
# [[cwd, [gc args]], ...]; for each, once all its racers ended, one line of JSON
# [[exit code, stdout, stderr], ...] on stdout.
RACERS = r"""
import importlib, json, os, sys, tempfile
from gc_beads import entry

for name in (  # what a claim loads: its command, the store, its sync (fetch, gate, merge, push)
    "gc_beads.cli", "gc_beads.producers", "gc_beads.settings", "mail.threads.cli", "mail.notify",
    "inbox.arrivals", "beads.sync.syncing", "beads.sync.arrivals", "beads.sync.merge",
    "beads.sync.treegate", "beads.settings.trust", "beads.records.codec", "beads.refresh",
    "beads.git.history", "beads.git.localfetch", "beads.git.quarantine", "beads.git.transport",
    "dulwich.client", "dulwich.diff_tree", "dulwich.graph",
):
    importlib.import_module(name)
for line in sys.stdin:
    start, go = os.pipe()
    forked = []
    for cwd, args in json.loads(line):
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        pid = os.fork()
        if pid == 0:
            os.close(go)
            os.read(start, 1)  # returns once the last racer is forked and `go` closed
            os.chdir(cwd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.argv = ["gc", *args]
            entry.script()  # ends the process: sys.exit with gc's exit code
        forked.append((pid, out, err))
    os.close(go)
    os.close(start)
    ended = []
    for pid, out, err in forked:
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        out.seek(0)
        err.seek(0)
        ended.append([code, out.read().decode(), err.read().decode()])
        out.close()
        err.close()
    print(json.dumps(ended), flush=True)
"""


class Racers:
    """The `RACERS` process, in the environment every runner has (the test's, less GC_
    variables); `race` runs one round."""

    def __init__(self, env: dict[str, str], errors: Path) -> None:
        self.errors = errors.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-c", RACERS], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.errors, text=True, start_new_session=True,
        )  # fmt: skip

    def race(self, runs: list[tuple[GcRunner, list[str]]]) -> list[tuple[int, str, str]]:
        """Run `gc args` on each machine at once: exit code, stdout, stderr each."""
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps([[str(side.cwd), args] for side, args in runs]))
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        # A round that never ends (a racer stuck on a lock) fails the test, never hangs it.
        if not select.select([self.process.stdout], [], [], 120)[0]:
            os.killpg(self.process.pid, signal.SIGKILL)
            pytest.fail("a round of racers did not end in 120 s")
        line = self.process.stdout.readline()
        assert line, Path(self.errors.name).read_text()
        return [(code, out, err) for code, out, err in json.loads(line)]

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        code = self.process.wait(timeout=120)
        self.errors.close()
        assert code == 0, Path(self.errors.name).read_text()


@pytest.mark.parametrize("kind", ["path", "file", "git"])
@pytest.mark.slow
def test_racing_claims_on_separate_machines_end_in_one_winner_and_clean_conflicts(
    tmp_path: Path, kind: str, pair_template: Path, request: pytest.FixtureRequest
) -> None:
    # Several machines claim one thread at once, each pushing to the one remote: for every
    # kind of remote one claim stands and the others are exit 20 lease_conflict. A local-path
    # remote's ref lock, its compare-and-swap and its refs read after packing were exit 50.
    # Five machines: the pair's a (gc init) and b (gc clone), pointed at this kind of remote,
    # and three copies of b once it synced the threads a sent (each the store a `gc clone` of
    # that remote then makes).
    copy_template(pair_template, tmp_path)
    (tmp_path / "a").rename(tmp_path / "m0")
    (tmp_path / "b").rename(tmp_path / "m1")
    if kind == "git":  # the daemon serves the remote
        url = f"{request.getfixturevalue('daemon')}/shared.git"
        shutil.rmtree(tmp_path / "srv" / "shared.git")
        where = (tmp_path / "remote.git").rename(tmp_path / "srv" / "shared.git")
    else:
        where = (tmp_path / "remote.git").rename(tmp_path / "shared.git")
        url = str(where) if kind == "path" else where.as_uri()
    machines = [GcRunner(tmp_path / f"m{n}") for n in range(5)]
    for side in machines[:2]:
        config = side.cwd / ".beads" / ".git" / "config"
        text = config.read_text().replace(f"url = {tmp_path / 'remote.git'}\n", f"url = {url}\n")
        assert f"url = {url}\n" in text
        config.write_text(text)
    first = machines[0]
    # Each round is a real race of five processes (`Racers`), for a thread of its own. Without
    # the handling of a locked branch about half the rounds of a local-path remote end in an
    # exit 50, without the handling of a lost compare-and-swap every round does: path and
    # file:// (one client) race five rounds between them.
    threads = [
        first.json("thread", "send", "--from", "leader", "--subject", f"race {round_}")
        for round_ in range(3 if kind == "path" else 2)
    ]
    assert first("sync").returncode == 0 and machines[1]("sync").returncode == 0
    for side in machines[2:]:
        copy_store(machines[1].cwd / ".beads", side.cwd / ".beads")
    racers = Racers(first.env, tmp_path / "racers.log")
    request.addfinalizer(racers.close)
    for round_, made in enumerate(threads):
        thread = made["thread"]["thread_id"]
        if round_:  # the last round's syncs each merged more: all start at the remote's head
            for side in machines:
                assert side("sync").returncode == 0
        claim = ["thread", "claim", "--thread", thread, "--json"]
        ended = racers.race(
            [(side, [*claim, "--agent", f"w{n}"]) for n, side in enumerate(machines)]
        )
        codes = sorted(code for code, _out, _err in ended)
        assert codes == [0] + [20] * (len(machines) - 1), [e for e in ended if e[0] != 20]
        winner = next(json.loads(out) for code, out, _err in ended if code == 0)["lease"]
        for code, out, _err in ended:
            if code:
                error = json.loads(out)["error"]
                assert (error["code"], error["holder"]) == ("lease_conflict", winner["agent"])
        for side in machines:
            assert side("sync").returncode == 0
            held = side.json("thread", "show", "--thread", thread)["thread"]["lease"]
            assert held == winner
    git("fsck", "--strict", cwd=where)


def test_a_sync_that_brings_mail_nudges_the_idle_session_here(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner, Path]
) -> None:
    a, b, _remote = pair
    log = tmp_path / "nudges.log"
    argv = ["sh", "-c", f'echo "$0 $1" >> {log}', "{session}", "{text}"]
    assert b("config", "set", "agents.dog.nudge", json.dumps(argv)).returncode == 0
    prompt_hook(b, "dog", "SessionStart")
    stop = {"session_id": "s-dog", "hook_event_name": "Stop", "stop_hook_active": False}
    assert b("hook", "run", input=json.dumps(stop), env={"GC_AGENT": "dog"}).returncode == 0
    a.json("mail", "send", "dog", "-s", "From A", "-m", "across machines",
           env={"GC_AGENT": "mayor"})  # fmt: skip
    assert a("sync").returncode == 0
    assert b.json("sync")["sync"]["action"] != "none"
    wait_for(lambda: log.exists() and log.read_text().strip())
    (line,) = log.read_text().splitlines()
    assert line.startswith("s-dog ") and "From A" in line
    # The item is there for the session's next hook, as a local send's is.
    assert "across machines" in prompt_hook(b, "dog")


# -- where a bead came from --------------------------------------------------------------


def named(side: GcRunner, machine: str) -> GcRunner:
    """`side`, its machine named `machine` (the name its commits give as committer)."""
    done = side("config", "set", "--local", "delivery.nats.machine", machine)
    assert done.returncode == 0, done.stderr
    return side


def test_a_first_session_start_says_which_machine_mail_answers_and_gates_came_from(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    # Everything is made on b, then a syncs: a's first hook ever finds the mail, the answer
    # and the resolved gate already in its store, and derives their items at start-up.
    a, b, _remote = pair
    b = named(b, "build-01")
    mail = b.json("mail", "send", "mayor", "-s", "Hi", "-m", "from b",
                  env={"GC_AGENT": "human"})["message"]["id"]  # fmt: skip
    asked = b.json("decision", "create", "--prompt", "Deploy?", "--option", "yes", "--option",
                   "no", env={"GC_AGENT": "mayor"})["bead"]["id"]  # fmt: skip
    answered = b("decision", "respond", asked, "--select", "yes", env={"GC_AGENT": "human"})
    assert answered.returncode == 0, answered.stderr
    gate = b.json("gate", "create", "--await", "human", "--waiter", "mayor",
                  env={"GC_AGENT": "mayor"})["bead"]["id"]  # fmt: skip
    assert b("gate", "resolve", gate, "--reason", "seen", env={"GC_AGENT": "human"}).returncode == 0
    assert b("sync").returncode == 0 and a("sync").returncode == 0
    context = prompt_hook(a, "mayor", "SessionStart")
    assert f"(from human on build-01) {mail} from human [Hi]" in context, context
    assert f"(from human on build-01) Decision {asked} answered: yes" in context, context
    assert f"(from human on build-01) Gate {gate} resolved" in context, context


def test_reading_commands_say_which_machine_a_bead_came_from(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    a, b, _remote = pair
    b = named(b, "build-01")
    note = "(from human on build-01)"
    human, mayor = {"GC_AGENT": "human"}, {"GC_AGENT": "mayor"}
    there = b.json("mail", "send", "mayor", "-s", "Hi", "-m", "from b", env=human)
    here = a.json("mail", "send", "mayor", "-s", "Yo", "-m", "from a", env=human)
    ask = ("decision", "create", "--option", "yes", "--option", "no", "--prompt")
    asked = a.json(*ask, "Deploy?", env=mayor)["bead"]["id"]
    mine = a.json(*ask, "Test?", env=mayor)["bead"]["id"]
    assert a("decision", "respond", mine, "--select", "no", env=human).returncode == 0
    sent = a.json("thread", "send", "--to", "dog", "--subject", "Which DB?", "--summary",
                  "which one", env=mayor)  # fmt: skip
    thread, question = sent["thread"]["thread_id"], sent["message"]["message_id"]
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    assert b("decision", "respond", asked, "--select", "yes", env=human).returncode == 0
    replied = b("thread", "reply", "--thread", thread, "--summary", "Postgres", env=human)
    assert replied.returncode == 0, replied.stderr
    assert b("sync").returncode == 0 and a("sync").returncode == 0

    # gc mail read: the note, and "origin" in --json. Reading it again, after this machine
    # marked it read, still says where it was written.
    there, here = there["message"]["id"], here["message"]["id"]
    read = a("mail", "read", there, env=mayor)
    assert read.returncode == 0, read.stderr
    assert read.stdout.startswith(f"{note}\nID:       {there}\n"), read.stdout
    assert a.json("mail", "read", there, env=mayor)["origin"] == note
    assert a.json("mail", "read", here, env=mayor)["origin"] is None
    assert a("mail", "read", here, env=mayor).stdout.startswith(f"ID:       {here}\n")
    # gc decision show
    shown = a("decision", "show", asked)
    assert shown.returncode == 0 and shown.stdout.startswith(f"{note}\n{{"), shown.stdout
    assert a.json("decision", "show", asked)["origin"] == note
    assert a.json("decision", "show", mine)["origin"] is None
    assert a("decision", "show", mine).stdout.startswith("{")
    # gc thread wait-reply
    wait = ("thread", "wait-reply", "--thread", thread, "--after-message", question,
            "--timeout-seconds", "5")  # fmt: skip
    woke = a(*wait, env=mayor)
    assert woke.returncode == 0 and woke.stdout.startswith(f"{note} "), woke.stdout
    assert a.json(*wait, env=mayor)["origin"] == note


def test_a_provider_held_open_finds_the_same_origins_as_a_fresh_one_after_syncs(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    # `gc mcp` keeps its provider open and walks only the commits new since the last lookup
    # (inbox.origincache): its answers must be those of a lookup from scratch.
    from mail.beadmail import BeadMail

    a, b, _remote = pair
    b = named(b, "build-01")
    human, note = {"GC_AGENT": "human"}, "(from human on build-01) "
    first = b.json("mail", "send", "mayor", "-s", "one", "-m", "b", env=human)["message"]["id"]
    assert b("sync").returncode == 0 and a("sync").returncode == 0
    store = Store.open(a.cwd, agent="mayor")
    try:
        held = BeadMail(store)
        assert held.origins([first]) == {first: note}
        here = a.json("mail", "send", "mayor", "-s", "two", "-m", "a", env=human)["message"]["id"]
        second = b.json("mail", "send", "mayor", "-s", "3", "-m", "b", env=human)["message"]["id"]
        assert b("sync").returncode == 0 and a("sync").returncode == 0
        assert a("mail", "read", first, env={"GC_AGENT": "mayor"}).returncode == 0  # here
        ids = [first, second, here]
        assert held.origins(ids) == {first: note, second: note}
        # A newer change made elsewhere to a bead already looked up replaces its answer.
        assert b("mail", "read", first, env={"GC_AGENT": "mayor"}).returncode == 0
        assert b("sync").returncode == 0 and a("sync").returncode == 0
        assert held.origins(ids) == {first: "(from mayor on build-01) ", second: note}
        fresh = Store.open(a.cwd, agent="mayor")
        try:
            assert BeadMail(fresh).origins(ids) == held.origins(ids)
        finally:
            fresh.close()
    finally:
        store.close()


def test_listings_say_which_machine_each_bead_came_from(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    # mail inbox and thread, thread show and watch, decision list: each row of a bead from
    # elsewhere carries the note reading it alone does, and "origin" in --json.
    a, b, _remote = pair
    b = named(b, "build-01")
    note = "(from human on build-01)"
    human, mayor = {"GC_AGENT": "human"}, {"GC_AGENT": "mayor"}
    here = a.json("mail", "send", "mayor", "-s", "Yo", "-m", "from a", env=human)["message"]["id"]
    ask = ("decision", "create", "--option", "yes", "--option", "no", "--prompt")
    asked = a.json(*ask, "Deploy?", env=mayor)["bead"]["id"]
    mine = a.json(*ask, "Test?", env=mayor)["bead"]["id"]
    sent = a.json("thread", "send", "--to", "dog", "--subject", "Which DB?", "--summary",
                  "which one", env=mayor)  # fmt: skip
    thread, question = sent["thread"]["thread_id"], sent["message"]["message_id"]
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    there = b.json("mail", "reply", here, "-m", "from b", env=mayor)["message"]["id"]
    assert b("decision", "respond", asked, "--select", "yes", env=human).returncode == 0
    replied = b.json("thread", "reply", "--thread", thread, "--summary", "Postgres", env=human)
    reply = replied["message"]["message_id"]
    assert b("sync").returncode == 0 and a("sync").returncode == 0

    def origins(payload: dict, key: str, entries: str = "messages") -> dict:
        return {entry[key]: entry["origin"] for entry in payload[entries]}

    # gc mail inbox (human's: mayor replied on b) and gc mail thread
    by_mayor = "(from mayor on build-01)"
    inbox = a("mail", "inbox", "--all", env=human)
    assert inbox.returncode == 0, inbox.stderr
    assert f"{there}  {by_mayor} mayor  Re: Yo" in inbox.stdout, inbox.stdout
    assert a.json("mail", "inbox", "--all", env=human)["messages"][0]["origin"] == by_mayor
    assert a.json("mail", "inbox", "--all", env=mayor)["messages"][0]["origin"] is None
    shown = a("mail", "thread", here).stdout
    assert f"{there}  {by_mayor} mayor  human" in shown and f"{here}  human " in shown, shown
    assert origins(a.json("mail", "thread", here), "id") == {here: None, there: by_mayor}
    # gc thread show and watch
    shown = a("thread", "show", thread).stdout
    assert f"\n{note} #" in shown and "human -> mayor: Postgres" in shown, shown
    assert "\n#" in shown and "mayor -> dog: which one" in shown, shown
    payload = a.json("thread", "show", thread)
    assert origins(payload, "message_id") == {question: None, reply: note}
    watch = ("thread", "watch", "--after-event", "0", "--timeout-seconds", "5")
    woke = a(*watch, env=mayor)
    assert woke.returncode == 0 and f"\n{note} #" in woke.stdout, woke.stdout
    payload = a.json(*watch, env=mayor)
    assert origins(payload, "message_id") == {question: None, reply: note}, payload
    assert payload["origin"] == (note if payload["message"]["message_id"] == reply else None)
    # gc decision list
    listed = a("decision", "list", "--all").stdout
    rows = {line.split()[0]: line for line in listed.splitlines()}
    assert f"closed  {note} mayor -> human  Deploy?" in rows[asked], listed
    assert "open    mayor -> human" in rows[mine], listed
    assert origins(a.json("decision", "list", "--all"), "id", "beads") == {asked: note, mine: None}


def forge(side: GcRunner, count: int, committer: str) -> None:
    """Make `side`'s last `count` commits again as a person with git would, each naming
    `committer` (`name <email>`) as its committer; authors, trees and messages kept."""
    git_dir = str(side.cwd / ".beads" / ".git")
    old = git("-C", git_dir, "rev-parse", "main")
    name, email = committer.removesuffix(">").split(" <")
    parent = git("-C", git_dir, "rev-parse", f"main~{count}")
    for commit in git("-C", git_dir, "rev-list", "--reverse", f"-{count}", "main").split():
        fields = git("-C", git_dir, "log", "-1", "--format=%an%x00%ae%x00%ad%x00%B", commit)
        author, author_email, date, message = fields.split("\0", 3)
        env = {**os.environ, "GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": author_email,
               "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_NAME": name,
               "GIT_COMMITTER_EMAIL": email}  # fmt: skip
        parent = subprocess.run(
            ["git", "-C", git_dir, "commit-tree", f"{commit}^{{tree}}", "-p", parent],
            input=message, env=env, check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
    git("-C", git_dir, "update-ref", "refs/heads/main", parent, old)


def test_a_commit_from_elsewhere_under_this_machines_committer_line_says_so(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    # b copies a's committer line (in every commit a pushed) onto its own commits: on a, the
    # mail and the answer they bring must not read as typed on a.
    a, b, remote = pair
    b = named(b, "build-01")
    human, mayor = {"GC_AGENT": "human"}, {"GC_AGENT": "mayor"}
    ask = ("decision", "create", "--option", "yes", "--option", "no", "--prompt")
    asked = a.json(*ask, "Deploy?", env=mayor)["bead"]["id"]
    here = a.json("mail", "send", "mayor", "-s", "Yo", "-m", "from a", env=human)["message"]["id"]
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    line = git("-C", str(remote), "log", "-1", "--format=%cn <%ce>", "main")
    assert line.endswith("@gc-beads>") and line == git(
        "-C", str(a.cwd / ".beads" / ".git"), "log", "-1", "--format=%cn <%ce>", "main"
    )
    plain = b.json("mail", "send", "mayor", "-s", "Ho", "-m", "b's", env=human)["message"]["id"]
    assert b("sync").returncode == 0 and a("sync").returncode == 0
    record = a.cwd / ".beads" / ".git" / "gc-claimed"  # the commits that came naming a
    assert not record.exists()  # b's own commits name b
    there = b.json("mail", "send", "mayor", "-s", "Hi", "-m", "from b", env=human)["message"]["id"]
    assert b("decision", "respond", asked, "--select", "yes", env=human).returncode == 0
    forge(b, 2, line)
    assert b("sync").returncode == 0 and a.json("sync")["sync"]["action"] == "fast-forward"
    assert len(record.read_text().split()) == 2

    note = "(from human, committed elsewhere under this machine's name)"
    context = prompt_hook(a, "mayor", "SessionStart")
    assert f"{note} {there} from human [Hi]" in context, context
    assert f"{note} Decision {asked} answered: yes" in context, context
    read = a("mail", "read", there, env=mayor)
    assert read.returncode == 0 and read.stdout.startswith(f"{note}\nID:       {there}\n")
    assert a.json("decision", "show", asked)["origin"] == note
    listed = a.json("mail", "inbox", "--all", env=mayor)["messages"]
    by_b = "(from human on build-01)"
    assert {m["id"]: m["origin"] for m in listed} == {there: note, here: None, plain: by_b}
    # What this machine knows of where its commits came from outlives the index.
    assert a("doctor", "--rebuild-index").returncode == 0
    assert a.json("mail", "read", there, env=mayor)["origin"] == note
    from mail.beadmail import BeadMail  # a provider held open (gc mcp) says the same

    store = Store.open(a.cwd, agent="mayor")
    try:
        assert BeadMail(store).origins([there, here]) == {there: f"{note} "}
    finally:
        store.close()


def merge_by_hand(git_dir: Path, tree: str, committer: str) -> str:
    """A merge commit, made in `git_dir` as a person with git would, of its HEAD and an empty
    commit beside it, whose tree is `tree` (holding what neither parent holds); committed by
    `committer` (`name <email>`), authored by human. Returns its id; no ref is moved."""
    name, email = committer.removesuffix(">").split(" <")
    env = {**os.environ, "GIT_AUTHOR_NAME": "human", "GIT_AUTHOR_EMAIL": "human@example.com",
           "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}  # fmt: skip

    def commit_tree(*args: str) -> str:
        command = ["git", "--git-dir", str(git_dir), "commit-tree", *args]
        made = subprocess.run(command, input="merge", env=env, capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        return made.stdout.strip()

    beside = commit_tree("HEAD^{tree}", "-p", "HEAD")
    return commit_tree(tree, "-p", "HEAD", "-p", beside)


def test_a_bead_a_merge_from_elsewhere_adds_by_itself_says_where_it_came_from(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    # b's history holds a merge commit, made by hand, whose tree adds a message neither of
    # its parents holds: on a, after `gc sync`, that message must not read as written on a.
    a, b, _remote = pair
    b = named(b, "build-01")
    human, mayor = {"GC_AGENT": "human"}, {"GC_AGENT": "mayor"}
    assert b("mail", "send", "mayor", "-s", "Warm", "-m", "up", env=human).returncode == 0
    assert b("sync").returncode == 0 and a("sync").returncode == 0
    b_git = b.cwd / ".beads" / ".git"
    line = git("-C", str(b_git), "log", "-1", "--format=%cn <%ce>", "main")
    sent = b.json("mail", "send", "mayor", "-s", "Deploy", "-m", "ship it", env=human)
    message, sending = sent["message"]["id"], git("-C", str(b_git), "rev-parse", "main")
    git("-C", str(b_git), "update-ref", "refs/heads/main", "main~1")  # the send's commit dropped
    merge = merge_by_hand(b_git, f"{sending}^{{tree}}", line)
    git("-C", str(b_git), "update-ref", "refs/heads/main", merge)
    assert b("sync").returncode == 0 and a.json("sync")["sync"]["action"] == "fast-forward"

    note = "(from human on build-01)"
    context = prompt_hook(a, "mayor", "SessionStart")
    assert f"{note} {message} from human [Deploy]" in context, context
    listed = a.json("mail", "inbox", "--all", env=mayor)["messages"]
    assert {m["id"]: m["origin"] for m in listed}[message] == note
    read = a("mail", "read", message, env=mayor)
    assert read.returncode == 0 and read.stdout.startswith(f"{note}\nID:       {message}\n")


def test_a_merge_pushed_into_the_store_under_this_machines_name_says_so(
    pair: tuple[GcRunner, GcRunner, Path], tmp_path: Path
) -> None:
    # A plain `git push` into a's store (through its pre-receive hook) of a merge commit
    # naming a's committer line, its tree adding a message (written by b's gc) neither of
    # its parents holds: recorded as it arrives, it must not read as written on a.
    a, b, _remote = pair
    human, mayor = {"GC_AGENT": "human"}, {"GC_AGENT": "mayor"}
    assert a("mail", "send", "mayor", "-s", "Warm", "-m", "up", env=human).returncode == 0
    a_git = a.cwd / ".beads" / ".git"
    line = git("-C", str(a_git), "log", "-1", "--format=%cn <%ce>", "main")
    message = b.json("mail", "send", "mayor", "-s", "Deploy", "-m", "x", env=human)["message"]["id"]
    path = next(p for p in (b.cwd / ".beads").rglob(f"{message}*") if p.is_file())
    relative = str(path.relative_to(b.cwd / ".beads"))
    clone = tmp_path / "clone"
    git("clone", "-q", str(a_git), str(clone))
    (clone / relative).parent.mkdir(parents=True, exist_ok=True)
    (clone / relative).write_bytes(path.read_bytes())
    git("add", relative, cwd=clone)
    merge = merge_by_hand(clone / ".git", git("write-tree", cwd=clone), line)
    git("push", "-q", "origin", f"{merge}:refs/heads/main", cwd=clone)
    assert merge.encode() in (a_git / "gc-claimed").read_bytes()

    note = "(from human, committed elsewhere under this machine's name)"
    context = prompt_hook(a, "mayor", "SessionStart")
    assert f"{note} {message} from human [Deploy]" in context, context
    read = a("mail", "read", message, env=mayor)
    assert read.returncode == 0 and read.stdout.startswith(f"{note}\nID:       {message}\n")


def test_a_conflict_resolved_by_this_machines_sync_adds_no_origin_of_its_own(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    # A message read on both machines: a's `gc sync` merges the two changes into a bead
    # neither side holds. That merge is a's (it stays local: no note names a), and the
    # change from b it merged in still says where it was made.
    a, b, _remote = pair
    b = named(b, "build-01")
    human, mayor = {"GC_AGENT": "human"}, {"GC_AGENT": "mayor"}
    mine = a.json("mail", "send", "mayor", "-s", "Here", "-m", "a", env=human)["message"]["id"]
    there = b.json("mail", "send", "mayor", "-s", "There", "-m", "b", env=human)["message"]["id"]
    assert b("sync").returncode == 0 and a("sync").returncode == 0 and b("sync").returncode == 0
    for message in (mine, there):
        assert a("mail", "read", message, env=mayor).returncode == 0
        assert b("mail", "archive", message, env=mayor).returncode == 0
    assert b("sync").returncode == 0 and a.json("sync")["sync"]["action"] == "merge"
    a_git = str(a.cwd / ".beads" / ".git")
    for message in (mine, there):
        path = git("-C", a_git, "ls-tree", "-r", "--name-only", "main", "--", f"*{message}*")
        held = {git("-C", a_git, "rev-parse", f"{rev}:{path}") for rev in ("main^1", "main^2")}
        assert git("-C", a_git, "rev-parse", f"main:{path}") not in held  # resolved here

    note = "(from mayor on build-01)"  # b's archiving, the newest change made elsewhere
    for message in (mine, there):
        assert a.json("mail", "read", message, env=mayor)["origin"] == note
    listed = a.json("mail", "inbox", "--archived", env=mayor)["messages"]
    assert {m["id"]: m["origin"] for m in listed} == {mine: note, there: note}


def local_commits(root: Path, count: int) -> None:
    """`count` commits made here on the branch of the store at `root`, written in one pack:
    only their number counts (each changes nothing), so they are made without a bead each."""
    store = Store.open(root, agent="mayor")
    try:
        with store.locked():
            git_repo = store.git
            old = head = git_repo.head()
            tree = git_repo.tree_of(head)  # the same in each: none is stored before the last
            objects = []
            for n in range(count):
                commit, made = git_repo.build_commit(
                    head, {}, f"local {n}", "mayor", root_of_parent=tree
                )
                objects.extend(made)
                head = commit.id
            git_repo.store_objects(objects)
            assert old is not None and head is not None
            git_repo.swap_head(old, head, "test: local commits", "mayor")
    finally:
        store.close()


def from_elsewhere(pair: tuple[GcRunner, GcRunner, Path]) -> tuple[GcRunner, GcRunner, str]:
    """Machines a and b of `pair`, b named build-01, and a message human sent mayor on b,
    synced to a."""
    a, b, _remote = pair
    b = named(b, "build-01")
    sent = b.json("mail", "send", "mayor", "-s", "Hi", "-m", "from b", env={"GC_AGENT": "human"})
    assert b("sync").returncode == 0 and a("sync").returncode == 0
    return a, b, sent["message"]["id"]


def test_a_message_from_elsewhere_older_than_2000_local_commits_still_says_where_it_came_from(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    # The lookup gave up 2,000 commits back (`MAX_WALK`): a message changed elsewhere before
    # that read as written here.
    a, _b, message = from_elsewhere(pair)
    local_commits(a.cwd, 2001)
    read = a("mail", "read", message, env={"GC_AGENT": "mayor"})
    assert read.returncode == 0, read.stderr
    assert read.stdout.startswith(f"(from human on build-01)\nID:       {message}\n"), read.stdout


def test_a_second_reading_command_walks_no_commit(
    pair: tuple[GcRunner, GcRunner, Path], origin_walks: list[bytes | None]
) -> None:
    # Every reading command walked up to 2,000 commits again, each in a fresh process.
    a, _b, message = from_elsewhere(pair)
    mayor, note = {"GC_AGENT": "mayor"}, "(from human on build-01)"
    assert a.json("mail", "peek", message, env=mayor)["origin"] == note
    assert origin_walks == [None]  # the first: the whole history, once
    assert a.json("mail", "peek", message, env=mayor)["origin"] == note
    assert [m["origin"] for m in a.json("mail", "inbox", env=mayor)["messages"]] == [note]
    assert origin_walks == [None]  # the branch has not moved: nothing walked again
    assert a("mail", "send", "dog", "-s", "Later", "-m", "c", env=mayor).returncode == 0
    assert a.json("mail", "peek", message, env=mayor)["origin"] == note
    assert len(origin_walks) == 2 and origin_walks[1] is not None  # only the new commit


def test_a_branch_reset_or_rewritten_gives_the_notes_of_its_own_history(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    a, b, message = from_elsewhere(pair)
    mayor = {"GC_AGENT": "mayor"}
    human, read_there = "(from human on build-01)", "(from mayor on build-01)"
    a_git = str(a.cwd / ".beads" / ".git")
    before = git("-C", a_git, "rev-parse", "main")
    assert a.json("mail", "peek", message, env=mayor)["origin"] == human
    assert b("mail", "read", message, env=mayor).returncode == 0  # a newer change there
    assert b("sync").returncode == 0 and a("sync").returncode == 0
    assert a.json("mail", "peek", message, env=mayor)["origin"] == read_there
    # Reset to before the read synced: what was kept at the newer head must not answer.
    assert a("doctor", "--reset-to", before).returncode == 0
    assert a.json("mail", "peek", message, env=mayor)["origin"] == human
    assert a("sync").returncode == 0  # the read comes back, merged
    assert a.json("mail", "peek", message, env=mayor)["origin"] == read_there
    # Rewritten: reset again, and a commit of this machine's on top.
    assert a("doctor", "--reset-to", before).returncode == 0
    assert a("mail", "send", "dog", "-s", "Other", "-m", "c", env=mayor).returncode == 0
    assert a.json("mail", "peek", message, env=mayor)["origin"] == human


@pytest.mark.parametrize("kind", ["garbage", "empty directory", "other database", "bad row"])
def test_a_kept_origins_file_that_is_damaged_or_not_gcs_is_made_again_and_the_note_is_right(
    pair: tuple[GcRunner, GcRunner, Path], origin_walks: list[bytes | None], kind: str
) -> None:
    import sqlite3

    a, _b, message = from_elsewhere(pair)
    mayor, note = {"GC_AGENT": "mayor"}, "(from human on build-01)"
    kept = a.cwd / ".beads" / ".runtime" / "origins.sqlite3"
    if kind == "garbage":
        kept.write_bytes(b"not a database at all " * 200)
    elif kind == "empty directory":
        kept.mkdir()
    elif kind == "other database":
        with sqlite3.connect(kept) as other:
            other.execute("CREATE TABLE origins(path TEXT, note TEXT)")
    else:  # ours, but a row holds what none written here does
        assert a.json("mail", "peek", message, env=mayor)["origin"] == note
        with sqlite3.connect(kept) as db:
            db.execute("UPDATE origins SET author = x'00ff'")  # a blob
        origin_walks.clear()
    assert a.json("mail", "peek", message, env=mayor)["origin"] == note
    assert kept.is_file()  # made again: the next command reads it
    assert a.json("mail", "peek", message, env=mayor)["origin"] == note
    assert origin_walks == [None]


def test_a_directory_holding_files_where_the_origins_are_kept_costs_walks_not_notes(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    a, _b, message = from_elsewhere(pair)
    kept = a.cwd / ".beads" / ".runtime" / "origins.sqlite3"
    kept.mkdir()
    (kept / "mine").write_text("a user's file")
    for _ in range(2):
        assert a.json("mail", "peek", message, env={"GC_AGENT": "mayor"})["origin"] == (
            "(from human on build-01)"
        )
    assert (kept / "mine").read_text() == "a user's file"


def test_doctor_rebuild_index_removes_the_kept_origins(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    a, _b, message = from_elsewhere(pair)
    mayor, note = {"GC_AGENT": "mayor"}, "(from human on build-01)"
    kept = a.cwd / ".beads" / ".runtime" / "origins.sqlite3"
    assert a.json("mail", "peek", message, env=mayor)["origin"] == note
    assert kept.is_file()
    done = a.json("doctor", "--rebuild-index")
    assert not kept.exists(), done
    assert any("origins" in line for line in done["fixed"]), done
    assert a.json("mail", "peek", message, env=mayor)["origin"] == note


@pytest.mark.gc_process
def test_reading_commands_racing_on_a_new_origins_file_all_say_where_it_came_from(
    pair: tuple[GcRunner, GcRunner, Path],
) -> None:
    a, _b, message = from_elsewhere(pair)
    argv = [gc_program(), "mail", "peek", "--json", message]
    env = {**a.env, "GC_AGENT": "mayor"}
    racers = [
        subprocess.Popen(argv, cwd=a.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
        assert json.loads(out)["origin"] == "(from human on build-01)"
    assert a.json("mail", "peek", message, env={"GC_AGENT": "mayor"})["origin"] == (
        "(from human on build-01)"
    )


def test_the_files_each_commit_changed_are_those_plain_git_names(
    tmp_path: Path,
) -> None:
    # The origins kept on disk, the index's catch-up, a sync's merge and the history page
    # take the files each commit changed from one tree walk (which reads only the trees
    # whose ids differ, a tree beside its parent's from the one id that differs): it must
    # name what `git diff-tree` names, with the same blobs, for a mode changed, a file
    # become a directory, a link, a submodule (no file of the store's: passed over).
    from beads.git import GitRepo

    work = tmp_path / "work"
    git("init", "-q", "-b", "main", str(work))

    def commit(message: str) -> None:
        git("-C", str(work), "add", "-A")
        git("-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
            "--allow-empty", "-m", message)  # fmt: skip

    big = work / "messages" / "aa"
    big.mkdir(parents=True)
    for n in range(300):  # a tree of many entries: a neighbour read from its parent
        (big / f"m{n:03}.yaml").write_text(f"{n}\n")
    commit("many")
    for n in (0, 150, 299):
        (big / f"m{n:03}.yaml").write_text("changed\n")
        commit(f"one of many: {n}")
    (big / "m001.yaml").write_text("two\n")
    (big / "m002.yaml").write_text("two\n")
    commit("two of many")
    (big / "m003.yaml").unlink()
    commit("one removed")
    (big / "m004.yaml").chmod(0o755)
    commit("a mode changed")
    (work / "messages" / "f").write_text("file\n")
    commit("a file")
    (work / "messages" / "f").unlink()
    (work / "messages" / "f").mkdir()
    (work / "messages" / "f" / "inner.yaml").write_text("in\n")
    commit("the file is a directory now")
    (work / "messages" / "link").symlink_to("f/inner.yaml")
    commit("a link")
    (work / "messages" / "link").unlink()
    (work / "messages" / "link").write_text("a file now\n")
    commit("the link is a file now")
    sub = git("-C", str(work), "rev-parse", "HEAD")
    git("-C", str(work), "update-index", "--add", "--cacheinfo", f"160000,{sub},messages/sub")
    git("-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "s")
    shutil.rmtree(work / "messages" / "f")
    commit("a directory removed")

    repo = GitRepo(work / ".git")
    try:
        compared = 0
        for line in git("-C", str(work), "rev-list", "--parents", "HEAD").splitlines():
            sha, *parents = (part.encode() for part in line.split())
            parent = parents[0] if parents else None
            expected = _regular_file_changes(work, sha.decode(), parent)
            assert repo.changes(parent, sha) == expected, line
            found = repo.differing_files(repo.tree_of(sha), repo.tree_of(parent))
            assert found == {change.path for change in expected}, line
            wanted = {change.path for change in expected[::2]} | {"messages/none"}
            changed = repo.changed_files(repo.tree_of(sha), repo.tree_of(parent), wanted)
            assert changed == wanted - {"messages/none"}, line
            compared += 1
        assert compared == 13
    finally:
        repo.close()


def _regular_file_changes(work: Path, sha: str, parent: bytes | None) -> list[Any]:
    """The regular files commit `sha` holds otherwise than `parent` (mode or blob), as
    `git diff-tree` lists them, as `FileChange`s in path order."""
    from beads.git import FileChange

    args = ["diff-tree", "-r", "--no-renames", "-z", "--root", sha]
    if parent is not None:
        args.insert(-1, parent.decode())
    out = git("-C", str(work), *args).split("\0")
    if parent is None:
        out = out[1:]  # a root commit's own id comes first
    changes = []
    for meta, path in zip(out[0::2], out[1::2], strict=False):
        old_mode, new_mode, old_sha, new_sha, _status = meta.lstrip(":").split()
        old = (old_mode, old_sha) if old_mode in ("100644", "100755") else None
        new = (new_mode, new_sha) if new_mode in ("100644", "100755") else None
        if old != new:
            changes.append(
                FileChange(path, old[1].encode() if old else None, new[1].encode() if new else None)
            )
    return sorted(changes)
