"""Many processes writing at once: nothing lost, one linear history, a clean repository."""

from __future__ import annotations

from pathlib import Path

import pytest

import beads.git.repacker as repacker
from beads import doctor
from beads.store import Store
from tests.conftest import GcRunner, forked_together, git

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
    runs = [(tmp_path, WRITER, ["-c", str(tmp_path), f"writer{n}", str(EACH), str(PACK_LOOSE_AT)])
            for n in range(8)]  # fmt: skip
    for code, _out, err in forked_together(runs, ("beads.batch", "beads.store")):
        assert code == 0, err

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


def _four_at_once(source: str, given: dict[str, object]) -> list[int | None]:
    """Four spawned processes each running `source` with the names in `given`, `start` (a
    barrier of the four, to meet at before each race) and `worker` (0 to 3); their exit
    codes."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    start = context.Barrier(4)
    workers = [
        context.Process(target=exec, args=(source, {**given, "start": start, "worker": n}))
        for n in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
    return [worker.exitcode for worker in workers]


def _race(tmp_path: Path, name: str, source: str) -> list[int | None]:
    """Four processes, started once, meet at a barrier before each of RACES new databases
    called `name`, so every round is a race (each runs `source`); their exit codes."""
    paths = []
    for round_ in range(RACES):
        runtime = tmp_path / f"r{round_}" / ".beads" / ".runtime"
        runtime.mkdir(parents=True)
        paths.append(str(runtime / name))
    return _four_at_once(source, {"paths": paths})


def test_processes_making_one_new_delivery_database_at_once_all_open_it(tmp_path: Path) -> None:
    """A relay and a hook can make `.runtime/sessions.sqlite3` at the same moment: switching
    it to WAL needs the file to itself, and neither may fail with "database is locked"."""
    assert _race(tmp_path, "sessions.sqlite3", OPEN_SESSIONS_DBS) == [0, 0, 0, 0]


def test_processes_making_one_new_index_at_once_all_open_it(tmp_path: Path) -> None:
    """After the index was deleted, the next commands (a waiter, a writer) make it again at
    the same moment: none fails with "database is locked"."""
    assert _race(tmp_path, "index.sqlite3", OPEN_INDEXES) == [0, 0, 0, 0]


MAKE_MACHINE_IDS = """
from pathlib import Path
from beads.settings.localconfig import machine_id
try:
    for path in paths:
        start.wait(120)
        made = machine_id(Path(path))
        Path(path, f"made-by-{worker}").write_text(made)
except BaseException:
    start.abort()
    raise
"""
# Rounds of four processes making one store's machine id at once; without the config's lock
# waited for, most rounds ended in a FileLocked error in at least one of them.
ID_RACES = 20


def test_processes_making_the_machine_id_at_once_all_go_on_with_the_one_that_stands(
    tmp_path: Path,
) -> None:
    """A copied store has no machine id: its first commands (a relay starting, a hook, a
    write) each make it on first use, at the same moment. None fails, and all go on with the
    one id the store keeps."""

    from beads.git.config import read_values, set_value

    made = Store.init(tmp_path / "made")[0]
    made.close()
    config = made.root / ".git" / "config"
    set_value(config.parent, (b"machine",), b"id", None)
    paths = []
    for round_ in range(ID_RACES):
        git_dir = tmp_path / f"r{round_}"
        git_dir.mkdir()
        (git_dir / "config").write_bytes(config.read_bytes())
        paths.append(str(git_dir))
    assert _four_at_once(MAKE_MACHINE_IDS, {"paths": paths}) == [0, 0, 0, 0]
    for path in paths:
        kept = read_values(Path(path))["machine.id"]
        assert [Path(path, f"made-by-{n}").read_text() for n in range(4)] == [kept] * 4


SET_VALUES = """
from pathlib import Path
from beads.git.config import set_value
try:
    start.wait(120)
    for n in range(40):
        set_value(Path(path), (b"gc",), f"w{worker}n{n}".encode(), b"x")
except BaseException:
    start.abort()
    raise
"""


def test_processes_writing_the_git_config_at_once_each_keep_every_value(tmp_path: Path) -> None:
    """Four processes writing the store's git config over and over (settings, remotes, the
    machine id): each write waits for the one before and edits what it wrote, so none fails
    and no value is lost (a writer that removed another's lock file as it finished, as dulwich
    1.0's lock file does, made the next rename fail and the edits after it undo others')."""

    from beads.git.config import read_values

    git_dir = tmp_path / "r"
    git_dir.mkdir()
    (git_dir / "config").write_bytes(b"[core]\n\tbare = true\n")
    assert _four_at_once(SET_VALUES, {"path": str(git_dir)}) == [0, 0, 0, 0]
    values = read_values(git_dir)
    assert {f"gc.w{w}n{n}" for w in range(4) for n in range(40)} <= set(values)
    assert not (git_dir / "config.lock").exists()


def test_a_git_config_lock_held_by_another_process_is_a_one_line_conflict(
    gc_store: GcRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `git config` (or a killed one's lock) holding `.git/config.lock` past the wait: a
    command writing the config says so in one line, exit 20, and changes nothing."""
    import beads.git.config

    # Held throughout: no need to wait the whole of LOCK_WAIT.
    monkeypatch.setattr(beads.git.config, "LOCK_WAIT", 0.05, raising=False)
    config = gc_store.cwd / ".beads" / ".git" / "config"
    before = config.read_bytes()
    (config.parent / "config.lock").write_bytes(before)
    result = gc_store("config", "set", "--local", "sync.auto", "true", internal_error=True)
    assert result.returncode == 20, result.stderr
    assert result.stderr == (
        f"gc: {config}.lock is held by another process writing the store's git config; retry "
        "(a lock left by a killed git or gc is removed by hand)\n"
    )
    assert config.read_bytes() == before and (config.parent / "config.lock").exists()
