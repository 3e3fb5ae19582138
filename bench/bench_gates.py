#!/usr/bin/env python
"""Benchmark of gates against the figures of the gates issue.

Run from the project root:

    python bench/bench_gates.py

Figures:
  1. `gc hook run` on Stop with 10 session gates and 100 open bead gates: within 1.5x of
     `python -c "import click, sqlite3"` (same run; no `gh` call in a hook);
  2. `gc gate check` (the API) over 10,000 open timer and bead gates, all due: under 1 ms per
     gate, the resolutions committed in one batch;
  3. `gc hook run` on PreToolUse, a Bash command destructive-op evaluates (and refuses, and
     one it lets through): within 1.3x of `python -c "import sqlite3, json"` (same run).

Shares its report helpers with bench_store.py; always exits 0 (it is a report).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import bench_store as b

from beads.store import Store
from gates.beadgates import GATE, check_gates, gate_meta
from gates.session_gates import mark

perf = time.perf_counter
ROUNDS = 20
SESSION_GATES = 10
BEAD_GATES = 100
CHECK_GATES = 10_000


def figure1(root: Path) -> None:
    b.compile_project()
    with Store.open(root) as store:
        for n in range(SESSION_GATES):
            store.set_setting(f"gates.session.g{n}", {"hook": "Stop", "mode": "strict"})
            mark(store.root, "s1", f"g{n}")
        store.set_setting("gates.disabled", ["commit-push", "bead-update"])
        with store.batch("bench: open bead gates") as batch:
            for n in range(BEAD_GATES):
                meta = gate_meta("human", None, waiters=["dog" if n % 2 else "cat"])
                batch.create(GATE, f"Wait for review {n}", meta=meta)
    gc = str(Path(sys.executable).parent / "gc")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    env["GC_AGENT"] = "dog"
    payload = json.dumps({"session_id": "s1", "hook_event_name": "Stop", "cwd": str(root),
                          "stop_hook_active": False}).encode()  # fmt: skip

    def timed(argv: list[str], stdin: bytes | None = None) -> tuple[float, str]:
        t0 = perf()
        result = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=root)
        elapsed = perf() - t0
        if result.returncode != 0:
            raise RuntimeError(f"{argv} exited {result.returncode}: {result.stderr.decode()}")
        return elapsed, result.stdout.decode()

    times: dict[str, list[float]] = {"baseline": [], "stop": []}
    for round_ in range(ROUNDS + 1):
        base, _ = timed([sys.executable, "-c", "import click, sqlite3"])
        stop, out = timed([gc, "hook", "run"], payload)
        if '"decision"' in out or out.count("you wait on gate") != BEAD_GATES // 2:
            raise RuntimeError(f"unexpected Stop reply: {out[:300]!r}")
        if round_:
            times["baseline"].append(base)
            times["stop"].append(stop)
    m = {name: b.med(values) for name, values in times.items()}
    ratio = m["stop"] / m["baseline"]
    b.verdict(f"1. hook Stop ({SESSION_GATES} session gates, {BEAD_GATES} open bead gates) / "
              f"import click, sqlite3 = {ratio:.2f}x (target <= 1.5x)", ratio <= 1.5,
              f"medians {b.ms(m['stop'])} vs {b.ms(m['baseline'])}, {ROUNDS} rounds")  # fmt: skip


def figure2(root: Path) -> None:
    with Store.open(root) as store:
        with store.batch("bench: tasks") as batch:
            tasks = [batch.create("task", f"task {n}") for n in range(CHECK_GATES // 2)]
        with store.batch("bench: gates") as batch:
            for n in range(CHECK_GATES // 2):
                meta = gate_meta("timer", "1ms", waiters=["dog"])
                batch.create(GATE, f"timer {n}", meta=meta)
            for task in tasks:
                meta = gate_meta("bead", task.id, waiters=["dog"])
                batch.create(GATE, f"after {task.id}", meta=meta)
        with store.batch("bench: close the tasks") as batch:
            for task in tasks:
                batch.close_bead(task.id, "done")
        time.sleep(0.01)
        head_before = store.git.head()
        t0 = perf()
        outcomes = check_gates(store)
        elapsed = perf() - t0
        commits = len(store.git.log(limit=5))
        new_commits = 0
        for entry in store.git.log(limit=5):
            if entry.commit.encode() == head_before:
                break
            new_commits += 1
    per_gate = elapsed / CHECK_GATES
    if len(outcomes) != CHECK_GATES:
        raise RuntimeError(f"resolved {len(outcomes)} of {CHECK_GATES} gates")
    b.verdict(f"2. gate check over {CHECK_GATES:,} due gates: {per_gate * 1000:.3f} ms per gate "
              "(target < 1 ms)", per_gate < 0.001,
              f"{elapsed:.2f}s in all, {new_commits} commit(s) for the resolutions "
              f"(of {commits} looked at), items pushed to the waiter included")  # fmt: skip


def figure3(root: Path) -> None:
    b.compile_project()
    gc = str(Path(sys.executable).parent / "gc")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    env["GC_AGENT"] = "dog"

    def payload(command: str) -> bytes:
        return json.dumps({"session_id": "s1", "hook_event_name": "PreToolUse",
                           "cwd": str(root), "tool_name": "Bash", "tool_use_id": "t1",
                           "tool_input": {"command": command}}).encode()  # fmt: skip

    cases = {"refused": payload("cd build && sudo rm -rf /"),
             "allowed": payload("rm -rf ./build && git status | head")}  # fmt: skip
    times: dict[str, list[float]] = {"baseline": [], "refused": [], "allowed": []}
    for round_ in range(ROUNDS + 1):
        t0 = perf()
        subprocess.run([sys.executable, "-c", "import sqlite3, json"], check=True)
        base = perf() - t0
        for name, stdin in cases.items():
            t0 = perf()
            result = subprocess.run([gc, "hook", "run"], input=stdin, capture_output=True,
                                    env=env, cwd=root)  # fmt: skip
            elapsed = perf() - t0
            deny = b'"permissionDecision": "deny"' in result.stdout
            if result.returncode != 0 or deny != (name == "refused"):
                raise RuntimeError(f"unexpected PreToolUse reply: {result.stdout[:300]!r}")
            if round_:
                times[name].append(elapsed)
        if round_:
            times["baseline"].append(base)
    m = {name: b.med(values) for name, values in times.items()}
    for name in ("refused", "allowed"):
        ratio = m[name] / m["baseline"]
        b.verdict(f"3. hook PreToolUse Bash ({name}) / import sqlite3, json = {ratio:.2f}x "
                  "(target <= 1.3x)", ratio <= 1.3,
                  f"medians {b.ms(m[name])} vs {b.ms(m['baseline'])}, {ROUNDS} rounds")  # fmt: skip


def main() -> None:
    def body(tmp: Path) -> None:
        Store.init(tmp / "hook", agent="bench")[0].close()
        Store.init(tmp / "check", agent="bench")[0].close()
        with b.figure("Figure 1: gc hook run Stop"):
            figure1(tmp / "hook")
        with b.figure("Figure 2: gate check over 10,000 gates"):
            figure2(tmp / "check")
        with b.figure("Figure 3: gc hook run PreToolUse"):
            figure3(tmp / "hook")

    b.report("gc-beads gates benchmark (bench/bench_gates.py)", "gc-bench-gates-", body)


if __name__ == "__main__":
    main()
    sys.exit(0)
