#!/usr/bin/env python
"""Benchmark of `gc sync` against the figures of issue 14.

Run from the project root (needs `git`, for `git daemon`, the server the remotes live on):

    python bench/bench_sync.py            # 100,000 beads against 1,000 (~5 min)
    python bench/bench_sync.py --quick    # 10,000 beads against 1,000
    python bench/bench_sync.py --only 1 --remote path   # figure 1 through a local-path remote

Figures (each prints its numbers, the target and PASS/FAIL):
  1. `gc sync` of 10 new beads on each side (the syncing machine fetches the other's 10,
     merges them with its own 10 in one merge commit and pushes) takes <= 1.5x as long at
     the large size as at 1,000 beads: the cost follows the change, not the store. Both
     stores are built with batches of 5,000 and then compacted into one pack, as
     `gc doctor --gc` does (`--no-compact` keeps a pack a batch: every object lookup then
     probes 20 packs at 100k, a cost of the pack count, not of sync). `--remote path`: the
     remote is a bare repository named by its path, which gc reads in its own process
     (`beads.git.localfetch`), instead of `git daemon`;
  2. convergence with `sync.auto` on and `sync.interval` 2 s through `git daemon`: the time
     from a send on machine A to the message in machine B's inbox, median and p95 (goal:
     median under 2 intervals). B's hooks are simulated by calling what each hook calls
     (`beads.sync.auto.fetch_if_due`) every 100 ms; A pushes after its write, in the
     background.

Everything happens in a temporary directory that is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from beads.store import Store
from beads.sync.auto import fetch_if_due
from gc_beads.producers import register_arrivals
from mail.beadmail import BeadMail

GC = str(Path(sys.executable).parent / "gc")
BUILD_BATCH = 5000
ROUNDS = 5
SENDS = 20
INTERVAL = 2.0
COMPACT = True  # --no-compact: keep the pack of each build batch
REMOTE = "daemon"  # --remote path: figure 1's remote named by its path


def log(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def run(*args: str, cwd: Path) -> float:
    """Run `gc args` in `cwd` as a process; returns its wall time."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    t0 = time.perf_counter()
    done = subprocess.run([GC, *args], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"gc {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return elapsed


@contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        ["git", "daemon", "--export-all", "--enable=receive-pack", "--reuseaddr",
         f"--base-path={base}", "--listen=127.0.0.1", f"--port={port}", str(base)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"git://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def machines(work: Path, url: str, size: int) -> tuple[Path, Path]:
    """Machine a with a store of `size` beads pushed to `url`, and machine b, its copy."""
    a, b = work / "a", work / "b"
    a.mkdir()
    store, _ = Store.init(a, agent="bench")
    done = 0
    t0 = time.perf_counter()
    while done < size:
        count = min(BUILD_BATCH, size - done)
        with store.batch(f"bench: build {done + 1}..{done + count}") as batch:
            for i in range(done, done + count):
                batch.create("task", f"Task {i}", f"Body of task {i}.\n", assignee=f"agent{i % 20}")
        done += count
    log(f"built {size:,} beads in {time.perf_counter() - t0:.1f}s")
    if COMPACT:
        t0 = time.perf_counter()
        with store.locked():  # what `gc doctor --gc` does: one pack, not one a batch
            store.git.pack_loose_objects()
            store.git.repack()
        log(f"compacted into one pack in {time.perf_counter() - t0:.1f}s")
    store.close()
    run("remote", "add", "origin", url, cwd=a)
    t0 = time.perf_counter()
    run("sync", cwd=a)
    log(f"first push of {size:,} beads in {time.perf_counter() - t0:.1f}s")
    shutil.copytree(a / ".beads", b / ".beads", symlinks=True)
    return a, b


def sync_rounds(a: Path, b: Path) -> list[float]:
    """Rounds of: 10 new beads on each side, a pushes, b syncs (fetch, merge, push)."""
    times = []
    for round_ in range(ROUNDS):
        for side in (a, b):
            with Store.open(side, agent=side.name) as store:
                for n in range(10):
                    store.create("task", f"round {round_} {side.name} {n}")
        run("sync", cwd=a)
        times.append(run("sync", cwd=b))
        run("sync", cwd=a)
    return times


def figure_1(work: Path, large: int) -> tuple[str, bool]:
    medians = {}
    for size in (1000, large):
        where = work / f"f1-{size}"
        (where / "srv").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(where / "srv" / "s.git")],
                       check=True)  # fmt: skip
        served = git_daemon(where / "srv") if REMOTE == "daemon" else nullcontext(where / "srv")
        with served as base:
            a, b = machines(where, f"{base}/s.git", size)
            times = sync_rounds(a, b)
        medians[size] = statistics.median(times)
        log(f"{size:,} beads: merging syncs {', '.join(f'{t * 1000:.0f}' for t in times)} ms")
        shutil.rmtree(where, ignore_errors=True)
    ratio = medians[large] / medians[1000]
    passed = ratio <= 1.5
    return (
        f"1. gc sync of 10 new beads each side: {medians[1000] * 1000:.0f} ms at 1,000 beads, "
        f"{medians[large] * 1000:.0f} ms at {large:,} (median of {ROUNDS}; a merge each; "
        f"{REMOTE} remote) = "
        f"{ratio:.2f}x (target <= 1.5x) {'PASS' if passed else 'FAIL'}",
        passed,
    )


def figure_2(work: Path) -> tuple[str, bool]:
    where = work / "f2"
    (where / "srv").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(where / "srv" / "s.git")],
                   check=True)  # fmt: skip
    register_arrivals()  # as `gc` does: a sync announces what it brings
    delays = []
    with git_daemon(where / "srv") as base:
        a, b = machines(where, f"{base}/s.git", 100)
        for side in (a, b):
            run("config", "set", "--local", "sync.auto", "true", cwd=side)
            run("config", "set", "--local", "sync.interval", f"{INTERVAL}s", cwd=side)
        for n in range(SENDS):
            time.sleep((n % 5) * 0.37)  # sends at different points of b's interval
            env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
            t0 = time.perf_counter()
            sent = subprocess.run(
                [GC, "mail", "send", "dog", "-m", f"convergence {n}", "--json"],
                cwd=a, env={**env, "GC_AGENT": "mayor"}, capture_output=True, text=True,
                check=True,
            ).stdout  # fmt: skip
            message = sent.split('"id": "', 1)[1].split('"', 1)[0]
            while True:  # b: its hooks fire every 100 ms; its agent reads its inbox
                fetch_if_due(b / ".beads")
                with Store.open(b) as store:
                    if message in {m.id for m in BeadMail(store).inbox("dog")}:
                        break
                if time.perf_counter() - t0 > 60:
                    raise RuntimeError(f"message {n} never reached b")
                time.sleep(0.1)
            delays.append(time.perf_counter() - t0)
            log(f"send {n}: in b's inbox after {delays[-1]:.2f}s")
        time.sleep(INTERVAL)  # let the last background syncers end before the daemon stops
    median = statistics.median(delays)
    p95 = sorted(delays)[max(0, round(0.95 * len(delays)) - 1)]
    passed = median < 2 * INTERVAL
    return (
        f"2. convergence A send -> B inbox, sync.auto, interval {INTERVAL:g}s, git daemon: "
        f"median {median:.2f}s, p95 {p95:.2f}s over {SENDS} sends (goal: median < "
        f"{2 * INTERVAL:g}s) {'PASS' if passed else 'FAIL'}",
        passed,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 beads, not 100,000")
    parser.add_argument("--only", choices=("1", "2"), help="run one figure")
    parser.add_argument("--no-compact", action="store_true", help="one pack a build batch")
    parser.add_argument(
        "--remote", choices=("daemon", "path"), default="daemon",
        help="figure 1's remote: git daemon, or a path gc reads itself",
    )  # fmt: skip
    args = parser.parse_args()
    global COMPACT, REMOTE
    COMPACT = not args.no_compact
    REMOTE = args.remote
    large = 10_000 if args.quick else 100_000
    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    lines = []
    try:
        if args.only in (None, "1"):
            lines.append(figure_1(work, large)[0])
            print(lines[-1], flush=True)
        if args.only in (None, "2"):
            lines.append(figure_2(work)[0])
            print(lines[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(["", "Summary:", *lines]))


if __name__ == "__main__":
    main()
