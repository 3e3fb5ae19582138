"""Kill the writer (SIGKILL) at each point of the write path; the next open must be consistent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beads import doctor
from beads.faults import (
    CONFIG_POINTS,
    INIT_POINTS,
    PACK_POINTS,
    POINTS,
    REBUILD_POINTS,
    REF_POINTS,
    REFRESH_POINTS,
)
from beads.git.refs import LOCK_WAIT
from beads.health.gitrepair import TEMP_STALE_SECONDS
from beads.store import Store
from tests.conftest import GcRunner, git

WRITER = """
import sys
from beads.store import Store
store = Store.open(sys.argv[1], agent="crasher")
with store.batch() as batch:
    batch.create("task", "in flight", assignee="dog")
    batch.update(sys.argv[2], title="changed in flight")
print("acknowledged", flush=True)
"""


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_any_point_leaves_git_view_and_index_consistent(
    tmp_path: Path, store: Store, point: str
) -> None:
    kept = store.create("task", "acknowledged before the crash")
    store.close()
    before = git("rev-parse", "HEAD", cwd=tmp_path / ".beads").strip()

    result = subprocess.run(
        [sys.executable, "-c", WRITER, str(tmp_path / ".beads"), kept.id],
        # The session's data folder (tests/conftest.py), never the user's, for approvals.
        env={
            "GC_FAULT_POINT": point,
            "PATH": "/usr/bin:/bin",
            "XDG_DATA_HOME": os.environ["XDG_DATA_HOME"],
        },
        capture_output=True,
        text=True,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert "acknowledged" not in result.stdout

    after = git("rev-parse", "HEAD", cwd=tmp_path / ".beads").strip()
    committed = after != before
    assert committed == (point not in ("before-objects", "after-objects"))

    reopened = Store.open(tmp_path)  # the next open brings view and index to HEAD
    titles = sorted(b.title for b in reopened.list())
    if committed:
        assert titles == ["changed in flight", "in flight"]
    else:
        assert titles == ["acknowledged before the crash"]
    report = doctor(reopened)
    assert report.ok, report.problems
    assert reopened.index.head() == reopened.view.applied() == reopened.git.head()
    git("fsck", "--strict", "--no-dangling", cwd=tmp_path / ".beads")
    # The store keeps working after the crash.
    reopened.create("task", "after the crash")
    assert doctor(reopened).ok
    reopened.close()


def test_the_lock_of_a_killed_writer_does_not_block_the_next(tmp_path: Path) -> None:
    store, _ = Store.init(tmp_path)
    store.close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom beads.store import Store\ns = Store.open(sys.argv[1])\n"
            "with s.locked():\n    print('locked', flush=True)\n    time.sleep(60)\n",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    holder.kill()
    holder.wait()
    with Store.open(tmp_path) as reopened:
        assert reopened.create("task", "T").title == "T"


def run_writer(root: Path, point: str, script: str, *args: str) -> None:
    """Run `script` with `point` armed; it must die there, before acknowledging."""
    result = subprocess.run(
        [sys.executable, "-c", script, str(root), *args],
        # The session's data folder (tests/conftest.py), never the user's, for approvals.
        env={
            "GC_FAULT_POINT": point,
            "PATH": "/usr/bin:/bin",
            "XDG_DATA_HOME": os.environ["XDG_DATA_HOME"],
        },
        capture_output=True,
        text=True,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert "acknowledged" not in result.stdout


def age_all(paths: list[Path], seconds: float) -> None:
    """Make leftovers look `seconds` old: the time a person takes to notice."""
    past = time.time() - seconds
    for path in paths:
        os.utime(path, (past, past))


def check_usable(root: Path, titles: list[str]) -> None:
    """The store holds exactly `titles`, doctor finds nothing left, git agrees, and a write
    works."""
    with Store.open(root) as reopened:
        assert sorted(b.title for b in reopened.list()) == titles
        report = doctor(reopened)
        assert report.ok, report.problems
        assert reopened.index.head() == reopened.view.applied() == reopened.git.head()
        git("fsck", "--strict", "--no-dangling", cwd=root)
        reopened.create("task", "after the crash")
        assert doctor(reopened).problems == []
    git("fsck", "--strict", "--no-dangling", cwd=root)


@pytest.mark.parametrize("point", REF_POINTS)
def test_a_kill_inside_the_ref_update_leaves_a_lock_the_next_writer_clears(
    tmp_path: Path, store: Store, point: str
) -> None:
    kept = store.create("task", "acknowledged before the crash")
    store.close()
    root = tmp_path / ".beads"
    before = git("rev-parse", "HEAD", cwd=root)
    run_writer(root, point, WRITER, kept.id)
    lock = root / ".git" / "refs" / "heads" / "main.lock"
    assert lock.exists() and git("rev-parse", "HEAD", cwd=root) == before
    with Store.open(root) as reopened:
        started = time.monotonic()
        assert reopened.create("task", "next").title == "next"
        # gc's own lock is known for a dead writer's at once: no wait, no conflict.
        assert time.monotonic() - started < LOCK_WAIT
    assert not lock.exists()
    check_usable(root, ["acknowledged before the crash", "next"])


BATCH_WRITER = """
import sys
import beads.batch
import beads.git.maintenance
from beads.store import Store
beads.batch.PACK_LOOSE_AT = int(sys.argv[2])
# This process packs the loose objects itself, below: a background repack started by the
# threshold would outlive the kill and race the test's look at the pack folder.
beads.git.maintenance.spawn = lambda git_dir: None
store = Store.open(sys.argv[1], agent="crasher")
with store.batch() as batch:
    for number in range(int(sys.argv[3])):
        batch.create("task", f"in flight {number}")
if sys.argv[2] == "0":  # what the background repack does past the threshold
    store.git.pack_loose_objects()
print("acknowledged", flush=True)
"""


@pytest.mark.parametrize("point", PACK_POINTS)
def test_a_kill_while_packing_leaves_a_usable_store(
    tmp_path: Path, store: Store, point: str
) -> None:
    store.create("task", "acknowledged before the crash")
    store.close()
    root = tmp_path / ".beads"
    packing_loose = point == "loose-packed"
    # A batch of 40 beads is written as a pack; loose objects are packed after a small commit
    # (the commit is in before packing starts), as the background repack packs them.
    run_writer(
        root, point, BATCH_WRITER, "0" if packing_loose else "1500", "1" if packing_loose else "40"
    )
    pack_dir = root / ".git" / "objects" / "pack"
    leftovers = [p for p in pack_dir.iterdir() if p.name.startswith("tmp_pack_")]
    leftovers += [p for p in pack_dir.glob("*.pack") if not p.with_suffix(".idx").exists()]
    assert bool(leftovers) == (point != "loose-packed")
    age_all(leftovers, TEMP_STALE_SECONDS + 1)
    expected = ["acknowledged before the crash"] + (["in flight 0"] if packing_loose else [])
    with Store.open(root) as reopened:
        assert sorted(b.title for b in reopened.list()) == expected
        report = doctor(reopened)
        assert [p.kind for p in report.problems] == ["stale_file"] * len(leftovers)
    assert not any(p.exists() for p in leftovers)
    check_usable(root, expected)


@pytest.mark.parametrize("point", REBUILD_POINTS)
def test_a_rebuild_of_the_index_killed_mid_swap_leaves_a_usable_store(
    gc_store: GcRunner, point: str
) -> None:
    made = [gc_store.json("bead", "create", "--type", "task", "--title", f"t{n}") for n in range(3)]
    killed = gc_store("doctor", "--rebuild-index", env={"GC_FAULT_POINT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    listed = gc_store.json("bead", "list")["beads"]
    assert sorted(b["id"] for b in listed) == sorted(m["bead"]["id"] for m in made)
    checked = gc_store("doctor")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    again = gc_store("doctor", "--rebuild-index")
    assert again.returncode == 0, again.stdout + again.stderr
    assert not (gc_store.cwd / ".beads" / ".runtime" / "index.sqlite3.new").exists()
    assert gc_store("doctor").returncode == 0


@pytest.mark.parametrize("point", [None, "rebuild-swapping"])
def test_an_index_that_cannot_take_the_rebuilt_one_is_replaced_by_a_rename(
    gc_store: GcRunner, point: str | None
) -> None:
    # The rebuilt index is copied into the old file; one of another page size cannot take
    # the copy (sqlite refuses it in WAL mode), and the new file is renamed into its place.
    import sqlite3

    made = [gc_store.json("bead", "create", "--type", "task", "--title", f"t{n}") for n in range(3)]
    path = gc_store.cwd / ".beads" / ".runtime" / "index.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    for statement in ("journal_mode=DELETE", "page_size=8192", "journal_mode=WAL"):
        db.execute(f"PRAGMA {statement}")
        if statement.startswith("page_size"):
            db.execute("VACUUM")
    db.close()
    rebuilt = gc_store("doctor", "--rebuild-index", env={"GC_FAULT_POINT": point or ""})
    if point is not None:
        assert rebuilt.returncode == -signal.SIGKILL, rebuilt.stderr
        rebuilt = gc_store("doctor", "--rebuild-index")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA page_size").fetchone()[0] == 4096  # the new file
    db.close()
    listed = gc_store.json("bead", "list")["beads"]
    assert sorted(b["id"] for b in listed) == sorted(m["bead"]["id"] for m in made)
    assert not (gc_store.cwd / ".beads" / ".runtime" / "index.sqlite3.new").exists()
    assert gc_store("doctor").returncode == 0


@pytest.mark.parametrize("point", INIT_POINTS)
def test_a_kill_inside_init_leaves_nothing_the_next_init_trips_on(gc: GcRunner, point: str) -> None:
    git("init", "-q", cwd=gc.cwd)  # a project around the store
    killed = gc("init", env={"GC_FAULT_POINT": point})
    assert killed.returncode == -signal.SIGKILL
    root = gc.cwd / ".beads"
    renamed = point == "init-renamed"
    assert (root / ".git").exists() == renamed
    assert bool(list(root.glob(".git-init-*"))) != renamed
    again = gc("init")
    assert again.returncode == 0 and "nitialized" in again.stdout, again.stderr
    assert not list(root.glob(".git-init-*"))
    assert "/.beads/" in (gc.cwd / ".git" / "info" / "exclude").read_text()
    assert git("status", "--porcelain", cwd=gc.cwd) == ""
    assert gc("bead", "create", "--type", "task", "--title", "first").returncode == 0
    assert gc("doctor").stdout.strip() == "store is healthy"
    check_usable(root, ["first"])


def commit_elsewhere(store: Store, titles: list[str], tmp_path: Path) -> None:
    """Commit beads the way a push into the store would: git moves, the index and the view
    stay behind for the next command to catch up."""
    from beads.records.codec import dump_bead
    from beads.records.ids import bead_path

    with Store.init(tmp_path / "elsewhere")[0] as other:
        made = [other.create("task", title) for title in titles]
    head = store.git.head()
    files = {bead_path(b.type, b.id): dump_bead(b) for b in made}
    commit, objects = store.git.build_commit(head, files, "pushed", "someone")
    store.git.store_objects(objects)
    store.git.swap_head(head, commit.id, "push", "someone")


@pytest.mark.parametrize("point", REFRESH_POINTS[:2])
def test_a_kill_while_catching_up_with_commits_made_elsewhere_leaves_a_usable_store(
    tmp_path: Path, point: str
) -> None:
    root = tmp_path / "store"
    store, _ = Store.init(root)
    store.create("task", "before")
    commit_elsewhere(store, ["pushed one", "pushed two"], tmp_path)
    store.close()
    reader = "import sys\nfrom beads.store import Store\nStore.open(sys.argv[1]).list()\n"
    run_writer(root, point, reader)
    check_usable(root / ".beads", ["before", "pushed one", "pushed two"])


def test_a_drain_killed_while_following_git_announces_the_mail_at_the_next(
    gc: GcRunner,
) -> None:
    assert gc("init").returncode == 0
    killed = gc("mail", "send", "dog", "-s", "Deploy", "-m", "ship it",
                env={"GC_AGENT": "mayor", "GC_FAULT_POINT": "after-index"})  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    drain = ("--agent", "dog", "inbox", "drain", "--session", "s1")
    following = gc(*drain, env={"GC_FAULT_POINT": REFRESH_POINTS[2]})
    assert following.returncode == -signal.SIGKILL
    keys = [item["key"] for item in gc.json(*drain)["items"]]
    assert len(keys) == 1 and keys[0].startswith("mail:")
    assert gc.json(*drain)["items"] == []  # once


@pytest.mark.parametrize("point", CONFIG_POINTS)
def test_a_config_write_killed_before_its_rename_leaves_the_config_as_it_was(
    gc_store: GcRunner, point: str
) -> None:
    config = gc_store.cwd / ".beads" / ".git" / "config"
    assert gc_store("config", "set", "--local", "sync.auto", "false").returncode == 0
    before = config.read_bytes()
    killed = gc_store(
        "config", "set", "--local", "sync.auto", "true", env={"GC_FAULT_POINT": point}
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert config.read_bytes() == before  # the edit is in the lock file, never half in place
    assert gc_store("config", "get", "--local", "sync.auto").stdout.strip() == "false"
    (config.parent / "config.lock").unlink()  # as git's own lock left by a kill is removed
    assert gc_store("config", "set", "--local", "sync.auto", "true").returncode == 0
    assert gc_store("config", "get", "--local", "sync.auto").stdout.strip() == "true"
