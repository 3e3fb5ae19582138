#!/usr/bin/env python
"""Two checkouts of gc-beads side by side, in one run, alternating: a change against the
code before it.

    python bench/bench_compare.py BEFORE AFTER [--beads 100000] [--rounds 200]

BEFORE and AFTER are project roots, each with its own `.venv` (`git worktree add` and a
venv per worktree). One store of `--beads` messages is built by BEFORE's code and copied
for each side, so both start from the same bytes. Then, round by round, each side in turn:

  1. API send: one `BeadMail.send` in a long-lived process of that side;
  2. CLI send: `gc mail send` as a child process;
  3. `gc hook run` for UserPromptSubmit with nothing pending, as a child process;
  4. index rebuild: `gc doctor --rebuild-index` as a child process (fewer rounds).

Each figure prints both medians and AFTER/BEFORE; the target is <= 1.10x. Always exits 0
(it is a report).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

perf = time.perf_counter
AGENTS = 500
BUILD_BATCH = 5_000
TARGET = 1.10

BUILD = """
import sys
from beads.store import Store
store, _ = Store.init(sys.argv[1], agent="bench")
total, step = int(sys.argv[2]), int(sys.argv[3])
for start in range(0, total, step):
    with store.batch(f"bench: build {start}") as batch:
        for i in range(start, min(total, start + step)):
            batch.create("message", f"Message {i}", f"Body of message {i}.\\n",
                         assignee=f"agent{i % 500}", sender=f"agent{(i * 7 + 3) % 500}")
store.close()
"""

# A long-lived sender: one line in ("send"), its wall seconds out.
SENDER = """
import sys, time
from gates import register_producers
register_producers()
from beads.store import Store
from mail.beadmail import BeadMail
store = Store.open(sys.argv[1], agent="bench")
mail = BeadMail(store)
i = 0
for line in sys.stdin:
    t0 = time.perf_counter()
    mail.send(f"agent{i % 500}", f"agent{(i * 13 + 1) % 500}", f"bench {i}", "hello\\n")
    print(time.perf_counter() - t0, flush=True)
    i += 1
store.close()
"""


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class Side:
    """One checkout: its Python, its `gc`, its copy of the store and its sender process."""

    def __init__(self, name: str, root: Path, store: Path) -> None:
        self.name = name
        self.python = str(root / ".venv" / "bin" / "python")
        self.gc = str(root / ".venv" / "bin" / "gc")
        self.store = store
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
        self.env["GC_AGENT"] = "bench"
        self.sender = subprocess.Popen(
            [self.python, "-c", SENDER, str(store)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=str(root),
        )
        self.times: dict[str, list[float]] = {}

    def api_send(self) -> float:
        assert self.sender.stdin is not None and self.sender.stdout is not None
        self.sender.stdin.write("send\n")
        self.sender.stdin.flush()
        return float(self.sender.stdout.readline())

    def child(self, argv: list[str], stdin: bytes | None = None) -> float:
        t0 = perf()
        done = subprocess.run(argv, input=stdin, env=self.env, capture_output=True)
        elapsed = perf() - t0
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: {argv[1:4]} exited {done.returncode}: "
                               f"{done.stderr.decode()[-300:]}")  # fmt: skip
        return elapsed

    def cli_send(self) -> float:
        return self.child([self.gc, "--beads-dir", str(self.store), "mail", "send", "agent1",
                           "-s", "bench", "-m", "hello"])  # fmt: skip

    def hook(self) -> float:
        payload = json.dumps({"session_id": f"s-{self.name}", "hook_event_name": "UserPromptSubmit",
                              "cwd": str(self.store.parent), "prompt": "next",
                              "transcript_path": "/tmp/t.jsonl"}).encode()  # fmt: skip
        return self.child([self.gc, "--beads-dir", str(self.store), "hook", "run"], payload)

    def rebuild(self) -> float:
        return self.child([self.gc, "--beads-dir", str(self.store), "doctor", "--rebuild-index"])

    def record(self, figure: str, seconds: float) -> None:
        self.times.setdefault(figure, []).append(seconds)

    def close(self) -> None:
        if self.sender.stdin is not None:
            self.sender.stdin.close()
        self.sender.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--beads", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--rebuilds", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    try:
        built = tmp / "built"
        t0 = perf()
        subprocess.run([str(args.before / ".venv/bin/python"), "-c", BUILD, str(built),
                        str(args.beads), str(BUILD_BATCH)], check=True)  # fmt: skip
        print(f"store of {args.beads:,} messages built in {perf() - t0:.0f}s (under {tmp})")
        sides = []
        for name, root in (("before", args.before), ("after", args.after)):
            shutil.copytree(built, tmp / name, symlinks=True)
            sides.append(Side(name, root.resolve(), tmp / name / ".beads"))
        figures = [("API send", Side.api_send), ("CLI send", Side.cli_send),
                   ("gc hook run (UserPromptSubmit)", Side.hook)]  # fmt: skip
        for _round in range(args.rounds):
            for figure, measure in figures:
                for side in sides if _round % 2 else sides[::-1]:
                    side.record(figure, measure(side))
        for _round in range(args.rebuilds):
            for side in sides if _round % 2 else sides[::-1]:
                side.record("index rebuild", side.rebuild())
        for side in sides:
            side.close()
        load = f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        print(f"{args.rounds} rounds, alternating; {args.rebuilds} rebuilds; {load}")
        for figure in [*(name for name, _ in figures), "index rebuild"]:
            if not all(side.times.get(figure) for side in sides):
                continue  # not measured in this run (--rounds 0, --rebuilds 0)
            before, after = (med(side.times[figure]) for side in sides)
            ratio = after / before
            verdict = "PASS" if ratio <= TARGET else "FAIL"
            print(f"  {figure}: before {before * 1000:.1f} ms, after {after * 1000:.1f} ms, "
                  f"after/before {ratio:.2f}x (target <= {TARGET:.2f}x) {verdict}")  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
