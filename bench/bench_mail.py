#!/usr/bin/env python
"""Benchmark of beadmail against the performance figures of the mail issue.

Run from the project root:

    python bench/bench_mail.py            # large mailbox store of 100,000 messages
    python bench/bench_mail.py --quick    # large store of 10,000 messages (a fast check)

Figures:
  1. `gc mail send` and `gc mail inbox` through the CLI: at the large size each costs
     <= 1.3x what it costs at 1,000 messages, and each is within 1.3x of
     `python -c "import click, dulwich.repo, ruamel.yaml, filelock, sqlite3"` (same run);
  2. API send at the large size is >= 10x cheaper than `git add` + `git commit` of one file
     with the git CLI in a clone of that store (same run);
  3. API inbox of the 20 unread messages of one agent among all the messages: < 5 ms.

Shares its report helpers with bench_store.py; always exits 0 (it is a report).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import bench_store as b

from beads.records.codec import dump_bead
from beads.records.ids import bead_path, new_id
from beads.records.record import Bead
from beads.records.times import now_stamp
from beads.store import Store
from mail.beadmail import BeadMail

perf = time.perf_counter

SMALL = 1_000
LARGE = 100_000
LARGE_QUICK = 10_000
BUILD_BATCH = 5_000
AGENTS = 500
TARGET = "target"  # whose inbox is read: exactly TARGET_UNREAD unread messages
TARGET_UNREAD = 20
SINK = "sink"  # where the CLI sends go, so the target's inbox keeps its size
CLI_ROUNDS = 15
API_SENDS = 200
GIT_ITERATIONS = 20
INBOX_CALLS = 200
IMPORTS = "import click, dulwich.repo, ruamel.yaml, filelock, sqlite3"


def build_mail_store(path: Path, total: int, name: str) -> Store:
    """A store of `total` messages among AGENTS agents, most of them read or archived.

    The target has exactly TARGET_UNREAD unread messages (and read and archived ones too, so
    the unread predicate has work to do).
    """
    store, created = Store.init(path, prefix="gc", agent="bench")
    assert created, f"{path} already holds a store"
    agents = [f"agent{i}" for i in range(AGENTS)]
    start = perf()
    done = 0
    while done < total:
        count = min(BUILD_BATCH, total - done)
        with store.batch(f"bench: build messages {done + 1}..{done + count}") as batch:
            for i in range(done, done + count):
                unread_target = i < TARGET_UNREAD
                to = TARGET if unread_target or i % 97 == 0 else agents[i % AGENTS]
                sender = agents[(i * 7 + 3) % AGENTS]
                bead = batch.create(
                    "message",
                    f"Message {i}: status of task {i % 311}",
                    f"Body of message {i}.\nSecond line.\n",
                    assignee=to,
                    sender=sender,
                    priority=i % 5,
                    meta={"read": not unread_target and (to == TARGET or i % 3 != 0)},
                )
                if not unread_target and i % 4 == 0:
                    batch.close_bead(bead.id, "archived")
        done += count
        b.log(f"{name}: {done:,}/{total:,} messages ({(perf() - start) / done * 1000:.2f} ms each)")
    return store


def gc_script() -> str:
    beside = Path(sys.executable).parent / "gc"
    found = str(beside) if beside.exists() else shutil.which("gc")
    if found is None:
        raise RuntimeError("the gc console script is not installed (pip install -e .)")
    return found


def figure1(small: Path, large: Path, n_large: int) -> None:
    b.compile_project()
    gc = gc_script()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    env["GC_AGENT"] = "bench"
    commands: dict[str, list[str]] = {"imports": [sys.executable, "-c", IMPORTS]}
    for label, root in (("1k", small), ("large", large)):
        beads_dir = ["--beads-dir", str(root)]
        commands[f"send@{label}"] = [gc, "mail", "send", SINK, "-s", "bench", "-m", "hello",
                                     *beads_dir]  # fmt: skip
        commands[f"inbox@{label}"] = [gc, "mail", "inbox", TARGET, *beads_dir]
    times: dict[str, list[float]] = {name: [] for name in commands}

    def once(name: str) -> float:
        t0 = perf()
        result = subprocess.run(commands[name], env=env, capture_output=True, text=True)
        elapsed = perf() - t0
        if result.returncode != 0:
            raise RuntimeError(f"`{name}` exited {result.returncode}: {result.stderr.strip()}")
        if name.startswith("inbox") and result.stdout.count("\n") < TARGET_UNREAD:
            raise RuntimeError(f"`{name}` listed fewer than {TARGET_UNREAD} messages")
        return elapsed

    for name in commands:  # warm-up (page cache, .pyc files), not counted
        once(name)
    for _ in range(CLI_ROUNDS):
        for name in commands:
            times[name].append(once(name))
    m = {name: b.med(values) for name, values in times.items()}
    big = b.size_label(n_large)
    b.out(f"   {CLI_ROUNDS} alternating rounds after 1 warm-up; medians: "
          + ", ".join(f"{name} {b.ms(v)}" for name, v in m.items()))  # fmt: skip
    for op in ("send", "inbox"):
        growth = m[f"{op}@large"] / m[f"{op}@1k"]
        b.verdict(f"1. gc mail {op}@{big} / {op}@1k = {growth:.2f}x (target <= 1.3x)",
                  growth <= 1.3)  # fmt: skip
        for label in ("1k", "large"):
            shown = big if label == "large" else "1k"
            r = m[f"{op}@{label}"] / m["imports"]
            b.verdict(f"1. gc mail {op}@{shown} / python -c \"{IMPORTS}\" = {r:.2f}x "
                      "(target <= 1.3x)", r <= 1.3)  # fmt: skip


def figure2(store: Store, tmp: Path, n_large: int) -> None:
    mail = BeadMail(store)
    for i in range(3):
        mail.send("bench", SINK, f"warm-up {i}", "hello")
    times = []
    for i in range(API_SENDS):
        t0 = perf()
        mail.send("bench", SINK, f"API send {i}", f"Body {i}\n")
        times.append(perf() - t0)
    api = b.med(times)

    git = shutil.which("git")
    if git is None:
        raise RuntimeError("the git CLI is not installed")
    env = b.git_env()
    clone = tmp / "git-cli-clone"
    b.run([git, "clone", "-q", str(store.root / ".git"), str(clone)], env=env)
    b.run([git, "config", "user.name", "bench"], cwd=clone, env=env)
    b.run([git, "config", "user.email", "bench@example.invalid"], cwd=clone, env=env)
    b.run([git, "status", "-s"], cwd=clone, env=env)

    def one(n: int) -> float:
        stamp = now_stamp()
        bead = Bead(id=new_id("gc"), type="message", title=f"git CLI send {n}", body="hello\n",
                    sender="bench", assignee=SINK, created_at=stamp, updated_at=stamp,
                    meta={"read": False})  # fmt: skip
        rel = bead_path(bead.type, bead.id)
        t0 = perf()
        target = clone / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(dump_bead(bead))
        b.run([git, "add", "--", rel], cwd=clone, env=env)
        b.run([git, "commit", "-q", "-m", f"mail send {n}"], cwd=clone, env=env)
        return perf() - t0

    one(0)
    cli = b.med([one(n) for n in range(1, GIT_ITERATIONS + 1)])
    shutil.rmtree(clone, ignore_errors=True)
    ratio = cli / api
    big = b.size_label(n_large)
    b.verdict(f"2. git CLI add+commit@{big} / API send@{big} = {ratio:.1f}x (target >= 10x)",
              ratio >= 10, f"median {b.ms(cli)} (git CLI, {GIT_ITERATIONS} runs) vs "
              f"{b.ms(api)} (BeadMail.send, {API_SENDS} runs)")  # fmt: skip


def figure3(store: Store, n_large: int) -> None:
    mail = BeadMail(store)
    found = mail.inbox(TARGET)
    if len(found) != TARGET_UNREAD:
        raise RuntimeError(f"the target's inbox holds {len(found)}, not {TARGET_UNREAD}")
    times = []
    for _ in range(INBOX_CALLS):
        t0 = perf()
        mail.inbox(TARGET)
        times.append(perf() - t0)
    m = b.med(times)
    b.verdict(f"3. API inbox of {TARGET_UNREAD} unread among {n_large:,} = {b.ms(m)} "
              "(target < 5 ms)", m < 0.005, f"{INBOX_CALLS} calls; mean {b.ms(b.mean(times))}, "
              f"max {b.ms(max(times))}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{LARGE_QUICK:,} messages")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    n_large = LARGE_QUICK if args.quick else LARGE
    b.out("gc-beads mail benchmark (bench/bench_mail.py)")
    b.out(f"sizes: {SMALL:,} and {n_large:,} messages among {AGENTS} agents + '{TARGET}' "
          f"({TARGET_UNREAD} unread)")  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="gc-bench-mail-", dir="/tmp"))
    started = perf()
    stores: list[Store] = []
    try:
        small = build_mail_store(tmp / "small", SMALL, "mail@1k")
        large = build_mail_store(tmp / "large", n_large, f"mail@{b.size_label(n_large)}")
        stores += [small, large]
        with b.figure("Figure 3: API inbox"):
            figure3(large, n_large)
        with b.figure("Figure 2: API send vs git CLI commit"):
            figure2(large, tmp, n_large)
        small.close()
        large.close()
        with b.figure("Figure 1: CLI send and inbox"):
            figure1(small.root, large.root, n_large)
    except Exception as exc:
        b.RESULTS.append((f"benchmark: ERROR {type(exc).__name__}: {exc} FAIL", False))
        b.out(traceback.format_exc().rstrip())
    finally:
        for store in stores:
            store.close()
        if args.keep:
            b.out(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        b.out()
        b.out(f"== Summary ({b.size_label(n_large)} messages, {perf() - started:.0f}s total)")
        for line, _passed in b.RESULTS:
            b.out(line)
        failed = sum(1 for _line, passed in b.RESULTS if not passed)
        b.out(f"{len(b.RESULTS) - failed} PASS, {failed} FAIL")


if __name__ == "__main__":
    main()
    sys.exit(0)
