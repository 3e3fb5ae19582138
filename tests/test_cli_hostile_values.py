"""Hostile values for every option and argument of every command.

The commands are enumerated from the click tree itself (the lazily loaded groups of mail,
inbox, gates included), so a new option is fuzzed without editing this file. Each value runs
in-process through `gc_beads.cli.main`, the function the real `gc` runs, so errors map to
exit codes exactly as they do for a user. A rejected value must exit 30 or 40 with one line
and leave the store as it was (HEAD, the view, the delivery items); nothing may exit 50,
print a traceback or say "internal error". A few of the worst values also run through the
real `gc` with undecodable bytes in argv.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from dulwich.refs import DiskRefsContainer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beads.records.times import MAX_DURATION
from beads.store import Store
from gc_beads.cli import cli
from gc_beads.cli import main as gc_main
from tests.conftest import THOROUGH, GcRunner

GLOBAL = {"beads_dir", "json", "agent", "debug", "help", "version"}
# Commands left out, with the reason: they run a program the user names, speak a protocol
# on stdin rather than taking options, or serve until interrupted (`gc web`: its options are
# tested in tests/test_web.py).
SKIPPED = {("mail", "conformance"), ("hook", "run"), ("web",)}

# Values that broke gc, or could: undecodable bytes (lone surrogates, as Python hands them
# over), numbers past every limit, format specs, YAML aliases, deep nesting, huge text.
WORST = [
    "\udcff\udcfe",
    "a\udc80b",
    "9" * 5000,
    "-" + "9" * 30,
    "99999999999999999999999",
    "1e400",
    "nan",
    "inf",
    "-1",
    "99999999999999d",
    "9" * 400 + "s",
    "{text:>3000000000}",
    "{0[0]}{session!r}",
    "&a [*a, *a, *a]",
    "[" * 5000 + "]" * 5000,
    '{"a":' * 3000 + "1" + "}" * 3000,
    "x" * 100_000,
    "",
    " ",
    "\n",
    "\x7f\x1b[2J",
    "\u2028\ufeff",
    "0x10",
    "%s%n%x",
    "timer:99999999999999d",
    "timer:" + "9" * 5000,
    "a=" + "9" * 5000,
    "k=\udcff",
    "a\x00b",
]
hostile = st.one_of(
    st.sampled_from(WORST),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.text(max_size=30).map(lambda s: s + "\udcff"),
    st.text(max_size=30),
)


class _WouldBlock(BaseException):
    """Raised by the patched `time.sleep`: the command accepted its input and would wait."""


def commands() -> Iterator[tuple[tuple[str, ...], click.Command]]:
    def walk(group: click.Group, path: tuple[str, ...], ctx: click.Context) -> Iterator[Any]:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            if isinstance(command, click.Group):
                yield from walk(command, (*path, name), ctx)
            elif (*path, name) not in SKIPPED:
                yield (*path, name), command

    with click.Context(cli) as ctx:
        yield from walk(cli, (), ctx)


def fuzzed_params() -> list[tuple[tuple[str, ...], str]]:
    """(command path, parameter name) for every parameter that takes a value."""
    found = []
    for path, command in commands():
        for param in command.params:
            if param.name in GLOBAL or getattr(param, "is_flag", False):
                continue
            found.append((path, param.name or ""))
    return found


PARAMS = fuzzed_params()
# Each command by its path, walked once: the click tree does not change while the tests run.
COMMANDS = dict(commands())


class World:
    """One store for the whole module, with a bead, a message, a gate and a decision."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # The snapshot taken after the last refused command, while no command ran since: the
        # next check starts from it instead of taking the same snapshot again.
        self.settled: tuple[str, str, int] | None = None
        # The delivery database, kept open between snapshots: (its device and inode, the
        # connection). Opening it costs more than counting its items.
        self.items_db: tuple[tuple[int, int], sqlite3.Connection] | None = None
        store, _ = Store.init(root, agent="tester")
        store.close()
        self.ids: dict[str, str] = {}
        self.ids["bead"] = self.json("bead", "create", "--type", "task", "--title", "t")["bead"][
            "id"
        ]
        sent = self.json("mail", "send", "dog", "-s", "hi", "-m", "body")
        self.ids["message"] = (
            sent["message"]["id"] if "message" in sent else sent["messages"][0]["id"]
        )
        self.ids["gate"] = self.json("gate", "create", "--await", "human")["bead"]["id"]
        made = self.json("decision", "create", "--prompt", "p", "--option", "a", "--option", "b")
        self.ids["decision"] = made["bead"]["id"]

    def run(self, args: list[str]) -> tuple[int, str, str]:
        """`gc ARGS` in-process, as the real entry maps it; (exit code, stdout, stderr)."""

        def would_block(seconds: float) -> None:
            if not 0 <= seconds <= MAX_DURATION:  # nan, inf, negative: the real one raises
                raise ValueError(f"sleep({seconds})")
            raise _WouldBlock

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(time, "sleep", would_block)
            result = CliRunner().invoke(_Gc(), args, catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    def json(self, *args: str) -> dict[str, Any]:
        code, out, err = self.run([*args, "--json"])
        assert code == 0, err
        return json.loads(out)

    def snapshot(self) -> tuple[str, str, int]:
        """HEAD, a digest of every view file, and the number of delivery items."""
        base = self.root / ".beads"
        # In this process, refs only (no git, no whole Repo per value: the store grows to
        # hundreds of beads and this runs twice a value).
        head = DiskRefsContainer(str(base / ".git"))[b"HEAD"].decode()
        digest = hashlib.sha256()
        _digest_tree(str(base), "", digest)
        items = 0
        database = base / ".runtime" / "delivery.sqlite3"
        try:
            found = os.stat(database)
        except FileNotFoundError:
            pass
        else:
            # The connection held open keeps its file's inode from being reused: an inode
            # other than its own is another file, opened afresh.
            identity = (found.st_dev, found.st_ino)
            if self.items_db is None or self.items_db[0] != identity:
                self.close()
                self.items_db = identity, sqlite3.connect(database)
            # Every row fetched: the statement ends, and its read of the database with it.
            [(items,)] = self.items_db[1].execute("SELECT count(*) FROM items").fetchall()
        return head, digest.hexdigest(), items

    def close(self) -> None:
        if self.items_db is not None:
            self.items_db[1].close()
            self.items_db = None


def _digest_tree(folder: str, relative: str, digest: Any) -> None:
    """Every file under `folder` (its path and content, in name order) into `digest`, but
    for git's and the runtime's folders."""
    with os.scandir(folder) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        name = relative + entry.name
        if entry.is_dir():
            if entry.name not in (".git", ".runtime") and not entry.is_symlink():
                _digest_tree(entry.path, name + "/", digest)
        else:
            with open(entry.path, "rb") as file:
                digest.update(name.encode() + b"\0" + file.read())


class _Gc:
    """What CliRunner invokes: the real `gc` main (error mapping included), not the bare group."""

    name = "gc"

    def main(self, args: list[str], prog_name: str, **extra: Any) -> None:
        gc_main(list(args))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("fuzz")
    saved = os.getcwd()
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("GC_"):
                patch.delenv(name)
        patch.setenv("GC_BEADS_DIR", str(root))
        patch.setenv("EDITOR", "true")
        patch.delenv("VISUAL", raising=False)
        os.chdir(root)
        world = None
        try:
            world = World(root)
            yield world
        finally:
            if world is not None:
                world.close()
            os.chdir(saved)


def defaults(ids: dict[str, str], path: tuple[str, ...]) -> dict[str, list[str]]:
    """Valid values for the required parameters of `path` (name -> argv pieces), given the
    ids of a bead, a message, a gate and a decision of the store."""
    gate_id = ids["gate"] if path[-1] in ("close", "resolve", "show") else "review"
    return {
        "bead_id": [ids["bead"]],
        "message_id": [ids["message"]],
        "thread_or_message_id": [ids["message"]],
        "ids": [ids["message"]],
        "decision_id": [ids["decision"]],
        "gate_id": [gate_id],
        "type_": ["--type", "task"],
        "title": ["--title", "t"],
        "key": ["x.y"],
        "value": ["1"],
        "prompt": ["--prompt", "p"],
        "options": ["--option", "a", "--option", "b"],
        "select": ["--select", "a"],
        "await_spec": ["--await", "human"],
        "mode": ["--mode", "soft"],
        "session": ["--session", "s1"],
        "text": ["hi"],
    }


def build_argv(ids: dict[str, str], path: tuple[str, ...], target: str, value: str) -> list[str]:
    """The command line of `path` with `value` for the parameter `target`, valid values for
    the other required ones."""
    command = COMMANDS[path]
    given = defaults(ids, path)
    options: list[str] = []
    arguments: list[str] = []
    for param in command.params:
        if param.name in GLOBAL or getattr(param, "is_flag", False):
            continue
        if param.name == target:
            if isinstance(param, click.Option):
                options += [param.opts[-1] if param.opts[-1].startswith("--") else param.opts[0]]
                options.append(value)
            else:
                arguments.append(value)
        elif param.required or (isinstance(param, click.Argument) and param.name in given):
            pieces = given.get(param.name or "", ["x"])
            (arguments if isinstance(param, click.Argument) else options).extend(pieces)
    if path == ("gate", "watch") and target != "rounds":
        options += ["--rounds", "2"]  # one sleep: its length is checked
    return [*path, *options, *arguments]


def _check(world: World, argv: list[str], as_json: bool) -> None:
    before = world.settled or world.snapshot()
    world.settled = None
    try:
        code, out, err = world.run([*argv, "--json"] if as_json else argv)
    except _WouldBlock:
        return  # accepted, and would wait: the store may have changed, that is fine
    if argv[:2] == ["remote", "add"] and code == 0:
        # An accepted remote (any path is one, reachable or not) would send every later
        # `gc sync` of this shared world to it: that sync fails to reach it (exit 50, as it
        # should), whichever value it was given. Take the remote away again.
        removed, _, why = world.run(["remote", "remove", argv[-2]])
        assert removed == 0, why
    shown = f"gc {' '.join(a[:40] for a in argv)!r} -> {code}\n{err[-2000:]}"
    assert "Traceback" not in out + err, shown
    assert "internal error" not in err, shown
    assert code in (0, 10, 30, 40), shown
    if code in (30, 40):
        after = world.snapshot()
        assert after == before, f"a rejected input changed the store: {shown}"
        world.settled = after
        assert len(err.strip().splitlines()) == 1, shown
        if as_json:
            reply = json.loads(out)
            assert reply["ok"] is False and reply["error"]["code"] in ("invalid_input", "not_found")


@pytest.mark.parametrize(("path", "target"), PARAMS, ids=[f"{' '.join(p)}:{t}" for p, t in PARAMS])
@settings(
    max_examples=12 if THOROUGH else 4,  # values for each of ~200 parameters
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=hostile, as_json=st.booleans())
def test_hostile_values_are_refused_cleanly(
    world: World, path: tuple[str, ...], target: str, value: str, as_json: bool
) -> None:
    _check(world, build_argv(world.ids, path, target, value), as_json)


def test_every_command_is_fuzzed() -> None:
    # The walk reaches the lazily loaded groups: a sample of their options is in the list.
    assert (("inbox", "push"), "dedup") in PARAMS
    assert (("mail", "send"), "subject") in PARAMS
    assert (("gate", "create"), "await_spec") in PARAMS
    assert (("bead", "list"), "limit") in PARAMS
    assert len(PARAMS) > 60


@pytest.mark.parametrize(
    "args",
    [
        ["inbox", "push", "hi", "--dedup-key", b"\xff\xfe"],
        ["inbox", "push", "hi", "--source", b"\xff"],
        ["inbox", "push", "hi", "--session", b"s\xff"],
        ["config", "set", b"a\xff", "1"],
        ["mail", "send", "dog", "-s", b"\xc3\x28", "hi"],
        ["bead", "create", "--type", "task", "--title", b"\xed\xa0\x80"],
        ["--beads-dir", "a" * 100_000, "bead", "list"],
        ["bead", "list", "--since", "99999999999999d"],
        ["bead", "list", "--limit", "9" * 30],
        ["gate", "create", "--await", "timer:99999999999999d"],
        ["inbox", "wait", "--timeout", "99999999999999d"],
        ["config", "set", "store", "1"],
    ],
)
def test_the_worst_inputs_through_the_real_gc(gc_store: GcRunner, args: list[Any]) -> None:
    gc = gc_store  # in a store as `gc init` makes it
    head = gc("log", "--json").stdout
    argv = [a if isinstance(a, bytes) else a.encode() for a in args]
    result = subprocess.run(
        [os.fsencode(_gc_program()), *argv], cwd=gc.cwd, capture_output=True, env=gc.env, timeout=60
    )
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 30, err
    assert "Traceback" not in err and "internal error" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert gc("log", "--json").stdout == head


def _gc_program() -> str:
    from tests.conftest import gc_program

    return gc_program()
