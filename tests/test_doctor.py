"""The doctor's view check: a view file edited by hand or stray is reported and restored; for
a large store a child process walks and reads the view while the index is rebuilt, and what it
found never hides a file edited by hand or gone. A damaged delivery database is reported with
what to do. Its repairs of `.git` are in `test_doctor_git.py`."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from beads import doctor
from beads.records.ids import bead_path
from beads.store import Store
from beads.view.scan import SCAN_AHEAD_FILES, ViewScan
from beads.view.view import git_blob_sha
from tests.conftest import GcRunner, git


def edit_in_place(path: Path) -> None:
    """Change one byte, keeping the file's size and times: only its content tells."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    at = data.index(b"T")
    data[at] = ord("X")
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.parametrize("ahead", [True, False])
@pytest.mark.parametrize("rebuild_index", [True, False])
def test_an_edit_that_keeps_size_and_times_and_a_missing_file_are_found(
    store: Store, monkeypatch: pytest.MonkeyPatch, ahead: bool, rebuild_index: bool
) -> None:
    if ahead:  # the view is walked and read by a child, as for a large store
        monkeypatch.setattr("beads.view.scan.SCAN_AHEAD_FILES", 0)
    edited, gone, kept = (store.create("task", f"T{n}") for n in range(3))
    edit_in_place(store.root / bead_path("task", edited.id))
    (store.root / bead_path("task", gone.id)).unlink()
    report = doctor(store, rebuild_index=rebuild_index)
    found = sorted((p.kind, p.path) for p in report.problems)
    assert found == sorted(
        [
            ("view_modified", bead_path("task", edited.id)),
            ("view_missing", bead_path("task", gone.id)),
        ]
    )
    assert doctor(store, restore_view=True, rebuild_index=rebuild_index).ok
    assert doctor(store).problems == []
    assert store.get(kept.id).title == "T2"


def test_a_view_behind_head_is_caught_up_before_it_is_checked(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("beads.view.scan.SCAN_AHEAD_FILES", 0)  # read before the catch-up
    first = store.create("task", "T")
    marker = store.view.applied_file.read_bytes()
    old = (store.root / bead_path("task", first.id)).read_bytes()
    store.update(first.id, title="Changed")
    # As if the writer had died before bringing the view forward: the old file, the old mark.
    (store.root / bead_path("task", first.id)).write_bytes(old)
    store.view.applied_file.write_bytes(marker)
    assert doctor(store, rebuild_index=True).problems == []
    assert b"Changed" in (store.root / bead_path("task", first.id)).read_bytes()


def test_the_background_scan_finds_what_the_view_walk_and_reads_find(store: Store) -> None:
    bead = store.create("task", "T")
    (store.root / "odd\nname").write_bytes(b"x")
    (store.root / "link.yaml").symlink_to(store.root / bead_path("task", bead.id))
    ahead = ViewScan(store.root, size=SCAN_AHEAD_FILES)
    files, links, hashes = ahead.result()
    assert (sorted(files), links) == (sorted(store.view.files()), ["link.yaml"])
    assert hashes == {path: git_blob_sha((store.root / path).read_bytes()) for path in files}
    assert ViewScan(store.root, size=1).result() == (*store.view.scan(), {})


def test_doctor_rebuild_index_after_a_lost_index_rebuilds_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from beads import refresh as reconcile

    bead = store.create("task", "T")
    store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store.index.path}{suffix}").unlink(missing_ok=True)
    rebuilds: list[bytes] = []
    real = reconcile.rebuild_index
    monkeypatch.setattr(reconcile, "rebuild_index", lambda *a: rebuilds.append(a[2]) or real(*a))
    with Store.open(store.root) as reopened:  # the lost index is rebuilt here, into a new file
        report = doctor(reopened, rebuild_index=True)
        assert report.problems == [] and len(rebuilds) == 1
        assert reopened.get(bead.id).title == "T"
        doctor(reopened, rebuild_index=True)  # asked again: this time from a new file
        assert len(rebuilds) == 2


def test_doctor_reports_and_restores_a_hand_edited_view_file(store: Store) -> None:
    bead = store.create("task", "T")
    view_file = store.root / bead_path("task", bead.id)
    original = view_file.read_bytes()
    view_file.write_text("title: hacked\n")
    (store.root / "stray.txt").write_text("x")
    assert doctor(store).ok is False
    kinds = sorted(p.kind for p in doctor(store).problems)
    assert kinds == ["view_modified", "view_stray"]
    fixed = doctor(store, restore_view=True)
    assert fixed.ok and len(fixed.fixed) == 2
    assert view_file.read_bytes() == original and not (store.root / "stray.txt").exists()


def test_a_stray_view_file_whose_name_holds_a_line_break_is_reported_on_one_line(
    gc_store: GcRunner,
) -> None:
    gc = gc_store
    stray = gc.cwd / ".beads" / "stray\nfile.txt"
    stray.write_text("x")
    result = gc("doctor")
    assert result.returncode == 50, result.stderr
    assert result.stdout.splitlines()[0] == (
        "view_stray: stray\\nfile.txt: not in HEAD; gc doctor --restore-view puts HEAD's "
        "version back"
    ), result.stdout
    [problem] = gc.json("doctor")["problems"]
    assert problem["path"] == "stray\nfile.txt"  # exact, as every string in --json
    restored = gc("doctor", "--restore-view")
    assert restored.returncode == 0 and not stray.exists(), restored.stderr
    assert "fixed: removed stray\\nfile.txt (not in HEAD)" in restored.stdout.splitlines()


def damage(path: Path, how: str) -> None:
    """Damage the database at `path` as a crash, a full disk or a stray write may."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the file itself
    db.close()
    data = path.read_bytes()
    if how == "cut in half":
        path.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        path.write_bytes(os.urandom(len(data)))
    else:  # "pages": the header stays, every other page is garbled
        path.write_bytes(data[:4096] + b"\xff" * (len(data) - 4096))


@pytest.mark.parametrize("how", ["cut in half", "garbage", "pages"])
def test_doctor_reports_a_damaged_delivery_database_and_what_to_do(
    gc_store: GcRunner, how: str
) -> None:
    for n in range(30):  # a database of several pages
        assert gc_store("inbox", "push", "--to", "dog", f"item {n} " + "y" * 500).returncode == 0
    path = gc_store.cwd / ".beads" / ".runtime" / "delivery.sqlite3"
    damage(path, how)
    kept = path.read_bytes()
    result = gc_store("--json", "doctor")
    assert result.returncode == 50, result.stderr
    reply = json.loads(result.stdout)
    assert reply["ok"] is False and reply["healthy"] is False
    [problem] = reply["problems"]
    assert (problem["kind"], problem["path"], problem["fixed"]) == (
        "delivery",
        ".runtime/delivery.sqlite3",
        False,
    )
    assert problem["message"].startswith("damaged (")
    assert f"move {path} aside and a new one is made" in problem["message"]
    assert path.read_bytes() == kept  # reported, never changed
    assert gc_store("doctor").stdout.startswith("delivery: .runtime/delivery.sqlite3: damaged")


@pytest.mark.parametrize("kind", ["directory holding files", "fifo"])
def test_a_non_file_where_the_origins_are_kept_is_reported_and_rebuild_index_clears_it(
    gc_store: GcRunner, kind: str
) -> None:
    # No lookup can use or remove it, so each reading command walks the whole history: plain
    # doctor said the store was healthy, and --rebuild-index failed on the directory.
    gc = gc_store
    assert gc("mail", "send", "--to", "dog", "-s", "hi", "-m", "b").returncode == 0
    kept = gc.cwd / ".beads" / ".runtime" / "origins.sqlite3"
    if kind == "fifo":
        os.mkfifo(kept)
        what = "not a regular file"
    else:
        (kept / "inner").mkdir(parents=True)
        (kept / "inner" / "file").write_text("x")
        what = "a directory holding files"
    result = gc("doctor")
    assert result.returncode == 50, result.stdout + result.stderr
    assert result.stdout.splitlines()[0] == (
        f"origins: .runtime/origins.sqlite3: {what} where gc keeps the origins for reading "
        "commands: each of them walks the whole history instead; gc doctor --rebuild-index "
        "removes it"
    ), result.stdout
    done = gc.json("doctor", "--rebuild-index")
    assert done["ok"] and done["problems"] == [], done
    assert not os.path.lexists(kept)
    assert any("origins" in line for line in done["fixed"]), done
    assert gc("mail", "inbox", "dog").returncode == 0
    assert kept.is_file()  # made again by the reading command
    assert gc("doctor").returncode == 0


def test_doctor_finds_an_empty_delivery_database_sound(gc_store: GcRunner) -> None:
    path = gc_store.cwd / ".beads" / ".runtime" / "delivery.sqlite3"
    path.write_bytes(b"")  # sqlite takes an empty file for an empty database, as gc does
    result = gc_store("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert gc_store("inbox", "push", "--to", "dog", "hi").returncode == 0


def test_an_unparsable_bead_that_arrived_by_sync_names_its_repair_which_works(
    gc_store: GcRunner, tmp_path: Path
) -> None:
    gc = gc_store
    remote = tmp_path / "remote.git"
    git("init", "-q", "--bare", "-b", "main", str(remote), cwd=tmp_path)
    assert gc("remote", "add", "origin", str(remote)).returncode == 0
    assert gc("sync").returncode == 0
    clone = tmp_path / "clone"
    git("clone", "-q", str(remote), str(clone), cwd=tmp_path)
    broken = bead_path("task", "gc-brokenxx")
    (clone / broken).parent.mkdir(parents=True, exist_ok=True)
    (clone / broken).write_text("id: gc-brokenxx\ntitle: [unclosed\n")
    git("add", broken, cwd=clone)
    git("commit", "-qm", "a broken bead", cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)
    assert gc("sync").returncode == 0

    report = gc.json("doctor")
    [problem] = report["problems"]
    assert (problem["kind"], problem["path"]) == ("unparsable", broken), report
    assert "gc bead edit gc-brokenxx" in problem["message"], problem

    # Following the advice: the file opens as it is, and what the editor leaves is committed.
    script = tmp_path / "editor.py"
    fixed = (
        "id: gc-brokenxx\ntype: task\ntitle: mended\nfrom: human\n"
        "created_at: '2026-01-01T00:00:00.000000Z'\nupdated_at: '2026-01-01T00:00:00.000000Z'\n"
    )
    script.write_text(
        "import sys\n"
        "path = sys.argv[1]\n"
        "assert open(path).read() == 'id: gc-brokenxx\\ntitle: [unclosed\\n'\n"
        f"open(path, 'w').write({fixed!r})\n"
    )
    edited = gc("bead", "edit", "gc-brokenxx", env={"EDITOR": f"{sys.executable} {script}"})
    assert edited.returncode == 0, edited.stderr
    assert gc("doctor").returncode == 0
    assert gc.json("bead", "show", "gc-brokenxx")["bead"]["title"] == "mended"
