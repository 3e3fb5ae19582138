#!/usr/bin/env python
"""Benchmark of the destructive-op gate (issue 26's figures).

Run from the project root:

    python bench/bench_gate.py

Figures:
  1. on the corpus (tests/data/shell_corpus), judged in the situation it assumes:
     destructive commands stopped (deny or ask) >= 95%, harmless ones stopped <= 1%;
  2. `gc hook run` on PreToolUse for `ls -la`, `pytest -x` and `git status` as a ratio to
     `python -c "import sqlite3, json"` measured in the same run (target <= 1.3x), and for
     a command that needs the parser (target <= 2.5x);
  3. the slowest judgement of a 1 MB command, and of commands just under the size the gate
     reads (the parser and the walk at their budget) (target < 1 s).

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

perf = time.perf_counter
ROUNDS = 20
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def git(where: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=where, check=True, capture_output=True)


def corpus_tree(where: Path) -> Path:
    """The situation the corpus assumes (tests/data/shell_corpus/README.md)."""
    where.mkdir()
    git(where, "init", "-q", "-b", "main")
    git(where, "config", "user.email", "t@example.com")
    git(where, "config", "user.name", "t")
    (where / "file.txt").write_text("one\n")
    git(where, "add", "file.txt")
    git(where, "commit", "-qm", "first")
    git(where, "branch", "done")
    git(where, "checkout", "-qb", "topic")
    (where / "topic.txt").write_text("topic\n")
    git(where, "add", "topic.txt")
    git(where, "commit", "-qm", "topic work")
    git(where, "checkout", "-q", "main")
    (where / "file.txt").write_text("changed\n")
    Store.init(where, agent="bench")[0].close()
    return where


def figure1(tmp: Path) -> None:
    from gates.destructive import judge
    from tests.test_hooks_session_gates import corpus

    tree = corpus_tree(tmp / "corpus")
    home = tmp / "home"
    home.mkdir()
    os.environ["HOME"] = str(home)
    os.environ.pop("XDG_DATA_HOME", None)
    for name, limit, stopped_is_good in (("destructive", 0.95, True), ("harmless", 0.01, False)):
        entries = corpus(name)
        stopped = [c for _, c in entries if judge(c, str(tree))[0] is not None]
        share = len(stopped) / len(entries)
        passed = share >= limit if stopped_is_good else share <= limit
        target = f">= {limit:.0%}" if stopped_is_good else f"<= {limit:.0%}"
        shown = "" if stopped_is_good or not stopped else "stopped: " + "; ".join(stopped)
        b.verdict(f"1. {name} stopped: {len(stopped)}/{len(entries)} = {share:.1%} "
                  f"(target {target})", passed, shown)  # fmt: skip
    # The red team's commands (attacks.txt): the ones to stop (known misses included) and
    # the look-alikes written as "none".
    attacks = corpus("attacks")
    for label, wanted, limit, stopped_is_good in (
        ("attacks, destructive", lambda a: a != "none", 0.95, True),
        ("attacks, harmless", lambda a: a == "none", 0.01, False),
    ):
        entries = [c for a, c in attacks if wanted(a)]
        stopped = [c for c in entries if judge(c, str(tree))[0] is not None]
        share = len(stopped) / len(entries)
        passed = share >= limit if stopped_is_good else share <= limit
        target = f">= {limit:.0%}" if stopped_is_good else f"<= {limit:.0%}"
        b.verdict(f"1. {label} stopped: {len(stopped)}/{len(entries)} = {share:.1%} "
                  f"(target {target})", passed, "")  # fmt: skip


def figure2(root: Path) -> None:
    b.compile_project()
    gc = str(Path(sys.executable).parent / "gc")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    env["GC_AGENT"] = "dog"

    def payload(command: str) -> bytes:
        return json.dumps({"session_id": "s1", "hook_event_name": "PreToolUse",
                           "cwd": str(root), "tool_name": "Bash", "tool_use_id": "t1",
                           "tool_input": {"command": command}}).encode()  # fmt: skip

    cases = {
        "ls -la": (payload("ls -la"), 1.3),
        "pytest -x": (payload("pytest -x"), 1.3),
        "git status": (payload("git status"), 1.3),
        "parser: rm -rf build/$X && git push origin main": (
            payload("rm -rf build/$X && git push origin main"), 2.5),
    }  # fmt: skip
    times: dict[str, list[float]] = {"baseline": [], **{name: [] for name in cases}}
    for round_ in range(ROUNDS + 1):
        t0 = perf()
        subprocess.run([sys.executable, "-c", "import sqlite3, json"], check=True)
        base = perf() - t0
        for name, (stdin, _target) in cases.items():
            t0 = perf()
            result = subprocess.run([gc, "hook", "run", "--event", "PreToolUse"], input=stdin,
                                    capture_output=True, env=env, cwd=root)  # fmt: skip
            elapsed = perf() - t0
            if result.returncode != 0 or result.stdout.strip():
                raise RuntimeError(f"expected no decision for {name}: {result.stdout[:300]!r}")
            if round_:
                times[name].append(elapsed)
        if round_:
            times["baseline"].append(base)
    m = {name: b.med(values) for name, values in times.items()}
    for name, (_stdin, target) in cases.items():
        ratio = m[name] / m["baseline"]
        b.verdict(f"2. PreToolUse `{name}` / import sqlite3, json = {ratio:.2f}x "
                  f"(target <= {target}x)", ratio <= target,
                  f"medians {b.ms(m[name])} vs {b.ms(m['baseline'])}, {ROUNDS} rounds")  # fmt: skip


def figure3(tmp: Path) -> None:
    from gates.destructive import MAX_COMMAND_BYTES
    from gates.pretool import pre_tool_use

    def judge(command: str, cwd: str) -> tuple[str | None, str]:
        """The whole PreToolUse judgement (both gates), as the hook runs it."""
        reply = pre_tool_use({"tool_name": "Bash", "tool_input": {"command": command},
                              "cwd": cwd}, None, {}) or {}  # fmt: skip
        return reply.get("hookSpecificOutput", {}).get("permissionDecision"), ""

    size = 1_000_000
    under = MAX_COMMAND_BYTES - 64
    units = ["git reset --hard;", "rm -rf build; ", "ls|", "$(", "((", "<<", "${", "'x' ",
             "echo a && ", "{ ls; }; ", "\\", "/x", " >a", "$x", "\\x72", " a", "x/"]  # fmt: skip
    judge("ls", str(tmp))  # the parser loaded, as in the hook once it needs it
    for label, length in (("1 MB", size), (f"{under // 1024} KiB", under), ("16 KiB", 16_000)):
        slowest, which, answers = 0.0, "", set()
        for unit in units:
            command = (unit * (length // len(unit) + 1))[:length]
            t0 = perf()
            answer, _reason = judge(command, str(tmp))
            elapsed = perf() - t0
            answers.add(answer)
            if elapsed > slowest:
                slowest, which = elapsed, unit
        b.verdict(f"3. slowest judgement of a {label} command: {b.ms(slowest)} (target < 1 s)",
                  slowest < 1.0, f"slowest of {len(units)} shapes: repeated {which!r}; "
                  f"answers {sorted(a or 'none' for a in answers)}")  # fmt: skip


def main() -> None:
    def body(tmp: Path) -> None:
        with b.figure("Figure 1: the corpus"):
            figure1(tmp)
        Store.init(tmp / "hook", agent="bench")[0].close()
        with b.figure("Figure 2: gc hook run PreToolUse"):
            figure2(tmp / "hook")
        with b.figure("Figure 3: a 1 MB command"):
            figure3(tmp)

    b.report("gc-beads destructive-op gate benchmark (bench/bench_gate.py)", "gc-bench-gate-",
             body)  # fmt: skip


if __name__ == "__main__":
    main()
    sys.exit(0)
