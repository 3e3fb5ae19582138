"""The doctor's view check: git hashes the view's files in bulk (while the index is rebuilt),
and that evidence never hides a file edited by hand or gone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from beads.doctor import doctor
from beads.ids import bead_path
from beads.reconcile import SCAN_AHEAD_FILES, FileHashes, ViewScan
from beads.store import Store
from beads.view import git_blob_sha


def edit_in_place(path: Path) -> None:
    """Change one byte, keeping the file's size and times: only its content tells."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    at = data.index(b"T")
    data[at] = ord("X")
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.parametrize("ahead", [True, False])
@pytest.mark.parametrize("with_git", [True, False])
@pytest.mark.parametrize("rebuild_index", [True, False])
def test_an_edit_that_keeps_size_and_times_and_a_missing_file_are_found(
    store: Store, monkeypatch: pytest.MonkeyPatch, ahead: bool, with_git: bool, rebuild_index: bool
) -> None:
    if ahead:  # the view is scanned and hashed by a child, as for a large store
        monkeypatch.setattr("beads.reconcile.SCAN_AHEAD_FILES", 0)
    if not with_git:  # then every file is read and compared here
        monkeypatch.setattr("shutil.which", lambda name: None)
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


def test_git_hashes_files_as_the_view_check_does_and_leaves_out_what_it_cannot(
    tmp_path: Path, store: Store
) -> None:
    (tmp_path / "a").write_bytes(b"one\n")
    (tmp_path / "b").write_bytes(b"two\n")
    (tmp_path / "odd\nname").write_bytes(b"three\n")
    hashes = FileHashes(store.git.git_dir, tmp_path, ["a", "odd\nname", "gone", "b"])
    # git stops at the missing file: what it hashed before counts, nothing after it
    assert hashes.result() == {"a": git_blob_sha(b"one\n")}
    assert FileHashes(store.git.git_dir, tmp_path, ["b", "a"]).result() == {
        "b": git_blob_sha(b"two\n"),
        "a": git_blob_sha(b"one\n"),
    }


def test_a_view_behind_head_is_caught_up_before_it_is_checked(store: Store) -> None:
    first = store.create("task", "T")
    marker = store.view.applied_file.read_bytes()
    old = (store.root / bead_path("task", first.id)).read_bytes()
    store.update(first.id, title="Changed")
    # As if the writer had died before bringing the view forward: the old file, the old mark.
    (store.root / bead_path("task", first.id)).write_bytes(old)
    store.view.applied_file.write_bytes(marker)
    assert doctor(store, rebuild_index=True).problems == []
    assert b"Changed" in (store.root / bead_path("task", first.id)).read_bytes()


def test_the_background_scan_finds_what_the_view_walk_and_git_find(store: Store) -> None:
    bead = store.create("task", "T")
    (store.root / "odd\nname").write_bytes(b"x")
    (store.root / "link.yaml").symlink_to(store.root / bead_path("task", bead.id))
    ahead = ViewScan(store.root, store.git.git_dir, size=SCAN_AHEAD_FILES)
    files, links, hashes = ahead.result()
    assert (sorted(files), links) == (sorted(store.view.files()), ["link.yaml"])
    assert hashes == {
        path: git_blob_sha((store.root / path).read_bytes()) for path in files if "\n" not in path
    }
    assert ViewScan(store.root, store.git.git_dir, size=1).result() == (*store.view.scan(), {})
