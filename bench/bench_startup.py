#!/usr/bin/env python
"""CLI start-up: `gc mail send` and `gc thread claim` against `python -c "import click,
sqlite3"`, in alternating rounds of the same run (issue 27: each <= 2.0x).

    python bench/bench_startup.py             # 15 rounds
    python bench/bench_startup.py --rounds 30
    python bench/bench_startup.py --dir /mnt/journaled   # the store on that disk

Each round runs the three in turn (the order rotates from round to round), each a fresh
process of this Python: a real send to a real store, and a real claim of a thread made for it
beforehand (not timed). The store is a temporary one made by `gc init` (under `--dir`, else
the system's temporary directory) and removed at the end. A send and a claim write files and
the baseline does not, so the disk under the store counts: on an ext4 without a journal,
creating a file costs the kernel more CPU for a while after many files were deleted (a test
run's clean-up), and the ratios rise with it. Byte-compiled files are written and used, as an
installed gc uses them (PYTHONDONTWRITEBYTECODE is removed from the children's environment).
Prints the load average before and after, each median of wall time and of the child's CPU
time (user + system, which other work on the machine distorts less) and their ratios to the
baseline; always exits 0 (it is a report).
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

BIN = Path(sys.executable).parent
TARGET = 2.0


def main() -> int:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dir", type=Path, help="where the temporary store is made")
    options = parser.parse_args()
    rounds = max(options.rounds, 10)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["GC_AGENT"] = "mayor"
    gc = str(BIN / "gc")
    work = Path(tempfile.mkdtemp(prefix="bench-startup-", dir=options.dir))
    try:
        run = lambda *args: subprocess.run(  # noqa: E731
            args, cwd=work, env=env, capture_output=True, text=True, check=True
        )
        run(gc, "init")
        for _ in range(3):  # warm: byte-compile every module a command imports
            run(gc, "mail", "send", "dog", "--subject", "warm", "--message", "up")
        threads = [
            json.loads(run(gc, "thread", "send", "--json", "--to", "mayor", "--subject",
                           f"t{n}", "--body", "b").stdout)["thread"]["thread_id"]
            for n in range(rounds + 1)
        ]  # fmt: skip
        run(gc, "thread", "claim", "--thread", threads.pop())
        commands = {
            "baseline": lambda n: [sys.executable, "-c", "import click, sqlite3"],
            "gc mail send": lambda n: [
                gc,
                "mail",
                "send",
                "dog",
                "--subject",
                f"s{n}",
                "--message",
                "hello",
            ],  # fmt: skip
            "gc thread claim": lambda n: [gc, "thread", "claim", "--thread", threads[n]],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        names = list(commands)
        load_before = os.getloadavg()
        for n in range(rounds):
            for name in names[n % 3 :] + names[: n % 3]:
                wall, used = timed(commands[name](n), work, env)
                times[name].append(wall)
                cpu[name].append(used)
        load_after = os.getloadavg()
        base = statistics.median(times["baseline"])
        base_cpu = statistics.median(cpu["baseline"])
        print(f"{rounds} rounds, alternating; load average {_load(load_before)} before, "
              f"{_load(load_after)} after; medians (wall, then CPU):")  # fmt: skip
        for name, samples in times.items():
            median = statistics.median(samples)
            ratio = median / base
            used = statistics.median(cpu[name])
            verdict = "" if name == "baseline" else (" ok" if ratio <= TARGET else " OVER")
            print(
                f"  {name:16} {median * 1000:7.1f} ms  {ratio:4.2f}x{verdict:5}"
                f"  cpu {used * 1000:6.1f} ms  {used / base_cpu:4.2f}x"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Run `args` to its end (it must succeed): its wall time and its CPU time, in seconds."""
    started = time.perf_counter()
    child = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert child.stderr is not None
    errors = child.stderr.read()
    _pid, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stderr.close()
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, args, stderr=errors)
    return wall, usage.ru_utime + usage.ru_stime


def _load(averages: tuple[float, float, float]) -> str:
    return "/".join(f"{value:.2f}" for value in averages)


if __name__ == "__main__":
    sys.exit(main())
