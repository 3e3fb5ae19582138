"""Packed loose objects kept as spare files that writers reuse: no object is ever wrong or lost."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

import beads.spares as spares
from beads import doctor
from beads.faults import SPARE_POINTS
from beads.gitobjects import BLOB, read_loose
from beads.gitrepair import TEMP_STALE_SECONDS
from beads.store import Store
from tests.conftest import git
from tests.test_crash import age_all, check_usable, run_writer


def spare_files(root: Path) -> dict[int, Path]:
    """The spares of the store at `root`, by inode."""
    found = {}
    for path in (root / ".git" / spares.SPARE_DIR).glob("*/*"):
        found[path.stat().st_ino] = path
    return found


def loose_objects(root: Path) -> dict[int, Path]:
    """The loose objects of the store at `root`, by inode."""
    objects = root / ".git" / "objects"
    return {p.stat().st_ino: p for p in objects.glob("[0-9a-f][0-9a-f]/*") if len(p.name) == 38}


@pytest.fixture
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spares, "GRACE_SECONDS", 0.0)
    monkeypatch.setattr(spares, "RELIST_SECONDS", 0.0)


def writes(store: Store, count: int, tag: str) -> None:
    for number in range(count):
        store.create("task", f"{tag} {number}", "body\n")


def test_packed_loose_objects_become_spares_and_new_objects_reuse_their_inodes(
    store: Store, no_grace: None
) -> None:
    root = store.root
    writes(store, 5, "first")
    packed = loose_objects(root)
    assert packed
    fresh_mode = stat.S_IMODE(next(iter(packed.values())).stat().st_mode)
    assert fresh_mode & 0o222 == 0
    store.git.pack_loose_objects()
    kept = spare_files(root)
    assert set(kept) == set(packed)  # moved, not deleted: the same inodes
    assert loose_objects(root) == {}

    writes(store, 2, "second")
    reused = loose_objects(root)
    assert reused and set(reused) <= set(kept)
    assert set(spare_files(root)) == set(kept) - set(reused)
    for path in reused.values():
        assert stat.S_IMODE(path.stat().st_mode) == fresh_mode  # read-only, like a new one
        sha = (path.parent.name + path.name).encode()
        assert read_loose(str(root / ".git" / "objects"), sha) is not None  # hashes to its name
    assert sorted(b.title for b in store.list()) == sorted(
        [f"first {n}" for n in range(5)] + ["second 0", "second 1"]
    )
    git("fsck", "--strict", "--no-dangling", cwd=root)
    assert "garbage: 0" in git("count-objects", "-v", cwd=root)
    assert doctor(store).ok


def test_a_spare_is_reused_only_after_the_grace_period(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that opened a loose object just before the repack moved it must still read
    that object's bytes: young spares are left alone, and new objects are created."""
    monkeypatch.setattr(spares, "RELIST_SECONDS", 0.0)
    writes(store, 3, "first")
    store.git.pack_loose_objects()
    kept = spare_files(store.root)
    writes(store, 2, "second")
    assert not set(loose_objects(store.root)) & set(kept)
    assert set(spare_files(store.root)) == set(kept)


def test_spares_are_bounded_and_the_rest_deleted(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spares, "BUCKET_SIZE", 2)
    monkeypatch.setattr(spares, "MAX_BUCKETS", 3)
    writes(store, 4, "first")
    store.git.pack_loose_objects()
    assert len(spare_files(store.root)) == 6
    assert loose_objects(store.root) == {}
    git("fsck", "--strict", "--no-dangling", cwd=store.root)


def test_drained_buckets_are_removed_and_stray_files_ignored(store: Store, no_grace: None) -> None:
    writes(store, 1, "first")
    store.git.pack_loose_objects()
    spare_dir = store.root / ".git" / spares.SPARE_DIR
    (spare_dir / "README").write_text("not a bucket\n")
    (spare_dir / "9999999999999-future").mkdir()  # from a clock far ahead: never used
    kept = spare_files(store.root)
    writes(store, 5, "second")  # needs more objects than there are spares
    assert not spare_files(store.root).keys() & kept.keys()
    assert sorted(p.name for p in spare_dir.iterdir()) == ["9999999999999-future", "README"]
    assert len({b.title for b in store.list()}) == 6
    git("fsck", "--strict", "--no-dangling", cwd=store.root)


def test_a_store_on_which_spares_cannot_be_kept_still_packs(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    (store.root / ".git" / spares.SPARE_DIR).write_text("a file where the folder goes\n")
    writes(store, 2, "first")
    assert store.git.pack_loose_objects() > 0
    assert loose_objects(store.root) == {}  # deleted, as before spares
    writes(store, 1, "second")
    git("fsck", "--strict", "--no-dangling", cwd=store.root)


WRITER = """
import sys
from beads.store import Store
store = Store.open(sys.argv[1], agent="crasher")
store.create("task", "in flight")
print("acknowledged", flush=True)
"""


def test_a_kill_after_taking_a_spare_leaves_a_usable_store(tmp_path: Path) -> None:
    store, _ = Store.init(tmp_path, agent="tester")
    writes(store, 3, "before")
    store.git.pack_loose_objects()
    store.close()
    root = tmp_path / ".beads"
    time.sleep(spares.GRACE_SECONDS + 0.1)  # the writer runs elsewhere: its grace is real
    run_writer(root, SPARE_POINTS[0], WRITER)
    # The spare was renamed to a temporary name, its old bytes not yet overwritten: no
    # object holds them, and doctor removes the file once it is a dead writer's.
    leftovers = list((root / ".git" / "objects").glob("*/tmp_obj_*"))
    assert len(leftovers) == 1
    age_all(leftovers, TEMP_STALE_SECONDS + 1)
    expected = sorted(f"before {n}" for n in range(3))
    with Store.open(root) as reopened:
        assert sorted(b.title for b in reopened.list()) == expected
        assert [p.kind for p in doctor(reopened).problems] == ["stale_file"]
    check_usable(root, expected)
    assert os.listdir(root / ".git" / spares.SPARE_DIR)


def test_a_loose_object_with_other_names_is_deleted_not_kept(
    store: Store, tmp_path: Path, no_grace: None
) -> None:
    """A local `git clone` hard-links the objects it copies: reusing one would rewrite the
    clone's object under it. Only this store's name goes; the clone's file is untouched."""
    writes(store, 2, "first")
    shared = next(iter(loose_objects(store.root).values()))
    other = tmp_path / "clone-object"
    other.hardlink_to(shared)
    before = other.read_bytes()
    store.git.pack_loose_objects()
    assert other.stat().st_ino not in spare_files(store.root)
    writes(store, 3, "second")
    assert other.read_bytes() == before and other.stat().st_nlink == 1


def test_a_spare_that_cannot_be_moved_makes_the_writer_create_its_file(
    store: Store, no_grace: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only or full disk, a folder of another user: the writer stops trying spares
    at once (it never spins holding the write lock) and writes its objects as new files."""
    writes(store, 3, "first")
    store.git.pack_loose_objects()
    kept = spare_files(store.root)
    calls = []

    def refused(source: str, target: str) -> None:
        calls.append(source)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(spares, "RELIST_SECONDS", 60.0)
    monkeypatch.setattr(spares.os, "rename", refused)
    writes(store, 1, "second")
    monkeypatch.undo()
    assert len(calls) == 1
    assert set(spare_files(store.root)) == set(kept)
    assert {b.title for b in store.list()} >= {"second 0"}
    git("fsck", "--strict", "--no-dangling", cwd=store.root)


def test_a_link_or_a_fifo_in_a_bucket_is_dropped_never_written_through(
    store: Store, tmp_path: Path, no_grace: None
) -> None:
    writes(store, 1, "first")
    store.git.pack_loose_objects()
    bucket = next((store.root / ".git" / spares.SPARE_DIR).iterdir())
    for spare in bucket.iterdir():
        spare.unlink()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (bucket / ("a" * 40)).symlink_to(victim)
    os.mkfifo(bucket / ("b" * 40))
    writes(store, 2, "second")  # would block on the FIFO, or write through the link
    assert victim.read_bytes() == b"precious"
    assert not bucket.exists() or list(bucket.iterdir()) == []
    git("fsck", "--strict", "--no-dangling", cwd=store.root)


def test_doctor_finds_a_loose_object_holding_another_objects_bytes(store: Store) -> None:
    """What a power cut can leave after a spare was reused: the old object's bytes, whole
    and valid, under the new name. They do not hash to it; doctor finds that."""
    writes(store, 1, "first")
    store.git.pack_loose_objects()  # everything so far is in a pack
    writes(store, 1, "second")
    objects = str(store.root / ".git" / "objects")

    def kind(path: Path) -> int:
        found = read_loose(objects, (path.parent.name + path.name).encode())
        assert found is not None
        return found[0]

    loose = sorted(loose_objects(store.root).values())
    victim = next(p for p in loose if kind(p) == BLOB)  # the new bead's file: in the view too
    donor = next(p for p in loose if p != victim)
    victim.chmod(0o600)
    victim.write_bytes(donor.read_bytes())
    report = doctor(store)
    assert [(p.kind, p.fixed) for p in report.problems] == [("corrupt_object", True)]
    assert "rewritten from the view file" in report.problems[0].message
    git("fsck", "--strict", "--no-dangling", cwd=store.root)
