#!/usr/bin/env python
"""Loose objects stored (`core.looseCompression 0`) against git's default compression, for
one send, in one run, alternating.

    python bench/bench_loose.py [--dir DIR] [--beads 10000] [--rounds 1000]

One store of `--beads` messages is built and copied twice under DIR (the file system to
measure: a journaled loop mount, this machine's disk). Two long-lived senders, one per
setting, then send in turn, round by round; printed are each one's median and p99 and the
ratio stored/compressed. Always exits 0 (it is a report).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BUILD = """
import sys
from beads.store import Store
store, _ = Store.init(sys.argv[1], agent="bench")
total = int(sys.argv[2])
for start in range(0, total, 5000):
    with store.batch(f"bench: build {start}") as batch:
        for i in range(start, min(total, start + 5000)):
            batch.create("message", f"Message {i}", f"Body of message {i}.\\n",
                         assignee=f"agent{i % 500}", sender=f"agent{(i * 7 + 3) % 500}")
store.close()
"""

# A long-lived sender with the loose compression level of argv[2]: one line in, seconds out.
SENDER = """
import sys, time
import beads.git.writing
beads.git.writing.LOOSE_COMPRESSION = int(sys.argv[2])
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--beads", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=1_000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-loose-", dir=args.dir))
    try:
        subprocess.run([sys.executable, "-c", BUILD, str(tmp / "built"), str(args.beads)],
                       check=True, cwd=ROOT)  # fmt: skip
        senders = {}
        for name, level in (("stored", "0"), ("compressed", "-1")):
            shutil.copytree(tmp / "built", tmp / name, symlinks=True)
            senders[name] = subprocess.Popen(
                [sys.executable, "-c", SENDER, str(tmp / name / ".beads"), level],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
            )  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in senders}
        for number in range(args.rounds):
            order = list(senders) if number % 2 else list(senders)[::-1]
            for name in order:
                child = senders[name]
                assert child.stdin is not None and child.stdout is not None
                child.stdin.write("send\n")
                child.stdin.flush()
                times[name].append(float(child.stdout.readline()))
        for child in senders.values():
            assert child.stdin is not None
            child.stdin.close()
            child.wait(60)
        where = subprocess.run(["df", "-T", str(tmp)], capture_output=True, text=True).stdout
        print(f"{args.beads:,} messages, {args.rounds} rounds alternating; under {tmp}")
        print(where.strip().splitlines()[-1])
        medians = {}
        for name, values in times.items():
            values.sort()
            medians[name] = statistics.median(values)
            p99 = values[int(len(values) * 0.99) - 1]
            print(f"  {name}: median {medians[name] * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms")
        print(f"  stored/compressed: {medians['stored'] / medians['compressed']:.3f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
