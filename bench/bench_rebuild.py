#!/usr/bin/env python
"""Benchmark of the index rebuild and of the view's disk cost (issue 16).

Run from the project root:

    python bench/bench_rebuild.py            # a store of 100,000 beads (a few minutes)
    python bench/bench_rebuild.py --quick    # a store of 10,000 beads
    python bench/bench_rebuild.py --baseline # also the rebuild through ruamel and dulwich

Figures:
  1. parsing a bead file: the direct reader against ruamel (per bead, and their ratio);
  2. index rebuild at the large size through the API (opening a store whose index is gone,
     as after a fresh clone) and through `gc doctor --rebuild-index` (a subprocess, start-up
     and the doctor's checks included, the view's among them: the line names the view
     setting): wall time, CPU time (children included for the doctor) and the child's peak
     RSS (ru_maxrss); targets <= 10 s and <= 150 MiB;
  3. disk per bead with `store.view` full, recent and off (view files, .git, .runtime).

Timings on a shared machine are noisy: the load average is printed with each figure, and
CPU time beside wall time. The store is built with `Store.batch` in a temporary directory
that is removed at the end. `measure_rebuild(store_path)` and `measure_view_disk(n)` are
also called by bench/bench_scale.py.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from beads.records import yamlread
from beads.records.codec import _yaml, dump_bead
from beads.records.record import Bead
from beads.records.times import stamp_at
from beads.store import Store

LARGE = 100_000
LARGE_QUICK = 10_000
BUILD_BATCH = 5_000
AGENTS = 500
# The aged workload of the disk figure: a tenth of the beads open, the rest closed, their
# last change spread evenly over half a year (mail archived, tasks done).
OPEN_SHARE = 0.1
AGE_DAYS = 180
TARGET_SECONDS = 10.0
TARGET_RSS_MIB = 150.0


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f} on {os.cpu_count()} cores"


def build_store(path: Path, total: int, seed: int = 16) -> None:
    """A store of `total` beads (aged as OPEN_SHARE and AGE_DAYS say), `BUILD_BATCH` a commit."""
    rng = random.Random(seed)
    now = time.time()
    store, _ = Store.init(path, agent="bench")
    done = 0
    started = time.perf_counter()
    while done < total:
        count = min(BUILD_BATCH, total - done)
        with store.batch(f"bench: beads {done + 1}..{done + count}") as batch:
            for n in range(done, done + count):
                stamp = stamp_at(now - rng.uniform(0, AGE_DAYS * 86400))
                closed = rng.random() >= OPEN_SHARE
                batch.insert(Bead(
                    id=batch.new_id(), type="message" if n % 2 else "task",
                    title=f"Bench bead {n}: check the parser of the queue", sender="bench",
                    body=f"Bead {n} made by the benchmark.\nLook at it and report back.\n",
                    assignee=f"agent{rng.randrange(AGENTS):03d}", labels=["bench", f"area{n % 20}"],
                    priority=n % 5, status="closed" if closed else "open", created_at=stamp,
                    updated_at=stamp, closed_at=stamp if closed else None,
                    close_reason="done" if closed else None, meta={"read": closed},
                ))  # fmt: skip
        done += count
        rate = done / (time.perf_counter() - started)
        log(f"built {done:,}/{total:,} beads ({rate:,.0f}/s)")
    store.close()


# -- 1. parsing -----------------------------------------------------------------------------


def measure_parse(store_path: Path, sample: int = 2000) -> dict[str, float]:
    """Per-bead parse time of the direct reader and of ruamel on the same files."""
    with Store.open(store_path) as store:
        texts = [dump_bead(bead).decode() for bead in store.list(limit=sample)]
    yaml = _yaml()
    rounds: dict[str, list[float]] = {"direct": [], "ruamel": []}
    for _ in range(3):  # alternating rounds, the best of each: the machine is shared
        for name, read in (("direct", yamlread.load), ("ruamel", yaml.load)):
            start = time.perf_counter()
            for text in texts:
                read(text)
            rounds[name].append((time.perf_counter() - start) / len(texts))
    direct, ruamel = min(rounds["direct"]), min(rounds["ruamel"])
    return {"direct_us": direct * 1e6, "ruamel_us": ruamel * 1e6, "ratio": ruamel / direct}


# -- 2. rebuild -----------------------------------------------------------------------------

_API_CHILD = """
import json, sys, time
from pathlib import Path
root = Path(sys.argv[1])
for suffix in ("", "-wal", "-shm"):
    (root / ".runtime" / f"index.sqlite3{suffix}").unlink(missing_ok=True)
wall, cpu = time.perf_counter(), time.process_time()
from beads.store import Store
if sys.argv[2:] == ["slow"]:  # the baseline: ruamel parses, dulwich reads
    import beads.records.yamlread, beads.refresh
    beads.records.yamlread.load = lambda text: None
    def no_git(*args):
        raise beads.refresh.GitUnavailable("baseline")
    beads.refresh.git_file_contents = no_git
store = Store.open(root)  # finds no index: rebuilds it from git
beads = store.index.count()
print(json.dumps({"seconds": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "beads": beads}))
"""


# Runs argv[2:] and writes its wall time, CPU time and peak RSS to the file argv[1]. A small
# process of its own: a child's ru_maxrss starts at its parent's RSS at the fork, so forking
# the measured program straight from this (large) benchmark would report the benchmark's size.
_MEASURE = """
import json, os, subprocess, sys, time
start = time.perf_counter()
process = subprocess.Popen(sys.argv[2:])
_pid, status, usage = os.wait4(process.pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"wall": time.perf_counter() - start, "cpu": usage.ru_utime + usage.ru_stime,
               "rss_kib": usage.ru_maxrss, "exit": os.waitstatus_to_exitcode(status)}, out)
"""


def _run_child(argv: list[str]) -> tuple[str, float, float, float]:
    """Run `argv` to completion; its stdout, wall seconds, CPU seconds (its children's
    included) and peak RSS in MiB."""
    with tempfile.TemporaryDirectory(prefix="gc-bench-measure-") as temp:
        figures = Path(temp) / "figures.json"
        done = subprocess.run([sys.executable, "-c", _MEASURE, str(figures), *argv],
                              capture_output=True, check=False)  # fmt: skip
        measured = json.loads(figures.read_text())
    if measured["exit"] != 0:
        raise RuntimeError(f"{argv[:4]} exited {measured['exit']}: {done.stderr[-800:]!r}")
    return done.stdout.decode(), measured["wall"], measured["cpu"], measured["rss_kib"] / 1024


def measure_rebuild(store_path: str | Path, *, baseline: bool = False) -> dict[str, Any]:
    """Rebuild the index of the store at `store_path` twice, each in a child process: through
    the API (`Store.open` finding no index) and through `gc doctor --rebuild-index`. Returns
    wall and CPU seconds and peak RSS (MiB) of each, the bead count and the load average;
    with `baseline`, also the API rebuild reading through ruamel and dulwich (`slow_*`)."""
    root = Path(store_path)
    root = root / ".beads" if (root / ".beads").is_dir() else root
    with Store.open(root) as store:
        view = store.view.setting.decode()  # the doctor checks the view: its size matters
    slow: dict[str, float] = {}
    if baseline:
        out, wall, cpu, rss = _run_child([sys.executable, "-c", _API_CHILD, str(root), "slow"])
        figures = json.loads(out)
        slow = {"slow_seconds": figures["seconds"], "slow_cpu_seconds": figures["cpu"],
                "slow_peak_rss_mib": rss}  # fmt: skip
    out, wall, cpu, rss = _run_child([sys.executable, "-c", _API_CHILD, str(root)])
    reported = json.loads(out)
    gc = str(Path(sys.executable).with_name("gc"))
    _out, d_wall, d_cpu, d_rss = _run_child([gc, "--beads-dir", str(root), "doctor",
                                             "--rebuild-index"])  # fmt: skip
    return {
        "beads": reported["beads"],
        "api_seconds": reported["seconds"],
        "api_cpu_seconds": reported["cpu"],
        "api_process_seconds": wall,
        "api_peak_rss_mib": rss,
        "doctor_seconds": d_wall,
        "doctor_cpu_seconds": d_cpu,
        "doctor_peak_rss_mib": d_rss,
        "view": view,
        "load": load(),
        **slow,
    }


# -- 3. disk --------------------------------------------------------------------------------


def disk_usage(path: Path) -> tuple[int, int]:
    """Bytes allocated on disk (blocks, not lengths) and files under `path`."""
    total = files = 0
    for dirpath, _dirs, names in os.walk(path):
        total += os.lstat(dirpath).st_blocks * 512
        for name in names:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            files += 1
    return total, files


def view_usage(root: Path) -> tuple[int, int]:
    total = files = 0
    for entry in root.iterdir():
        if entry.name in (".git", ".runtime"):
            continue
        size, count = disk_usage(entry) if entry.is_dir() else (entry.lstat().st_blocks * 512, 1)
        total, files = total + size, files + count
    return total, files


def measure_view_disk(n: int, store_path: str | Path | None = None) -> dict[str, Any]:
    """Disk per bead of a store of `n` aged beads (built unless `store_path` holds one) with
    `store.view` full, recent (the default window) and off; `git clone --bare` time too."""
    from beads.health.checkup import doctor

    temp = None
    if store_path is None:
        temp = Path(tempfile.mkdtemp(prefix="gc-bench-view-"))
        build_store(temp, n)
        store_path = temp
    root = Path(store_path)
    root = root / ".beads" if (root / ".beads").is_dir() else root
    result: dict[str, Any] = {"beads": n}
    try:
        for mode in ("full", "recent", "off"):
            with Store.open(root) as store:
                if store.config["store"].get("view", "full") != mode:
                    store.set_setting("store.view", mode)
                doctor(store)  # brings the view to the setting and prunes it
                days = store.view.days
            view, view_files = view_usage(root)
            git, _ = disk_usage(root / ".git")
            runtime, _ = disk_usage(root / ".runtime")
            result[mode] = {
                "view_files": view_files,
                "view_kib_per_bead": view / 1024 / n,
                "git_kib_per_bead": git / 1024 / n,
                "runtime_kib_per_bead": runtime / 1024 / n,
                "total_kib_per_bead": (view + git + runtime) / 1024 / n,
                "view_days": days,
            }
        with tempfile.TemporaryDirectory(prefix="gc-bench-clone-") as target:
            start = time.perf_counter()
            # --no-local: git's own transport, as from another machine (a local clone only
            # hard-links the object files)
            subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(root / ".git"),
                            target + "/c"], check=True)  # fmt: skip
            result["clone_bare_seconds"] = time.perf_counter() - start
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    return result


# -- the report -----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{LARGE_QUICK:,} beads")
    parser.add_argument("--keep", metavar="DIR", help="build (or reuse) the store in DIR")
    parser.add_argument("--baseline", action="store_true",
                        help="also rebuild reading through ruamel and dulwich (slow)")  # fmt: skip
    args = parser.parse_args()
    n = LARGE_QUICK if args.quick else LARGE
    temp = None
    if args.keep:
        path = Path(args.keep)
        if not (path / ".beads").is_dir():
            build_store(path, n)
    else:
        temp = path = Path(tempfile.mkdtemp(prefix="gc-bench-rebuild-"))
        build_store(path, n)
    try:
        parse = measure_parse(path)
        print(f"1. parse a bead: direct reader {parse['direct_us']:.1f} us, ruamel "
              f"{parse['ruamel_us']:.1f} us: {parse['ratio']:.1f}x faster ({load()})")  # fmt: skip
        r = measure_rebuild(path, baseline=args.baseline)
        if args.baseline:
            print(f"2. baseline: the same rebuild reading through ruamel and dulwich: "
                  f"{r['slow_seconds']:.2f} s (CPU {r['slow_cpu_seconds']:.2f} s, peak RSS "
                  f"{r['slow_peak_rss_mib']:.0f} MiB); with the direct reader and git "
                  f"{r['slow_seconds'] / r['api_seconds']:.1f}x faster")  # fmt: skip
        ok = (
            r["api_seconds"] <= TARGET_SECONDS
            and r["doctor_seconds"] <= TARGET_SECONDS
            and max(r["api_peak_rss_mib"], r["doctor_peak_rss_mib"]) <= TARGET_RSS_MIB
        )
        print(f"2. rebuild of {r['beads']:,} beads: API {r['api_seconds']:.2f} s "
              f"(CPU {r['api_cpu_seconds']:.2f} s, process {r['api_process_seconds']:.2f} s, "
              f"peak RSS {r['api_peak_rss_mib']:.0f} MiB); gc doctor --rebuild-index "
              f"{r['doctor_seconds']:.2f} s (CPU {r['doctor_cpu_seconds']:.2f} s, peak RSS "
              f"{r['doctor_peak_rss_mib']:.0f} MiB, view {r['view']}); target <= "
              f"{TARGET_SECONDS:.0f} s and <= {TARGET_RSS_MIB:.0f} MiB: "
              f"{'PASS' if ok else 'FAIL'} ({r['load']})")  # fmt: skip
        disk = measure_view_disk(n, path)
        for mode in ("full", "recent", "off"):
            d = disk[mode]
            window = f", {d['view_days']} days" if mode == "recent" else ""
            print(f"3. disk per bead, store.view={mode}{window}: view "
                  f"{d['view_kib_per_bead']:.2f} KiB ({d['view_files']:,} files), .git "
                  f"{d['git_kib_per_bead']:.2f} KiB, .runtime {d['runtime_kib_per_bead']:.2f} "
                  f"KiB: total {d['total_kib_per_bead']:.2f} KiB")  # fmt: skip
        print(f"   git clone --bare: {disk['clone_bare_seconds']:.2f} s ({load()})")
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    main()
