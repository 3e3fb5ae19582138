"""The `gc` command: output, JSON shapes, exit codes, bad input, help and the README's list.

Commands run through the real entry point in this process (the `gc` fixture); the tests
marked `gc_process` run the installed program, and one test checks both ways agree."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from gc_beads.commands import COMMANDS
from tests.conftest import GcRunner, gc_program, git


@pytest.fixture
def project(gc_store: GcRunner) -> GcRunner:
    return gc_store


def head(gc: GcRunner) -> str:
    return git("rev-parse", "HEAD", cwd=gc.cwd / ".beads").strip()


def test_the_quick_start_flow(project: GcRunner) -> None:
    gc = project
    made = gc.json(
        "bead",
        "create",
        "--type",
        "task",
        "--title",
        "Try gc-beads",
        "--body",
        "first\nsecond\n",
        "--label",
        "demo",
        "--priority",
        "1",
        "--meta",
        "estimate=3",
    )
    assert made["ok"] is True and made["command"] == "bead.create"
    bead = made["bead"]
    assert bead["title"] == "Try gc-beads" and bead["from"] == "human"
    assert bead["meta"] == {"estimate": "3"} and bead["labels"] == ["demo"]
    listed = gc("bead", "list")
    assert (
        listed.returncode == 0 and bead["id"] in listed.stdout and "Try gc-beads" in listed.stdout
    )
    shown = gc("bead", "show", bead["id"][:6])
    assert "body: |\n  first\n  second" in shown.stdout
    assert gc.json("bead", "list")["beads"] == [bead]
    assert (
        gc("bead", "update", bead["id"], "--title", "Renamed", "--add-label", "x").returncode == 0
    )
    assert gc("bead", "close", bead["id"], "--reason", "done").returncode == 0
    assert gc.json("bead", "list")["beads"] == []
    closed = gc.json("bead", "list", "--status", "closed")["beads"]
    assert [(b["title"], b["close_reason"]) for b in closed] == [("Renamed", "done")]
    assert gc("bead", "reopen", bead["id"]).returncode == 0
    log = gc("log")
    assert log.stdout.splitlines()[0].endswith(f"bead reopen {bead['id']}")
    assert len(gc.json("log", bead["id"])["commits"]) == 4
    assert gc("doctor").returncode == 0
    git("fsck", "--strict", cwd=gc.cwd / ".beads")


def test_json_is_accepted_before_and_after_the_subcommand(project: GcRunner) -> None:
    before = json.loads(project("--json", "bead", "list").stdout)
    after = json.loads(project("bead", "list", "--json").stdout)
    assert before == after == {"ok": True, "command": "bead.list", "beads": []}


def test_the_author_is_the_acting_agent(project: GcRunner) -> None:
    project("bead", "create", "--type", "task", "--title", "a", "--agent", "mayor")
    project("bead", "create", "--type", "task", "--title", "b", env={"GC_AGENT": "dog"})
    project("--agent", "cat", "bead", "create", "--type", "task", "--title", "c")
    authors = git("log", "--format=%an", "-3", cwd=project.cwd / ".beads").split()
    assert authors == ["cat", "dog", "mayor"]


def test_body_from_stdin_and_file(project: GcRunner, tmp_path: Path) -> None:
    from_stdin = project.json(
        "bead", "create", "--type", "task", "--title", "s", "--stdin", input="piped ünïcode\n"
    )
    assert from_stdin["bead"]["body"] == "piped ünïcode\n"
    body_file = tmp_path / "body.md"
    body_file.write_text("# from a file\n")
    from_file = project.json(
        "bead", "create", "--type", "task", "--title", "f", "--body-file", str(body_file)
    )
    assert from_file["bead"]["body"] == "# from a file\n"


def test_example_store_works_after_install(gc: GcRunner) -> None:
    result = gc("init", "--example")
    assert result.returncode == 0, result.stderr
    beads = gc.json("bead", "list", "--status", "all")["beads"]
    assert {b["type"] for b in beads} == {"message", "gate", "decision", "task"}
    thread = gc.json("bead", "list", "--thread", "gc-reviewpr")["beads"]
    assert [b["id"] for b in thread] == ["gc-reviewpr", "gc-lgtmdone"]
    closing = gc("bead", "close", "gc-shipgate")
    assert closing.returncode == 30 and "guarded" in closing.stderr
    assert gc("bead", "close", "gc-shipgate", "--force").returncode == 0


def test_edit_opens_the_editor_validates_and_commits(project: GcRunner, tmp_path: Path) -> None:
    made = project.json("bead", "create", "--type", "task", "--title", "Old")["bead"]
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "text = p.read_text().replace('title: Old', 'title: New')\n"
        "p.write_text(text.replace('priority: 2', 'priority: 0'))\n"
    )
    result = project("bead", "edit", made["id"], env={"EDITOR": f"{sys.executable} {editor}"})
    assert result.returncode == 0, result.stderr
    shown = project.json("bead", "show", made["id"])["bead"]
    assert (shown["title"], shown["priority"]) == ("New", 0)

    breaker = tmp_path / "breaker.py"
    breaker.write_text("import sys\nopen(sys.argv[1], 'w').write('title: [unclosed\\n')\n")
    before = head(project)
    broken = project("bead", "edit", made["id"], env={"EDITOR": f"{sys.executable} {breaker}"})
    assert broken.returncode == 30 and "not valid YAML" in broken.stderr
    assert head(project) == before


def run_bad(gc: GcRunner, *args: str, **kwargs: object) -> tuple[int, str]:
    """Run a command that must fail cleanly: one stderr line, no traceback."""
    result = gc(*args, **kwargs)  # type: ignore[arg-type]
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.returncode, result.stderr


@pytest.mark.parametrize(
    "args, code, message",
    [
        (("bead", "show", "gc-zzzzzzzz"), 40, "no bead"),
        (("bead", "show", "../../etc/passwd"), 30, "invalid id"),
        (("bead", "close", "gc-x/../y"), 30, "invalid id"),
        (
            ("bead", "create", "--type", "task", "--title", "t", "--assignee", "bad name"),
            30,
            "invalid assignee",
        ),
        (("bead", "create", "--type", "Bad!", "--title", "t"), 30, "invalid type"),
        (("bead", "create", "--type", "task"), 30, "Missing option '--title'"),
        (("bead", "create", "--type", "task", "--title", "t", "--priority", "7"), 30, "priority"),
        (
            ("bead", "create", "--type", "task", "--title", "t", "--meta", "novalue"),
            30,
            "KEY=VALUE",
        ),
        (("bead", "frobnicate"), 30, "No such command"),
        (("bead", "list", "--since", "yesterdayish"), 30, "invalid time"),
        (("bead", "update", "gc-zzzzzzzz", "--title", "x"), 40, "no bead"),
    ],
)
def test_bad_input_exits_with_its_code_and_changes_nothing(
    project: GcRunner, args: tuple[str, ...], code: int, message: str
) -> None:
    before = head(project)
    exit_code, stderr = run_bad(project, *args)
    assert exit_code == code and message in stderr
    assert head(project) == before


def test_oversized_and_binary_bodies_are_refused(project: GcRunner, tmp_path: Path) -> None:
    before = head(project)
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (1024 * 1024 + 1))
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)))
    latin1 = "caf\xe9".encode("latin-1")
    for args, stdin in (
        (("--body-file", str(big)), None),
        (("--stdin",), b"y" * (2 * 1024 * 1024)),
        (("--body-file", str(binary)), None),
        (("--stdin",), latin1),
    ):
        exit_code, stderr = run_bad(
            project, "bead", "create", "--type", "task", "--title", "t", *args, input=stdin
        )
        assert exit_code == 30 and ("limit" in stderr or "binary" in stderr)
    assert head(project) == before


@pytest.mark.gc_process
def test_errors_in_json_mode(project: GcRunner) -> None:
    result = project("--json", "bead", "show", "gc-zzzzzzzz")
    assert result.returncode == 40
    assert json.loads(result.stdout) == {
        "ok": False,
        "error": {"code": "not_found", "message": "no bead gc-zzzzzzzz"},
    }
    usage = project("bead", "create", "--json")
    assert usage.returncode == 30 and json.loads(usage.stdout)["error"]["code"] == "invalid_input"


@pytest.mark.parametrize(
    "group", [("mail",), ("thread",), ("bead",), ("hook",), ("inbox",), ()], ids=" ".join
)
def test_a_group_without_a_subcommand_says_so_and_shows_its_help_as_lines(
    project: GcRunner, group: tuple[str, ...]
) -> None:
    result = project(*group)
    assert result.returncode == 30 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == "gc: missing subcommand"
    assert lines[1].startswith(f"Usage: gc {' '.join(group)}".rstrip())
    assert "Commands:" in lines and "\\n" not in result.stderr
    as_json = project(*group, "--json")
    assert as_json.returncode == 30
    assert json.loads(as_json.stdout)["error"]["message"] == "missing subcommand"
    assert project(*group, "--help").returncode == 0


@pytest.mark.gc_process
def test_no_store_exits_40_and_says_to_init(gc: GcRunner) -> None:
    exit_code, stderr = run_bad(gc, "bead", "list")
    assert exit_code == 40 and "gc init" in stderr


def test_ambiguous_prefix_exits_30_listing_candidates(project: GcRunner) -> None:
    for i in range(3):
        project("bead", "create", "--type", "task", "--title", f"t{i}")
    exit_code, stderr = run_bad(project, "bead", "show", "gc-")
    assert exit_code == 30 and "ambiguous" in stderr and stderr.count("gc-") >= 4


@pytest.mark.gc_process
def test_help_needs_no_store(gc: GcRunner) -> None:
    result = gc("--help")
    assert result.returncode == 0 and "bead" in result.stdout and "mail" in result.stdout
    assert gc("bead", "create", "--help").returncode == 0


# -- help and the guides ------------------------------------------------------------------


def command_paths() -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command of `COMMANDS` and, under each group, every subcommand."""

    def walk(command: click.Command, path: tuple[str, ...]) -> Iterator[Any]:
        yield path, command
        if isinstance(command, click.Group):
            with click.Context(command) as ctx:
                for name in command.list_commands(ctx):
                    sub = command.get_command(ctx, name)
                    assert sub is not None, (*path, name)
                    yield from walk(sub, (*path, name))

    for name, (module, attribute, _help) in COMMANDS.items():
        yield from walk(getattr(importlib.import_module(module), attribute), (name,))


COMMAND_PATHS = [path for path, _command in command_paths()]
# The guides, not the generated reference (docs/cli.md), must describe every command.
GUIDES = "\n".join(
    page.read_text()
    for page in sorted((Path(__file__).parent.parent / "docs").glob("*.md"))
    if page.name not in {"cli.md", "config.md"}
)


def test_every_group_is_walked() -> None:
    assert ("mail", "send") in COMMAND_PATHS and ("gate", "watch") in COMMAND_PATHS
    assert {path[0] for path in COMMAND_PATHS} == set(COMMANDS)


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=" ".join)
def test_every_command_has_help_and_a_guide_entry(gc: GcRunner, path: tuple[str, ...]) -> None:
    command = dict(command_paths())[path]
    description = (command.help or "").strip()
    assert description, f"gc {' '.join(path)} has no help text"
    result = gc(*path, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Usage: gc {' '.join(path)}")
    shown = " ".join(result.stdout.split())  # click wraps the text to the terminal's width
    assert " ".join(description.splitlines()[0].split()) in shown
    assert f"gc {' '.join(path)}" in GUIDES, f"no page of docs/ mentions gc {' '.join(path)}"


# -- the runner: in this process as the real program --------------------------------------


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (("--json", "bead", "show", "gc-zzzzzzzz"), None),  # exit 40, JSON error
        (("bead", "create", "--type", "task"), None),  # a usage error: exit 30
        (("bead", "list", "--status", "all"), None),
        (("hook", "run"), b"not json"),  # the fast path without click
        (("inbox", "push", "--to", "dog", "--stdin"), "caf\xe9 \u2028".encode()),
    ],
)
def test_in_process_runs_are_what_the_real_program_does(
    project: GcRunner, args: tuple[str, ...], stdin: bytes | None
) -> None:
    before = os.getcwd(), os.umask(0o077), dict(os.environ), sys.unraisablehook
    os.umask(before[1])
    here = project(*args, input=stdin)
    assert (os.getcwd(), os.umask(before[1]), dict(os.environ), sys.unraisablehook) == before
    real = project.subprocess(*args, input=stdin)
    assert (here.returncode, here.stderr) == (real.returncode, real.stderr)
    if args[0] == "inbox":  # a second push of the same text is a new item: another id
        assert here.stdout.split()[:2] == real.stdout.split()[:2]
    else:
        assert here.stdout == real.stdout


def test_a_fault_of_gc_fails_the_test_that_meets_it(
    gc: GcRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("gc_beads.cli.check_arguments", broken)
    with pytest.raises(AssertionError, match="internal error: RuntimeError: boom"):
        gc("bead", "list")
    assert gc("bead", "list", internal_error=True).returncode == 50


def test_a_run_of_gc_leaves_the_library_runtime_as_it_found_it(project: GcRunner) -> None:
    # `gc` runs under a runtime of its own (its umask policy, its output mode, its caches);
    # the library's defaults in this process are the same after it, even after --json.
    from beads import runtime

    before = os.umask(0o022)
    try:
        assert project("--json", "bead", "list").returncode == 0
        assert project("bead", "create", "--type", "task", "--title", "t").returncode == 0
        library = runtime.current()
        assert library is runtime.LIBRARY
        assert (library.own_umask, library.output, library.progress) == (False, "plain", True)
        assert library.started_umask == -1
    finally:
        os.umask(before)


PROBED: list[tuple[str, bool, bool]] = []


@click.command()
def runtime_probe() -> None:
    """What a command sees of the run's runtime (test_json_output_turns_...)."""
    from beads.cli.common import settings
    from beads.runtime import current

    run = settings().runtime
    PROBED.append((run.output, run.progress, run is current()))


def test_json_output_turns_the_runs_progress_line_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from beads.runtime import Runtime, using
    from gc_beads.cli import main

    monkeypatch.setitem(COMMANDS, "runtime-probe", (__name__, "runtime_probe", "probe"))
    PROBED.clear()
    with using(Runtime(own_umask=True)) as program:
        for args in (["runtime-probe"], ["--json", "runtime-probe"]):
            with pytest.raises(SystemExit):
                main(args)
    assert PROBED == [("plain", True, True), ("json", False, True)]
    assert program.output == "json"  # the entry point's runtime is the one carried


@click.command()
def collector_probe() -> None:
    """The garbage collector's thresholds a command runs with (test_a_short_command_...)."""
    import gc as collector

    PROBED_THRESHOLDS.append(collector.get_threshold())


PROBED_THRESHOLDS: list[tuple[int, int, int]] = []


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    """The garbage collector's thresholds set to values of the test's own (and enabled);
    Python's are back afterwards."""
    import gc as collector

    before, enabled = collector.get_threshold(), collector.isenabled()
    collector.set_threshold(555, 9, 8)
    collector.enable()
    yield collector.get_threshold()
    collector.set_threshold(*before)
    # The test may have turned it off: as it was, or the worker leaks what only it frees
    # (file descriptors of every later test's garbage cycles).
    if enabled:
        collector.enable()
    else:
        collector.disable()


def test_a_short_command_collects_garbage_rarely_and_leaves_the_collector_as_found(
    project: GcRunner, monkeypatch: pytest.MonkeyPatch, thresholds: tuple[int, int, int]
) -> None:
    import gc as collector

    from beads.runtime import SHORT_RUN_THRESHOLD

    monkeypatch.setitem(COMMANDS, "collector-probe", (__name__, "collector_probe", "probe"))
    PROBED_THRESHOLDS.clear()
    frozen = collector.get_freeze_count()
    assert project("collector-probe").returncode == 0
    assert PROBED_THRESHOLDS == [(SHORT_RUN_THRESHOLD, 9, 8)]
    assert collector.get_threshold() == thresholds and collector.isenabled()
    assert project("mail", "send", "dog", "--subject", "s", "--message", "m").returncode == 0
    assert collector.get_threshold() == thresholds and collector.isenabled()
    collector.disable()  # a caller's choice the run keeps
    assert project("bead", "list").returncode == 0
    assert collector.get_threshold() == thresholds and not collector.isenabled()
    assert collector.get_freeze_count() == frozen  # the heap is frozen in gc's process only


@pytest.mark.parametrize(("entry_point", "frozen"), [("script", True), ("main", False)])
def test_the_console_script_ends_with_the_heap_frozen_and_main_never_freezes_it(
    tmp_path: Path, entry_point: str, frozen: bool
) -> None:
    # Python's exit collects garbage over every object left; frozen, the run's are skipped.
    program = (
        "import atexit, gc, sys\n"
        "from gc_beads import entry\n"
        "atexit.register(lambda: print('frozen' if gc.get_freeze_count() else 'not frozen'))\n"
        "sys.argv = ['gc', '--version']\n"
        f"entry.{entry_point}()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == ("frozen" if frozen else "not frozen")


def test_a_command_that_waits_gets_the_collectors_usual_thresholds_back(
    project: GcRunner, monkeypatch: pytest.MonkeyPatch, thresholds: tuple[int, int, int]
) -> None:
    import gc as collector

    from beads import waiting

    seen: list[tuple[int, int, int]] = []

    class Clock:
        """`beads.waiting`'s clock, noting the collector's thresholds at each sleep. Its time
        moves only as the wait sleeps, so the wait sleeps until its timeout however slowly
        a loaded machine runs its checks, and no real time is slept."""

        now = 0.0

        @staticmethod
        def monotonic() -> float:
            return Clock.now

        @staticmethod
        def sleep(seconds: float) -> None:
            seen.append(collector.get_threshold())
            Clock.now += seconds

    monkeypatch.setattr(waiting, "time", Clock)
    # The command gives the wait what is left of its 2 s after opening the store (a loaded
    # machine may take a good part of it); the wait sleeps 2 s of the clock at most.
    waited = project("inbox", "wait", "--agent", "zed", "--timeout", "2")
    assert waited.returncode == 10, waited.stderr  # it waited its whole timeout
    assert seen and set(seen) == {thresholds}
    assert collector.get_threshold() == thresholds


# What a send and a claim never import: every agent runs them all day, and each of these
# would be paid at every start-up (docs/benchmarks.md: CLI start-up). The store's locks are
# gc's own flock (filelock brings `logging`, `secrets`, `random`, `decimal`), the host name
# comes from `os.uname` (not `socket`), git runs (`subprocess`) only where a command needs it,
# a loose object is read and written with `dulwich.objects` alone (dulwich's object store
# brings its pack, multi-pack-index and protocol modules and `logging`), and a new id's
# base32 is written out (`base64` brings `struct`). They only write YAML (its reader waits
# for a first read), open a store without making one, and push items without draining a
# session's queue. They bring the index and the view up to HEAD only when git moved past them
# (`beads.refresh`), and load the NATS outbox only where `delivery.nats.url` is set. A name
# with a dot is a module, one without a package and everything in it.
NEVER_ON_A_SEND_OR_A_CLAIM = (
    "filelock", "decimal", "numbers", "secrets", "random", "socket", "subprocess", "selectors",
    "signal", "ruamel", "tempfile", "shutil", "argparse", "email", "asyncio", "ssl",
    "zoneinfo", "pickle", "statistics", "concurrent", "nats", "web", "mcpserver", "flask",
    "mcp", "logging", "mmap", "dulwich.object_store", "dulwich.pack",
    "dulwich.midx", "dulwich.protocol", "dulwich.refs", "dulwich.repo", "dulwich.lru_cache",
    "base64", "struct", "beads.records.yamlread", "beads.initstore", "beads.receivehook",
    "inbox.drain", "inbox.queuemerge", "beads.refresh", "beads.git.program", "inbox.nats",
)  # fmt: skip
# What a claim never imports besides: its commit makes no "you have mail" item, so neither the
# mail provider nor the item's line (mail.notify applies the rule of `mail.unread` alone).
NEVER_ON_A_CLAIM = ("mail.beadmail", "mail.provider", "mail.message", "mail.line", "inbox.render")


def imports_of(gc: GcRunner, *args: str) -> set[str]:
    """The modules a real `gc` process imports running `args` (it must succeed)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", gc_program(), *args],
        cwd=gc.cwd, env={**gc.env, "GC_AGENT": "mayor"}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def never_imported(
    imported: set[str], never: tuple[str, ...] = NEVER_ON_A_SEND_OR_A_CLAIM
) -> list[str]:
    """The names of `never` that `imported` (module names) contains."""
    return sorted(
        name
        for name in never
        if any(module == name or module.startswith(name + ".") for module in imported)
    )


def test_a_new_id_is_the_lowercase_base32_of_its_random_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import base64

    from beads.records import ids

    for random in (b"\x00" * 5, b"\xff" * 5, bytes(range(1, 6)), b"\x8a\x13\xf0\x07\x5c"):
        monkeypatch.setattr(ids.os, "urandom", lambda n, random=random: random[:n])
        expected = base64.b32encode(random).decode().lower()
        assert ids.new_id("gc") == f"gc-{expected}"
        assert ids.check_id(ids.new_id("gc"))


def test_a_send_and_a_claim_import_none_of_the_modules_they_never_use(
    project: GcRunner,
) -> None:
    sent = imports_of(project, "mail", "send", "dog", "--subject", "s", "--message", "hello")
    assert {"beads.store", "mail.beadmail", "dulwich.objects", "sqlite3"} <= sent  # a commit
    assert never_imported(sent) == []
    made = project.json("thread", "send", "--to", "mayor", "--subject", "t", "--body", "b")
    claimed = imports_of(project, "thread", "claim", "--thread", made["thread"]["thread_id"])
    assert {"beads.store", "mail.notify", "dulwich.objects", "sqlite3"} <= claimed
    assert never_imported(claimed, NEVER_ON_A_SEND_OR_A_CLAIM + NEVER_ON_A_CLAIM) == []
