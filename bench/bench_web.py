#!/usr/bin/env python
"""Benchmark of `gc web` against the figures of its issue.

Run from the project root (needs the web extra: `pip install -e '.[web]'`):

    python bench/bench_web.py            # a store of 100,000 messages (~3 min)
    python bench/bench_web.py --quick    # 10,000 messages (a fast check)

Figures, on a store built as bench_mail.py builds it (messages among 500 agents, most of them
read or archived), with a three-agent conversation and everyday commits (sends, replies,
reads, archives, updates) on top:
  1. an agent's mailbox, a conversation and the history page (20 commits with their
     field-level diffs, every changed blob parsed anew: the parse cache cleared before each
     request) each answer over HTTP in < 100 ms (median; p99 shown); the agents page, the
     history with its parse cache warm, and a search are shown too;
  2. the full-text table's share of the index at that size (the index with it, and the same
     index with it dropped, each after VACUUM);
  3. what it adds to a send: its statements timed against whole API sends (same run).

The site runs in this process (werkzeug's threaded server on a free loopback port); each
request is a new HTTP connection, as a browser's first request is. Always exits 0 (it is a
report); the machine's load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from collections.abc import Callable
from pathlib import Path

import bench_mail as m
import bench_store as b

from beads.store import Store
from mail import api
from mail.beadmail import BeadMail

try:
    from web import history as web_history
    from web.app import serve, url_of
except ImportError as exc:  # pragma: no cover - the extra is not installed
    print(f"bench_web: {exc}; install the web extra (pip install -e '.[web]')", file=sys.stderr)
    sys.exit(0)

perf = time.perf_counter
GOAL = 0.100
REQUESTS = 100
EVERYDAY = 40  # commits of everyday work on top of the built store
SENDS = 200


def add_everyday_work(store: Store) -> str:
    """A conversation of three agents and EVERYDAY ordinary commits; returns the thread id."""
    root = store.root
    mayor = BeadMail(Store.open(root, agent="mayor"))
    dog = BeadMail(Store.open(root, agent="dog"))
    cat = BeadMail(Store.open(root, agent="cat"))
    first = api.send(mayor, "mayor", ["dog"], "Review the parser", "Please look.", cc=["cat"])
    thread = first.messages[0].id
    task = store.create("task", "Port the parser", "Spec in the thread.", assignee="dog")
    dog.read(thread)
    for n in range(EVERYDAY // 4):
        answer = api.reply(dog, thread, "dog", "", f"Progress {n}: {n * 10}% done")
        mayor.read(answer.messages[0].id)
        api.send(cat, "cat", ["mayor"], f"Note {n}", f"Seen {task.id}.")
        store.update(task.id, meta={"progress": n * 10}, title=f"Port the parser ({n})")
        mayor.archive(answer.messages[0].id)
    for provider in (mayor, dog, cat):
        provider.close()
        provider.store.close()
    return thread


def timed(url: str, requests: int, before: Callable[[], None] | None = None) -> list[float]:
    """Seconds for each of `requests` GETs of `url` (after one untimed warm-up); `before`
    runs before each, untimed."""
    times = []
    for n in range(requests + 1):
        if before is not None:
            before()
        t0 = perf()
        with urllib.request.urlopen(url, timeout=30) as response:
            body = response.read()
        elapsed = perf() - t0
        if response.status != 200 or not body:
            raise RuntimeError(f"{url} answered {response.status}")
        if n:
            times.append(elapsed)
    return times


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def batch_commit(store: Store) -> str:
    """The newest of the commits that built the store (a batch of BUILD_BATCH messages)."""
    return store.log(grep="bench: build", limit=1)[0].commit


def figure1(store: Store, thread: str) -> None:
    server = serve(store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = url_of(server)
    pages = {
        f"mailbox of '{m.TARGET}'": (f"{base}agents/{m.TARGET}", None, True),
        "conversation": (f"{base}mail/{thread}", None, True),
        "history (cold: every blob parsed)": (f"{base}history", web_history.forget, True),
        "history (parse cache warm)": (f"{base}history", None, False),
        "history of the build (5,000-bead commits, cold)": (
            f"{base}history?from={batch_commit(store)}",
            web_history.forget,
            False,
        ),
        "agents (first 50)": (base, None, False),
        "search 'parser' (a few beads)": (f"{base}search?q=parser", None, False),
        "search 'message' (every bead)": (f"{base}search?q=message", None, False),
    }
    try:
        b.out(f"   load average before: {os.getloadavg()[0]:.2f}")
        for name, (url, before, goal) in pages.items():
            times = timed(url, REQUESTS, before)
            median, worst = b.med(times), p99(times)
            line = f"1. {name}: median {b.ms(median)}, p99 {b.ms(worst)}"
            if goal:
                b.verdict(f"{line} (target median < 100 ms)", median < GOAL)
            else:
                b.out(f"{line} (shown)")
        b.out(f"   {REQUESTS} requests each after a warm-up; load average after: "
              f"{os.getloadavg()[0]:.2f}")  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()


def figure2(store: Store, tmp: Path, n: int) -> None:
    index = store.runtime / "index.sqlite3"
    with_fts, without = tmp / "with.sqlite3", tmp / "without.sqlite3"
    source = sqlite3.connect(index)
    for copy in (with_fts, without):
        target = sqlite3.connect(copy)
        source.backup(target)
        target.close()
    source.close()
    db = sqlite3.connect(without)
    db.execute("DROP VIEW beads_text")
    db.execute("DROP TABLE beads_fts")
    db.commit()
    for path in (with_fts, without):
        db = sqlite3.connect(path)
        db.execute("VACUUM")
        db.close()
    big, small = with_fts.stat().st_size, without.stat().st_size
    growth = big / small - 1
    b.out(f"2. the index at {n:,} beads: {small / 2**20:.1f} MiB without the full-text table, "
          f"{big / 2**20:.1f} MiB with it: +{(big - small) / 2**20:.1f} MiB (+{growth:.0%}), "
          f"{(big - small) / n:.0f} bytes a bead")  # fmt: skip
    db = sqlite3.connect(with_fts)
    db.execute("DELETE FROM beads_fts")
    t0 = perf()  # what a rebuild adds: every row's words, as `Index.apply` puts them in
    db.execute("INSERT INTO beads_fts(rowid, title, body, labels, agents) "
               "SELECT * FROM beads_text")  # fmt: skip
    db.commit()
    db.close()
    b.out(f"   its share of an index rebuild (gc doctor --rebuild-index): {perf() - t0:.1f} s "
          f"to index the words of {n:,} beads")  # fmt: skip


def figure3(store: Store) -> None:
    """What the full-text table adds to a send: its two statements for a send's two copies
    (out with the old words, in with the new), in the index's transaction, against whole
    API sends in the same run."""
    from beads.index.index import _FTS_ADD, _FTS_DROP

    mail = BeadMail(store)
    sends = []
    for n in range(SENDS + 3):
        t0 = perf()
        mail.send("bench", m.SINK, f"FTS cost {n}", "hello there", cc=["cc-sink"])
        if n >= 3:
            sends.append(perf() - t0)
    ids = json.dumps([b.id for b in store.list(sender="bench", descending=True, limit=2)])
    db = store.index.db
    statements = []
    for _ in range(SENDS):
        db.execute("BEGIN IMMEDIATE")
        t0 = perf()
        db.execute(_FTS_DROP, (ids,))
        db.execute(_FTS_ADD, (ids,))
        statements.append(perf() - t0)
        db.execute("ROLLBACK")
    mail.close()
    share = b.med(statements) / b.med(sends)
    b.out(f"3. a send's full-text statements: median {b.ms(b.med(statements))} of a "
          f"{b.ms(b.med(sends))} API send with one cc ({share:.1%}; {SENDS} of each, "
          f"load average {os.getloadavg()[0]:.2f})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{m.LARGE_QUICK:,} messages")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    n = m.LARGE_QUICK if args.quick else m.LARGE
    b.out("gc-beads web benchmark (bench/bench_web.py)")
    tmp = Path(tempfile.mkdtemp(prefix="gc-bench-web-", dir="/tmp"))
    started = perf()
    store = None
    try:
        store = m.build_mail_store(tmp / "store", n, f"web@{b.size_label(n)}")
        thread = add_everyday_work(store)
        b.out(f"store: {store.index.count():,} beads, {m.AGENTS} agents; a conversation of "
              f"three agents and {EVERYDAY} everyday commits on top")  # fmt: skip
        with b.figure("Figure 1: pages over HTTP"):
            figure1(store, thread)
        with b.figure("Figure 2: the full-text table's share of the index"):
            figure2(store, tmp, store.index.count())
        with b.figure("Figure 3: the full-text table on the write path"):
            figure3(store)
    except Exception as exc:
        b.RESULTS.append((f"benchmark: ERROR {type(exc).__name__}: {exc} FAIL", False))
        b.out(traceback.format_exc().rstrip())
    finally:
        if store is not None:
            store.close()
        if args.keep:
            b.out(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        b.out()
        b.out(f"== Summary ({b.size_label(n)} messages, {perf() - started:.0f}s total)")
        for line, _passed in b.RESULTS:
            b.out(line)
        failed = sum(1 for _line, passed in b.RESULTS if not passed)
        b.out(f"{len(b.RESULTS) - failed} PASS, {failed} FAIL")


if __name__ == "__main__":
    main()
    sys.exit(0)
