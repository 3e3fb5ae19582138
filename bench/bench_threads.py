#!/usr/bin/env python
"""Benchmark of work threads (issue 12) against the figures of the issue.

Run from the project root:

    python bench/bench_threads.py            # large store of 100,000 threads (several minutes)
    python bench/bench_threads.py --quick    # large store of 10,000 threads (a fast check)

Figures:
  1. wake latency of `inbox wait-reply` after the reply's command returns, cross-process:
     median < 100 ms; and the waiter's CPU use while it waits: < 2% of a core;
  2. CLI `inbox claim` <= 1.3x `python -c "import click, dulwich.repo, filelock, sqlite3"`,
     measured in alternating rounds of the same run;
  3. an API claim at the large size costs <= 1.2x what it costs at 1,000 threads
     (interleaved, so both see the same machine);
  4. `Threads.fetch` of one agent's pending threads among the large store's: < 5 ms.

The stores are built with `Store.batch` (5,000 beads a commit, as bench/bench_store.py does):
threads spread over AGENTS agents, most of them finished (closed, as in a store that has
been in use), a few waiting for any agent (label `pool`). Everything happens in a temporary
directory that is removed at the end. The script always exits 0 (it is a report).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from beads.records.record import Bead
from beads.records.times import now_stamp
from beads.store import Store
from mail.threads import Threads

perf = time.perf_counter
SMALL = 1_000
LARGE = 100_000
LARGE_QUICK = 10_000
BUILD_BATCH = 5_000
AGENTS = 1_000
DONE_SHARE = 0.95  # finished threads (closed beads)
POOL_SHARE = 0.001  # waiting, open to every agent
WAKES = 15
CPU_SECONDS = 10.0
CLI_ROUNDS = 15
CLAIMS = 100
FETCHES = 200
RESULTS: list[tuple[str, bool]] = []
BIN = Path(sys.executable).parent


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def verdict(line: str, passed: bool, details: str = "") -> None:
    full = f"{line} {'PASS' if passed else 'FAIL'}"
    RESULTS.append((full, passed))
    print(full, flush=True)
    for detail in details.splitlines():
        print(f"      {detail}", flush=True)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GC_")}


def build_store(path: Path, total: int, rng: random.Random) -> Store:
    """`total` thread beads in batches: DONE_SHARE closed, POOL_SHARE open to all, the rest
    pending for one of AGENTS agents."""
    store, _ = Store.init(path, agent="bench")
    start = perf()
    done = 0
    while done < total:
        count = min(BUILD_BATCH, total - done)
        with store.batch(f"bench: threads {done + 1}..{done + count}") as batch:
            for i in range(done, done + count):
                stamp = now_stamp()
                draw = rng.random()
                finished = draw < DONE_SHARE
                pool = not finished and draw < DONE_SHARE + POOL_SHARE
                batch.insert(Bead(
                    id=batch.new_id(), type="thread", title=f"Task {i}", sender="leader",
                    assignee=None if pool else f"agent-{rng.randrange(AGENTS)}",
                    labels=["pool"] if pool else [], priority=rng.choice((1, 2, 2, 3)),
                    status="closed" if finished else "open", created_at=stamp,
                    updated_at=stamp, closed_at=stamp if finished else None,
                    close_reason="done" if finished else None,
                    meta={"run_id": "R1", "task_id": f"T{i}",
                          "status": "done" if finished else "pending"},
                ))  # fmt: skip
        done += count
        log(f"{path.name}: {done:,}/{total:,} threads ({perf() - start:.0f}s)")
    return store


def pending(store: Store, n: int, agent: str = "bench") -> list[str]:
    """`n` new pending threads (one commit each, as a leader would send them)."""
    api = Threads(store)
    made = [api.send("leader", to=agent, subject=f"bench {i}")[0].thread_id for i in range(n)]
    api.close()
    return made


def figure1(store: Store) -> None:
    """Wake latency and the waiter's CPU, through the `inbox` program.

    One Store per store directory in this process: a second one, opened and closed while
    the first is open, loses the first's sqlite locks (POSIX locks are per process, and
    `files.create` opens and closes the index file), which later shows as "disk I/O error".
    """
    inbox = str(BIN / "inbox")
    env = clean_env()
    root = store.root
    api = Threads(store)
    (thread,) = pending(store, 1)
    api.claim("bench", thread, lease_seconds=3600)
    base = ["--beads-dir", str(root), "--json"]
    latencies: dict[str, list[float]] = {"cli": [], "api": []}
    for n in range(WAKES * 2):
        how = "cli" if n % 2 == 0 else "api"
        cursor = api.last_event()
        waiter = subprocess.Popen(
            [inbox, "wait-reply", "--thread", thread, "--after-event", str(cursor),
             "--timeout-seconds", "30", *base],
            stdout=subprocess.PIPE, env=env,
        )  # fmt: skip
        time.sleep(0.4)  # started and waiting
        if how == "cli":  # the reply's command: it returns after its process has ended
            subprocess.run(
                [inbox, "reply", "--from", "leader", "--thread", thread, "--summary",
                 f"answer {n}", *base],
                check=True, stdout=subprocess.DEVNULL, env=env,
            )  # fmt: skip
        else:  # the API in this process: returns as soon as the commit is in
            api.reply("leader", thread, summary=f"answer {n}")
        returned = perf()
        line = waiter.stdout.readline()  # type: ignore[union-attr]
        woke = perf()
        waiter.wait()
        assert json.loads(line)["woke"] is True, line
        latencies[how].append(woke - returned)
    api.close()
    median = statistics.median(latencies["cli"])
    by_api = latencies["api"]
    verdict(
        f"1a. wait-reply wake latency after the reply returns = {ms(median)} median "
        "(target < 100 ms)",
        median < 0.1,
        f"{WAKES} wakes after `inbox reply` returned (the waiter often wrote before the "
        f"reply's process had exited: ~0); min {ms(min(latencies['cli']))}, max "
        f"{ms(max(latencies['cli']))}\n"
        f"{WAKES} wakes after an API reply returned (the commit just in): median "
        f"{ms(statistics.median(by_api))}, min {ms(min(by_api))}, max {ms(max(by_api))}",
    )
    waiter = subprocess.Popen(
        [inbox, "wait-reply", "--thread", thread, "--timeout-seconds", str(CPU_SECONDS + 5),
         *base],
        stdout=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    time.sleep(1.5)  # past start-up: only the waiting is measured
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        fields = Path(f"/proc/{waiter.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    before, t0 = cpu(), perf()
    time.sleep(CPU_SECONDS)
    used, elapsed = cpu() - before, perf() - t0
    waiter.wait()
    share = used / elapsed
    verdict(
        f"1b. waiter CPU while waiting = {share * 100:.2f}% of a core (target < 2%)",
        share < 0.02,
        f"{used * 1000:.0f} ms of CPU in {elapsed:.1f} s (from /proc, {1000 / ticks:.0f} ms ticks)",
    )


def figure2(store: Store) -> None:
    """CLI claim against the import of the libraries it needs, alternating."""
    from bench_store import compile_project  # .pyc files, even under PYTHONDONTWRITEBYTECODE

    compile_project()
    env = clean_env()
    root = store.root
    threads = pending(store, CLI_ROUNDS + 1)
    commands = {
        "inbox claim": lambda n: [str(BIN / "inbox"), "claim", "--agent", "bench", "--thread",
                                  threads[n], "--beads-dir", str(root)],
        "import libs": lambda n: [sys.executable, "-c",
                                  "import click, dulwich.repo, filelock, sqlite3"],
    }  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():  # warm-up (page cache, .pyc files)
        subprocess.run(command(CLI_ROUNDS), check=True, stdout=subprocess.DEVNULL, env=env)
    for n in range(CLI_ROUNDS):
        for name, command in commands.items():
            t0 = perf()
            subprocess.run(command(n), check=True, stdout=subprocess.DEVNULL, env=env)
            times[name].append(perf() - t0)
    claim, libs = (statistics.median(times[k]) for k in commands)
    verdict(
        f'2. `inbox claim` / `python -c "import click, dulwich.repo, filelock, sqlite3"` = '
        f"{claim / libs:.2f}x (target <= 1.3x)",
        claim / libs <= 1.3,
        f"median {ms(claim)} vs {ms(libs)}, {CLI_ROUNDS} alternating rounds after a warm-up",
    )


def figure3(small: Store, large: Store, label: str) -> None:
    """API claims at both sizes, interleaved."""
    targets = {id(s): pending(s, CLAIMS) for s in (small, large)}
    apis = {id(s): Threads(s) for s in (small, large)}
    times: dict[int, list[float]] = {id(small): [], id(large): []}
    for n in range(CLAIMS):
        for store in (small, large) if n % 2 else (large, small):  # neither always first
            t0 = perf()
            apis[id(store)].claim("bench", targets[id(store)][n])
            times[id(store)].append(perf() - t0)
    for api in apis.values():
        api.close()
    at_small, at_large = (statistics.median(times[id(s)]) for s in (small, large))
    verdict(
        f"3. API claim at {label} / at 1k threads = {at_large / at_small:.2f}x (target <= 1.2x)",
        at_large / at_small <= 1.2,
        f"median {ms(at_large)} vs {ms(at_small)}, {CLAIMS} claims each, interleaved",
    )


def figure4(large: Store, label: str) -> None:
    api = Threads(large)
    agents = [f"agent-{n}" for n in range(AGENTS)]
    api.fetch(agents[0])  # warm
    times, sizes = [], []
    for n in range(FETCHES):
        t0 = perf()
        found = api.fetch(agents[n % AGENTS], statuses=["pending"])
        times.append(perf() - t0)
        sizes.append(len(found))
    median = statistics.median(times)
    verdict(
        f"4. fetch of an agent's pending threads among {label} = {ms(median)} median "
        "(target < 5 ms)",
        median < 0.005,
        f"{FETCHES} fetches over different agents, {statistics.mean(sizes):.1f} threads each "
        f"(own and pool), p90 {ms(sorted(times)[int(FETCHES * 0.9)])}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 threads, not 100,000")
    args = parser.parse_args()
    size = LARGE_QUICK if args.quick else LARGE
    label = f"{size // 1000}k"
    tmp = Path(tempfile.mkdtemp(prefix="gc-bench-threads-"))
    print(
        f"gc-beads work threads benchmark: 1k and {label} threads, {AGENTS} agents, "
        f"{DONE_SHARE:.0%} finished, {POOL_SHARE:.1%} open to all; "
        f"python {sys.version.split()[0]}"
    )
    rng = random.Random(12)
    try:
        small = build_store(tmp / "small", SMALL, rng)
        for name, run in (
            ("Figure 1: wake latency and CPU", lambda: figure1(small)),
            ("Figure 2: CLI claim start-up", lambda: figure2(small)),
        ):
            try:
                print(name, flush=True)
                run()
            except Exception:  # noqa: BLE001 - a report: the error is a FAIL line
                traceback.print_exc()
                verdict(f"{name} raised", False)
        t0 = perf()
        large = build_store(tmp / "large", size, rng)
        print(f"(built the {label} store in {perf() - t0:.0f} s)", flush=True)
        for name, run in (
            ("Figure 3: claim at the large size", lambda: figure3(small, large, label)),
            ("Figure 4: fetch among the large store", lambda: figure4(large, label)),
        ):
            try:
                print(name, flush=True)
                run()
            except Exception:  # noqa: BLE001
                traceback.print_exc()
                verdict(f"{name} raised", False)
        small.close()
        large.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nSummary:")
    for line, _ in RESULTS:
        print(f"  {line}")


if __name__ == "__main__":
    main()
