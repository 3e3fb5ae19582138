#!/usr/bin/env python
"""The cost of an accepted fetch: this checkout's `sync` against the code of another
revision (before a change to the fetch path), in one run, alternating.

    python bench/bench_sync_fetch.py [--before main] [--beads 1000] [--rounds 15]

The code of `--before` is exported with `git archive` into a temporary directory and run by
this interpreter with it first on `PYTHONPATH`, so both sides use the same dulwich. Built
once with this checkout's code: a bare remote, machine A (`--beads` beads, pushed), machine B
(its clone); then A makes each size's new beads, one commit each, and pushes them. For each
size, round by round, each side in turn (the order swapped every round) syncs a fresh copy
of B from a long-lived process of its own: `beads.sync.syncing.sync` (fetch, the gate,
the objects into the store, the fast-forward, the index and the view brought up to it).

Sizes: 10 beads (about 60 objects: stored loose) and 100 beads (one pack). Each prints both
medians and AFTER/BEFORE; the target is <= 1.10x. Always exits 0 (it is a report).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from beads.settings.localconfig import add_remote  # noqa: E402
from beads.store import Store  # noqa: E402
from beads.sync.syncing import clone, sync  # noqa: E402

SIZES = (10, 100)
TARGET = 1.10
BUILD_BATCH = 500

# A long-lived syncer: a store's path in, the wall seconds of its sync out.
# No background repack: one started by a round would run through the next round's timing.
SYNCER = """
import sys, time
import beads
import beads.git.maintenance
from beads.store import Store
from beads.sync.syncing import sync
beads.git.maintenance.spawn = lambda git_dir: None
print(beads.__file__, flush=True)
for line in sys.stdin:
    store = Store.open(line.strip(), agent="bench")
    started = time.perf_counter()
    result = sync(store)
    took = time.perf_counter() - started
    assert result.action == "fast-forward", result.action
    store.close()
    print(took, flush=True)
"""


def log(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def export(revision: str, into: Path) -> Path:
    """The tree of `revision` of this repository, written under `into`."""
    into.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def build(top: Path, beads: int) -> Store:
    """A bare remote and machine A, with `beads` beads pushed there."""
    remote = top / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a, _ = Store.init(top / "a", agent="bench")
    for start in range(0, beads, BUILD_BATCH):
        with a.batch(f"bench: build {start}") as batch:
            for n in range(start, min(beads, start + BUILD_BATCH)):
                batch.create("task", f"bead {n}", f"Body of bead {n}.\n")
    add_remote(a.root / ".git", "origin", str(remote))
    sync(a)
    return a


def behind(a: Store, size: int, top: Path) -> Path:
    """Machine B: a clone of A's remote, which A then moves `size` beads ahead of it (one
    commit each)."""
    template = top / f"b-{size}"
    clone(str(top / "remote.git"), template)
    for n in range(size):
        a.create("task", f"new {size}.{n}", f"Made on A, one commit each ({n}).\n")
    sync(a)
    return template


class Side:
    """A long-lived syncer running one side's code."""

    def __init__(self, name: str, code: Path) -> None:
        self.name = name
        env = {**os.environ, "PYTHONPATH": str(code)}
        env = {k: v for k, v in env.items() if not k.startswith("GC_")}
        self.process = subprocess.Popen(
            [sys.executable, "-c", SYNCER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env=env, cwd=code,  # `-c` puts its directory first on the path
        )  # fmt: skip
        assert self.process.stdout is not None
        where = self.process.stdout.readline().strip()
        assert where.startswith(str(code)), f"{name} runs {where}, not {code}"

    def sync(self, store: Path) -> float:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{store}\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def measure(sides: list[Side], template: Path, rounds: int, top: Path) -> dict[str, list[float]]:
    """Each side's sync times of fresh copies of `template` (the first round a warm-up)."""
    times: dict[str, list[float]] = {side.name: [] for side in sides}
    for number in range(rounds + 1):
        order = sides if number % 2 == 0 else list(reversed(sides))
        for side in order:
            copy = top / f"copy-{side.name}-{template.name}-{number}"
            shutil.copytree(template, copy, symlinks=True)
            took = side.sync(copy / ".beads")
            shutil.rmtree(copy)
            if number:
                times[side.name].append(took)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="main", help="the revision to compare against")
    parser.add_argument("--beads", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sync-fetch-") as tmp:
        top = Path(tmp)
        before_code = export(args.before, top / "before")
        log(f"building {args.beads} beads")
        a = build(top, args.beads)
        sides = [Side("before", before_code), Side("after", ROOT)]
        try:
            print(f"accepted fetch (sync of B behind A), {args.rounds} rounds, medians:")
            for size in SIZES:
                times = measure(sides, behind(a, size, top), args.rounds, top)
                old = statistics.median(times["before"])
                new = statistics.median(times["after"])
                ratio = new / old
                verdict = "PASS" if ratio <= TARGET else "FAIL"
                print(
                    f"  {size:>4} beads: before ({args.before}) {old * 1000:7.1f} ms, "
                    f"after {new * 1000:7.1f} ms, ratio {ratio:.3f}x "
                    f"(target <= {TARGET:.2f}x) {verdict}"
                )
        finally:
            for side in sides:
                side.close()
            a.close()


if __name__ == "__main__":
    main()
