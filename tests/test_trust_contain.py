"""Issue 10, containment: what gc runs dies with the call, and what gc writes stays inside
`.beads/` (no symlink is followed) and private to its owner."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from beads.process import run_bounded
from mail.execmail import ExecMail
from mail.message import ProviderError
from tests.conftest import GcRunner

MESSAGE = {
    "id": "m-1",
    "from": "a",
    "to": "b",
    "subject": "s",
    "body": "x",
    "created_at": "2026-01-01T00:00:00Z",
    "read": False,
}


def script(tmp_path: Path, body: str, name: str = "prog") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper that containers may lack is dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


# -- exec provider: process groups, one budget, bad numbers ----------------------------------


def test_a_child_left_holding_stdout_dies_with_each_call(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    prog = script(tmp_path, f"sleep 100 & echo $! >> {pids}\necho '[]'\n")
    started = time.monotonic()
    assert ExecMail(prog).inbox("b") == []
    assert time.monotonic() - started < 3
    time.sleep(0.1)
    children = [int(pid) for pid in pids.read_text().split()]
    assert len(children) == 2  # ensure-running's and the operation's
    assert not any(alive(pid) for pid in children)


def test_a_child_left_with_no_pipes_dies_too(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    prog = script(tmp_path, f"sleep 100 >/dev/null 2>&1 & echo $! >> {pids}\n")
    ExecMail(prog).archive("m-1")
    time.sleep(0.1)
    assert not any(alive(int(pid)) for pid in pids.read_text().split())


def test_a_hanging_program_costs_one_budget_per_command(tmp_path: Path) -> None:
    prog = script(tmp_path, "exec sleep 100\n")  # ensure-running hangs, and so would inbox
    started = time.monotonic()
    with pytest.raises(ProviderError, match="ensure-running timed out after 1s"):
        ExecMail(prog, timeout=1).inbox("b")
    assert time.monotonic() - started < 1.8


def test_copies_of_a_send_share_one_budget(tmp_path: Path) -> None:
    prog = script(
        tmp_path, f"[ \"$1\" = send ] && sleep 0.6\necho '{json.dumps(MESSAGE)}'\n"
    )  # each copy takes 0.6 s: the second cannot finish within 1 s
    started = time.monotonic()
    with pytest.raises(ProviderError, match="timed out"):
        ExecMail(prog, timeout=1).send("a", "b", "s", "x", cc=["c", "d"])
    assert time.monotonic() - started < 1.6


def test_exec_timeout_from_config_applies_with_gc_mail(gc: GcRunner, tmp_path: Path) -> None:
    assert gc("init").returncode == 0
    assert gc("config", "set", "mail.exec_timeout", "1").returncode == 0
    prog = script(tmp_path, '[ "$1" = ensure-running ] && exit 0\nexec sleep 100\n')
    started = time.monotonic()
    result = gc("mail", "inbox", "dog", env={"GC_MAIL": f"exec:{prog}"})
    assert result.returncode == 50 and "timed out after 1s" in result.stderr
    assert time.monotonic() - started < 10
    assert gc("config", "set", "mail.exec_timeout", '"soon"').returncode == 0
    bad = gc("mail", "inbox", "dog", env={"GC_MAIL": f"exec:{prog}"})
    assert bad.returncode == 30 and "mail.exec_timeout must be a number" in bad.stderr


@pytest.mark.parametrize(
    "field, value",
    [("priority", "1e400"), ("priority", "-1e400"), ("priority", "1" * 30), ("read", "1e400")],
)
def test_numbers_out_of_range_are_invalid_input(
    gc: GcRunner, tmp_path: Path, field: str, value: str
) -> None:
    message = json.dumps({**MESSAGE, field: 0}).replace(f'"{field}": 0', f'"{field}": {value}')
    prog = script(tmp_path, f"echo '{message}'\n")
    result = gc("mail", "read", "m-1", env={"GC_MAIL": f"exec:{prog}"})
    assert result.returncode == 30, result.stderr
    assert "out of range" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
    count = script(tmp_path, f'echo \'{{"total": {value}, "unread": 0}}\'\n', "count")
    counted = gc("mail", "count", "dog", env={"GC_MAIL": f"exec:{count}"})
    assert counted.returncode == 30 and "internal error" not in counted.stderr


def test_one_bad_message_is_skipped_and_the_others_listed(gc: GcRunner, tmp_path: Path) -> None:
    good = {**MESSAGE, "id": "m-2", "to": "dog", "body": "the good one"}
    bad = json.dumps({**MESSAGE, "to": "dog"}).replace('"read": false', '"priority": 1e400')
    listing = f"[{bad}, {json.dumps(good)}]"
    prog = script(tmp_path, f"echo '{listing}'\n")
    result = gc("mail", "check", "dog", "--inject", env={"GC_MAIL": f"exec:{prog}"})
    assert result.returncode == 0 and "the good one" in result.stdout
    assert "skipped message m-1" in result.stderr and "out of range" in result.stderr


def test_the_hook_announces_the_good_messages_of_a_listing(gc: GcRunner, tmp_path: Path) -> None:
    assert gc("init").returncode == 0
    good = {**MESSAGE, "id": "m-2", "to": "dog", "body": "announce me"}
    bad = json.dumps({**MESSAGE, "to": "dog"}).replace('"read": false', '"priority": 1e400')
    prog = script(tmp_path, f"[ \"$1\" = check ] && echo '[{bad}, {json.dumps(good)}]'\n")
    event = {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup"}
    event["cwd"] = str(tmp_path)
    result = gc(
        "hook", "run", input=json.dumps(event), env={"GC_MAIL": f"exec:{prog}", "GC_AGENT": "dog"}
    )
    assert result.returncode == 0
    reply = json.loads(result.stdout)
    assert "announce me" in reply["hookSpecificOutput"]["additionalContext"]


# -- checks, nudges and gh through beads.process ---------------------------------------------


def test_run_bounded_kills_what_a_finished_program_left_behind(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    started = time.monotonic()
    code, out, _err = run_bounded(["sh", "-c", f"sleep 100 & echo $! > {pid_file}; echo done"], 10)
    assert (code, out) == (0, b"done\n") and time.monotonic() - started < 2
    time.sleep(0.1)
    assert not alive(int(pid_file.read_text()))


def test_run_bounded_feeds_stdin_and_times_out(tmp_path: Path) -> None:
    assert run_bounded(["cat"], 5, stdin=b"x" * 200_000)[1] == b"x" * 200_000
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded(["sleep", "100"], 0.5)
    assert time.monotonic() - started < 1.5
