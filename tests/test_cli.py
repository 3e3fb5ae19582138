"""The `gc` command through a real subprocess: output, JSON shapes, exit codes, bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import GcRunner, git


@pytest.fixture
def project(gc: GcRunner) -> GcRunner:
    result = gc("init")
    assert result.returncode == 0, result.stderr
    return gc


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
