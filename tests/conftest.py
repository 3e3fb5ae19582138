"""Shared fixtures: stores on real disks, a runner for the `gc` command, hypothesis profiles."""

from __future__ import annotations

import ast
import gc as collector
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Hypothesis runs the "hypothesis" entry points of every installed package at its import: one
# is trio's (installed for Selenium), which costs each test process trio's whole import and
# which no test here uses.
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")
from hypothesis import settings  # noqa: E402 - after the variable above

from beads.example import init_example
from beads.store import Store

# Hypothesis: ~100 examples a property on a developer's run; `HYPOTHESIS_PROFILE=ci` (what
# .ci/run sets) tries many more. A test's own `max_examples` overrides both. Under CI=true the
# examples are drawn from a fixed seed, so CI's verdict on a change is the same on every run;
# a developer's runs draw new ones each time, and find what no fixed seed reaches.
FIXED_SEED = os.environ.get("CI") == "true"
settings.register_profile("default", max_examples=100, deadline=None, derandomize=FIXED_SEED)
settings.register_profile("ci", max_examples=500, deadline=None, derandomize=FIXED_SEED)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")
settings.load_profile(PROFILE)
# The `ci` profile also runs the soaks longer (a developer's run keeps them short).
THOROUGH = PROFILE == "ci"


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: `-p no:xdist` still runs
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per CPU and two more. Much of the suite waits (timeouts,
    servers, subprocesses, fsync) and the extra workers fill that time (docs/development.md
    has the measurements)."""
    return len(os.sched_getaffinity(0)) + 2


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle",
        type=int,
        metavar="SEED",
        help="run the tests in an order shuffled by SEED (files and tests within them), to "
        "find tests that depend on the order they run in",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--shuffle SEED`: every xdist worker draws the same order from the same seed. Without
    it, the tests marked `slow` start first under xdist (`slow_first`)."""
    seed = config.getoption("shuffle")
    if seed is not None:
        import random

        random.Random(seed).shuffle(items)
        return
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        items[:] = slow_first(items, workers)


def slow_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """`items` reordered so that each of `workers` begins with its share of the tests marked
    `slow`, the others kept in file order. xdist's `worksteal` hands each worker an even run
    of the list at the start (sized as below) and balances by taking tests from the end of a
    busy worker's run: a test of several seconds left near an end becomes the run's tail,
    one CPU idle while it finishes."""
    slow = [item for item in items if item.get_closest_marker("slow")]
    rest = [item for item in items if not item.get_closest_marker("slow")]
    ordered: list[pytest.Item] = []
    left = len(items)
    for worker in range(workers):
        size = left // (workers - worker)
        left -= size
        share = slow[worker::workers]
        fill = max(0, size - len(share))
        ordered += share + rest[:fill]
        del rest[:fill]
    return ordered + rest


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("shuffle")
    return None if seed is None else f"test order shuffled with --shuffle {seed}"


def gc_program(name: str = "gc") -> str:
    """The installed console script `name` (`gc`, `inbox`) of this Python (never another
    one on PATH)."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"the {name} console script is not installed (pip install .)"
    return found


# Settings only a process of its own can honour: read once at import (fault points) or ending
# the process (a kill). A run whose environment names one always runs in a subprocess.
PROCESS_ONLY_ENV = ("GC_FAULT_POINT",)


class GcRunner:
    """Runs `gc` (or `program`: `inbox`) in `cwd` with a clean identity, as a user would.

    By default the command runs in this process (`gc_beads.entry.main`, exactly what the
    installed `gc` calls, with its own argv, environment, cwd, stdin and captured output):
    a subprocess costs ~0.2 s of start-up, and the suite runs hundreds of commands.
    `process=True` (or `gc.subprocess(...)`, or the `gc_process` marker on a test) runs the
    real program instead: for what only a process shows (the launcher, start-up, signals,
    kills, races, umask). A run that ends in "internal error" (an exception escaping a
    command, which gc words as one line, exit 50) fails the test unless it passes
    `internal_error=True`.
    """

    def __init__(self, cwd: Path, *, process: bool = False, program: str = "gc") -> None:
        self.cwd = cwd
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
        self.process = process
        self.program = program

    def __call__(
        self,
        *args: str,
        input: bytes | str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        process: bool | None = None,
        internal_error: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        data = input.encode() if isinstance(input, str) else input
        full_env = {**self.env, **(env or {})}
        where = cwd or self.cwd
        if process is None:
            process = self.process or any(name in full_env for name in PROCESS_ONLY_ENV)
        run = _run_process if process else _run_in_process
        code, out, err = run(self.program, args, data, full_env, where)
        result = subprocess.CompletedProcess(
            [gc_program(self.program), *args],
            code,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
        )
        if not internal_error:
            assert f"{self.program}: internal error" not in result.stderr, result.stderr
        return result

    def subprocess(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """Run the real program in a process of its own."""
        return self(*args, process=True, **kwargs)

    def json(self, *args: str, **kwargs: Any) -> dict:
        result = self(*args, "--json", **kwargs)
        assert result.stdout, result.stderr
        return json.loads(result.stdout)


def _run_process(
    program: str, args: tuple[str, ...], data: bytes | None, env: dict[str, str], cwd: Path
) -> tuple[int, bytes, bytes]:
    result = subprocess.run(
        [gc_program(program), *args],
        cwd=cwd,
        input=data,
        capture_output=True,
        env=env,
        timeout=120,
    )
    return result.returncode, result.stdout, result.stderr


class _Pipe(io.BytesIO):
    """A captured stream whose contents outlive `close()` (gc closes stderr when its reader
    went away)."""

    def close(self) -> None:
        pass


def _set_environ(wanted: dict[str, str]) -> None:
    """Make os.environ exactly `wanted`, touching only the variables that differ
    (`os.environ.clear()` unsets and `update` sets every one, each a libc call)."""
    for name in [name for name in os.environ if name not in wanted]:
        del os.environ[name]
    for name, value in wanted.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def _run_in_process(
    program: str, args: tuple[str, ...], data: bytes | None, env: dict[str, str], cwd: Path
) -> tuple[int, bytes, bytes]:
    """`program args` through the program's own entry point, with what a fresh process would have:
    its argv, environment, cwd, streams (pipes: no terminal), umask and logging without
    handlers; all of it restored afterwards. (The run's policies and caches are its own
    `beads.runtime.Runtime`, made by the entry point and gone when it returns.)"""
    from gc_beads import entry

    out, err = _Pipe(), _Pipe()
    model = sys.__stdout__ or sys.stdout  # a subprocess's streams: this locale's encoding
    encoding, errors = model.encoding, model.errors

    def stream(buffer: _Pipe, errors: str) -> io.TextIOWrapper:
        return io.TextIOWrapper(buffer, encoding=encoding, errors=errors, write_through=True)

    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_hook, saved_sigint = sys.unraisablehook, signal.getsignal(signal.SIGINT)
    root_logger = logging.getLogger()
    saved_logging = root_logger.handlers[:], root_logger.level
    umask = os.umask(0o077)
    os.umask(umask)
    path = gc_program(program)
    try:
        root_logger.handlers.clear()  # no handler, as in a fresh process: warnings to stderr
        root_logger.setLevel(logging.WARNING)
        _set_environ(env)
        os.chdir(cwd)
        sys.argv = [path, *args]
        sys.stdin = stream(_Pipe(data or b""), errors)
        sys.stdout, sys.stderr = stream(out, errors), stream(err, "backslashreplace")
        entry.main(program)
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    finally:
        if sys.stdout is not saved_streams[1]:
            sys.stdout.flush()
            sys.stderr.flush()
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        _set_environ(saved_env)
        os.umask(umask)
        root_logger.handlers[:] = saved_logging[0]
        root_logger.setLevel(saved_logging[1])
        signal.signal(signal.SIGINT, saved_sigint)
        sys.unraisablehook = saved_hook
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("text"): Python prints it and exits 1
        err.write(f"{code}\n".encode())
        code = 1
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def gate_budget_beyond_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """The destructive-op gate reads a command within `BUDGET` seconds of wall time, then
    asks: on a loaded machine a test's judgement could run out of it and ask where the gate
    denies. Tests of its answers get 30 s in this process; a test of the budget sets its own."""
    import gates.destructive

    monkeypatch.setattr(gates.destructive, "BUDGET", 30.0)


@pytest.fixture(scope="session", autouse=True)
def person_with_own_data_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every test runs as a person at a shell (no agent session's variables), whose data
    folder (approvals of guarded settings: `beads.settings.approvals`) is a temporary one, never the
    user's own, and whose `python3` on PATH is the Python under test."""
    saved = dict(os.environ)
    for name in list(os.environ):
        if name == "CLAUDECODE" or name.startswith("CLAUDE_CODE_"):
            del os.environ[name]
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("data-home"))
    # `python3` (the test scripts' `#!/usr/bin/env python3`, run once per exec mail op) is the
    # Python under test, not whatever a version manager's shim on PATH would pick, and costs
    # one interpreter start, not a shell script's work first. Every child environment the
    # fixtures build (the `gc` runner, git, the docs' pages) starts from this one.
    here = str(Path(sys.executable).parent)
    os.environ["PATH"] = os.pathsep.join([here, *os.environ.get("PATH", "").split(os.pathsep)])
    yield
    os.environ.clear()
    os.environ.update(saved)


def copy_tree(source: Path, target: Path) -> None:
    """Copy the directory `source` to `target` (made, or filled when it exists): each file's
    bytes, mode and times, each directory's mode and times, symlinks as links. What
    `shutil.copytree(source, target, symlinks=True)` copies, less its look for extended
    attributes (a look at every entry: no test's tree has any) and its steps in Python: the
    fixtures copy a template for most tests, and a copy takes a third less CPU so."""
    found = os.stat(source)
    os.makedirs(target, 0o700, exist_ok=True)
    with os.scandir(source) as scan:
        entries = list(scan)
    for entry in entries:
        there = os.path.join(target, entry.name)
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), there)
        elif entry.is_dir(follow_symlinks=False):
            copy_tree(Path(entry.path), Path(there))
        else:
            _copy_file(entry.path, there, entry.stat(follow_symlinks=False))
    os.chmod(target, found.st_mode & 0o7777)
    os.utime(target, ns=(found.st_atime_ns, found.st_mtime_ns))


def _copy_file(source: str, target: str, found: os.stat_result) -> None:
    """A new `target` with the bytes of `source`, and its mode and times (`found`)."""
    reading = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
    try:
        writing = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            left = found.st_size
            while left > 0:
                sent = os.sendfile(writing, reading, None, left)
                if not sent:  # the file shrank meanwhile: copied as far as it went
                    break
                left -= sent
            os.fchmod(writing, found.st_mode & 0o7777)
            os.utime(writing, ns=(found.st_atime_ns, found.st_mtime_ns))
        finally:
            os.close(writing)
    finally:
        os.close(reading)


def copy_store(template: Path, beads_dir: Path) -> None:
    """Copy the store `template` (a `.beads/` directory) to `beads_dir`, with what its init
    recorded outside it (`copy_approvals`). The copy's commands then read an approval file,
    as a store's commands do after its init."""
    copy_tree(template, beads_dir)
    copy_approvals(template, beads_dir)


def copy_approvals(template: Path, beads_dir: Path) -> None:
    """What the init of the store `template` recorded outside it, the first run of its
    settings on this machine (`beads.settings.trust`), recorded for its copy `beads_dir`: the
    template's approval file, filed under the copy's path. (Written as read, without the lock
    and the two flushes to disk of `approvals.record`: no other process writes it yet, and a
    test's store outlives no power cut.)"""
    from beads.settings import approvals

    made = approvals.read(template)
    if made is not None:
        made["store"] = approvals.store_key(beads_dir)
        where = approvals.approval_path(beads_dir)
        handle = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with open(handle, "w") as file:
            json.dump(made, file)


@pytest.fixture(scope="session")
def store_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store made once a session (per xdist worker) by `Store.init`; the `store` fixture
    copies it (a copy costs ~2 ms, an init ~16 ms and four git runs)."""
    root = tmp_path_factory.mktemp("store-template")
    Store.init(root, agent="tester")[0].close()
    return root / ".beads"


@pytest.fixture
def store(tmp_path: Path, store_template: Path) -> Iterator[Store]:
    """A fresh store in `tmp_path`, as `Store.init(tmp_path, agent="tester")` makes it."""
    copy_store(store_template, tmp_path / ".beads")
    opened = Store.open(tmp_path, agent="tester")
    yield opened
    opened.close()


@pytest.fixture
def example_store(tmp_path: Path) -> Iterator[Store]:
    opened, _ = init_example(tmp_path, agent="tester")
    yield opened
    opened.close()


@pytest.fixture
def gc(tmp_path: Path, request: pytest.FixtureRequest) -> GcRunner:
    """A `gc` runner in `tmp_path`; in this process unless the test is marked `gc_process`."""
    return GcRunner(tmp_path, process=request.node.get_closest_marker("gc_process") is not None)


@pytest.fixture(scope="session")
def gc_init_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store made once a session (per xdist worker) by `gc init`."""
    root = tmp_path_factory.mktemp("gc-init-template")
    result = GcRunner(root)("init")
    assert result.returncode == 0, result.stderr
    return root / ".beads"


@pytest.fixture
def gc_store(gc: GcRunner, gc_init_template: Path) -> GcRunner:
    """The `gc` runner, in a store as `gc init` makes it (a copy: an init costs four git runs)."""
    copy_store(gc_init_template, gc.cwd / ".beads")
    return gc


def syntax_nodes(source: str) -> tuple[ast.AST, ...]:
    """Every node of the Python `source`'s syntax tree (`ast.walk` order), built with the
    cyclic garbage collector off: the tree's new nodes, none of them garbage, would otherwise
    start a collection every few hundred, over every object the test process holds (about
    twice the cost of the parse itself, for the checks that read the whole project)."""
    enabled = collector.isenabled()
    collector.disable()
    try:
        return tuple(ast.walk(ast.parse(source)))
    finally:
        if enabled:
            collector.enable()


# Runs Python code in processes forked from one that imported the modules a request names: a
# test of processes racing pays for those imports once, not once a process. Reads one line of
# JSON from stdin, {"preload": [module, ...], "runs": [[cwd, source, argv], ...]}; forks one
# process a run, lets them all go at once, and once all ended prints one line of JSON,
# [[exit code, stdout, stderr], ...] in the order of the runs.
FORKER = r"""
import importlib, json, os, sys, tempfile
request = json.loads(sys.stdin.readline())
for name in request["preload"]:
    importlib.import_module(name)
start, go = os.pipe()
forked = []
for cwd, source, argv in request["runs"]:
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:
        os.close(go)
        os.read(start, 1)  # returns once the last one is forked and `go` closed
        os.chdir(cwd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.argv = argv
        # Ends as `python -c` would: its exit code, or an exception's traceback and exit 1.
        exec(compile(source, "<string>", "exec"), {"__name__": "__main__"})
        sys.exit(0)
    forked.append((pid, out, err))
os.close(go)
os.close(start)
ended = []
for pid, out, err in forked:
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    out.seek(0)
    err.seek(0)
    ended.append([code, out.read().decode(errors="replace"), err.read().decode(errors="replace")])
print(json.dumps(ended))
"""


def forked_together(
    runs: list[tuple[Path, str, list[str]]], preload: tuple[str, ...], *, timeout: float = 300
) -> list[tuple[int, str, str]]:
    """Run each of `runs`, `(cwd, source, argv)`: the Python `source` in `cwd` with
    `sys.argv` (`["-c", ARGS...]` is what `python -c source ARGS...` is given), each in a
    process of its own, all let go at once: forked from one process that imported `preload`
    first, so none pays for those imports. Each ends as a process does; their exit codes,
    stdouts and stderrs, in the order of `runs` (`timeout` bounds a hang only)."""
    forks = [[str(cwd), source, argv] for cwd, source, argv in runs]
    request = {"preload": list(preload), "runs": forks}
    done = subprocess.run(
        [sys.executable, "-c", FORKER], input=json.dumps(request) + "\n", capture_output=True,
        text=True, timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [(code, out, err) for code, out, err in json.loads(done.stdout)]


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper that containers may lack is dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def gone(pids: list[int], within: float = 5.0) -> bool:
    """True once none of `pids` is running: a process killed takes a moment to die."""
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def git(*args: str, cwd: Path) -> str:
    """Run the real git CLI; returns stdout, fails the test on a non-zero exit."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout


@pytest.fixture
def origin_walks(monkeypatch: pytest.MonkeyPatch) -> list[bytes | None]:
    """Each walk of the history for origins (`inbox.origin.foreign_origins`) from now on, as
    where it stopped: None for a walk of the whole history."""
    import inbox.origin

    walks: list[bytes | None] = []
    walk = inbox.origin.foreign_origins

    def counted(*args: Any, **kwargs: Any) -> dict[str, Any]:
        walks.append(args[2])
        return walk(*args, **kwargs)

    monkeypatch.setattr(inbox.origin, "foreign_origins", counted)
    return walks
