#!/usr/bin/env python
"""What the origin note costs a reading command (`inbox.origin.note_of`).

Run from the project root:

    python bench/bench_origin.py [COMMITS]

Builds a store of COMMITS mail commits (default 1000, every fifth to mayor), all made here,
then times, in the same run, `gc bead show` of mayor's oldest and newest message (no origin
lookup: the baseline) and `gc mail peek` of the same two (which walks the history for a change
made on another machine), and `gc bead list --type message` against `gc mail inbox --all`
(mayor's 200, their origins found in one walk), each the median of 7 runs. Figures: the
ratios.
Always exits 0 (it is a report).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def build(where: Path, commits: int) -> list[str]:
    """A store at `where` with `commits` messages sent; mayor's message ids, oldest first."""
    from beads.store import Store
    from mail import api
    from mail.beadmail import BeadMail

    store, _ = Store.init(where, agent="human")
    mail = BeadMail(store)
    mayors = []
    for n in range(commits):
        to = "mayor" if n % 5 == 0 else f"dog{n % 7}"
        sent = api.send(mail, "human", [to], f"s{n}", f"body {n}")
        if to == "mayor":
            mayors.append(sent.messages[0].id)
    store.close()
    return mayors


def median_ms(argv: list[str], cwd: Path) -> float:
    runs = []
    env = {**os.environ, "GC_AGENT": "mayor"}
    for _ in range(7):
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
        runs.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"{argv}: {done.stderr.decode(errors='replace')}")
    return statistics.median(runs) * 1000


def main() -> None:
    commits = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    gc = str(Path(sys.executable).parent / "gc")
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        ids = build(where, commits)
        print(f"store of {commits} commits, {len(ids)} messages to mayor")
        for label, bead in (("oldest", ids[0]), ("newest", ids[-1])):
            show = median_ms([gc, "bead", "show", bead], where)
            peek = median_ms([gc, "mail", "peek", bead], where)
            print(f"{label:6} message: show {show:.0f} ms, peek {peek:.0f} ms: {peek / show:.2f}x")
        listed = median_ms([gc, "bead", "list", "--type", "message"], where)
        inbox = median_ms([gc, "mail", "inbox", "--all"], where)
        print(
            f"mayor's inbox: bead list {listed:.0f} ms, mail inbox {inbox:.0f} ms: "
            f"{inbox / listed:.2f}x"
        )


if __name__ == "__main__":
    main()
