"""`gc hook run` and `gc hook install` as Claude Code calls them: JSON in, JSON out.

The replies are checked against the fields Claude Code documents for each event:
SessionStart and UserPromptSubmit answer `hookSpecificOutput.hookEventName` and
`additionalContext`; Stop answers `decision: "block"` with a `reason`, or nothing.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from beads.store import Store
from inbox import Delivery
from mail.beadmail import BeadMail
from tests.conftest import GcRunner, gc_program

MAILSCRIPT = Path(__file__).parent / "mailscripts" / "jsonmail"


def hook(gc: GcRunner, event: str, session: str = "s1", agent: str = "dog", **fields: object):
    payload = {
        "session_id": session,
        "transcript_path": f"/tmp/{session}.jsonl",
        "cwd": str(gc.cwd),
        "hook_event_name": event,
        **fields,
    }
    result = gc("hook", "run", input=json.dumps(payload), env={"GC_AGENT": agent})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


@pytest.fixture
def project(gc_store: GcRunner) -> Path:
    """`gc`'s directory, holding a store as `gc init` makes it (a copy of one made once)."""
    return gc_store.cwd


def test_session_start_registers_and_drains_into_additional_context(
    project: Path, gc: GcRunner
) -> None:
    assert gc("mail", "send", "dog", "-s", "Review", "-m", "Please review PR 12",
              env={"GC_AGENT": "mayor"}).returncode == 0  # fmt: skip
    reply = hook(gc, "SessionStart", source="startup")
    assert set(reply) == {"hookSpecificOutput"}
    out = reply["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    assert "Please review PR 12" in out["additionalContext"]
    assert out["additionalContext"].startswith("<system-reminder>")
    sessions = gc.json("session", "list")["sessions"]
    assert [(s["session"], s["agent"], s["state"]) for s in sessions] == [("s1", "dog", "busy")]
    assert hook(gc, "UserPromptSubmit", prompt="next") is None  # delivered once


@pytest.mark.gc_process
def test_mail_reaches_the_next_prompt_once(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    gc("mail", "send", "dog", "-m", "ping", env={"GC_AGENT": "mayor"})
    reply = hook(gc, "UserPromptSubmit", prompt="hello")
    assert reply["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "ping" in reply["hookSpecificOutput"]["additionalContext"]
    assert hook(gc, "UserPromptSubmit", prompt="again") is None


def test_read_mail_never_reaches_the_hook(project: Path, gc: GcRunner) -> None:
    sent = gc.json("mail", "send", "dog", "-m", "already seen", env={"GC_AGENT": "mayor"})
    gc("mail", "read", sent["message"]["id"], env={"GC_AGENT": "dog"})
    assert hook(gc, "SessionStart", source="startup") is None


def test_exec_provider_mail_reaches_the_hook_once(project: Path, gc: GcRunner) -> None:
    env = {"GC_MAIL": f"exec:{MAILSCRIPT}", "JSONMAIL_FILE": str(project / "mailbox.json")}
    gc.env.update(env)
    assert gc("mail", "send", "dog", "-m", "via script", env={"GC_AGENT": "mayor"}).returncode == 0
    reply = hook(gc, "SessionStart", source="startup")
    assert "via script" in reply["hookSpecificOutput"]["additionalContext"]
    assert hook(gc, "UserPromptSubmit", prompt="x") is None


def test_compact_start_drains_again(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    gc("inbox", "push", "--to", "dog", "after compaction", env={"GC_AGENT": "mayor"})
    reply = hook(gc, "SessionStart", source="compact")
    assert "after compaction" in reply["hookSpecificOutput"]["additionalContext"]


def test_pre_compact_marks_nothing_delivered(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    gc("inbox", "push", "--to", "dog", "keep me", env={"GC_AGENT": "mayor"})
    reply = hook(gc, "PreCompact", trigger="auto", custom_instructions="")
    assert set(reply) == {"systemMessage"}  # decision-only: no context (state-checkpoint)
    assert "state-checkpoint" in reply["systemMessage"]
    pending = gc.json("inbox", "list", "--agent", "dog")["items"]
    assert [i["content"] for i in pending] == ["keep me"]


def test_stop_blocks_only_for_priority_zero(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    gc("inbox", "push", "--to", "dog", "later is fine", env={"GC_AGENT": "mayor"})
    assert hook(gc, "Stop", stop_hook_active=False) is None
    assert gc.json("session", "list")["sessions"][0]["state"] == "idle"
    gc("inbox", "push", "--to", "dog", "--priority", "0", "prod is down",
       env={"GC_AGENT": "mayor"})  # fmt: skip
    reply = hook(gc, "Stop", stop_hook_active=False)
    assert reply["decision"] == "block" and "prod is down" in reply["reason"]
    assert "later is fine" not in reply["reason"]
    assert hook(gc, "Stop", stop_hook_active=True) is None
    reply = hook(gc, "UserPromptSubmit", prompt="ok")
    assert "later is fine" in reply["hookSpecificOutput"]["additionalContext"]


def test_session_end_ends_the_session(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    assert hook(gc, "SessionEnd", reason="exit") is None
    assert gc.json("session", "list")["sessions"] == []
    ended = gc.json("session", "list", "--all")["sessions"]
    assert ended[0]["state"] == "ended"


@pytest.mark.gc_process
@pytest.mark.parametrize(
    "stdin", [b"", b"not json", b"[1, 2]", b'{"hook_event_name": "Stop"}', b"\xff\xfe"]
)
def test_bad_hook_input_fails_open(project: Path, gc: GcRunner, stdin: bytes) -> None:
    result = gc("hook", "run", input=stdin)
    assert result.returncode == 0 and result.stdout == "" and "Traceback" not in result.stderr
    assert (project / ".beads" / ".runtime" / "hooks.log").read_text().strip()


@pytest.mark.gc_process
def test_a_hook_whose_directory_holds_a_nul_fails_open_and_asks_before_a_destructive_call(
    project: Path, gc: GcRunner
) -> None:
    odd = {"session_id": "s", "cwd": "/tmp\u0000x"}
    stop = gc("hook", "run", input=json.dumps({**odd, "hook_event_name": "Stop"}))
    assert stop.returncode == 0 and stop.stdout == "" and "Traceback" not in stop.stderr
    call = {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}
    pre = gc("hook", "run", input=json.dumps({**odd, **call, "hook_event_name": "PreToolUse"}))
    assert pre.returncode == 0 and "Traceback" not in pre.stderr, pre.stderr
    decision = json.loads(pre.stdout)["hookSpecificOutput"]["permissionDecision"]
    assert decision in ("ask", "deny")


@pytest.mark.gc_process
@pytest.mark.parametrize("entry", [(), ("--event", "PreToolUse")])
def test_a_hook_whose_directory_is_no_text_fails_open_and_asks_before_a_destructive_call(
    project: Path, gc: GcRunner, entry: tuple[str, ...]
) -> None:
    odd = {"session_id": "s", "cwd": "/tmp/\ud800"}  # a lone surrogate: no file name encodes it
    stop = gc("hook", "run", input=json.dumps({**odd, "hook_event_name": "Stop"}))
    assert stop.returncode == 0 and stop.stdout == "" and stop.stderr == ""
    call = {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}
    payload = json.dumps({**odd, **call, "hook_event_name": "PreToolUse"})
    pre = gc("hook", "run", *entry, input=payload)
    assert pre.returncode == 0 and pre.stderr == "", pre.stderr
    decision = json.loads(pre.stdout)["hookSpecificOutput"]["permissionDecision"]
    assert decision in ("ask", "deny")


@pytest.mark.parametrize("entry", [(), ("--event", "PreToolUse")])
def test_a_hook_whose_stdout_is_closed_ends_quietly(
    project: Path, gc: GcRunner, entry: tuple[str, ...]
) -> None:
    # A reply written to a closed stdout was a traceback and exit 1, the gate's own "ask"
    # after it failing the same way.
    call = {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}, "cwd": str(project)}
    payload = {**call, "session_id": "s", "hook_event_name": "PreToolUse"}
    ran = subprocess.run(
        [gc_program(), "hook", "run", *entry],
        input=json.dumps(payload).encode(),
        stderr=subprocess.PIPE,
        env=gc.env,
        preexec_fn=lambda: os.close(1),  # noqa: PLW1509 - the child's stdout, closed
        timeout=60,
    )
    assert (ran.returncode, ran.stderr) == (0, b""), ran.stderr.decode()


def test_broken_delivery_database_fails_open(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    db = project / ".beads" / ".runtime" / "delivery.sqlite3"
    for extra in ("-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    assert hook(gc, "UserPromptSubmit", prompt="x") is None
    assert "delivery" in (project / ".beads" / ".runtime" / "hooks.log").read_text()


def test_hook_outside_any_store_does_nothing(tmp_path: Path) -> None:
    runner = GcRunner(tmp_path)
    payload = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "cwd": str(tmp_path)}
    result = runner("hook", "run", input=json.dumps(payload))
    assert result.returncode == 0 and result.stdout == ""


@pytest.mark.parametrize("event", ["UserPromptSubmit", "Stop"])
def test_hooks_load_nothing_heavy(project: Path, gc: GcRunner, event: str) -> None:
    # Hooks run on every prompt and stop: `gc hook run` (as installed) must start without
    # click, git (dulwich), YAML (ruamel), mail, typing or dataclasses, nor the NATS client,
    # even on a machine with a NATS server whose pushes and hooks write items for other
    # machines' agents to the outbox (`gc nats`).
    gc("config", "set", "--local", "delivery.nats.url", "nats://127.0.0.1:1")
    gc("gate", "register", "review", "--hook", "Stop", "--mode", "strict")
    gc("gate", "create", "--await", "human", "--waiter", "dog", env={"GC_AGENT": "dog"})
    gc("inbox", "push", "--to", "dog", "build finished")
    # An open decision with a default, not due: the hook answers nothing and loads no git.
    decision = ["--prompt", "Ship?", "--option", "y", "--option", "n", "--default", "n"]
    gc("decision", "create", *decision, "--timeout", "1h")
    heavy = ["click", "dulwich", "ruamel", "mail", "typing", "dataclasses", "nats", "mcp"]
    heavy += ["mcpserver", "mcp_types", "pydantic", "anyio"]  # nor the MCP server (gc mcp)
    if event == "UserPromptSubmit":  # no gate of its own to run: no subprocess, and
        heavy += ["subprocess", "hashlib"]  # no hashing (OpenSSL) of queue lines
    code = (
        "import json, sys; sys.argv = ['gc', 'hook', 'run']\n"
        "from gc_beads.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"heavy = {tuple(heavy)!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))"
    )
    payload = {"session_id": "s", "hook_event_name": event, "cwd": str(project)}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GC_")}, "GC_AGENT": "dog"}
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload), cwd=project,
                         capture_output=True, text=True, env=env, check=True).stdout  # fmt: skip
    reply, loaded = out.strip().splitlines()
    if event == "Stop":  # it did its job: the unmarked strict gate blocks
        assert json.loads(reply)["decision"] == "block"
    else:  # and the prompt hook delivered the item
        assert "build finished" in json.loads(reply)["hookSpecificOutput"]["additionalContext"]
    assert json.loads(loaded) == []
    with Delivery.open(project / ".beads") as delivery:  # dog lives elsewhere: outboxed
        assert delivery.db.execute("SELECT count(*) FROM outbox").fetchone()[0] >= 1


# What the prompt hook, with nothing to deliver, never imports: every prompt of every agent
# runs it, so each of these would be paid on every prompt. Lazy imports and `TYPE_CHECKING`
# blocks in the hook's modules keep them out; this list is what they keep out today.
NEVER_ON_THE_PROMPT_HOOK = (
    "typing", "dataclasses", "inspect", "dulwich", "ruamel", "click", "filelock", "decimal",
    "difflib", "logging", "uuid", "subprocess", "hashlib", "argparse", "email", "socket",
    "ssl", "threading", "asyncio", "tempfile", "shutil", "zoneinfo", "textwrap", "random",
    "base64", "zlib", "bz2", "lzma", "pickle", "traceback", "tokenize", "ast", "mail", "web",
    "mcpserver", "nats", "mcp", "pydantic", "anyio", "flask",
)  # fmt: skip


def test_the_prompt_hook_with_nothing_pending_imports_none_of_the_slow_modules(
    project: Path,
) -> None:
    payload = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "cwd": str(project)}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GC_")}, "GC_AGENT": "dog"}
    result = subprocess.run(
        [sys.executable, "-X", "importtime", gc_program(), "hook", "run"],
        input=json.dumps(payload), cwd=project, capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0 and result.stdout == "", result.stderr[-2000:]
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "beads" in imported and "gates" in imported  # the hook's own code did run
    assert sorted(imported & set(NEVER_ON_THE_PROMPT_HOOK)) == []


def test_hook_with_stdout_closed_still_exits_zero(project: Path, gc: GcRunner) -> None:
    gc("inbox", "push", "--to", "dog", "there is news")
    payload = json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit"})
    env = {**gc.env, "GC_AGENT": "dog"}
    command = f"{shlex.quote(gc_program())} hook run >&-"  # a shell to close stdout: no user text
    result = subprocess.run(command, shell=True, cwd=project, env=env, input=payload,
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0 and result.stderr == ""


def test_hook_run_with_options_goes_through_the_full_cli(project: Path, gc: GcRunner) -> None:
    gc("inbox", "push", "--to", "dog", "--priority", "0", "deploy is on fire")
    payload = json.dumps({"session_id": "s9", "hook_event_name": "Stop", "cwd": "/"})
    result = gc("hook", "run", "--beads-dir", str(project / ".beads"), input=payload,
                env={"GC_AGENT": "dog"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply["decision"] == "block" and "deploy is on fire" in reply["reason"]


@pytest.mark.gc_process
def test_hung_nudge_is_killed_and_reported(project: Path, gc: GcRunner) -> None:
    pidfile = project / "nudge.pid"
    script = f"echo $$ > {pidfile}; exec sleep 60"
    nudge = json.dumps(["sh", "-c", script])
    assert gc("config", "set", "agents.dog.nudge", nudge, process=False).returncode == 0
    assert gc("config", "set", "delivery.nudge_timeout", "1s", process=False).returncode == 0
    here = GcRunner(project)  # dog's session, idle, made in this process
    hook(here, "SessionStart", source="startup")
    hook(here, "Stop", stop_hook_active=False)
    started = time.monotonic()
    assert gc("inbox", "push", "--to", "dog", "wake up").returncode == 0
    assert time.monotonic() - started < 40  # never waits for the nudge's 60 s
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        session = gc.json("session", "list", process=False)["sessions"][0]
        if session["nudge_outcome"]:
            break
        time.sleep(0.1)
    assert session["nudge_outcome"] == "timed out"
    assert "timed out" in gc("session", "list", process=False).stdout
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_nudge_that_cannot_start_says_why(tmp_path: Path) -> None:
    from inbox.nudge import run_job

    no_shebang = tmp_path / "nudger"
    no_shebang.write_text("echo hi\n")
    no_shebang.chmod(0o755)
    for program, why in ((tmp_path, "is a directory, not a program"),
                         (no_shebang, "cannot be run here (a script needs a #! line)"),
                         (tmp_path / "none", "was not found")):  # fmt: skip
        assert run_job({"argv": [str(program)], "timeout": 5}) == (
            "failed",
            f"{str(program)!r} {why}",
        )


def test_nudge_only_idle_agents_once_per_interval(project: Path, gc: GcRunner) -> None:
    log = project / "nudges.log"
    argv = ["sh", "-c", f'echo "$0 $1" >> {log}', "{session}", "{text}"]
    gc("config", "set", "agents.dog.nudge", json.dumps(argv))
    hook(gc, "SessionStart", source="startup")
    gc("inbox", "push", "--to", "dog", "busy: no nudge")
    hook(gc, "Stop", stop_hook_active=False)
    gc("inbox", "push", "--to", "dog", "idle: nudge")
    gc("inbox", "push", "--to", "dog", "within the interval: no nudge")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not log.exists():
        time.sleep(0.1)
    time.sleep(0.5)
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("s1 ") and "idle: nudge" in lines[0]
    assert gc.json("session", "list")["sessions"][0]["nudge_outcome"] == "ok"


def test_install_merges_idempotently(tmp_path: Path, gc: GcRunner) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"type": "command", "command": "echo mine"}
    settings.write_text(json.dumps({
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {"Stop": [{"hooks": [mine]}],
                  "PreToolUse": [{"matcher": "Bash", "hooks": [mine]}]},
    }))  # fmt: skip
    assert gc("hook", "install").returncode == 0
    once = json.loads(settings.read_text())
    assert gc("hook", "install").returncode == 0
    twice = json.loads(settings.read_text())
    assert once == twice
    assert twice["permissions"] == {"allow": ["Bash(ls:*)"]}
    # PreToolUse names its event, so a payload the hook cannot read is still asked about;
    # every entry has a timeout Claude Code never reaches (cut off, a hook decides nothing).
    ours = {"type": "command", "command": "gc hook run --event PreToolUse", "timeout": 30}
    assert twice["hooks"]["PreToolUse"] == [
        {"matcher": "Bash", "hooks": [mine]},  # the user's entry kept, ours added beside it
        {"matcher": "Bash|Write|Edit", "hooks": [ours]},
    ]
    for event in ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop", "SessionEnd"):
        entries = [h for g in twice["hooks"][event] for h in g["hooks"]]
        assert [h for h in entries if h["command"] == "gc hook run"] == [
            {"type": "command", "command": "gc hook run", "timeout": 120}
        ]
    assert [h["command"] for g in twice["hooks"]["Stop"] for h in g["hooks"]] == [
        "echo mine",
        "gc hook run",
    ]


def test_install_brings_an_older_pre_tool_use_entry_up_to_date(
    tmp_path: Path, gc: GcRunner
) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    old = {"type": "command", "command": "gc hook run"}
    settings.write_text(json.dumps({"hooks": {
        "PreToolUse": [{"matcher": "Bash|Write|Edit", "hooks": [dict(old)]}],
        "Stop": [{"hooks": [dict(old)]}],
    }}))  # fmt: skip
    reply = gc.json("hook", "install")
    assert "PreToolUse" in reply["added"] and "Stop" in reply["added"]
    hooks = json.loads(settings.read_text())["hooks"]
    new = {"type": "command", "command": "gc hook run --event PreToolUse", "timeout": 30}
    assert hooks["PreToolUse"] == [{"matcher": "Bash|Write|Edit", "hooks": [new]}]
    assert hooks["Stop"] == [{"hooks": [{**old, "timeout": 120}]}]
    assert gc.json("hook", "install")["added"] == []


def test_install_refuses_a_broken_settings_file(tmp_path: Path, gc: GcRunner) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text("{not json")
    result = gc("hook", "install", "--settings", str(settings))
    assert result.returncode == 30 and "not valid JSON" in result.stderr
    assert settings.read_text() == "{not json"


def test_install_through_a_symlinked_settings_file_updates_the_file_it_points_to(
    tmp_path: Path, gc: GcRunner
) -> None:
    dotfile = tmp_path / "dotfiles" / "settings.json"
    dotfile.parent.mkdir()
    dotfile.write_text(json.dumps({"permissions": {"allow": ["Bash(ls:*)"]}}))
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.symlink_to(Path("..") / "dotfiles" / "settings.json")
    assert gc("hook", "install").returncode == 0
    assert settings.is_symlink() and os.readlink(settings) == "../dotfiles/settings.json"
    written = json.loads(dotfile.read_text())
    assert written["permissions"] == {"allow": ["Bash(ls:*)"]} and "Stop" in written["hooks"]
    assert sorted(p.name for p in dotfile.parent.iterdir()) == ["settings.json"]


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_install_refuses_a_settings_path_that_is_not_a_regular_file(
    tmp_path: Path, gc: GcRunner, kind: str
) -> None:
    target = tmp_path / "settings.json"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    # A reader blocked opening the FIFO gets an end of file, so a gc that opens it fails
    # this test rather than hanging it.
    done = threading.Event()

    def end_any_reader() -> None:
        while not done.wait(0.05):
            try:
                os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # no reader (ENXIO), or a directory

    feeder = threading.Thread(target=end_any_reader, daemon=True)
    feeder.start()
    try:
        for link in (None, tmp_path / "link.json"):
            if link is not None:
                link.symlink_to(target)
            result = gc("hook", "install", "--settings", str(link or target))
            assert result.returncode == 30, result.stderr
            assert result.stderr.strip() == f"gc: cannot read {link or target}: not a regular file"
    finally:
        done.set()
        feeder.join()
    is_kind = stat.S_ISFIFO if kind == "fifo" else stat.S_ISDIR
    assert is_kind(target.lstat().st_mode) and sorted(os.listdir(tmp_path)) == [
        "link.json",
        "settings.json",
    ]


def test_install_refuses_a_too_deeply_nested_settings_file_as_invalid_json(
    tmp_path: Path, gc: GcRunner
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text("[" * 100_000)
    result = gc("hook", "install", "--settings", str(settings))
    assert result.returncode == 30, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "not valid JSON" in result.stderr
    assert settings.read_text() == "[" * 100_000


def test_inbox_cli_push_list_drain_wait(project: Path, gc: GcRunner) -> None:
    pushed = gc.json("inbox", "push", "--to", "dog", "--type", "alert", "--dedup-key", "k", "hi")
    assert pushed["items"][0]["created"] is True
    again = gc.json("inbox", "push", "--to", "dog", "--dedup-key", "k", "hi again")
    assert again["items"][0]["created"] is False
    assert gc("inbox", "wait", "--agent", "dog", "--timeout", "1").returncode == 0
    assert gc("inbox", "wait", "--agent", "cat", "--timeout", "0.2").returncode == 10
    drained = gc.json("inbox", "drain", "--session", "cli-1", "--agent", "dog")
    assert [i["content"] for i in drained["items"]] == ["hi"]
    assert "<system-reminder>" in drained["text"]
    assert gc.json("inbox", "list", "--agent", "dog", "--delivered")["items"][0]["state"] == (
        "delivered"
    )
    bad = gc("inbox", "push", "--to", "../x", "hi")
    assert bad.returncode == 30 and "Traceback" not in bad.stderr
    assert gc("inbox", "drain", "--session", "../etc").returncode == 30


def test_drain_reconcile_recovers_missed_mail_items(project: Path, gc: GcRunner) -> None:
    with Store.open(project) as store:
        BeadMail(store).send("mayor", "dog", "s", "missed")
    with Delivery(store.root) as delivery:
        delivery.db.execute("DELETE FROM items")
    drained = gc.json("inbox", "drain", "--session", "s9", "--agent", "dog", "--reconcile")
    assert "missed" in drained["text"]


def test_push_onto_one_sessions_queue(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    queued = gc("inbox", "push", "--session", "s1", "--priority", "0", "just for s1")
    assert queued.returncode == 0, queued.stderr
    assert (project / ".beads" / ".runtime" / "inject-queue" / "s1.jsonl").read_text().strip()
    reply = hook(gc, "Stop", stop_hook_active=False)
    assert reply["decision"] == "block" and "just for s1" in reply["reason"]
