"""Many processes writing at once: nothing lost, one linear history, a clean repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import beads.git.repacker as repacker
from beads import doctor
from beads.store import Store
from tests.conftest import git

WRITER = """
import sys
import beads.batch
from beads.store import Store
beads.batch.PACK_LOOSE_AT = int(sys.argv[4])
store = Store.open(sys.argv[1], agent=sys.argv[2])
for i in range(int(sys.argv[3])):
    store.create("task", f"{sys.argv[2]} #{i}", assignee=sys.argv[2])
store.close()
"""


# Enough creates that the writers pack loose objects while they race: each create makes
# about six objects, and the writers pack once PACK_LOOSE_AT of them are loose (lowered
# from its default of 1500 so that fewer creates reach it): ~480 objects in all, packed
# once about 50 of the 80 commits are in.
EACH = 10
PACK_LOOSE_AT = 300


@pytest.mark.slow
def test_eight_processes_creating_beads_at_once(tmp_path: Path) -> None:
    Store.init(tmp_path)[0].close()
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(tmp_path),
                f"writer{n}",
                str(EACH),
                str(PACK_LOOSE_AT),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(8)
    ]
    for writer in writers:
        _out, err = writer.communicate(timeout=600)
        assert writer.returncode == 0, err

    with Store.open(tmp_path) as store:
        beads = store.list(limit=None)
        assert len(beads) == 8 * EACH
        for n in range(8):
            assert len(store.list(assignee=f"writer{n}")) == EACH
        assert doctor(store).ok  # while the writers' background repack may still run
    repo = tmp_path / ".beads"
    # git fsck reads the packs it listed at its start: let the repack settle first.
    assert repacker.wait_idle(repo / ".git", 600)
    git("fsck", "--strict", cwd=repo)
    assert git("rev-list", "--count", "HEAD", cwd=repo).strip() == str(8 * EACH + 1)
    assert list((repo / ".git" / "objects" / "pack").glob("*.pack"))  # packed mid-race
    assert git("rev-list", "--min-parents=2", "HEAD", cwd=repo) == ""  # linear: no merges
    files = git("ls-tree", "-r", "--name-only", "HEAD", cwd=repo).splitlines()
    assert len([f for f in files if f.startswith("tasks/")]) == 8 * EACH


# What each racing process runs, given `paths` and the barrier `start`: for each path in
# turn, wait at `start` for the other processes, then open the database there. Run by
# `exec` in the child, so that it imports what the opening needs and nothing of this test
# module (whose conftest brings pytest and hypothesis, far more than the opening costs).
OPEN_SESSIONS_DBS = """
from pathlib import Path
from inbox.database import connect
from inbox.sessions import SESSIONS_SCHEMA

try:
    for path in paths:
        start.wait(120)
        connect(Path(path), "OFF", SESSIONS_SCHEMA, "nudges").close()
except BaseException:
    start.abort()  # the others stop waiting for this one
    raise
"""

OPEN_INDEXES = """
from pathlib import Path
from beads.index.index import Index

try:
    for path in paths:
        start.wait(120)
        Index(Path(path)).close()
except BaseException:
    start.abort()
    raise
"""


# New databases four processes race to make; with one switch to WAL left unguarded, about
# half of the runs see "database is locked" within this many.
RACES = 60


def _race(tmp_path: Path, name: str, source: str) -> list[int | None]:
    """Four processes, started once, meet at a barrier before each of RACES new databases
    called `name`, so every round is a race (each runs `source`); their exit codes."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    paths = []
    for round_ in range(RACES):
        runtime = tmp_path / f"r{round_}" / ".beads" / ".runtime"
        runtime.mkdir(parents=True)
        paths.append(str(runtime / name))
    start = context.Barrier(4)
    workers = [
        context.Process(target=exec, args=(source, {"paths": paths, "start": start}))
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
    return [worker.exitcode for worker in workers]


def test_processes_making_one_new_delivery_database_at_once_all_open_it(tmp_path: Path) -> None:
    """A relay and a hook can make `.runtime/sessions.sqlite3` at the same moment: switching
    it to WAL needs the file to itself, and neither may fail with "database is locked"."""
    assert _race(tmp_path, "sessions.sqlite3", OPEN_SESSIONS_DBS) == [0, 0, 0, 0]


def test_processes_making_one_new_index_at_once_all_open_it(tmp_path: Path) -> None:
    """After the index was deleted, the next commands (a waiter, a writer) make it again at
    the same moment: none fails with "database is locked"."""
    assert _race(tmp_path, "index.sqlite3", OPEN_INDEXES) == [0, 0, 0, 0]
