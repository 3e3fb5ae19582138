#!/usr/bin/env python
"""Benchmark of the store at scale against the figures of issue 16 (flat cost to 300k beads).

Run from the project root:

    python bench/bench_scale.py            # stores of 100,000 then 300,000 messages (~6 min)
    python bench/bench_scale.py --quick    # 10,000 then 30,000 messages (a smoke run)

One store grows by batches (`Store.batch`, 500 agents, as bench_mail.py builds its stores):
measured at the checkpoint (100k), then at the large size (300k), with a 1,000-message store
beside it. Nothing is repacked by hand: the packs are whatever the writers and their
background repacks left. Figures:

  1. send at the large size after 10k sends, as the median of alternating rounds in one
     process against the 1k store: <= 1.15x (interquartile ranges printed);
  2. p99.9 of those 10k sends <= 50 ms (p50, p99, p99.9 and max printed);
  3. `gc doctor --gc` at the large size, as a child process: <= 300 MiB peak RSS (the child's
     ru_maxrss, git's processes included) and its pack <= 1.2x `git repack -adf`'s; also
     without git (`--no-git`), for the record;
  4. disk per bead at the checkpoint (view, git, .runtime) and `git clone --bare` time.

More figures plug in as sections: a function `(Scale) -> None` added to `CHECKPOINT_SECTIONS`
(run on the store at 100k) or `LARGE_SECTIONS` (at 300k); the rebuild and view-setting
figures come from `bench_rebuild.py`'s functions.
Always exits 0 (it is a report); each figure prints PASS/FAIL and the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import bench_rebuild
import bench_store as b

from beads.git.maintenance import packs_of
from beads.git.repacker import wait_idle
from beads.store import Store
from mail.beadmail import BeadMail

perf = time.perf_counter

SMALL = 1_000
CHECKPOINT, LARGE = 100_000, 300_000
CHECKPOINT_QUICK, LARGE_QUICK = 10_000, 30_000
BUILD_BATCH = 5_000
AGENTS = 500
SENDS = 10_000
SENDS_QUICK = 2_000
ROUNDS = 21
ROUND_SENDS = 30


@dataclass
class Scale:
    """What a section gets: the growing store, the 1k store, sizes, and the work directory."""

    tmp: Path
    quick: bool
    store: Store
    small: Store
    beads: int = 0
    notes: dict[str, float] = field(default_factory=dict)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} (1/5 min) on {os.cpu_count()} CPUs"


def grow(store: Store, start: int, end: int, name: str) -> None:
    """Messages start..end among AGENTS agents (most read, a quarter archived)."""
    agents = [f"agent{i}" for i in range(AGENTS)]
    t0 = perf()
    done = start
    while done < end:
        count = min(BUILD_BATCH, end - done)
        with store.batch(f"bench: build messages {done + 1}..{done + count}") as batch:
            for i in range(done, done + count):
                bead = batch.create(
                    "message",
                    f"Message {i}: status of task {i % 311}",
                    f"Body of message {i}.\nSecond line.\n",
                    assignee=agents[i % AGENTS],
                    sender=agents[(i * 7 + 3) % AGENTS],
                    priority=i % 5,
                    meta={"read": i % 3 != 0},
                )
                if i % 4 == 0:
                    batch.close_bead(bead.id, "archived")
        done += count
        rate = (perf() - t0) / (done - start) * 1000
        b.log(f"{name}: {done:,}/{end:,} messages ({rate:.2f} ms each); {pack_summary(store)}")


def pack_summary(store: Store) -> str:
    packs = packs_of(store.git.git_dir)
    counts = sorted((pack.count for pack in packs), reverse=True)
    return f"{len(counts)} packs {counts[:6]}{'...' if len(counts) > 6 else ''}"


def disk_bytes(path: Path) -> int:
    """Bytes the files under `path` take on disk (their blocks, as `du` counts)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def iqr(values: list[float]) -> str:
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"IQR {b.ms(q1)}..{b.ms(q3)}"


# -- sections ---------------------------------------------------------------------------------


def section_disk(scale: Scale) -> None:
    """Figure 4: disk per bead (view files, git, .runtime) and a `git clone --bare` time."""
    wait_idle(scale.store.root / ".git", 600)
    root = scale.store.root
    parts = {"git": disk_bytes(root / ".git"), "runtime": disk_bytes(root / ".runtime")}
    parts["view"] = disk_bytes(root) - parts["git"] - parts["runtime"]
    total = sum(parts.values())
    per = {name: size / scale.beads for name, size in parts.items()}
    b.out(f"   {load()}; {pack_summary(scale.store)}")
    b.out(f"4a. disk per bead @{b.size_label(scale.beads)} = {total / scale.beads / 1024:.2f} KiB "
          f"(view {per['view'] / 1024:.2f}, git {per['git'] / 1024:.2f}, "
          f".runtime {per['runtime'] / 1024:.2f} KiB; {total / 2**20:.0f} MiB in all)")  # fmt: skip
    target = scale.tmp / "clone.git"
    t0 = perf()
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(root / ".git"), str(target)],
                   check=True, capture_output=True)  # fmt: skip
    took = perf() - t0
    b.out(f"4b. git clone --bare --no-local @{b.size_label(scale.beads)} = {took:.1f}s "
          f"({disk_bytes(target) / 2**20:.0f} MiB)")  # fmt: skip
    shutil.rmtree(target, ignore_errors=True)


def section_rebuild(scale: Scale) -> None:
    """The index rebuild at the checkpoint size, through the API and `gc doctor
    --rebuild-index` (<= 10 s, <= 150 MiB at 100k): `bench_rebuild.measure_rebuild`."""
    root = scale.store.root
    scale.store.close()  # the children delete and rebuild its index: reopened after them
    try:
        r = bench_rebuild.measure_rebuild(root)
    finally:
        scale.store = Store.open(root, agent="bench")
    seconds = max(r["api_seconds"], r["doctor_seconds"])
    rss = max(r["api_peak_rss_mib"], r["doctor_peak_rss_mib"])
    b.verdict(
        f"index rebuild of {r['beads']:,} beads: API {r['api_seconds']:.2f} s (CPU "
        f"{r['api_cpu_seconds']:.2f} s, {r['api_peak_rss_mib']:.0f} MiB), gc doctor "
        f"--rebuild-index {r['doctor_seconds']:.2f} s ({r['doctor_peak_rss_mib']:.0f} MiB, "
        f"view {r['view']}) (target <= {bench_rebuild.TARGET_SECONDS:.0f} s, "
        f"<= {bench_rebuild.TARGET_RSS_MIB:.0f} MiB)",
        seconds <= bench_rebuild.TARGET_SECONDS and rss <= bench_rebuild.TARGET_RSS_MIB,
        r["load"],
    )


def section_view_settings(scale: Scale) -> None:
    """Disk per bead with `store.view` full, recent and off, on a store of aged beads of the
    checkpoint size (`bench_rebuild.measure_view_disk` builds it)."""
    disk = bench_rebuild.measure_view_disk(scale.beads)
    for mode in ("full", "recent", "off"):
        d = disk[mode]
        window = f", {d['view_days']} days" if mode == "recent" else ""
        b.out(
            f"   store.view={mode}{window}: {d['total_kib_per_bead']:.2f} KiB a bead (view "
            f"{d['view_kib_per_bead']:.2f}, .git {d['git_kib_per_bead']:.2f}, .runtime "
            f"{d['runtime_kib_per_bead']:.2f})"
        )


CHECKPOINT_SECTIONS: list[tuple[str, Callable[[Scale], None]]] = [
    ("Figure 4: disk per bead and git clone --bare", section_disk),
    ("Index rebuild", section_rebuild),
    ("Disk per bead by view setting", section_view_settings),
]


def send_once(mail: BeadMail, i: int, cpu: list[float] | None = None) -> float:
    """One API send; its wall time (its CPU time appended to `cpu`, when given)."""
    t0, c0 = perf(), time.process_time()
    mail.send(f"agent{i % AGENTS}", f"agent{(i * 13 + 1) % AGENTS}", f"bench {i}", "hello\n")
    if cpu is not None:
        cpu.append(time.process_time() - c0)
    return perf() - t0


def section_sends(scale: Scale) -> None:
    """Figures 2 then 1: 10k sends in a row at the large size, then alternating rounds."""
    large, small = BeadMail(scale.store), BeadMail(scale.small)
    n = SENDS_QUICK if scale.quick else SENDS
    big = b.size_label(scale.beads)
    b.out(f"   before: {load()}; {pack_summary(scale.store)}")
    times = []
    for i in range(n):
        times.append(send_once(large, i))
        if (i + 1) % 1000 == 0:
            b.log(f"{i + 1:,}/{n:,} sends ({b.ms(statistics.median(times[-1000:]))} median of the "
                  f"last 1,000); {pack_summary(scale.store)}")  # fmt: skip
    p999 = quantile(times, 0.999)
    b.verdict(f"2. p99.9 of {n:,} sends @{big} = {b.ms(p999)} (target <= 50 ms)", p999 <= 0.050,
              f"p50 {b.ms(quantile(times, 0.5))}, p99 {b.ms(quantile(times, 0.99))}, "
              f"p99.9 {b.ms(p999)}, max {b.ms(max(times))}; {load()}; "
              f"after: {pack_summary(scale.store)}")  # fmt: skip
    rounds: dict[str, list[float]] = {"1k": [], big: []}
    cpu: dict[str, list[float]] = {"1k": [], big: []}
    for i in range(5):  # warm-up of the small store (page cache, its caches)
        send_once(small, i)
    for r in range(ROUNDS):
        for label, mail in (("1k", small), (big, large)):
            sent = [send_once(mail, r * ROUND_SENDS + k, cpu[label]) for k in range(ROUND_SENDS)]
            rounds[label].append(statistics.median(sent))
    m_small, m_big = statistics.median(rounds["1k"]), statistics.median(rounds[big])
    ratio = m_big / m_small
    cpu_small, cpu_big = statistics.median(cpu["1k"]), statistics.median(cpu[big])
    b.verdict(f"1. send @{big} after {n:,} sends / send @1k = {ratio:.2f}x (target <= 1.15x)",
              ratio <= 1.15,
              f"{ROUNDS} alternating rounds of {ROUND_SENDS} sends, median of round medians: "
              f"{b.ms(m_big)} ({iqr(rounds[big])}) vs {b.ms(m_small)} ({iqr(rounds['1k'])}); "
              f"CPU time of a send (this process): {b.ms(cpu_big)} vs {b.ms(cpu_small)} = "
              f"{cpu_big / cpu_small:.2f}x; {load()}")  # fmt: skip


# Run through a small Python that starts the child and reports its peak: Linux counts in a
# child's ru_maxrss the memory of the process it was forked from (the bench, large by then).
WAIT4 = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_pid, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def run_child_rss(argv: list[str]) -> tuple[int, float, float, str]:
    """Run a child; its exit status, seconds, peak RSS in MiB (it and the processes it
    waited for, as wait4 reports) and stderr's tail."""
    t0 = perf()
    done = subprocess.run([sys.executable, "-c", WAIT4, *argv], capture_output=True, text=True)
    took = perf() - t0
    code, maxrss = done.stdout.split()
    return int(code), took, int(maxrss) / 1024, done.stderr.strip()[-300:]


def pack_bytes(git_dir: Path) -> int:
    return sum(p.stat().st_size for p in (git_dir / "objects" / "pack").glob("*.pack"))


def section_doctor_gc(scale: Scale) -> None:
    """Figure 3: `gc doctor --gc` as a child, its peak RSS and pack size vs git repack -adf."""
    root = scale.store.root
    wait_idle(root / ".git", 600)
    big = b.size_label(scale.beads)
    reference = scale.tmp / "reference.git"
    shutil.copytree(root / ".git", reference)
    t0 = perf()
    subprocess.run(["git", "-C", str(reference), "repack", "-adf", "-q"], check=True)
    git_took = perf() - t0
    git_size = pack_bytes(reference)
    shutil.rmtree(reference, ignore_errors=True)
    before = pack_bytes(root / ".git") / 2**20
    b.out(f"   git repack -adf on a copy: {git_size / 2**20:.1f} MiB in {git_took:.1f}s; "
          f"before: {pack_summary(scale.store)}, {before:.1f} MiB")  # fmt: skip
    gc = str(Path(sys.executable).parent / "gc")
    # Without git first: it merges what the writers left; git's -f then recomputes every delta.
    variants = [("no git", ["--no-git"]), ("git", [])]
    for label, extra in variants:
        scale.store.close()  # the child works alone on the store
        argv = [gc, "doctor", "--gc", *extra, "--beads-dir", str(root)]
        code, took, rss, err = run_child_rss(argv)
        size = pack_bytes(root / ".git")
        ratio = size / git_size
        passed = code == 0 and rss <= 300 and (ratio <= 1.2 or label != "git")
        b.verdict(f"3. gc doctor --gc ({label}) @{big}: peak RSS {rss:.0f} MiB (target <= 300), "
                  f"pack {size / 2**20:.1f} MiB = {ratio:.2f}x git repack -adf"
                  f"{' (target <= 1.2x)' if label == 'git' else ''}", passed,
                  f"exit {code} in {took:.1f}s; {load()}{'; ' + err if code else ''}")  # fmt: skip


LARGE_SECTIONS: list[tuple[str, Callable[[Scale], None]]] = [
    ("Figures 1-2: sends after 10k sends, no manual step", section_sends),
    ("Figure 3: gc doctor --gc", section_doctor_gc),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{CHECKPOINT_QUICK:,} then {LARGE_QUICK:,} messages")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--dir", default="/tmp",
                        help="where the stores are made (the file system measured)")  # fmt: skip
    parser.add_argument("--sends-only", action="store_true",
                        help="figures 1-2 only (no checkpoint, no doctor --gc)")  # fmt: skip
    args = parser.parse_args()
    checkpoint, large = (CHECKPOINT_QUICK, LARGE_QUICK) if args.quick else (CHECKPOINT, LARGE)
    b.out("gc-beads scale benchmark (bench/bench_scale.py)")
    b.out(f"sizes: 1k store beside one growing to {checkpoint:,} then {large:,} messages, "
          f"{BUILD_BATCH:,} per batch commit, {AGENTS} agents{' (--quick)' if args.quick else ''}; "
          f"{load()}")  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="gc-bench-scale-", dir=args.dir))
    started = perf()
    scale = None
    try:
        small, _ = Store.init(tmp / "small", prefix="gc", agent="bench")
        grow(small, 0, SMALL, "store@1k")
        store, _ = Store.init(tmp / "large", prefix="gc", agent="bench")
        scale = Scale(tmp, args.quick, store, small)
        plan = [(checkpoint, CHECKPOINT_SECTIONS), (large, LARGE_SECTIONS)]
        if args.sends_only:
            plan = [(large, LARGE_SECTIONS[:1])]
        for target, sections in plan:
            t0 = perf()
            grow(scale.store, scale.beads, target, f"store@{b.size_label(target)}")
            b.out(f"built {b.size_label(target)} messages (grown in {perf() - t0:.0f}s); {load()}")
            scale.beads = target
            for name, section in sections:
                with b.figure(name):
                    section(scale)
    except KeyboardInterrupt:
        b.out("interrupted")
    except Exception as exc:
        b.RESULTS.append((f"benchmark: ERROR {type(exc).__name__}: {exc} FAIL", False))
        b.out(f"ERROR: {type(exc).__name__}: {exc}")
        b.out(traceback.format_exc().rstrip())
    finally:
        if scale is not None:
            for opened in (scale.store, scale.small):
                try:
                    opened.close()
                except Exception as exc:
                    b.out(f"warning: closing a store failed: {exc}")
            wait_idle(tmp / "large" / ".beads" / ".git", 600)
        if args.keep:
            b.out(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        b.out()
        b.out(f"== Summary ({b.size_label(large)}, {perf() - started:.0f}s total; {load()})")
        for line, _passed in b.RESULTS:
            b.out(line)
        failed = sum(1 for _line, passed in b.RESULTS if not passed)
        b.out(f"{len(b.RESULTS) - failed} PASS, {failed} FAIL")


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # the report must never end in a bare traceback
        print(f"bench_scale: unexpected error: {type(exc).__name__}: {exc}", flush=True)
        traceback.print_exc(file=sys.stdout)
    sys.exit(0)
