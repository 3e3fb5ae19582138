"""The store never bricks itself and never loses history through its git repository: locks
of dead writers are cleared, a lost branch ref is refused and restored, a reflog is kept,
and `gc doctor` repairs what a kill, a full disk or a power cut leaves in `.git`."""

from __future__ import annotations

import errno
import json
import os
import threading
import time
import zlib
from pathlib import Path

import pytest

import beads.batch
import beads.git.refs
from beads import doctor
from beads.errors import StorageError
from beads.git.history import walk
from beads.git.objects import loose_path
from beads.index.reader import IndexReader
from beads.store import Store
from tests.conftest import GcRunner, copy_store, git


@pytest.fixture(scope="session")
def project_template(tmp_path_factory: pytest.TempPathFactory, gc_init_template: Path) -> Path:
    """A store as `gc init` makes it, with the beads "first" and "second", made once a session
    (per xdist worker): `project` copies it (two commands' commits, made once)."""
    gc = GcRunner(tmp_path_factory.mktemp("doctor-project"))
    copy_store(gc_init_template, gc.cwd / ".beads")
    for title in ("first", "second"):
        assert gc("bead", "create", "--type", "task", "--title", title).returncode == 0
    return gc.cwd / ".beads"


@pytest.fixture
def project(gc: GcRunner, project_template: Path) -> GcRunner:
    copy_store(project_template, gc.cwd / ".beads")
    return gc


def git_dir(gc: GcRunner) -> Path:
    return gc.cwd / ".beads" / ".git"


def head(gc: GcRunner) -> str:
    return git("rev-parse", "refs/heads/main", cwd=gc.cwd / ".beads").strip()


def age(path: Path, seconds: float = 60) -> Path:
    """Make `path` (created empty if missing) look `seconds` old: a lock left by a writer
    that died that long ago."""
    path.parent.mkdir(exist_ok=True)
    path.touch()
    past = time.time() - seconds
    os.utime(path, (past, past))
    return path


def titles(gc: GcRunner) -> list[str]:
    return sorted(b["title"] for b in gc.json("bead", "list", "--status", "all")["beads"])


def synced_to_a_bare_remote(gc: GcRunner, tmp_path: Path) -> Path:
    """A bare repository made under `tmp_path`, added as remote `origin` of the store `gc`
    runs in and synced to: a remote holding every object of the store."""
    remote = tmp_path / "remote.git"
    git("init", "-q", "--bare", "-b", "main", str(remote), cwd=tmp_path)
    assert gc("remote", "add", "origin", str(remote)).returncode == 0
    assert gc("sync").returncode == 0
    return remote


def fsck(gc: GcRunner) -> None:
    git("fsck", "--strict", "--no-dangling", cwd=gc.cwd / ".beads")


# -- stale locks -----------------------------------------------------------------------------


def test_a_ref_lock_left_by_a_dead_writer_is_cleared_by_the_next_write(project: GcRunner) -> None:
    gc = project
    lock = age(git_dir(gc) / "refs" / "heads" / "main.lock")  # touched, then aged
    result = gc("bead", "create", "--type", "task", "--title", "after")
    assert result.returncode == 0, result.stderr
    assert not lock.exists()
    assert titles(gc) == ["after", "first", "second"]
    fsck(gc)


def test_doctor_clears_the_ref_lock_of_a_killed_gc_writer_at_once(store: Store) -> None:
    store.set_setting("store.stale_lock_seconds", 120)  # an unknown lock would wait this long
    lock = store.root / ".git" / "refs" / "heads" / "main.lock"
    fd = store.git._take_lock(lock)  # what a writer killed inside the ref update leaves
    os.close(fd)
    started = time.monotonic()
    report = doctor(store)
    assert time.monotonic() - started < 60 and not lock.exists()
    assert [(p.kind, p.message, p.fixed) for p in report.problems] == [
        ("stale_lock", "a lock left by a killed gc writer; removed", True)
    ]


def test_a_young_ref_lock_is_a_conflict_naming_it_and_is_never_deleted(
    project: GcRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc = project
    monkeypatch.setattr(beads.git.refs, "LOCK_WAIT", 0.1)  # in process: a tenth of the wait
    before = head(gc)
    lock = git_dir(gc) / "refs" / "heads" / "main.lock"
    lock.touch()  # a `git push` into the store updating the ref right now
    result = gc("bead", "create", "--type", "task", "--title", "x", "--json")
    assert result.returncode == 20, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "conflict" and "main.lock" in error["message"]
    assert lock.exists() and head(gc) == before
    lock.unlink()
    assert titles(gc) == ["first", "second"]


def test_a_writer_waits_for_a_young_ref_lock_that_is_released(store: Store) -> None:
    lock = store.root / ".git" / "refs" / "heads" / "main.lock"
    lock.touch()
    threading.Timer(0.2, lock.unlink).start()  # the push finishes
    assert store.create("task", "waited").title == "waited"
    assert [b.title for b in store.list()] == ["waited"]


def test_stale_lock_seconds_is_a_validated_setting(project: GcRunner) -> None:
    gc = project
    assert gc("config", "set", "store.stale_lock_seconds", "-1").returncode == 30
    assert gc("config", "set", "store.stale_lock_seconds", "true").returncode == 30
    assert gc("config", "set", "store.stale_lock_seconds", "1").returncode == 0
    age(git_dir(gc) / "refs" / "heads" / "main.lock", 1.5)
    assert gc("bead", "create", "--type", "task", "--title", "x").returncode == 0


def test_what_a_dead_writer_left_of_an_object_does_not_block_writing_that_object(
    store: Store,
) -> None:
    commit, objects = store.git.build_commit(store.git.head(), {"x.txt": b"x"}, "m", "a")
    path = Path(loose_path(str(store.git.git_dir / "objects"), objects[0].id))
    path.parent.mkdir(exist_ok=True)
    Path(f"{path}.lock").touch()  # dulwich's lock, of a gc killed while writing that object
    store.git.store_objects(objects)
    assert store.git.read(objects[0].id) == b"x"
    assert not Path(f"{path}.lock").exists()


def test_doctor_reports_and_removes_every_stale_lock(project: GcRunner) -> None:
    gc = project
    locks = [
        git_dir(gc) / "refs" / "heads" / "main.lock",
        git_dir(gc) / "packed-refs.lock",
        git_dir(gc) / "config.lock",
        git_dir(gc) / "objects" / "ab" / ("c" * 38 + ".lock"),
    ]
    for lock in locks:
        age(lock)
    text = gc("doctor")
    assert "store is healthy" not in text.stdout
    assert "4 problem(s) found, all fixed" in text.stdout and text.returncode == 0
    for lock in locks:
        assert not lock.exists()
        age(lock)
    report = gc.json("doctor")
    assert report["healthy"] is True
    shown = sorted((p["kind"], p["path"], p["fixed"]) for p in report["problems"])
    assert shown == sorted(
        ("stale_lock", lock.relative_to(gc.cwd / ".beads").as_posix(), True) for lock in locks
    )
    assert gc("doctor").stdout.strip() == "store is healthy"
    assert gc("bead", "create", "--type", "task", "--title", "x").returncode == 0


def test_doctor_leaves_alone_a_directory_named_like_a_lock(project: GcRunner) -> None:
    gc = project
    # What a sync from a remote named `a.lock` left, before such names were refused.
    remote_refs = git_dir(gc) / "refs" / "remotes" / "a.lock"
    remote_refs.mkdir(parents=True)
    (remote_refs / "main").write_text(head(gc) + "\n")
    past = time.time() - 3600
    os.utime(remote_refs, (past, past))
    result = gc("doctor")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "store is healthy"
    assert (remote_refs / "main").read_text() == head(gc) + "\n"


def test_doctor_runs_on_while_a_repack_removes_the_directories_it_emptied(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A background repack's `git prune-packed` removes each fan-out directory it empties;
    # doctor's walk must skip one that goes between being seen and being listed. The
    # removal is made to land in that window: just before the directory is listed.
    objects = store.root / ".git" / "objects"
    # A fan-out directory the store does not have: its loose objects' names vary by run.
    emptied = next(objects / f"{n:02x}" for n in range(256) if not (objects / f"{n:02x}").exists())
    emptied.mkdir()
    dead = age(objects / "ab" / "tmp_obj_dead", seconds=2 * 3600)
    real_scandir = os.scandir

    def scandir_after_prune(path: str | os.PathLike[str] = ".") -> object:
        if os.fspath(path) == os.fspath(emptied) and emptied.exists():
            emptied.rmdir()
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir_after_prune)
    report = doctor(store)
    monkeypatch.undo()
    assert not emptied.exists()  # the removal did happen mid-walk
    assert report.ok
    assert [(p.kind, p.fixed) for p in report.problems] == [("stale_file", True)]
    assert not dead.exists()


def test_a_full_disk_during_the_ref_update_changes_nothing_and_leaves_no_lock(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create("task", "kept")
    before = store.git.head()

    def no_space(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", no_space)
    with pytest.raises(StorageError, match="No space left on device; nothing was changed"):
        store.create("task", "lost to the full disk")
    monkeypatch.undo()
    assert store.git.head() == before
    assert not (store.root / ".git" / "refs" / "heads" / "main.lock").exists()
    assert [b.title for b in store.list()] == ["kept"]
    assert store.create("task", "after").title == "after"


def test_a_reflog_that_cannot_be_written_never_fails_a_commit(store: Store) -> None:
    reflog = store.root / ".git" / "logs" / "refs" / "heads" / "main"
    reflog.unlink()
    reflog.mkdir()  # unwritable as a file
    assert store.create("task", "in").title == "in"
    assert [b.title for b in store.list()] == ["in"]


# -- a lost branch ---------------------------------------------------------------------------


@pytest.mark.parametrize("content", [None, b"", b"garbage\n", b"ref: refs/heads/other\n"])
def test_a_lost_or_garbled_branch_ref_is_refused_then_restored_by_doctor(
    project: GcRunner, content: bytes | None
) -> None:
    gc = project
    before = head(gc)
    ref = git_dir(gc) / "refs" / "heads" / "main"
    if content is None:
        ref.unlink()
    else:
        ref.write_bytes(content)
    views = sorted(p.name for p in (gc.cwd / ".beads" / "tasks").rglob("*.yaml"))
    for args in (
        ("bead", "create", "--type", "task", "--title", "orphan"),
        ("bead", "list"),
        ("log",),
    ):
        result = gc(*args)
        assert result.returncode == 50, (args, result.stderr)
        assert "gc doctor" in result.stderr and "Traceback" not in result.stderr
    # Nothing was papered over: no new history, the view and the index are intact.
    assert sorted(p.name for p in (gc.cwd / ".beads" / "tasks").rglob("*.yaml")) == views
    report = gc.json("doctor")
    assert report["healthy"] is True, report
    assert [(p["kind"], p["fixed"]) for p in report["problems"]] == [("branch", True)]
    assert head(gc) == before
    assert titles(gc) == ["first", "second"]
    assert gc("bead", "create", "--type", "task", "--title", "third").returncode == 0
    assert titles(gc) == ["first", "second", "third"]
    fsck(gc)


def test_a_ref_naming_a_missing_commit_is_refused_then_restored(project: GcRunner) -> None:
    gc = project
    before = head(gc)
    (git_dir(gc) / "refs" / "heads" / "main").write_text("1" * 40 + "\n")
    for args in (("bead", "create", "--type", "task", "--title", "x"), ("bead", "list")):
        result = gc(*args)
        assert result.returncode == 50 and "gc doctor" in result.stderr, result.stderr
    report = gc.json("doctor")
    assert [(p["kind"], p["fixed"]) for p in report["problems"]] == [("branch", True)]
    assert head(gc) == before and titles(gc) == ["first", "second"]


def test_doctor_restores_a_lost_refs_directory(project: GcRunner) -> None:
    gc = project
    before = head(gc)
    for path in sorted((git_dir(gc) / "refs").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (git_dir(gc) / "refs").rmdir()
    assert gc("bead", "list").returncode == 50
    report = gc.json("doctor")
    assert [(p["kind"], p["fixed"]) for p in report["problems"]] == [("branch", True)]
    assert head(gc) == before and titles(gc) == ["first", "second"]
    fsck(gc)


def test_reads_with_a_lost_ref_never_reset_the_index_or_the_view(store: Store) -> None:
    store.create("task", "kept")
    store.close()
    (store.root / ".git" / "refs" / "heads" / "main").unlink()
    reopened = Store.open(store.root)
    with pytest.raises(StorageError, match="gc doctor"):
        reopened.list()
    with pytest.raises(StorageError, match="gc doctor"):
        reopened.create("task", "new root")
    assert reopened.index.count() == 1 and len(reopened.view.files()) == 2
    reopened.close()


@pytest.mark.parametrize("content", [None, b"1" * 40 + b"\n"])
def test_the_index_reader_of_the_hooks_refuses_a_lost_branch(
    store: Store, content: bytes | None
) -> None:
    store.create("task", "kept")
    store.close()
    ref = store.root / ".git" / "refs" / "heads" / "main"
    if content is None:
        ref.unlink()
    else:
        ref.write_bytes(content)
    with pytest.raises(StorageError, match="gc doctor"):
        IndexReader(store.root)


def test_doctor_restores_the_branch_from_the_index_when_there_is_no_reflog(
    project: GcRunner,
) -> None:
    gc = project
    before = head(gc)
    (git_dir(gc) / "refs" / "heads" / "main").unlink()
    (git_dir(gc) / "logs" / "refs" / "heads" / "main").unlink()
    report = gc.json("doctor")
    assert "the commit the index recorded" in report["problems"][0]["message"]
    assert head(gc) == before


def test_doctor_restores_the_newest_commit_when_nothing_recorded_the_branch(
    project: GcRunner,
) -> None:
    gc = project
    before = head(gc)
    runtime = gc.cwd / ".beads" / ".runtime"
    for path in (
        git_dir(gc) / "refs" / "heads" / "main",
        git_dir(gc) / "logs" / "refs" / "heads" / "main",
        runtime / "view-applied",
        runtime / "index.sqlite3",
    ):
        path.unlink()
    result = gc("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the newest commit in the objects" in result.stdout
    assert head(gc) == before and titles(gc) == ["first", "second"]


def test_a_write_that_failed_leaves_no_commit_for_doctor_to_restore(
    project: GcRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc = project
    monkeypatch.setattr(beads.git.refs, "LOCK_WAIT", 0.1)  # in process: a tenth of the wait
    before = head(gc)
    lock = git_dir(gc) / "refs" / "heads" / "main.lock"
    lock.touch()  # a push holds the ref: this write fails, and its caller is told so
    assert gc("bead", "create", "--type", "task", "--title", "failed").returncode == 20
    lock.unlink()
    runtime = gc.cwd / ".beads" / ".runtime"
    for path in (
        git_dir(gc) / "refs" / "heads" / "main",
        git_dir(gc) / "logs" / "refs" / "heads" / "main",
        runtime / "view-applied",
        runtime / "index.sqlite3",
    ):
        path.unlink()
    assert gc("doctor").returncode == 0
    assert head(gc) == before and titles(gc) == ["first", "second"]


def test_every_ref_move_is_in_the_reflog_that_git_reads(project: GcRunner) -> None:
    gc = project
    reflog = git("reflog", cwd=gc.cwd / ".beads").splitlines()
    assert len(reflog) == 3
    assert reflog[0].split()[0] == head(gc)[:7] and 'task "second"' in reflog[0]
    assert "commit (initial): init: gc-beads store" in reflog[2]
    log = (git_dir(gc) / "logs" / "refs" / "heads" / "main").read_text().splitlines()
    assert [line.split()[1] for line in log][-1] == head(gc)
    assert "human <human@gc-beads>" in log[-1] and "\tcommit: bead create" in log[-1]


def test_doctor_gc_drops_reflog_entries_older_than_90_days(store: Store) -> None:
    store.create("task", "recent")
    reflog = store.root / ".git" / "logs" / "refs" / "heads" / "main"
    lines = reflog.read_text().splitlines(keepends=True)
    old = lines[0].replace(lines[0].split("\t")[0].split()[-2], str(int(time.time()) - 91 * 86400))
    reflog.write_text(old + "".join(lines[1:]))
    report = doctor(store, compact=True)
    assert "dropped 1 reflog entries older than 90 days" in report.fixed
    assert reflog.read_text().splitlines(keepends=True) == lines[1:]
    (fixed,) = doctor(store, compact=True).fixed  # nothing dropped the second time
    assert fixed.startswith("repacked ") and "into one pack" in fixed


# -- the rest of `.git` ----------------------------------------------------------------------


def test_a_machine_id_set_by_hand_to_no_id_fails_writes_in_one_line_and_is_never_replaced(
    project: GcRunner,
) -> None:
    # It was replaced by a new id at the next write: this machine's own commits, naming the
    # old id, then read as made elsewhere.
    gc = project
    config = git_dir(gc) / "config"
    mine = git("config", "machine.id", cwd=git_dir(gc)).strip()
    git("config", "machine.id", "my-laptop", cwd=git_dir(gc))
    before = head(gc)
    said = (
        f"machine.id in {config} is 'my-laptop', not a machine id (m- and 16 hex digits): set "
        "this machine's id back (its commits name it: git -C .beads log -1 --format=%ce), or "
        "unset it for a new one (git -C .beads config --unset machine.id), under which this "
        "machine's earlier commits read as made elsewhere"
    )
    created = gc("bead", "create", "--type", "task", "--title", "third")
    assert (created.returncode, created.stderr) == (50, f"gc: {said}\n")
    assert head(gc) == before and titles(gc) == ["first", "second"]
    assert git("config", "machine.id", cwd=git_dir(gc)).strip() == "my-laptop"
    checked = gc("doctor")
    assert checked.returncode == 50, checked.stdout + checked.stderr
    assert f"config: .git/config: {said}" in checked.stdout.splitlines(), checked.stdout
    git("config", "machine.id", mine, cwd=git_dir(gc))
    assert gc("bead", "create", "--type", "task", "--title", "third").returncode == 0
    assert git("log", "-1", "--format=%ce", cwd=gc.cwd / ".beads").strip() == f"{mine}@gc-beads"
    assert gc("doctor").returncode == 0


def test_doctor_rewrites_a_missing_git_head(project: GcRunner) -> None:
    gc = project
    (git_dir(gc) / "HEAD").unlink()  # git no longer sees a repository
    report = gc.json("doctor")
    assert [(p["kind"], p["fixed"]) for p in report["problems"]] == [("git_head", True)]
    assert git("log", "--oneline", cwd=gc.cwd / ".beads").count("\n") == 3
    fsck(gc)


@pytest.mark.parametrize("packed", [False, True])
def test_doctor_drops_the_lines_of_packed_refs_that_git_cannot_read(
    project: GcRunner, packed: bool
) -> None:
    gc = project
    before = head(gc)
    lines = "# pack-refs with: peeled fully-peeled sorted \n"
    if packed:  # the branch lives only in packed-refs (as after `git pack-refs`)
        git("pack-refs", "--all", cwd=gc.cwd / ".beads")
        lines = (git_dir(gc) / "packed-refs").read_text()
    (git_dir(gc) / "packed-refs").write_text(lines + before[:9])  # cut short by a power cut
    report = gc.json("doctor")
    assert report["healthy"] is True
    assert ("packed_refs", True) in [(p["kind"], p["fixed"]) for p in report["problems"]]
    assert head(gc) == before and titles(gc) == ["first", "second"]
    fsck(gc)


def test_doctor_removes_a_repository_half_built_by_a_dead_gc_init(project: GcRunner) -> None:
    gc = project
    leftover = gc.cwd / ".beads" / ".git-init-999999999"  # no such process
    (leftover / "objects").mkdir(parents=True)
    (leftover / "config").write_text("[core]\n")
    report = gc.json("doctor")
    assert [(p["kind"], p["path"], p["fixed"]) for p in report["problems"]] == [
        ("stale_file", ".git-init-999999999", True)
    ]
    assert not leftover.exists()


def test_a_truncated_loose_object_is_found_and_rewritten_from_the_view(store: Store) -> None:
    bead = store.create("task", "cut short")
    sha = next(s for p, s, _ in store.index.rows() if p.endswith(f"{bead.id}.yaml"))
    object_file = Path(loose_path(str(store.git.git_dir / "objects"), sha.encode()))
    object_file.write_bytes(b"")  # what a power cut leaves of an unsynced file
    report = doctor(store)
    assert [(p.kind, p.fixed) for p in report.problems] == [("corrupt_object", True)]
    assert zlib.decompress(object_file.read_bytes()).startswith(b"blob ")
    git("fsck", "--strict", "--no-dangling", cwd=store.root)
    assert doctor(store).problems == []


def delete_loose_blobs(gc: GcRunner, *, only: str | None = None) -> dict[str, str]:
    """Delete the loose files of the blobs of HEAD's tree (of the one at `only`): deleted,
    not damaged, as a hand or a tool cleaning the objects may; returns path -> blob id."""
    listed = git("ls-tree", "-r", "HEAD", cwd=gc.cwd / ".beads").splitlines()
    blobs = {}
    for line in listed:
        info, path = line.split("\t")
        if info.split()[1] == "blob" and only in (None, path):
            blobs[path] = info.split()[2]
            Path(loose_path(str(git_dir(gc) / "objects"), blobs[path].encode())).unlink()
    return blobs


@pytest.mark.parametrize("flags", [(), ("--rebuild-index",)])
def test_blobs_of_head_deleted_are_written_again_from_the_view_and_no_bead_is_lost(
    project: GcRunner, flags: tuple[str, ...]
) -> None:
    # A rebuild of the index reads every blob: the lost ones are written again first.
    gc = project
    blobs = delete_loose_blobs(gc)
    assert len(blobs) == 3  # config.yaml and the two beads
    report = gc.json("doctor", *flags)
    assert report["ok"], report
    assert sorted((p["kind"], p["path"], p["fixed"]) for p in report["problems"]) == sorted(
        ("repository", path, True) for path in blobs
    ), report  # and no history entry, which would suggest a reset that drops beads
    assert all("rewritten from the view file" in p["message"] for p in report["problems"])
    fsck(gc)
    assert titles(gc) == ["first", "second"]
    assert gc("doctor").returncode == 0


def test_a_blob_the_history_check_found_missing_is_not_reported_once_written_again(
    project: GcRunner,
) -> None:
    # Its view file edited meanwhile: no copy, so the history check records the entry; once
    # the file holds the blob's bytes again, doctor writes the blob and checks that commit
    # again.
    gc = project
    [bead] = [b["id"] for b in gc.json("bead", "list")["beads"] if b["title"] == "second"]
    [view_file] = (gc.cwd / ".beads" / "tasks").rglob(f"{bead}.yaml")
    path = view_file.relative_to(gc.cwd / ".beads").as_posix()
    delete_loose_blobs(gc, only=path)
    content = view_file.read_bytes()
    view_file.write_bytes(content + b"# edited\n")
    first = gc.json("doctor")
    assert not first["ok"] and "corrupt_object" in {p["kind"] for p in first["problems"]}, first
    assert not any("--reset-to" in p["message"] for p in first["problems"]), first
    view_file.write_bytes(content)
    again = gc.json("doctor")
    assert again["ok"], again
    assert [(p["kind"], p["path"], p["fixed"]) for p in again["problems"]] == [
        ("repository", path, True)
    ], again
    fsck(gc)
    assert titles(gc) == ["first", "second"]
    assert gc("doctor").returncode == 0


def test_a_rebuild_of_the_index_with_a_blob_found_nowhere_names_it_and_keeps_the_index(
    project: GcRunner,
) -> None:
    gc = project
    view_file = sorted((gc.cwd / ".beads" / "tasks").rglob("*.yaml"))[0]
    path = view_file.relative_to(gc.cwd / ".beads").as_posix()
    delete_loose_blobs(gc, only=path)
    view_file.write_bytes(view_file.read_bytes() + b"# edited\n")  # no copy of the blob left
    listed = gc("bead", "list").stdout
    result = gc("doctor", "--rebuild-index")
    assert result.returncode == 50, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert f"repository: {path}: the file's object is missing" in lines, result.stdout
    [kept] = [line for line in lines if "not rebuilt" in line]
    assert path in kept and "the index was kept" in kept and "gc clone" in kept, kept
    assert not any(line.startswith("fixed: index rebuilt") for line in lines), result.stdout
    assert gc("bead", "list").stdout == listed  # the index still serves every bead


def test_restore_view_over_a_file_whose_object_is_missing_says_so_in_one_line(
    project: GcRunner,
) -> None:
    gc = project
    view_file = sorted((gc.cwd / ".beads" / "tasks").rglob("*.yaml"))[0]
    path = view_file.relative_to(gc.cwd / ".beads").as_posix()
    delete_loose_blobs(gc, only=path)
    edited = view_file.read_bytes() + b"# edited\n"
    view_file.write_bytes(edited)  # no copy of the blob left anywhere
    result = gc("doctor", "--restore-view")
    assert result.returncode == 50, result.stdout + result.stderr
    assert f"repository: {path}: the file's object is missing" in result.stdout
    assert (
        f"view_modified: {path}: edited outside gc (edits go through gc bead edit); HEAD's "
        "version cannot be read to put it back" in result.stdout
    ), result.stdout
    assert view_file.read_bytes() == edited  # left as it was


def test_a_damaged_tree_no_view_file_holds_is_rewritten_from_a_remote(
    project: GcRunner, tmp_path: Path
) -> None:
    gc = project
    synced_to_a_bare_remote(gc, tmp_path)
    tree = git("rev-parse", "HEAD^{tree}", cwd=gc.cwd / ".beads").strip()
    object_file = Path(loose_path(str(git_dir(gc) / "objects"), tree.encode()))
    object_file.chmod(0o600)
    object_file.write_bytes(b"")  # cut short; the view holds files, never trees
    report = gc.json("doctor")
    assert [(p["kind"], p["fixed"]) for p in report["problems"]] == [("corrupt_object", True)]
    assert "rewritten from the remote origin" in report["problems"][0]["message"]
    assert titles(gc) == ["first", "second"]
    fsck(gc)


def test_an_unreadable_loose_object_does_not_fail_every_write_that_packs(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = store.create("task", "one")
    blob = next(s for p, s, _ in store.index.rows() if p.endswith(f"{one.id}.yaml"))
    Path(loose_path(str(store.git.git_dir / "objects"), blob.encode())).write_bytes(b"")
    monkeypatch.setattr(beads.batch, "PACK_LOOSE_AT", 0)
    assert store.create("task", "two").title == "two"  # packs the others, leaves that one
    assert sorted(b.title for b in store.list()) == ["one", "two"]


def test_a_loose_object_that_does_not_hash_to_its_name_is_never_packed(store: Store) -> None:
    one = store.create("task", "one")
    blob = next(s for p, s, _ in store.index.rows() if p.endswith(f"{one.id}.yaml"))
    path = Path(loose_path(str(store.git.git_dir / "objects"), blob.encode()))
    path.chmod(0o644)
    path.write_bytes(zlib.compress(b"blob 5\0other"))  # whole, but not what its name says
    assert store.git.pack_loose_objects() > 0
    assert path.exists()  # still loose, for `gc doctor` to find: no pack holds the wrong bytes
    assert blob.encode() not in set(store.git.objects.packs[0])


def test_a_garbled_ref_is_a_storage_error_never_a_conflict_to_retry(store: Store) -> None:
    (store.root / ".git" / "refs" / "heads" / "main").write_bytes(b"\x00" * 41)
    with pytest.raises(StorageError):
        store.create("task", "x")
    with pytest.raises(StorageError):
        store.list()


def test_a_pack_whose_idx_was_lost_is_indexed_again_not_removed(project: GcRunner) -> None:
    # The pack holds the only copy of the history (`gc doctor --gc` packed it all): taken
    # for a killed writer's and removed, it took every commit with it.
    assert project("doctor", "--gc").returncode == 0
    [pack] = (git_dir(project) / "objects" / "pack").glob("pack-*.pack")
    pack.with_suffix(".idx").unlink()
    age(pack)
    checked = project.json("doctor")
    assert checked["ok"], checked
    assert [(p["kind"], p["fixed"]) for p in checked["problems"]] == [("stale_file", True)]
    assert "its .idx was written again" in checked["problems"][0]["message"]
    assert pack.exists() and pack.with_suffix(".idx").exists()
    git("fsck", "--strict", cwd=git_dir(project))
    titles = [b["title"] for b in project.json("bead", "list")["beads"]]
    assert sorted(titles) == ["first", "second"]
    assert project("doctor").returncode == 0


def test_a_pack_cut_short_without_its_idx_is_still_removed(project: GcRunner) -> None:
    # A writer killed as it wrote: the pack does not read whole, and no commit names it.
    made = (
        git_dir(project) / "objects" / "pack" / "pack-0123456789abcdef0123456789abcdef01234567.pack"
    )
    made.write_bytes(b"PACK\x00\x00\x00\x02\x00\x00\x00\x05cut")
    age(made)
    checked = project.json("doctor")
    assert checked["ok"], checked
    assert "removed" in checked["problems"][0]["message"]
    assert not made.exists()


def cut_pack_in_half(gc: GcRunner) -> Path:
    """`gc doctor --gc` packs every object into one pack; cut it to half its length (a disk
    fault, a copy that stopped): the objects past the cut are lost, its `.idx` still names
    them."""
    assert gc("doctor", "--gc").returncode == 0
    [pack] = (git_dir(gc) / "objects" / "pack").glob("pack-*.pack")
    pack.chmod(0o600)
    with open(pack, "r+b") as handle:
        handle.truncate(pack.stat().st_size // 2)
    return pack


def test_a_pack_cut_short_is_salvaged_and_what_is_lost_is_named_by_every_run(
    project: GcRunner,
) -> None:
    # The objects before the cut read whole: written again (the commits, here); HEAD's
    # trees are made again from the index's record of its files and its files come from
    # the view; the older commits' trees are lost, and said so until they are back.
    gc = project
    for title in ("third", "fourth"):
        assert gc("bead", "create", "--type", "task", "--title", title).returncode == 0
    listed = gc("bead", "list").stdout
    pack = cut_pack_in_half(gc)
    assert gc("log").returncode == 50  # neither git nor gc reads a pack whose checksum fails
    result = gc("doctor", "--rebuild-index")
    assert result.returncode == 50, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    [salvaged] = [line for line in result.stdout.splitlines() if pack.name in line]
    aside = gc.cwd / ".beads" / ".runtime" / "corrupt-objects" / pack.name
    assert aside.exists() and not pack.exists(), salvaged
    assert "objects before the damage were written again" in salvaged, salvaged
    assert "trees of HEAD made again from the index's record of its files" in salvaged
    assert "rewritten from the view files that hash to them" in salvaged
    assert "lost from this repository: copy the store again" in salvaged, salvaged
    assert "fixed: index rebuilt from git (4 beads)" in result.stdout, result.stdout
    assert not (gc.cwd / ".beads" / ".runtime" / "index.sqlite3.new").exists()
    assert gc("bead", "list").stdout == listed
    assert gc("log").returncode == 0 and gc("mail", "inbox").returncode == 0
    assert gc("bead", "create", "--type", "task", "--title", "fifth").returncode == 0
    again = gc.json("doctor")
    assert [(p["kind"], p["path"], p["fixed"]) for p in again["problems"]] == [
        ("corrupt_object", aside.relative_to(gc.cwd / ".beads").as_posix(), False)
    ], again
    assert "objects still missing are lost" in again["problems"][0]["message"], again


def test_a_pack_whose_idx_was_overwritten_is_indexed_again_not_set_aside(
    project: GcRunner,
) -> None:
    assert project("doctor", "--gc").returncode == 0
    [pack] = (git_dir(project) / "objects" / "pack").glob("pack-*.pack")
    index = pack.with_suffix(".idx")
    index.chmod(0o600)
    with open(index, "r+b") as handle:  # its last bytes: the pack's checksum, then its own
        handle.seek(-40, os.SEEK_END)
        handle.write(b"\xff" * 40)
    report = project.json("doctor")
    assert report["ok"], report
    assert [(p["kind"], p["fixed"]) for p in report["problems"]] == [("corrupt_object", True)]
    assert "its .idx was written again" in report["problems"][0]["message"], report
    assert pack.exists() and not (git_dir(project).parent / ".runtime" / "corrupt-objects").exists()
    fsck(project)
    assert titles(project) == ["first", "second"]
    assert project("doctor").returncode == 0


def delete_history_commit(gc: GcRunner) -> str:
    """Delete the loose file of the commit before HEAD (a disk fault, a hand cleaning the
    objects): the history is cut in the middle, HEAD's tree stays whole; returns its id."""
    commit = git("rev-parse", "HEAD~1", cwd=gc.cwd / ".beads").strip()
    Path(loose_path(str(git_dir(gc) / "objects"), commit.encode())).unlink()
    return commit


def test_gc_log_over_a_history_cut_at_a_missing_commit_lists_the_commits_above_it(
    project: GcRunner,
) -> None:
    # With no copy of the commit anywhere, doctor says the history is cut there; gc log then
    # printed nothing and still told to run gc doctor.
    gc = project
    for title in ("third", "fourth"):
        assert gc("bead", "create", "--type", "task", "--title", title).returncode == 0
    above = git("rev-list", "-2", "HEAD", cwd=gc.cwd / ".beads").split()
    cut = git("rev-parse", "HEAD~2", cwd=gc.cwd / ".beads").strip()
    Path(loose_path(str(git_dir(gc) / "objects"), cut.encode())).unlink()
    assert gc("doctor").returncode == 50  # no remote: the history stays cut
    said = (
        f"the history is cut at commit {cut}: its object is missing, so older commits cannot "
        "be read (gc doctor fetches it again from a remote that has it)"
    )
    logged = gc("log")
    assert (logged.returncode, logged.stderr) == (50, f"gc: {said}\n")
    assert [line.split("  ")[0] for line in logged.stdout.splitlines()] == [
        sha[:10] for sha in above
    ]
    assert logged.stdout.splitlines()[0].endswith('task "fourth"'), logged.stdout
    reply = gc.json("log")
    assert reply["ok"] is False
    assert [c["commit"] for c in reply["commits"]] == above
    assert reply["error"] == {"code": "storage_error", "message": said, "cut": [cut]}
    # The commits asked for were read: nothing is missing from the answer.
    assert gc("log", "--limit", "2").returncode == 0
    fourth = next(b["id"] for b in gc.json("bead", "list")["beads"] if b["title"] == "fourth")
    of_bead = gc.json("log", fourth)
    assert [c["commit"] for c in of_bead["commits"]] == above[:1], of_bead
    mail_log = gc("mail", "log")
    assert (mail_log.returncode, mail_log.stderr) == (50, f"gc: {said}\n")


def test_the_inbox_over_a_history_missing_a_commit_lists_its_messages(
    project: GcRunner,
) -> None:
    # The inbox's origin notes walk the history: the walk ends in one line naming the
    # missing commit and gc doctor, and the messages go unmarked (an origin informs).
    gc = project
    for n in range(2):
        assert gc("mail", "send", "--to", "bob", "-s", f"hi{n}", "-m", "b").returncode == 0
    commit = delete_history_commit(gc)
    inbox = gc("mail", "inbox", "bob")
    assert inbox.returncode == 0, inbox.stderr
    assert "hi0" in inbox.stdout and "hi1" in inbox.stdout
    assert "internal error" not in inbox.stderr
    store = Store.open(gc.cwd / ".beads")
    try:
        with pytest.raises(StorageError) as walked:
            list(walk(store.git, store.git.head()))  # type: ignore[arg-type]
    finally:
        store.close()
    assert walked.value.message == (
        f"the history names {commit} as a commit, which is missing; run 'gc doctor' to restore it"
    )


def test_doctor_fetches_a_missing_history_commit_again_from_a_remote(
    project: GcRunner, tmp_path: Path
) -> None:
    gc = project
    synced_to_a_bare_remote(gc, tmp_path)
    commit = delete_history_commit(gc)
    assert gc("log").returncode == 50
    report = gc.json("doctor")
    assert report["ok"], report
    [problem] = report["problems"]
    assert (problem["kind"], problem["fixed"]) == ("corrupt_object", True), problem
    assert problem["message"] == (
        f"commit {commit} of the branch's history was missing; fetched from the remote origin"
    )
    fsck(gc)
    assert len(gc.json("log")["commits"]) == 3
    assert titles(gc) == ["first", "second"]
    assert gc("doctor").returncode == 0


def test_doctor_fetches_a_missing_commit_and_its_tree_instead_of_advising_a_reset(
    project: GcRunner, tmp_path: Path
) -> None:
    # A loose commit lost with its tree (a disk fault takes both): doctor fetched the commit
    # alone, then its history check found the tree missing and advised
    # `gc doctor --reset-to`, which would drop every bead made since.
    gc = project
    synced_to_a_bare_remote(gc, tmp_path)
    tree = git("rev-parse", "HEAD~1^{tree}", cwd=gc.cwd / ".beads").strip()
    commit = delete_history_commit(gc)
    Path(loose_path(str(git_dir(gc) / "objects"), tree.encode())).unlink()
    report = gc.json("doctor")
    assert report["ok"], report
    assert [(p["message"], p["fixed"]) for p in report["problems"]] == [
        (
            f"commit {commit} of the branch's history was missing; fetched from the remote origin",
            True,
        ),
        (
            f"tree {tree} of commit {commit[:12]} was missing; fetched from the remote origin",
            True,
        ),
    ]
    fsck(gc)
    assert gc("doctor").returncode == 0


def test_doctor_says_a_remote_it_could_not_reach_rather_than_that_none_has_the_commit(
    project: GcRunner, tmp_path: Path
) -> None:
    # The remote down (a daemon stopped, no network) is no remote lacking the commit: the
    # report named no remote and told to copy the store again, from the remote that was down.
    gc = project
    remote = synced_to_a_bare_remote(gc, tmp_path)
    commit = delete_history_commit(gc)
    remote.rename(tmp_path / "away.git")
    result = gc("doctor")
    assert result.returncode == 50, result.stdout + result.stderr
    assert (
        f"corrupt_object: .git: commit {commit} of the branch's history is missing and the "
        f"remote origin could not be read (no git repository at {remote}): the history is cut "
        "there (gc log cannot read past it); the beads themselves are intact (HEAD's tree is "
        "whole); run gc doctor again once it can be read, else copy the store again from a "
        "remote or a backup (gc clone URL makes a new one)" in result.stdout.splitlines()
    ), result.stdout
    (tmp_path / "away.git").rename(remote)
    assert gc("doctor").returncode == 0
    fsck(gc)


def test_a_sync_over_a_history_missing_a_commit_names_gc_doctor(
    project: GcRunner, tmp_path: Path
) -> None:
    # The sync's walk of this store's history said "which is missing" and no way on, where
    # every reading command names gc doctor (which fetches the commit back, or says the
    # history is cut there).
    gc = project
    synced_to_a_bare_remote(gc, tmp_path)
    for title in ("third", "fourth"):  # not pushed: the remote lacks them
        assert gc("bead", "create", "--type", "task", "--title", title).returncode == 0
    commit = delete_history_commit(gc)
    synced = gc("sync")
    assert (synced.returncode, synced.stderr) == (
        50,
        f"gc: the history names {commit} as a commit, which is missing; run 'gc doctor' to "
        "restore it\n",
    )


def test_doctor_without_a_remote_says_the_history_is_cut_at_a_missing_commit(
    project: GcRunner,
) -> None:
    gc = project
    commit = delete_history_commit(gc)
    view_file = sorted((gc.cwd / ".beads" / "tasks").rglob("*.yaml"))[0]
    view_file.unlink()  # the checks after the history's still run
    result = gc("doctor")
    assert result.returncode == 50, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert (
        f"corrupt_object: .git: commit {commit} of the branch's history is missing and no "
        "remote has it: the history is cut there (gc log cannot read past it); the beads "
        "themselves are intact (HEAD's tree is whole); copy the store again from a remote or "
        "a backup (gc clone URL makes a new one)" in lines
    ), result.stdout
    shown = view_file.relative_to(gc.cwd / ".beads").as_posix()
    assert (
        f"view_missing: {shown}: missing from the view; gc doctor --restore-view puts HEAD's "
        "version back" in lines
    ), result.stdout
    assert "Traceback" not in result.stderr
    assert titles(gc) == ["first", "second"]


def delete_history_tree(gc: GcRunner, which: str) -> tuple[str, str]:
    """After a third bead, delete the loose file of the tree `which` ("root" or "tasks") of
    the commit before HEAD, which no other commit holds (a disk fault, a hand cleaning the
    objects): the commit reads, HEAD's tree stays whole. Returns the tree's and the commit's
    ids."""
    assert gc("bead", "create", "--type", "task", "--title", "third").returncode == 0
    beads_dir = gc.cwd / ".beads"
    commit = git("rev-parse", "HEAD~1", cwd=beads_dir).strip()
    tree = git("rev-parse", "HEAD~1^{tree}" if which == "root" else "HEAD~1:tasks", cwd=beads_dir)
    tree = tree.strip()
    Path(loose_path(str(git_dir(gc) / "objects"), tree.encode())).unlink()
    return tree, commit


@pytest.mark.parametrize("checked_before", ["never", "by this gc", "by an earlier gc"])
@pytest.mark.parametrize("which", ["root", "tasks"])
def test_a_tree_missing_under_a_commit_is_named_and_no_reset_that_drops_beads_is_advised(
    project: GcRunner, which: str, checked_before: str
) -> None:
    # Doctor called the missing tree an entry the gate refuses and advised
    # `gc doctor --reset-to` the commit before, which would drop every bead made since; and
    # once a run had checked the history past that commit, it no longer found it at all.
    gc = project
    if checked_before != "never":
        assert gc("bead", "create", "--type", "task", "--title", "zero").returncode == 0
        assert gc("doctor").returncode == 0  # the history is checked up to HEAD
    if checked_before == "by an earlier gc":  # its record says nothing of the objects
        record = gc.cwd / ".beads" / ".runtime" / "history-checked"
        kept = json.loads(record.read_text())
        record.write_text(json.dumps({"head": kept["head"], "found": kept["found"]}))
    tree, commit = delete_history_tree(gc, which)
    for _ in range(2):  # and again on the next run
        report = gc.json("doctor")
        assert not report["ok"]
        assert [(p["kind"], p["path"], p["message"], p["fixed"]) for p in report["problems"]] == [
            (
                "corrupt_object",
                ".git",
                f"tree {tree} of commit {commit[:12]} is missing and no remote has it: the "
                "history is damaged at that commit (the beads as it left them cannot be read); "
                "the beads themselves are intact (HEAD's tree is whole), so no reset is needed; "
                "copy the store again from a remote or a backup (gc clone URL makes a new one)",
                False,
            )
        ], report
    assert "third" in titles(gc)
    assert gc("log").returncode == 0


@pytest.mark.parametrize("which", ["root", "tasks"])
def test_a_tree_missing_under_a_commit_is_fetched_again_from_a_remote(
    project: GcRunner, tmp_path: Path, which: str
) -> None:
    gc = project
    assert gc("doctor").returncode == 0
    synced_to_a_bare_remote(gc, tmp_path)
    assert gc("bead", "create", "--type", "task", "--title", "pushed").returncode == 0
    assert gc("sync").returncode == 0
    beads_dir = gc.cwd / ".beads"
    commit = git("rev-parse", "HEAD", cwd=beads_dir).strip()
    tree = git("rev-parse", "HEAD^{tree}" if which == "root" else "HEAD:tasks", cwd=beads_dir)
    assert gc("bead", "create", "--type", "task", "--title", "later").returncode == 0
    Path(loose_path(str(git_dir(gc) / "objects"), tree.strip().encode())).unlink()
    report = gc.json("doctor")
    assert report["ok"], report
    assert [(p["message"], p["fixed"]) for p in report["problems"]] == [
        (
            f"tree {tree.strip()} of commit {commit[:12]} was missing; fetched from the remote "
            "origin",
            True,
        )
    ], report
    fsck(gc)
    assert gc("doctor").returncode == 0


@pytest.fixture
def history_walks(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The heads of each walk of every commit of the history (`missing_commits`) from now
    on: what doctor's search for missing commits costs on a long history."""
    import beads.git.history

    walks: list[bytes] = []
    walk = beads.git.history.missing_commits

    def counted(git: object, head: bytes) -> set[bytes]:
        walks.append(head)
        return walk(git, head)  # type: ignore[arg-type]

    monkeypatch.setattr(beads.git.history, "missing_commits", counted)
    return walks


def test_doctor_walks_an_unchanged_history_once_and_still_finds_a_commit_lost_in_it(
    project: GcRunner, history_walks: list[bytes]
) -> None:
    # Every run walked every commit of the history looking for missing ones (about 1.5 s at
    # 50,000 commits), however often it had found none.
    gc = project
    assert gc("doctor").returncode == 0
    assert len(history_walks) == 1  # the first run: the whole history, once
    assert gc("doctor").returncode == 0
    assert gc("bead", "create", "--type", "task", "--title", "third").returncode == 0
    assert gc("doctor").returncode == 0
    assert len(history_walks) == 1  # nothing went from the objects: only new commits read
    commit = delete_history_commit(gc)  # a loose object seen by the last run is gone
    result = gc("doctor")
    assert result.returncode == 50
    assert f"commit {commit} of the branch's history is missing" in result.stdout, result.stdout
    assert len(history_walks) == 2


def test_doctor_walks_the_history_again_after_a_pack_went(
    project: GcRunner, history_walks: list[bytes]
) -> None:
    # A pack that goes may have held commits: a repack's (its objects are in the pack that
    # replaced it), or one lost (deleted by hand), whose commits are then found missing.
    gc = project
    assert gc("doctor", "--gc").returncode == 0  # every object in one pack
    assert gc("bead", "create", "--type", "task", "--title", "third").returncode == 0
    assert gc("doctor").returncode == 0  # a repack went before: the whole history again
    walked = len(history_walks)
    assert gc("doctor").returncode == 0
    assert len(history_walks) == walked
    before = git("rev-parse", "HEAD~1", cwd=gc.cwd / ".beads").strip()
    [pack] = (git_dir(gc) / "objects" / "pack").glob("*.pack")
    pack.unlink()
    pack.with_suffix(".idx").unlink()
    result = gc("doctor")
    assert len(history_walks) == walked + 1
    assert f"commit {before} of the branch's history is missing" in result.stdout, result.stdout


def test_a_pack_cut_short_is_made_whole_again_from_a_remote(
    project: GcRunner, tmp_path: Path
) -> None:
    gc = project
    synced_to_a_bare_remote(gc, tmp_path)
    pack = cut_pack_in_half(gc)
    report = gc.json("doctor")
    assert report["ok"], report
    [problem] = report["problems"]
    assert (problem["kind"], problem["fixed"]) == ("corrupt_object", True), problem
    assert "fetched from the remote origin" in problem["message"], problem
    assert pack.name in problem["path"]
    fsck(gc)
    assert titles(gc) == ["first", "second"]
    assert gc("doctor").returncode == 0


def test_doctor_gc_on_a_pack_cut_short_reports_each_problem_in_one_line(
    project: GcRunner,
) -> None:
    # git's repack fails with an `error:` line per object it cannot read, then a `fatal:`
    # line: the report gives the one line that says why, in the text and in --json.
    gc = project
    cut_pack_in_half(gc)
    result = gc("doctor", "--gc")
    assert result.returncode == 50, result.stdout + result.stderr
    kinds = ("corrupt_object: ", "repository: ")
    lines = result.stdout.splitlines()
    assert all(line.startswith(kinds) for line in lines[:-1]), result.stdout
    assert lines[-1].endswith("not fixed"), result.stdout
    [repack] = [line for line in lines if "repack failed" in line]
    assert repack.count("error:") + repack.count("fatal:") == 1, repack
    assert len(result.stderr.splitlines()) == 1, result.stderr
    report = gc.json("doctor", "--gc")
    assert report["ok"] is False and len(report["problems"]) == len(lines) - 1, report
    for problem in report["problems"]:
        assert "\n" not in problem["message"] and "\r" not in problem["message"], problem


# -- a lost head commit ----------------------------------------------------------------------


def lose_head_commit(gc: GcRunner, *, with_its_objects: bool = False) -> tuple[str, str, str]:
    """Delete the loose object of the branch's commit (with its new trees and blob too, as
    a power cut takes what a write had not synced); returns the lost commit, its parent and
    the id of the bead it created."""
    made = gc.json("bead", "create", "--type", "task", "--title", "last")["bead"]["id"]
    beads_dir = gc.cwd / ".beads"
    lost = head(gc)
    parent = git("rev-parse", "main^", cwd=beads_dir).strip()
    names = [lost]
    if with_its_objects:
        listed = git("rev-list", "--objects", "main^..main", cwd=beads_dir).split("\n")
        names = [line.split()[0] for line in listed if line]
    for name in names:
        Path(loose_path(str(git_dir(gc) / "objects"), name.encode())).unlink()
    return lost, parent, made


@pytest.mark.parametrize("with_its_objects", [False, True])
def test_doctor_makes_a_lost_head_commit_again_and_loses_no_bead(
    project: GcRunner, with_its_objects: bool
) -> None:
    gc = project
    lost, parent, made = lose_head_commit(gc, with_its_objects=with_its_objects)
    report = gc.json("doctor")
    assert report["ok"], report
    assert [(p["kind"], p["fixed"]) for p in report["problems"]] == [("branch", True)]
    assert "made again from the index's record" in report["problems"][0]["message"]
    shown = gc("bead", "show", made)
    assert shown.returncode == 0 and "title: last" in shown.stdout, shown.stderr
    beads_dir = gc.cwd / ".beads"
    subject = git("log", "-1", "--format=%s", cwd=beads_dir).strip()
    assert subject.startswith(f"gc doctor: redo lost commit {lost[:12]} (bead create {made}")
    assert git("rev-parse", "main^", cwd=beads_dir).strip() == parent
    assert titles(gc) == ["first", "last", "second"]
    fsck(gc)
    assert gc("doctor").returncode == 0
    assert gc("bead", "create", "--type", "task", "--title", "after").returncode == 0


def test_a_lost_head_commit_the_index_did_not_record_is_reported_and_its_files_kept(
    project: GcRunner,
) -> None:
    gc = project
    lost, parent, made = lose_head_commit(gc)
    [view_file] = (gc.cwd / ".beads" / "tasks").rglob(f"{made}.yaml")
    content = view_file.read_bytes()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{gc.cwd}/.beads/.runtime/index.sqlite3{suffix}").unlink(missing_ok=True)
    result = gc("doctor")
    assert result.returncode == 50, result.stdout + result.stderr
    assert f"the changes of the lost commit {lost} are not in it" in result.stdout
    kept = gc.cwd / ".beads" / ".runtime" / "lost-commits" / lost
    assert [p.read_bytes() for p in kept.rglob("*.yaml")] == [content], result.stdout
    assert head(gc) == parent and titles(gc) == ["first", "second"]
    assert gc("doctor").returncode == 0


# -- a history the gate refuses --------------------------------------------------------------


def commit_outside_the_layout(gc: GcRunner, name: str, when: int, salt: int = 0) -> str:
    """Commit (by git plumbing, as a hand or another tool may) the file `notes/<name>`,
    outside the store's layout, with its time `when`, on the branch; returns the commit."""
    beads_dir = gc.cwd / ".beads"
    notes = {}
    listed = git("ls-tree", "HEAD", cwd=beads_dir)
    top = [line for line in listed.splitlines() if not line.endswith("\tnotes")]
    if "\tnotes" in listed:
        notes_listed = git("ls-tree", "HEAD:notes", cwd=beads_dir)
        notes = {line.split("\t")[1]: line for line in notes_listed.splitlines()}
    blob = git_input(beads_dir, f"{name}\n", "hash-object", "-w", "--stdin").strip()
    notes[name] = f"100644 blob {blob}\t{name}"
    subtree = git_input(beads_dir, "\n".join(sorted(notes.values())) + "\n", "mktree").strip()
    tree = git_input(beads_dir, "\n".join([*top, f"040000 tree {subtree}\tnotes"]) + "\n", "mktree")
    env = {"GIT_COMMITTER_DATE": f"{when} +0000", "GIT_AUTHOR_DATE": f"{when} +0000"}
    message = f"add notes/{name} ({salt})"
    commit = git_input(
        beads_dir, message, "commit-tree", tree.strip(), "-p", "HEAD", env=env
    ).strip()
    git("update-ref", "refs/heads/main", commit, cwd=beads_dir)
    return commit


def git_input(cwd: Path, data: str, *args: str, env: dict[str, str] | None = None) -> str:
    import subprocess

    result = subprocess.run(
        ["git", *args], cwd=cwd, input=data, capture_output=True, text=True, check=True,
        env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com", **(env or {})},
    )  # fmt: skip
    return result.stdout


@pytest.mark.parametrize("clock", ["the same second", "set back"])
def test_the_reset_doctor_advises_goes_before_the_first_bad_commit_in_the_history(
    project: GcRunner, clock: str
) -> None:
    # Two commits outside the layout, the second made in the same second as the first (its
    # id sorting first) or under a clock set back: the first in the history is the one
    # whose parents hold none, whatever the commit times say.
    gc = project
    good = head(gc)
    when = int(time.time()) + 100
    first = commit_outside_the_layout(gc, "a", when)
    beads_dir = gc.cwd / ".beads"
    for salt in range(200):
        second = commit_outside_the_layout(
            gc, "b", when if clock == "the same second" else when - 60, salt
        )
        if clock != "the same second" or second < first:
            break
        git("update-ref", "refs/heads/main", first, cwd=beads_dir)
    assert git("rev-parse", "main^", cwd=beads_dir).strip() == first
    report = gc.json("doctor")
    assert not report["ok"] and [p["kind"] for p in report["problems"]] == ["history"] * 2
    for problem in report["problems"]:
        assert f"gc doctor --reset-to {good[:12]}'" in problem["message"], problem
    reset = gc.json("doctor", "--reset-to", good[:12])
    assert reset["ok"] and head(gc) == good, reset
    assert titles(gc) == ["first", "second"]


def test_a_tree_missing_past_the_first_twenty_bad_entries_is_still_found_by_the_next_run(
    project: GcRunner,
) -> None:
    # The history check stops after 20 bad entries, yet it recorded the history as checked
    # up to HEAD: a tree missing under a later commit was never reported again. (The bad
    # commits' times are before their parents': the check follows the parents.)
    gc = project
    when = int(time.time()) - 1000
    bad = [commit_outside_the_layout(gc, f"n{i:02}", when + i) for i in range(22)]
    assert gc("bead", "create", "--type", "task", "--title", "later").returncode == 0
    tree, commit = delete_history_tree(gc, "tasks")  # under "later", made after them all
    damage = (
        f"tree {tree} of commit {commit[:12]} is missing and no remote has it: the history is "
        "damaged at that commit"
    )
    more = (
        "and more may be wrong: the history check stopped after 20 entries; run gc doctor "
        "again to check the commits after them"
    )
    first = gc.json("doctor")
    messages = [(p["kind"], p["path"], p["message"]) for p in first["problems"]]
    assert not first["ok"]
    assert [path for kind, path, _ in messages if kind == "history"][:20] == [
        f"'notes/n{i:02}'" for i in range(20)
    ], messages
    assert ("history", ".git", more) in messages, messages
    assert not any(damage in message for _, _, message in messages), messages
    second = gc.json("doctor")  # goes on where the first stopped
    messages = [(p["kind"], p["path"], p["message"]) for p in second["problems"]]
    assert [path for kind, path, _ in messages if kind == "history"] == [
        f"'notes/n{i:02}'" for i in range(22)
    ], messages
    assert [m for _, _, m in messages if damage in m], messages
    for _ in range(2):  # and every run after, from the record of the last
        report = gc.json("doctor")
        assert [(p["kind"], p["path"], p["message"]) for p in report["problems"]] == messages
    history = [message for kind, _, message in messages if kind == "history"]
    assert all(f"commit {c[:12]} holds it" in m for c, m in zip(bad, history, strict=False))


def test_a_commit_holding_more_than_twenty_bad_entries_is_reported_as_needing_repair_first(
    project: GcRunner,
) -> None:
    # The check stops in that commit on every run: running it again checks nothing more.
    gc = project
    beads_dir = gc.cwd / ".beads"
    notes = []
    for i in range(21):
        blob = git_input(beads_dir, f"{i}\n", "hash-object", "-w", "--stdin").strip()
        notes.append(f"100644 blob {blob}\tn{i:02}")
    subtree = git_input(beads_dir, "\n".join(notes) + "\n", "mktree").strip()
    top = git("ls-tree", "HEAD", cwd=beads_dir).splitlines()
    tree = git_input(beads_dir, "\n".join([*top, f"040000 tree {subtree}\tnotes"]) + "\n", "mktree")
    commit = git_input(beads_dir, "notes", "commit-tree", tree.strip(), "-p", "HEAD").strip()
    git("update-ref", "refs/heads/main", commit, cwd=beads_dir)
    for _ in range(2):
        report = gc.json("doctor")
        problems = [(p["kind"], p["path"]) for p in report["problems"]]
        assert problems == [("history", f"'notes/n{i:02}'") for i in range(20)] + [
            ("history", ".git")
        ], report
        assert report["problems"][-1]["message"] == (
            "and more may be wrong: the history check stopped after 20 entries; run gc doctor "
            "again after repairing these"
        )
