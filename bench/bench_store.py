#!/usr/bin/env python
"""Benchmark of the bead store against the performance figures of the issue.

Run from the project root:

    python bench/bench_store.py            # large store of 100,000 beads (several minutes)
    python bench/bench_store.py --quick    # large store of 10,000 beads (a fast check)

Every figure prints one line with the measured numbers, the ratio, the target and PASS/FAIL;
a summary of those lines ends the report. The script always exits 0 (it is a report); an
error inside a figure is printed with its traceback and counted as FAIL.

Figures:
  1. create through the API at the large size costs <= 1.3x what it costs at 1,000 beads;
  2. at the large size one API create is >= 10x cheaper than `git add` + `git commit` of one
     file with the git CLI in a clone of the same repository (same run);
  3. a batch of 100 creates (one commit) is >= 2x cheaper per bead than 100 single creates,
     and its git work (build_commit, store_objects, swap_head) >= 5x cheaper per bead;
  4. listing one assignee's 50 open beads through the index takes < 5 ms and is >= 100x
     faster than reading and parsing the bead files (a sampled extrapolation);
  5. CLI start-up: `gc --help` within 1.3x of `python -c "import click"`, and
     `gc bead create` within 1.3x of importing the libraries it needs.

Everything happens in a temporary directory under /tmp that is removed at the end.
Only the standard library and the project's dependencies are used.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:
    from beads.records.codec import dump_bead, load_bead
    from beads.records.ids import bead_path, new_id
    from beads.records.record import Bead
    from beads.records.times import now_stamp
    from beads.store import Store
except Exception as exc:  # pragma: no cover - a broken install
    print(
        f"bench_store: cannot import the beads package ({type(exc).__name__}: {exc}); "
        "install the project with `pip install -e .`",
        file=sys.stderr,
    )
    sys.exit(0)

perf = time.perf_counter

SMALL = 1_000
LARGE = 100_000
LARGE_QUICK = 10_000
BUILD_BATCH = 5_000
AGENTS = 2_000
TARGET = "target"
TARGET_OPEN = 50
TARGET_CLOSED = 20  # closed beads of the target too, so the status filter has work to do
SINGLE_CREATES = 200
WARMUP_CREATES = 3
GIT_ITERATIONS = 20
BATCH_BEADS = 100
LIST_CALLS = 200
PARSE_SAMPLE = 2_000
CLI_ROUNDS = 15
GIT_WORK = ("build_commit", "store_objects", "swap_head")


# -- reporting --------------------------------------------------------------------------------

RESULTS: list[tuple[str, bool]] = []


def log(message: str) -> None:
    """Progress, on stderr (stdout carries the report)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def out(line: str = "") -> None:
    print(line, flush=True)


def verdict(line: str, passed: bool, details: str = "") -> None:
    full = f"{line} {'PASS' if passed else 'FAIL'}"
    RESULTS.append((full, passed))
    out(full)
    if details:
        for detail in details.splitlines():
            out(f"      {detail}")


def size_label(n: int) -> str:
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def med(values: list[float]) -> float:
    return statistics.median(values)


def mean(values: list[float]) -> float:
    return statistics.fmean(values)


@contextmanager
def figure(name: str) -> Iterator[None]:
    """Run one figure; an exception becomes a clear FAIL line instead of ending the report."""
    out()
    out(f"== {name}")
    start = perf()
    try:
        yield
    except Exception as exc:
        RESULTS.append((f"{name}: ERROR {type(exc).__name__}: {exc} FAIL", False))
        out(f"ERROR in {name}: {type(exc).__name__}: {exc}")
        out(traceback.format_exc().rstrip())
    finally:
        log(f"{name} done in {perf() - start:.1f}s")


# -- building stores --------------------------------------------------------------------------


class Workload:
    """Deterministic bead contents (ids themselves are random, from the store)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.agents = [f"agent{n:04d}" for n in range(1, AGENTS + 1)]
        self.counter = 0

    def agent(self) -> str:
        return self.rng.choice(self.agents)

    def fields(self) -> dict[str, Any]:
        """Arguments for `create(type, title, body, **fields)` of one ordinary task."""
        self.counter += 1
        n = self.counter
        return {
            "title": (
                f"Bench task {n}: check the {self.rng.choice(WORDS)} "
                f"of the {self.rng.choice(WORDS)}"
            ),
            "body": (
                f"Task {n} made by the benchmark.\n"
                f"Look at the {self.rng.choice(WORDS)} and report back.\n"
            ),
            "assignee": self.agent(),
            "labels": ["bench", f"area{n % 20}"],
            "priority": n % 5,
        }


WORDS = [
    "parser",
    "index",
    "cache",
    "queue",
    "ledger",
    "mailbox",
    "gate",
    "worker",
    "pack",
    "report",
    "schema",
    "router",
    "clock",
    "budget",
    "config",
    "shard",
]


def create_one(target: Any, work: Workload, **overrides: Any) -> Bead:
    """One task through `Store.create` or `Batch.create` (same signature)."""
    f = work.fields()
    f.update(overrides)
    title, body = f.pop("title"), f.pop("body")
    return target.create("task", title, body, **f)


def build_store(path: Path, total: int, work: Workload, name: str) -> Store:
    """A store of `total` beads, built with the batch API, `BUILD_BATCH` beads per commit.

    The target agent gets exactly TARGET_OPEN open beads (and TARGET_CLOSED closed ones);
    every other bead goes to one of AGENTS agent names.
    """
    store, created = Store.init(path, prefix="gc", agent="bench")
    assert created, f"{path} already holds a store"
    special = work.rng.sample(range(total), TARGET_OPEN + TARGET_CLOSED)
    open_at, closed_at = set(special[:TARGET_OPEN]), set(special[TARGET_OPEN:])
    start = perf()
    done = 0
    while done < total:
        count = min(BUILD_BATCH, total - done)
        t0 = perf()
        with store.batch(f"bench: build beads {done + 1}..{done + count}") as batch:
            for i in range(done, done + count):
                if i in closed_at:
                    stamp = now_stamp()
                    batch.insert(Bead(
                        id=batch.new_id(), type="task", title=f"Closed target task {i}",
                        body="Done already.\n", sender="bench", assignee=TARGET,
                        labels=["bench"], status="closed", created_at=stamp, updated_at=stamp,
                        closed_at=stamp, close_reason="done",
                    ))  # fmt: skip
                elif i in open_at:
                    create_one(batch, work, assignee=TARGET)
                else:
                    create_one(batch, work)
        done += count
        elapsed = perf() - start
        rate = done / elapsed
        log(f"{name}: {done:,}/{total:,} beads ({count} in {perf() - t0:.1f}s, "
            f"{1000 / rate:.2f} ms/bead, ~{(total - done) / rate:.0f}s left)")  # fmt: skip
    log(f"{name}: built {total:,} beads in {perf() - start:.1f}s")
    return store


# -- git work timing --------------------------------------------------------------------------


class GitWorkTimer:
    """Accumulates the time spent in the git part of commits, by wrapping the GitRepo instance.

    Instance attributes shadow the class's methods; `remove()` deletes them again.
    `pack_loose_objects` is timed apart (it is not counted as commit work).
    """

    def __init__(self, store: Store) -> None:
        self.git = store.git
        self.seconds = 0.0
        self.calls = 0
        self.pack_seconds = 0.0
        self.packs = 0
        for name in GIT_WORK:
            setattr(self.git, name, self._wrap(getattr(self.git, name), pack=False))
        self.git.pack_loose_objects = self._wrap(self.git.pack_loose_objects, pack=True)

    def _wrap(self, method: Callable[..., Any], *, pack: bool) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = perf()
            try:
                return method(*args, **kwargs)
            finally:
                if pack:
                    self.pack_seconds += perf() - t0
                    self.packs += 1
                else:
                    self.seconds += perf() - t0
                    self.calls += 1

        return timed

    def reset(self) -> None:
        self.seconds = self.pack_seconds = 0.0
        self.calls = self.packs = 0

    def remove(self) -> None:
        for name in (*GIT_WORK, "pack_loose_objects"):
            self.git.__dict__.pop(name, None)


def pack_now(store: Store) -> float:
    """Pack the loose objects now (as the store does by itself past its threshold)."""
    t0 = perf()
    store.git.pack_loose_objects()
    store.index.apply(head=store.git.head(), loose_objects=0)
    return perf() - t0


# -- the figures ------------------------------------------------------------------------------


def figure1(small: Store, large: Store, work: Workload, n_large: int) -> dict[str, float]:
    """Single creates at both sizes, interleaved so both see the same machine conditions."""
    for store in (small, large):
        for _ in range(WARMUP_CREATES):
            create_one(store, work)
    timers = {"small": GitWorkTimer(small), "large": GitWorkTimer(large)}
    times: dict[str, list[float]] = {"small": [], "large": []}
    try:
        for _ in range(SINGLE_CREATES):
            for key, store in (("small", small), ("large", large)):
                t0 = perf()
                create_one(store, work)
                times[key].append(perf() - t0)
    finally:
        for timer in timers.values():
            timer.remove()
    s, lg = times["small"], times["large"]
    ratio = med(lg) / med(s)
    label = f"create@{size_label(n_large)} / create@{size_label(SMALL)}"
    details = (
        f"median {ms(med(lg))} @{size_label(n_large)} vs {ms(med(s))} @{size_label(SMALL)}; "
        f"mean {ms(mean(lg))} vs {ms(mean(s))}; "
        f"N={SINGLE_CREATES} single store.create() calls each (after {WARMUP_CREATES} warm-up), "
        "interleaved\n"
        f"p90 {ms(statistics.quantiles(lg, n=10)[-1])} vs {ms(statistics.quantiles(s, n=10)[-1])}; "
        f"max {ms(max(lg))} vs {ms(max(s))}; automatic packs during the run: "
        f"{timers['large'].packs} @{size_label(n_large)} ({ms(timers['large'].pack_seconds)}), "
        f"{timers['small'].packs} @{size_label(SMALL)} ({ms(timers['small'].pack_seconds)})\n"
        f"git work (build_commit+store_objects+swap_head) per create: "
        f"{ms(timers['large'].seconds / SINGLE_CREATES)} @{size_label(n_large)} vs "
        f"{ms(timers['small'].seconds / SINGLE_CREATES)} @{size_label(SMALL)}"
    )  # fmt: skip
    verdict(f"1. {label} = {ratio:.2f}x (target <= 1.3x)", ratio <= 1.3, details)
    return {"large_median": med(lg), "small_median": med(s)}


def git_env() -> dict[str, str]:
    """The git CLI without the machine's system/global config (hooks, signing, ...)."""
    env = dict(os.environ)
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})  # fmt: skip
    return env


def run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: "
                           f"{(result.stderr or result.stdout).strip()[:500]}")  # fmt: skip


def figure2(large: Store, work: Workload, tmp: Path, n_large: int, api_median: float) -> None:
    git = shutil.which("git")
    if git is None:
        raise RuntimeError("the git CLI is not installed")
    env = git_env()
    clone = tmp / "git-cli-clone"
    log(f"figure 2: git clone of the {size_label(n_large)} store into a work tree ...")
    t0 = perf()
    run([git, "clone", "-q", str(large.root / ".git"), str(clone)], env=env)
    clone_seconds = perf() - t0
    run([git, "config", "user.name", "bench"], cwd=clone, env=env)
    run([git, "config", "user.email", "bench@example.invalid"], cwd=clone, env=env)
    files = int(subprocess.run([git, "ls-files", "-z"], cwd=clone, env=env,
                               stdout=subprocess.PIPE, check=True).stdout.count(b"\0"))  # fmt: skip
    run([git, "status", "-s"], cwd=clone, env=env)  # warm the index's stat data and the cache

    def one(n: int) -> float:
        stamp = now_stamp()
        f = work.fields()
        bead = Bead(id=new_id("gc"), type="task", title=f["title"], body=f["body"],
                    sender="bench", assignee=f["assignee"], labels=f["labels"],
                    created_at=stamp, updated_at=stamp)  # fmt: skip
        rel = bead_path(bead.type, bead.id)
        data = dump_bead(bead)
        t0 = perf()
        target = clone / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        run([git, "add", "--", rel], cwd=clone, env=env)
        run([git, "commit", "-q", "-m", f"bench: git cli commit {n}"], cwd=clone, env=env)
        return perf() - t0

    one(0)  # warm-up, not counted
    times = [one(n) for n in range(1, GIT_ITERATIONS + 1)]
    ratio = med(times) / api_median
    details = (
        f"git CLI: median {ms(med(times))}, mean {ms(mean(times))} per (write file + git add + "
        f"git commit), {GIT_ITERATIONS} iterations after 1 warm-up, in a clone with {files:,} "
        f"tracked files (clone took {clone_seconds:.1f}s; system/global git config ignored)\n"
        f"API: median {ms(api_median)} per store.create() @{size_label(n_large)} "
        "(figure 1, same run)"
    )  # fmt: skip
    verdict(f"2. git-cli-commit@{size_label(n_large)} / create@{size_label(n_large)} = "
            f"{ratio:.1f}x (target >= 10x)", ratio >= 10, details)  # fmt: skip
    shutil.rmtree(clone, ignore_errors=True)


def figure3(store: Store, work: Workload, n: int) -> None:
    packed = pack_now(store)
    timer = GitWorkTimer(store)
    try:
        t0 = perf()
        for _ in range(BATCH_BEADS):
            create_one(store, work)
        single_total = perf() - t0
        single_git, single_calls, single_packs = timer.seconds, timer.calls, timer.packs
        single_pack_seconds = timer.pack_seconds
        timer.reset()
        t0 = perf()
        with store.batch() as batch:
            for _ in range(BATCH_BEADS):
                create_one(batch, work)
        batch_total = perf() - t0
        batch_git, batch_calls, batch_packs = timer.seconds, timer.calls, timer.packs
    finally:
        timer.remove()
    at = f"@{size_label(n)}"
    ratio_total = single_total / batch_total
    ratio_git = single_git / batch_git
    per = BATCH_BEADS
    verdict(
        f"3a. single/batch time per bead {at} = {ratio_total:.1f}x (target >= 2x)",
        ratio_total >= 2,
        f"{ms(single_total / per)} per bead as {per} single creates vs {ms(batch_total / per)} "
        f"per bead in one batch of {per} (totals {single_total * 1000:.1f} ms vs "
        f"{batch_total * 1000:.1f} ms)",
    )  # fmt: skip
    verdict(
        f"3b. single/batch git work per bead {at} = {ratio_git:.1f}x (target >= 5x)",
        ratio_git >= 5,
        f"git work (build_commit+store_objects+swap_head): {ms(single_git / per)} per bead as "
        f"singles ({single_calls} calls) vs {ms(batch_git / per)} per bead batched "
        f"({batch_calls} calls)\n"
        f"loose objects packed before the run ({ms(packed)}) so no automatic pack lands inside "
        f"it; automatic packs during it: {single_packs} singles "
        f"({ms(single_pack_seconds)}), {batch_packs} batch",
    )  # fmt: skip


def dump_times(store: Store, sample: int = 500) -> None:
    """One line: a bead's dump by the canonical writer against ruamel's emitter (C where
    installed) configured to write the same bytes, best of alternating rounds."""
    from io import StringIO

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=False)
    yaml.default_flow_style, yaml.allow_unicode, yaml.width = False, True, 4096
    yaml.representer.sort_base_mapping_type_on_output = False
    yaml.representer.add_representer(str, lambda rep, text: rep.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))  # fmt: skip
    data = [bead.to_dict() for bead in store.list(limit=sample)]
    best = {"direct": float("inf"), "ruamel": float("inf")}
    for _ in range(3):
        for name, dump in (("direct", dump_bead), ("ruamel", lambda d: yaml.dump(d, StringIO()))):
            items = [Bead.from_dict(d) for d in data] if name == "direct" else data
            t0 = perf()
            for item in items:
                dump(item)
            best[name] = min(best[name], (perf() - t0) / len(items))
    out(f"bead dump: canonical writer {best['direct'] * 1e6:.1f} us, ruamel "
        f"{yaml.Emitter.__name__} {best['ruamel'] * 1e6:.1f} us "
        f"({best['ruamel'] / best['direct']:.0f}x), over {len(data)} beads")  # fmt: skip


def figure4(large: Store, n_large: int, rng: random.Random) -> None:
    found = large.list(assignee=TARGET, status="open")  # warm-up and check
    if len(found) != TARGET_OPEN or any(b.assignee != TARGET or b.status != "open" for b in found):
        raise AssertionError(f"list returned {len(found)} beads, expected {TARGET_OPEN} open "
                             f"beads of {TARGET}")  # fmt: skip
    times = []
    for _ in range(LIST_CALLS):
        t0 = perf()
        found = large.list(assignee=TARGET, status="open")
        times.append(perf() - t0)
        assert len(found) == TARGET_OPEN
    api = med(times)
    verdict(f"4a. list(assignee={TARGET}, status=open)@{size_label(n_large)} = {ms(api)} "
            "(target < 5 ms)", api < 0.005,
            f"median over {LIST_CALLS} calls, mean {ms(mean(times))}, max {ms(max(times))}; "
            f"returns {len(found)} beads")  # fmt: skip

    tasks = large.root / "tasks"
    t0 = perf()
    paths = []
    for dirpath, _dirnames, filenames in os.walk(tasks):
        paths.extend(os.path.join(dirpath, name) for name in filenames if name.endswith(".yaml"))
    walk = perf() - t0
    sample = rng.sample(paths, min(PARSE_SAMPLE, len(paths)))
    matches = 0
    t0 = perf()
    for path in sample:
        with open(path, "rb") as handle:
            bead = load_bead(handle.read(), what=path)
        if bead.assignee == TARGET and bead.status == "open":
            matches += 1
    parse = perf() - t0
    estimate = walk + parse * len(paths) / len(sample)
    ratio = estimate / api
    verdict(
        f"4b. read+parse files / index list @{size_label(n_large)} = {ratio:,.0f}x "
        "(target >= 100x)",
        ratio >= 100,
        f"SAMPLED EXTRAPOLATION: walked {len(paths):,} files under {tasks.name}/ in "
        f"{walk * 1000:.0f} ms, read+parsed a random sample of {len(sample):,} in "
        f"{parse * 1000:.0f} ms ({ms(parse / len(sample))} per file; {matches} matches in the "
        f"sample), so a full pass is estimated at {estimate:.2f} s vs {ms(api)} through the index",
    )  # fmt: skip


def report(title: str, prefix: str, body: Callable[[Path], None]) -> None:
    """Run `body` in a fresh temporary directory, then print the summary of every verdict."""
    out(title)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    started = perf()
    try:
        body(tmp)
    except Exception as exc:
        RESULTS.append((f"benchmark: ERROR {type(exc).__name__}: {exc} FAIL", False))
        out(traceback.format_exc().rstrip())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        out()
        out(f"== Summary ({perf() - started:.0f}s total)")
        for line, _passed in RESULTS:
            out(line)
        failed = sum(1 for _line, passed in RESULTS if not passed)
        out(f"{len(RESULTS) - failed} PASS, {failed} FAIL")


def compile_project() -> None:
    """Write the project's .pyc files, as `pip install .` does.

    An editable install under PYTHONDONTWRITEBYTECODE=1 (set on some machines) would
    otherwise recompile every changed module at each start and time the compiler, not gc.
    """
    root = Path(__file__).resolve().parent.parent
    packages = [str(root / name) for name in ("beads", "mail", "inbox", "gates")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True)


def figure5(small_root: Path) -> None:
    compile_project()
    gc = Path(sys.executable).parent / "gc"
    if not gc.exists():
        found = shutil.which("gc")
        if found is None:
            raise RuntimeError("the gc console script is not installed (pip install -e .)")
        gc = Path(found)
    py = sys.executable
    env = dict(os.environ)
    env.pop("GC_BEADS_DIR", None)
    commands = {
        "gc --help": [str(gc), "--help"],
        "import click": [py, "-c", "import click"],
        "gc bead create": [str(gc), "bead", "create", "--type", "task", "--title", "x",
                           "--beads-dir", str(small_root)],
        "import libs": [py, "-c", "import click, dulwich.repo, ruamel.yaml, filelock, sqlite3"],
    }  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in commands}

    def once(name: str) -> float:
        t0 = perf()
        result = subprocess.run(commands[name], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        elapsed = perf() - t0
        if result.returncode != 0:
            raise RuntimeError(f"`{name}` exited {result.returncode}: {result.stderr.strip()}")
        return elapsed

    for name in commands:  # warm-up round (page cache, .pyc files), not counted
        once(name)
    for _ in range(CLI_ROUNDS):
        for name in commands:
            times[name].append(once(name))
    m = {name: med(values) for name, values in times.items()}
    out(f"   gc script: {gc}; python: {py}; {CLI_ROUNDS} alternating rounds after 1 warm-up")
    r1 = m["gc --help"] / m["import click"]
    verdict(f"5a. `gc --help` / `python -c \"import click\"` = {r1:.2f}x (target <= 1.3x)",
            r1 <= 1.3, f"median {ms(m['gc --help'])} vs {ms(m['import click'])}")  # fmt: skip
    r2 = m["gc bead create"] / m["import libs"]
    verdict(
        f"5b. `gc bead create` / `python -c \"import click, dulwich.repo, ruamel.yaml, filelock, "
        f"sqlite3\"` = {r2:.2f}x (target <= 1.3x)",
        r2 <= 1.3,
        f"median {ms(m['gc bead create'])} vs {ms(m['import libs'])} "
        f"(gc bead create in the {size_label(SMALL)} store)",
    )  # fmt: skip


def profile_creates(store: Store, work: Workload, n: int, top: int = 30) -> None:
    """cProfile of single creates on the large store, top entries by cumulative time."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(SINGLE_CREATES):
        create_one(store, work)
    profiler.disable()
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer)
    stats.sort_stats("cumulative").print_stats(top)
    out(f"   cProfile of {SINGLE_CREATES} store.create() @{size_label(n)}, "
        f"top {top} by cumulative time:")  # fmt: skip
    for line in buffer.getvalue().splitlines():
        if line.strip():
            out(f"   {line}")


# -- main -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a large store of {LARGE_QUICK:,} beads instead of {LARGE:,}",
    )
    parser.add_argument("--seed", type=int, default=20260131, help="seed of the bead contents")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also print a cProfile of single creates at the large size",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--startup-only", action="store_true", help="only figure 5 (CLI start-up), in a small store"
    )
    args = parser.parse_args()
    if args.startup_only:

        def startup(tmp: Path) -> None:
            build_store(tmp, SMALL, Workload(args.seed), f"store@{size_label(SMALL)}").close()
            with figure("Figure 5: CLI start-up"):
                figure5(tmp / ".beads")

        report("gc-beads store benchmark, CLI start-up only", "gc-bench-", startup)
        return
    n_large = LARGE_QUICK if args.quick else LARGE

    out("gc-beads store benchmark (bench/bench_store.py)")
    out(f"machine: {platform.platform()}; {os.cpu_count()} CPUs; "
        f"python {platform.python_version()} ({platform.python_implementation()}) "
        f"at {sys.executable}")  # fmt: skip
    try:
        import dulwich
        import ruamel.yaml
        from ruamel.yaml import CSafeLoader  # noqa: F401

        c_yaml = "C emitter/parser available"
    except ImportError:
        c_yaml = "NO C YAML (pure Python)"
    git_version = "git not found"
    if shutil.which("git"):
        git_version = subprocess.run(
            ["git", "--version"], capture_output=True, text=True
        ).stdout.strip()
    out(
        f"libraries: dulwich {'.'.join(map(str, dulwich.__version__))}, "
        f"ruamel.yaml {ruamel.yaml.__version__} ({c_yaml}); {git_version}"
    )
    out(
        f"sizes: small store {SMALL:,} beads; large store {n_large:,} beads"
        f"{' (--quick)' if args.quick else ''}; built {BUILD_BATCH:,} beads per batch commit; "
        f"{AGENTS:,} agents + '{TARGET}' ({TARGET_OPEN} open, {TARGET_CLOSED} closed beads)"
    )
    out(
        f"runs: {SINGLE_CREATES} single creates per size; {GIT_ITERATIONS} git CLI commits; "
        f"batch of {BATCH_BEADS}; {LIST_CALLS} list calls; parse sample {PARSE_SAMPLE:,}; "
        f"{CLI_ROUNDS} CLI rounds"
    )

    tmp = Path(tempfile.mkdtemp(prefix="gc-bench-", dir="/tmp"))
    out(f"work directory: {tmp}")
    work = Workload(args.seed)
    small = large = None
    started = perf()
    try:
        try:
            log(f"building the {size_label(SMALL)} store ...")
            t0 = perf()
            small = build_store(tmp / "small", SMALL, work, f"store@{size_label(SMALL)}")
            small_build = perf() - t0
            log(f"building the {size_label(n_large)} store ...")
            t0 = perf()
            large = build_store(tmp / "large", n_large, work, f"store@{size_label(n_large)}")
            large_build = perf() - t0
            out(f"built: {size_label(SMALL)} store in {small_build:.1f}s, "
                f"{size_label(n_large)} store in {large_build:.1f}s "
                f"({large_build / n_large * 1000:.2f} ms/bead)")  # fmt: skip
        except Exception as exc:
            RESULTS.append((f"building the stores: ERROR {type(exc).__name__}: {exc} FAIL", False))
            out(f"ERROR while building the stores: {type(exc).__name__}: {exc}")
            out(traceback.format_exc().rstrip())
            return

        api = {}
        with figure(f"Figure 1: single create, {size_label(n_large)} vs {size_label(SMALL)}"):
            api = figure1(small, large, work, n_large)
        with figure(f"Figure 2: API create vs git CLI add+commit @{size_label(n_large)}"):
            if "large_median" not in api:
                raise RuntimeError("figure 1 failed, so there is no API create time to compare")
            figure2(large, work, tmp, n_large, api["large_median"])
        with figure("Figure 3: batch of 100 vs 100 single creates"):
            figure3(small, work, SMALL)
            figure3(large, work, n_large)
        with figure(f"Figure 4: list one assignee's open beads @{size_label(n_large)}"):
            figure4(large, n_large, work.rng)
            dump_times(large)
        if args.profile:
            with figure(f"Profile: single creates @{size_label(n_large)}"):
                profile_creates(large, work, n_large)
        small_root = small.root
        small.close()
        small = None
        with figure("Figure 5: CLI start-up"):
            figure5(small_root)
    except KeyboardInterrupt:
        out("interrupted")
    except Exception as exc:
        RESULTS.append((f"benchmark: ERROR {type(exc).__name__}: {exc} FAIL", False))
        out(f"ERROR: {type(exc).__name__}: {exc}")
        out(traceback.format_exc().rstrip())
    finally:
        for store in (small, large):
            if store is not None:
                try:
                    store.close()
                except Exception as exc:
                    out(f"warning: closing a store failed: {exc}")
        if args.keep:
            out(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        out()
        out(f"== Summary ({size_label(n_large)} large store, {perf() - started:.0f}s total)")
        for line, _passed in RESULTS:
            out(line)
        failed = sum(1 for _line, passed in RESULTS if not passed)
        out(f"{len(RESULTS) - failed} PASS, {failed} FAIL")


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # the report must never end in a bare traceback
        print(f"bench_store: unexpected error: {type(exc).__name__}: {exc}", flush=True)
        traceback.print_exc(file=sys.stdout)
    sys.exit(0)
