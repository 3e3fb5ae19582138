#!/usr/bin/env python
"""kill -9 at random moments of `gc bead create`, `gc mail send` and `gc inbox drain`.

Run from the project root (the `gc` of this Python's environment is used):

    python bench/bench_crash.py [--trials 1000] [--stores 4] [--seed N]

Each trial starts one real `gc` process on one of a few stores and, unless it finishes first,
SIGKILLs it after a random delay: sometimes anywhere in the run (start-up included), mostly
near its end, where the commit, the index, the view and the notification are written. The
delays are scaled by each operation's duration measured on the same store at the start.

Figures (targets of issue 10):
  1. acknowledged writes lost: every create and send that printed its JSON reply is in the
     store at the end (target 0);
  2. notifications lost: every mail bead the store holds (acknowledged or not) reached a
     drain's output for its recipient, at least once (target 0); drains count only when
     their JSON reply was complete, as an agent would have seen it;
  3. stores that need a person: after a failed (not killed) command, one `gc doctor` must make
     the store usable again (target 0);
  4. `git fsck --strict` problems at the end (target 0).

Always exits 0 (it is a report); prints PASS/FAIL per figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GC = str(Path(sys.executable).parent / "gc")
RECIPIENT = "dog"
SESSION = "crash-session"
OPS = ("create", "send", "drain")


def gc(store: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run gc to completion (setup and checks)."""
    return subprocess.run(
        [GC, "--beads-dir", str(store), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
    )


ENV = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}


def argv_for(op: str, store: Path, n: int) -> list[str]:
    base = [GC, "--beads-dir", str(store), "--json"]
    if op == "create":
        return [*base, "bead", "create", "--type", "task", "--title", f"crash task {n}"]
    if op == "send":
        return [*base, "mail", "send", RECIPIENT, "-s", f"crash mail {n}", "-m", f"body {n}"]
    return [*base, "--agent", RECIPIENT, "inbox", "drain", "--session", SESSION]


def parse_reply(stdout: str) -> dict | None:
    """The complete JSON reply, or None when the process died before writing all of it."""
    try:
        reply = json.loads(stdout)
    except ValueError:
        return None
    return reply if isinstance(reply, dict) and reply.get("ok") else None


class StoreState:
    """One store under test and what was acknowledged on it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.acked_tasks: set[str] = set()
        self.acked_mail: set[str] = set()
        self.announced: set[str] = set()  # dedup keys seen in complete drain replies
        self.doctor_runs = 0
        self.needs_person = 0
        self.failures: list[str] = []

    def record(self, op: str, reply: dict) -> None:
        if op == "create":
            self.acked_tasks.add(reply["bead"]["id"])
        elif op == "send":
            message = reply.get("message") or {}
            if message.get("id"):
                self.acked_mail.add(message["id"])
        else:
            self.announced.update(item["key"] for item in reply.get("items", []))

    def recover(self, what: str) -> None:
        """A command failed without being killed: one `gc doctor` must bring the store back."""
        self.failures.append(what)
        self.doctor_runs += 1
        gc(self.path, "doctor")
        # Usable means writable: a write after the doctor must succeed.
        probe = gc(self.path, "--json", "bead", "create", "--type", "task", "--title", "probe")
        reply = parse_reply(probe.stdout)
        if probe.returncode != 0 or reply is None:
            self.needs_person += 1
            self.failures.append(f"after gc doctor: {probe.stderr.strip()}")
        else:
            self.record("create", reply)


def measure(store: StoreState, rounds: int = 5) -> dict[str, float]:
    """Median wall time of each operation on this store."""
    durations: dict[str, float] = {}
    for op in OPS:
        times = []
        for i in range(rounds):
            start = time.perf_counter()
            result = subprocess.run(
                argv_for(op, store.path, -i - 1), capture_output=True, text=True, env=ENV
            )
            times.append(time.perf_counter() - start)
            reply = parse_reply(result.stdout)
            if result.returncode != 0 or reply is None:
                raise SystemExit(f"warm-up {op} failed: {result.stderr.strip()}")
            store.record(op, reply)
        durations[op] = statistics.median(times)
    return durations


def trial(store: StoreState, op: str, n: int, duration: float, rng: random.Random) -> str:
    """One run of `op`, killed after a random delay unless it finished; returns its outcome."""
    if rng.random() < 0.3:
        delay = rng.uniform(0, duration * 1.5)
    else:  # the tail of the run, where the writes are
        delay = rng.uniform(duration * 0.5, duration * 1.5)
    process = subprocess.Popen(
        argv_for(op, store.path, n),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        process.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
    stdout, stderr = process.communicate()
    killed = process.returncode == -signal.SIGKILL
    reply = parse_reply(stdout)
    if reply is not None:
        store.record(op, reply)  # complete replies count even from a killed process
    if not killed and process.returncode != 0:
        store.recover(f"{op} exit {process.returncode}: {stderr.strip()}")
        return "failed"
    return "killed" if killed else "done"


def final_check(store: StoreState) -> dict[str, int]:
    """Drain until nothing is left, then compare what git holds with what was acknowledged."""
    for _ in range(50):
        result = subprocess.run(argv_for("drain", store.path, 0), capture_output=True, text=True,
                                env=ENV)  # fmt: skip
        reply = parse_reply(result.stdout)
        if result.returncode != 0 or reply is None:
            store.recover(f"final drain exit {result.returncode}: {result.stderr.strip()}")
            continue
        if not reply.get("items"):
            break
        store.record("drain", reply)
    listed = gc(store.path, "--json", "bead", "list", "--status", "all", "--limit", "1000000")
    if listed.returncode != 0:
        store.recover(f"final list: {listed.stderr.strip()}")
        listed = gc(store.path, "--json", "bead", "list", "--status", "all", "--limit", "1000000")
    beads = json.loads(listed.stdout)["beads"] if listed.returncode == 0 else []
    tasks = {b["id"] for b in beads if b["type"] == "task"}
    mail = {b["id"] for b in beads if b["type"] == "message" and b.get("assignee") == RECIPIENT}
    fsck = subprocess.run(
        ["git", "-C", str(store.path), "fsck", "--strict", "--no-dangling"],
        capture_output=True,
        text=True,
    )
    doctor = gc(store.path, "--json", "doctor")
    return {
        "tasks": len(tasks),
        "mail": len(mail),
        "lost_writes": len(store.acked_tasks - tasks) + len(store.acked_mail - mail),
        "lost_notifications": len({f"mail:{m}" for m in mail} - store.announced),
        "unacked_committed": len(tasks - store.acked_tasks) + len(mail - store.acked_mail),
        "fsck_problems": 0 if fsck.returncode == 0 else max(1, len(fsck.stdout.splitlines())),
        "doctor_problems": 0 if doctor.returncode == 0 else 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--stores", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="gc-crash-"))
    print(f"seed {seed}; {args.trials} trials on {args.stores} stores in {work}")
    stores = []
    for number in range(args.stores):
        path = work / f"s{number}"
        path.mkdir()
        init = subprocess.run([GC, "init"], cwd=path, capture_output=True, text=True, env=ENV)
        if init.returncode != 0:
            raise SystemExit(f"gc init failed: {init.stderr}")
        stores.append(StoreState(path / ".beads"))
    durations = measure(stores[0])
    for other in stores[1:]:
        measure(other, rounds=1)
    print(
        "median durations: " + ", ".join(f"{op} {d * 1000:.0f} ms" for op, d in durations.items())
    )
    outcomes: dict[str, dict[str, int]] = {op: {} for op in OPS}
    started = time.perf_counter()
    for n in range(args.trials):
        store = stores[n % len(stores)]
        op = rng.choice(OPS)
        outcome = trial(store, op, n, durations[op], rng)
        outcomes[op][outcome] = outcomes[op].get(outcome, 0) + 1
    elapsed = time.perf_counter() - started
    totals: dict[str, int] = {}
    for store in stores:
        for key, value in final_check(store).items():
            totals[key] = totals.get(key, 0) + value
    print(f"{args.trials} trials in {elapsed:.0f} s")
    for op in OPS:
        print(f"  {op:6}: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes[op].items())))
    print(
        f"  beads at the end: {totals['tasks']} tasks, {totals['mail']} mail "
        f"({totals['unacked_committed']} committed by a killed process before its reply)"
    )
    doctor_runs = sum(s.doctor_runs for s in stores)
    needs_person = sum(s.needs_person for s in stores)
    figures = [
        ("acknowledged writes lost", totals["lost_writes"]),
        ("notifications lost", totals["lost_notifications"]),
        ("stores that need a person", needs_person),
        ("git fsck --strict problems", totals["fsck_problems"]),
        ("gc doctor problems at the end", totals["doctor_problems"]),
    ]
    for name, value in figures:
        print(f"{name:32} {value:6}   target 0   {'PASS' if value == 0 else 'FAIL'}")
    print(f"commands that failed unkilled (each followed by gc doctor): {doctor_runs}")
    for store in stores:
        for failure in store.failures[:5]:
            print(f"  {store.path.parent.name}: {failure[:200]}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
