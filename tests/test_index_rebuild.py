"""Index rebuild: streamed from git, equal to the index built commit by commit."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import gc_beads.settings  # noqa: F401 - varied_store sets a mail setting, as `gc` would
from beads import doctor
from beads import refresh as reconcile
from beads.git import program
from beads.records.ids import bead_path
from beads.store import Store
from tests.conftest import copy_store

TABLES = {
    "beads": "SELECT * FROM beads ORDER BY id",
    "labels": "SELECT * FROM labels ORDER BY label, id",
    "invalid": "SELECT * FROM invalid ORDER BY path",
    "agents": "SELECT * FROM agents ORDER BY name",
    "meta": "SELECT * FROM meta WHERE key IN ('head', 'config', 'schema') ORDER BY key",
    "indexes": "SELECT name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name",
}


def snapshot(store: Store) -> dict[str, list[tuple[object, ...]]]:
    """What the index holds, table by table (event ids aside: machine-local, never reused)."""
    db = store.index.db
    return {name: db.execute(sql).fetchall() for name, sql in TABLES.items()}


def event_order(store: Store) -> list[str]:
    return [row[0] for row in store.index.db.execute("SELECT id FROM events ORDER BY seq")]


def varied_store(root: Path) -> Store:
    """A store built by many commits: creates, updates, closes, labels, meta, a config change,
    a file git holds that is not a bead, and one bead file that does not parse."""
    store, _ = Store.init(root, agent="mayor")
    ids = []
    for n in range(30):
        bead = store.create(
            "task" if n % 3 else "message", f"bead {n}", "line one\nline two\n" * (n % 2),
            assignee=f"agent{n % 4}", labels=[f"area{n % 3}", "x"] if n % 2 else [],
            meta={"read": n % 2 == 0, "nested": {"n": n}}, cc=["dog"] if n % 5 == 0 else [],
        )  # fmt: skip
        ids.append(bead.id)
    with store.batch() as batch:
        for bead_id in ids[:10]:
            batch.update(bead_id, title="changed", labels=["moved"])
        for bead_id in ids[10:15]:
            batch.close_bead(bead_id, "done")
    store.set_setting("mail.strict_recipients", True)
    with store.batch() as batch:  # files that are not (valid) beads, committed by hand
        batch_files = {
            bead_path("task", "gc-aaaaaaaa"): b"id: gc-aaaaaaaa\ntype: [unclosed\n",
            "notes/readme.txt": b"not a bead\n",
        }
        commit, objects = store.git.build_commit(batch.base, batch_files, "by hand", "mayor")
        store.git.store_objects(objects)
        store.git.swap_head(batch.base, commit.id, "by hand", "mayor")
    store.close()
    return Store.open(root)


@pytest.fixture(scope="module")
def varied_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `.beads` of a `varied_store`, made once for the module."""
    root = tmp_path_factory.mktemp("varied")
    varied_store(root).close()
    return root / ".beads"


@pytest.fixture
def varied(tmp_path: Path, varied_template: Path) -> Iterator[Store]:
    """A copy of the varied store in `tmp_path`, opened."""
    copy_store(varied_template, tmp_path / ".beads")
    opened = Store.open(tmp_path)
    yield opened
    opened.close()


def rebuilt(store: Store) -> None:
    with store.locked():
        store.index.drop_file()
        store.refresh()


def test_a_rebuild_equals_the_index_built_commit_by_commit(varied: Store) -> None:
    store = varied
    before = snapshot(store)
    assert len(before["beads"]) == 30 and len(before["invalid"]) == 1
    rebuilt(store)
    assert snapshot(store) == before
    # A rebuild numbers events in (created_at, id) order, above every id handed out before.
    order = event_order(store)
    beads = {b.id: b for b in store.list(limit=None)}
    assert order == sorted(beads, key=lambda i: (beads[i].created_at, i))
    store.close()


def test_a_small_store_is_read_without_starting_the_git_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Starting git costs more than dulwich reading a few files: a new store (init rebuilds
    # its index and view) starts no git; a store of many objects is read by git.
    started = []
    real = program.git_command

    def counted(git_dir: Path) -> tuple[list[str], dict[str, str]]:
        started.append(git_dir)
        return real(git_dir)

    monkeypatch.setattr(program, "git_command", counted)
    store, _ = Store.init(tmp_path / "new", agent="mayor")
    rebuilt(store)
    assert started == [] and store.index.count() == 0
    store.close()
    store = varied_store(tmp_path / "varied")
    before = snapshot(store)
    assert not started  # writing never starts git either
    rebuilt(store)
    assert started and snapshot(store) == before
    store.close()


def test_the_rebuild_reads_git_with_or_without_the_git_program(
    varied: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = varied
    before = snapshot(store)
    used = []
    real = reconcile.git_file_contents

    def no_git(git_dir: Path, commit: bytes):  # type: ignore[no-untyped-def]
        used.append("dulwich")
        raise reconcile.GitUnavailable("no git program")

    monkeypatch.setattr(reconcile, "git_file_contents", no_git)
    rebuilt(store)
    assert snapshot(store) == before and used == ["dulwich"]
    monkeypatch.setattr(reconcile, "git_file_contents", real)
    with store.locked():  # and the two readers give the same files
        head = store.git.head()
        by_git = sorted(real(store.git.git_dir, head))
        by_dulwich = sorted((p, s, store.git.read(s)) for p, s in store.git.files(head))
    assert by_git == by_dulwich
    store.close()


def test_a_git_that_cannot_read_the_store_falls_back_to_dulwich(
    tmp_path: Path, varied: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = varied
    before = snapshot(store)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\necho broken >&2\nexit 1\n")
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    rebuilt(store)
    assert snapshot(store) == before
    store.close()


def test_doctor_rebuild_index_reports_the_count_and_a_clean_store(varied: Store) -> None:
    store = varied
    before = snapshot(store)
    report = doctor(store, rebuild_index=True)
    assert snapshot(store) == before
    assert any("index rebuilt from git (30 beads)" in line for line in report.fixed)
    # notes/readme.txt is outside the layout: reported from the history (beads.health.historycheck)
    assert [p.kind for p in report.problems] == ["unparsable", "history"]
    store.close()


def test_a_rebuild_that_fails_midway_leaves_no_half_index(
    tmp_path: Path, varied: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = varied
    before = snapshot(store)
    real = reconcile._read_bead
    calls = [0]

    def failing(*args):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == 20:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(reconcile, "_read_bead", failing)
    monkeypatch.setattr(
        "beads.index.rebuild.REBUILD_CHUNK", 5
    )  # rows already flushed are rolled back
    with store.locked(), pytest.raises(KeyboardInterrupt):
        store.index.drop_file()
        store.refresh()
    assert store.index.head() is None and store.index.count() == 0
    monkeypatch.setattr(reconcile, "_read_bead", real)
    store.close()
    with Store.open(tmp_path) as again:  # the next open rebuilds it
        assert snapshot(again) == before


def test_progress_is_shown_on_a_terminal_only(
    varied: Store,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = varied
    seen: list[int] = []
    monkeypatch.setattr(reconcile, "PROGRESS_EVERY", 10)
    with store.locked():
        count = reconcile.rebuild_index(store.git, store.index, store.git.head(), seen.append)
    assert count == 30 and seen[:3] == [10, 20, 30] and seen[-1] == -1
    with store.locked():  # not a terminal: nothing on stderr
        reconcile.rebuild_index(store.git, store.index, store.git.head())
    assert capsys.readouterr().err == ""

    class Terminal:
        text = ""

        def isatty(self) -> bool:
            return True

        def write(self, text: str) -> None:
            Terminal.text += text

        def flush(self) -> None:
            pass

    monkeypatch.setattr("sys.stderr", Terminal())
    monkeypatch.setattr(reconcile, "_PROGRESS_AFTER", 0.0)
    with store.locked():
        reconcile.rebuild_index(store.git, store.index, store.git.head())
    assert "\rgc: indexing the store: 30 files" in Terminal.text and Terminal.text.endswith("\n")
    store.close()


def test_a_rebuild_holds_one_chunk_of_beads_at_a_time(
    varied: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = varied
    monkeypatch.setattr("beads.index.rebuild.REBUILD_CHUNK", 4)
    sizes: list[int] = []
    real = sqlite3.Connection.executemany

    with store.locked():
        store.index.drop_file()
        db = store.index.db

        class Watch:
            def __getattr__(self, name: str) -> object:
                return getattr(db, name)

            def executemany(self, sql: str, rows: list) -> object:  # type: ignore[type-arg]
                if "INTO beads" in sql:
                    sizes.append(len(rows))
                return real(db, sql, rows)

        store.index.db = Watch()  # type: ignore[assignment]
        try:
            store.refresh()
        finally:
            store.index.db = db
    assert max(sizes) == 4 and sum(sizes) == 30
    store.close()


def test_doctor_meets_a_damaged_row_and_rebuilds(varied: Store) -> None:
    store = varied
    before = snapshot(store)
    store.index.db.execute("UPDATE beads SET data = 'not json' WHERE rowid = 3")
    doctor(store)  # reads every row: the damaged one makes it rebuild the index from git
    assert snapshot(store) == before
    store.close()


def test_a_file_in_another_layout_is_indexed_as_its_bead(store: Store) -> None:
    # The rebuild encodes a canonical file's mapping as it is; any other (fields in another
    # order, nulls where a bead has empty lists) goes through the bead, as `apply` does.
    import json

    from beads.index.rows import bead_row
    from beads.records.codec import load_bead

    text = (b"type: task\nid: gc-bbbbbbbb\ntitle: t\nfrom: mayor\ncc: null\nlabels:\n- x\n"
            b"created_at: '2026-01-01T00:00:00.000000Z'\n"
            b"updated_at: '2026-01-01T00:00:00.000000Z'\n")  # fmt: skip
    path = bead_path("task", "gc-bbbbbbbb")
    base = store.git.head()
    commit, objects = store.git.build_commit(base, {path: text}, "by hand", "mayor")
    store.git.store_objects(objects)
    store.git.swap_head(base, commit.id, "by hand", "mayor")
    rebuilt(store)
    (data,) = store.index.db.execute("SELECT data FROM beads WHERE path = ?", (path,)).fetchone()
    bead = load_bead(text)
    assert data == bead_row(bead, path, "")[-1] == json.dumps(bead.to_dict(), separators=(",", ":"))
    assert json.loads(data)["cc"] == []


# -- a damaged object: never a bead silently lost --------------------------------------------


def damage_a_beads_blob(gc, how: str, before=None) -> tuple[Path, str]:
    """Two beads through the CLI, in the new store of `gc` (`gc_store`'s); the second bead's
    loose blob then holds another loose object's bytes (whole, valid zlib, the wrong hash:
    what a power cut can leave) or is cut short, and the index is deleted (`before(root)`
    runs just before the damage). Returns the store's root and the damaged bead's title."""
    from beads.git.objects import BLOB, loose_ids, read_loose
    from tests.conftest import git

    assert gc("bead", "create", "--type", "task", "--title", "first").returncode == 0
    root = gc.cwd / ".beads"
    git("repack", "-a", "-d", "-q", cwd=root)  # the first bead's objects now in a pack
    git("prune-packed", cwd=root)
    assert gc("bead", "create", "--type", "task", "--title", "second").returncode == 0
    if before is not None:
        before(root)
    objects = root / ".git" / "objects"
    loose = {sha: read_loose(str(objects), sha) for sha in loose_ids(str(objects))}
    tree = git("ls-tree", "-r", "HEAD", cwd=root)
    (victim,) = [
        sha for sha, read in loose.items() if read and read[0] == BLOB and sha.decode() in tree
    ]
    path = objects / victim[:2].decode() / victim[2:].decode()
    donor = next(sha for sha in loose if sha != victim)
    path.chmod(0o600)
    if how == "misnamed":
        path.write_bytes((objects / donor[:2].decode() / donor[2:].decode()).read_bytes())
    else:
        path.write_bytes(path.read_bytes()[:-5])
    (root / ".runtime" / "index.sqlite3").unlink()
    return root, "second"


@pytest.fixture(params=["dulwich", "git"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which reader a rebuild uses: dulwich (a small store's), or the git program (as for a
    large store: `program.WORTH_STARTING_AT` lowered to 0)."""
    if request.param == "git":
        monkeypatch.setattr(program, "WORTH_STARTING_AT", 0)
    return request.param


@pytest.mark.parametrize("how", ["misnamed", "cut-short"])
def test_a_damaged_blob_never_drops_its_bead_and_doctor_restores_it_from_the_view(
    gc_store, how: str, reader: str
) -> None:
    from tests.conftest import git

    gc = gc_store  # in a store as `gc init` makes it
    root, title = damage_a_beads_blob(gc, how)
    listed = gc("bead", "list", "--json")
    if listed.returncode == 0:  # listed, restored: never listed without it
        assert title in listed.stdout
    else:
        assert listed.returncode == 50 and "gc doctor" in listed.stderr
        assert len(listed.stderr.strip().splitlines()) == 1 and "Traceback" not in listed.stderr
    report = gc.json("doctor")
    corrupt = [p for p in report["problems"] if p["kind"] == "corrupt_object"]
    assert [p["fixed"] for p in corrupt] == [True]
    assert "view file" in corrupt[0]["message"]
    git("fsck", "--strict", "--no-dangling", cwd=root)
    listed = gc("bead", "list", "--json")
    assert listed.returncode == 0 and title in listed.stdout and "first" in listed.stdout


def test_a_file_entry_naming_a_tree_is_a_damaged_object_not_an_internal_error(
    gc_store, reader: str
) -> None:
    # Another tool commits a tree whose file entry names a tree object; the index is lost.
    from tests.conftest import git

    gc = gc_store  # in a store as `gc init` makes it
    root = gc.cwd / ".beads"
    top = git("rev-parse", "HEAD^{tree}", cwd=root).strip()
    raw = subprocess.run(
        ["git", "cat-file", "tree", top], cwd=root, capture_output=True, check=True
    ).stdout
    raw += b"100644 zz-stray.yaml\0" + bytes.fromhex(top)
    made = subprocess.run(
        ["git", "hash-object", "-t", "tree", "-w", "--literally", "--stdin"],
        cwd=root, input=raw, capture_output=True, check=True,
    ).stdout.decode().strip()  # fmt: skip
    commit = git("commit-tree", made, "-p", "HEAD", "-m", "stray", cwd=root).strip()
    git("update-ref", "refs/heads/main", commit, cwd=root)
    (root / ".runtime" / "index.sqlite3").unlink()
    listed = gc("bead", "list")
    assert listed.returncode == 50 and "zz-stray.yaml" in listed.stderr, listed.stderr
    assert "is damaged" in listed.stderr and "gc doctor" in listed.stderr
    assert len(listed.stderr.strip().splitlines()) == 1


def test_a_damaged_blob_missing_from_the_view_and_the_packs_is_restored_from_a_remote(
    gc_store, tmp_path: Path
) -> None:
    from tests.conftest import git

    gc = gc_store  # in a store as `gc init` makes it
    peer = tmp_path / "peer.git"
    git("init", "-q", "--bare", "-b", "main", str(peer), cwd=tmp_path)

    def share(root: Path) -> None:
        assert gc("remote", "add", "origin", str(peer)).returncode == 0
        assert gc("sync").returncode == 0

    root, title = damage_a_beads_blob(gc, "misnamed", before=share)
    for view_file in root.glob("tasks/**/*.yaml"):  # no good copy left here
        view_file.unlink()
    report = gc.json("doctor")
    corrupt = [p for p in report["problems"] if p["kind"] == "corrupt_object"]
    assert [p["fixed"] for p in corrupt] == [True]
    assert "the remote origin" in corrupt[0]["message"]
    git("fsck", "--strict", "--no-dangling", cwd=root)
    listed = gc("bead", "list", "--json")
    assert listed.returncode == 0 and title in listed.stdout


# -- processes that hold the index while it is rebuilt ---------------------------------------

# `gc doctor --rebuild-index` that stops at each point of the swap (`beads.faults`), and once
# more before it closes the store, until the test lets it go on (`go-<point>` in argv[2]).
PAUSING_DOCTOR = """
import os, sys, time
import beads.index.index as index
from beads import doctor
from beads.store import Store

signals = sys.argv[2]
real = index.fault

def pause(point):
    if os.path.exists(os.path.join(signals, "go-" + point)):
        return  # a point reached again (each step of a copy): once is enough
    open(os.path.join(signals, "paused-" + point), "w").close()
    while not os.path.exists(os.path.join(signals, "go-" + point)):
        time.sleep(0.01)

def paused(point):
    if point.startswith("rebuild-"):
        pause(point)
    real(point)

index.fault = paused
store = Store.open(sys.argv[1], agent="doctor")
print(doctor(store, rebuild_index=True).ok, flush=True)
pause("closing")
store.close()
"""

# A process that holds the store open (as `gc mcp` or `gc inbox wait` does): for each line
# it reads, how many beads its index connection holds and sqlite's quick check, read straight
# from that connection (the index's own recovery would hide a read of a mixed file).
HOLDER = """
import sys
from beads.store import Store

store = Store.open(sys.argv[1], agent="holder")
store.list()
print("ready", flush=True)
for _line in sys.stdin:
    try:
        db = store.index.db
        count = db.execute("SELECT count(*) FROM beads").fetchone()[0]
        print(count, db.execute("PRAGMA quick_check").fetchone()[0], flush=True)
    except Exception as exc:
        print("error:", exc, flush=True)
store.close()
"""


def next_pause(signals: Path, doctor: subprocess.Popen[str]) -> str:
    """The point where the pausing doctor waits now."""
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        waiting = [
            p.name.removeprefix("paused-")
            for p in signals.glob("paused-*")
            if not (signals / p.name.replace("paused-", "go-")).exists()
        ]
        if waiting:
            return waiting[0]
        assert doctor.poll() is None, doctor.communicate()
        time.sleep(0.01)
    raise AssertionError("the doctor never paused")


@pytest.mark.gc_process
def test_a_process_holding_the_index_reads_the_rebuilt_one_never_a_mix(
    gc_store, tmp_path: Path
) -> None:
    # A holder opens the index at each point of `gc doctor --rebuild-index` (and one after
    # it, before the doctor closes); a bead is written once it is done. Each holder reads
    # that bead through the file it has open, whole: none is left on the old index, nor
    # reads the old index through the new one's `-wal` and `-shm`.
    import os
    import sys

    gc = gc_store
    for n in range(3):
        assert gc("bead", "create", "--type", "task", "--title", f"t{n}").returncode == 0
    root = gc.cwd / ".beads"
    signals = tmp_path / "signals"
    signals.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    run = [sys.executable, "-c"]
    doctor = subprocess.Popen(
        [*run, PAUSING_DOCTOR, str(root), str(signals)], env=env, stdout=subprocess.PIPE, text=True
    )
    holders: dict[str, subprocess.Popen[str]] = {}
    try:
        while "closing" not in holders:
            point = next_pause(signals, doctor)
            holder = subprocess.Popen(
                [*run, HOLDER, str(root)], env=env, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            )  # fmt: skip
            holders[point] = holder
            assert holder.stdout is not None and holder.stdout.readline() == "ready\n", point
            (signals / f"go-{point}").touch()
        out, _ = doctor.communicate(timeout=60)
        assert (doctor.returncode, out) == (0, "True\n")
        assert "rebuild-filled" in holders and len(holders) == 3, holders
        assert gc("bead", "create", "--type", "task", "--title", "after").returncode == 0
        read = {}
        for point, holder in holders.items():
            assert holder.stdin is not None and holder.stdout is not None
            holder.stdin.write("count\n")
            holder.stdin.flush()
            read[point] = holder.stdout.readline().strip()
        assert read == dict.fromkeys(holders, "4 ok"), read
    finally:
        for process in [doctor, *holders.values()]:
            process.kill()
            process.wait()
    checked = gc("doctor")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert sorted(b["title"] for b in gc.json("bead", "list")["beads"]) == [
        "after", "t0", "t1", "t2"
    ]  # fmt: skip
