"""Session gates on PreToolUse, UserPromptSubmit and PreCompact, through `gc hook run` with
the JSON Claude Code sends; replies checked against the shapes its hooks reference documents
(../shared/CLAUDE_HOOKS.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GcRunner


def hook(gc: GcRunner, event: str, session: str = "s1", **fields: object) -> dict | None:
    payload = {
        "session_id": session,
        "transcript_path": f"/tmp/{session}.jsonl",
        "cwd": str(gc.cwd),
        "hook_event_name": event,
        "permission_mode": "default",
        **fields,
    }
    result = gc("hook", "run", input=json.dumps(payload), env={"GC_AGENT": "dog"})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def bash(gc: GcRunner, command: str) -> dict | None:
    reply = hook(gc, "PreToolUse", tool_name="Bash", tool_use_id="toolu_1",
                 tool_input={"command": command, "description": "run it"})  # fmt: skip
    check_pre_tool_use_shape(reply)
    return reply


def check_pre_tool_use_shape(reply: dict | None) -> None:
    """PreToolUse: `hookSpecificOutput` with hookEventName, permissionDecision and its reason;
    `systemMessage` beside it; nothing else."""
    if reply is None:
        return
    assert set(reply) <= {"hookSpecificOutput", "systemMessage"}
    if "hookSpecificOutput" in reply:
        out = reply["hookSpecificOutput"]
        assert set(out) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
        assert out["hookEventName"] == "PreToolUse"
        assert out["permissionDecision"] in ("allow", "deny", "ask")
        assert isinstance(out["permissionDecisionReason"], str) and out["permissionDecisionReason"]
    if "systemMessage" in reply:
        assert isinstance(reply["systemMessage"], str)


def denied(reply: dict | None) -> bool:
    return bool(reply) and reply.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def made_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git work tree with one commit and a gc store, made once for the module."""
    where = tmp_path_factory.mktemp("project")
    git(where, "init", "-q", "-b", "main")
    git(where, "config", "user.email", "t@example.com")
    git(where, "config", "user.name", "t")
    (where / "file.txt").write_text("one\n")
    git(where, "add", "file.txt")
    git(where, "commit", "-qm", "first")
    assert GcRunner(where)("init").returncode == 0
    (where / ".gitignore").write_text(".beads/\n")
    git(where, "add", ".gitignore")
    git(where, "commit", "-qm", "ignore the store")
    return where


@pytest.fixture
def project(tmp_path: Path, made_project: Path) -> Path:
    """A copy of `made_project` in `tmp_path` (where the `gc` fixture runs): twelve processes
    fewer a test than making it."""
    shutil.copytree(made_project, tmp_path, symlinks=True, dirs_exist_ok=True)
    return tmp_path


DESTRUCTIVE = [
    "rm -rf /",
    "rm -rf ~",
    "rm -rf .git",
    "rm -rf /etc/nginx",
    "rm -r ../sibling",
    "sudo rm -rf /var/lib",
    "env FOO=1 rm -fr $HOME/projects",
    'bash -c "cd build && rm -rf /"',
    "make clean; rm -rf /opt",
    "true && sh -c 'rm -R ~/'",
    "ls | xargs echo ok && rm -rf .git/",
    "git push --force origin main",
    "git push -f origin master",
    "git push origin +main",
    "git push --force-with-lease origin HEAD:refs/heads/main",
    "git push --mirror backup",
    "git clean -fdx",
    "git clean -xfd",
    'psql -c "DROP TABLE users"',
    "mysql -e 'drop database shop'",
    "dropdb shop",
    "mkfs.ext4 /dev/sdb1",
    "sudo mkfs -t xfs /dev/sdc",
    "dd if=image.iso of=/dev/sda bs=4M",
]

HARMLESS = [
    "rm -rf ./build",
    "rm -rf build/ dist/",
    "rm -f /tmp/x",  # not recursive
    'echo "rm -rf /"',
    "echo rm -rf /",
    "grep -r 'rm -rf /' .",
    "git push origin main",
    "git push --force origin feature/x",
    "git clean -n",
    "git clean -fd",
    "git reset --hard",  # a clean work tree: nothing to lose
    'echo "DROP TABLE users"',
    "psql -c 'SELECT 1'",
    "dd if=/dev/zero of=./disk.img bs=1M count=1",
    "dd if=x of=/dev/null",
    "ls -la",
]


@pytest.mark.parametrize("command", DESTRUCTIVE)
def test_destructive_commands_are_denied(project: Path, gc: GcRunner, command: str) -> None:
    reply = bash(gc, command)
    assert denied(reply), command
    assert "destructive-op" in reply["hookSpecificOutput"]["permissionDecisionReason"]


@pytest.mark.parametrize("command", HARMLESS)
def test_harmless_look_alikes_pass(project: Path, gc: GcRunner, command: str) -> None:
    assert not denied(bash(gc, command)), command


def test_reset_hard_is_denied_only_with_uncommitted_work(project: Path, gc: GcRunner) -> None:
    assert not denied(bash(gc, "git reset --hard HEAD"))
    (project / "file.txt").write_text("changed\n")
    reply = bash(gc, "git reset --hard HEAD")
    assert denied(reply)
    assert "uncommitted" in reply["hookSpecificOutput"]["permissionDecisionReason"]


def test_force_push_without_refspec_judges_the_current_branch(project: Path, gc: GcRunner) -> None:
    assert denied(bash(gc, "git push --force"))  # on main
    git(project, "checkout", "-qb", "topic")
    assert not denied(bash(gc, "git push --force"))


def test_patterns_allow_list_and_protected_branches_are_settings(
    project: Path, gc: GcRunner
) -> None:
    assert gc("config", "set", "gates.destructive.allow", '["rm -r* /srv/cache/*"]').returncode == 0
    assert (
        gc("config", "set", "gates.destructive.patterns", '["terraform destroy"]').returncode == 0
    )
    assert gc("config", "set", "gates.destructive.protected_branches",
              '["release"]').returncode == 0  # fmt: skip
    assert not denied(bash(gc, "rm -rf /srv/cache/tiles"))
    assert denied(bash(gc, "rm -rf /srv/data"))
    assert denied(bash(gc, "cd infra && terraform destroy -auto-approve"))
    assert denied(bash(gc, "git push -f origin release"))
    assert not denied(bash(gc, "git push -f origin main"))
    result = gc("config", "set", "gates.destructive.allow", '"rm"')
    assert result.returncode == 30 and "list" in result.stderr


def test_disabled_destructive_op_denies_nothing(project: Path, gc: GcRunner) -> None:
    assert gc("config", "set", "gates.disabled", '["destructive-op"]').returncode == 0
    reply = bash(gc, "rm -rf /")
    assert not denied(reply) and "sandbox-boundary" in reply["systemMessage"]  # still warns


def test_sandbox_boundary_warns_on_writes_outside_the_project(
    project: Path, gc: GcRunner, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    inside = hook(gc, "PreToolUse", tool_name="Write",
                  tool_input={"file_path": str(project / "a.txt"), "content": "x"})  # fmt: skip
    assert inside is None
    assert gc("config", "set", "gates.sandbox.roots", "[]").returncode == 0
    outside = hook(gc, "PreToolUse", tool_name="Edit",
                   tool_input={"file_path": str(elsewhere / "b.txt"), "old_string": "a",
                               "new_string": "b"})  # fmt: skip
    check_pre_tool_use_shape(outside)
    assert set(outside) == {"systemMessage"}  # soft: warns, never denies
    assert "sandbox-boundary" in outside["systemMessage"]
    reply = bash(gc, f"echo hi > {elsewhere}/c.txt")
    assert set(reply) == {"systemMessage"} and "sandbox-boundary" in reply["systemMessage"]
    assert gc("config", "set", "gates.sandbox.roots", json.dumps([str(elsewhere)])).returncode == 0
    assert bash(gc, f"cp a.txt {elsewhere}/d.txt") is None


def test_registered_pre_tool_use_gate_judges_each_call_and_is_never_marked(
    project: Path, gc: GcRunner
) -> None:
    # The check reads the hook's JSON on stdin: it refuses calls that mention "secret".
    check = "sh -c '! grep -q secret'"
    result = gc("gate", "register", "no-secrets", "--hook", "PreToolUse", "--mode", "strict",
                "--check", check)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert bash(gc, "ls") is None
    reply = bash(gc, "cat secret.txt")
    assert denied(reply) and "no-secrets" in reply["hookSpecificOutput"]["permissionDecisionReason"]
    assert bash(gc, "ls") is None
    assert not (project / ".beads" / ".runtime" / "gates" / "s1" / "no-secrets").exists()
    assert denied(bash(gc, "cat secret.txt"))  # a passing call exempts no later one


def test_built_in_ids_cannot_be_registered(project: Path, gc: GcRunner) -> None:
    result = gc("gate", "register", "destructive-op", "--hook", "PreToolUse", "--mode", "soft")
    assert result.returncode == 30 and "built-in" in result.stderr


def test_context_injection_says_what_waits(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    assert gc("config", "set", "delivery.max_items", "1").returncode == 0
    for n in range(3):
        gc("inbox", "push", "--to", "dog", f"item {n}", env={"GC_AGENT": "mayor"})
    reply = hook(gc, "UserPromptSubmit", prompt="go on")
    assert set(reply) == {"hookSpecificOutput"}
    out = reply["hookSpecificOutput"]
    assert set(out) == {"hookEventName", "additionalContext"}
    assert out["hookEventName"] == "UserPromptSubmit"
    assert "item 0" in out["additionalContext"]
    assert "context-injection: 2 more item(s)" in out["additionalContext"]


def test_stale_context_when_items_waited_past_the_setting(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    gc("inbox", "push", "--to", "dog", "fresh", env={"GC_AGENT": "mayor"})
    reply = hook(gc, "UserPromptSubmit", prompt="go on")
    assert "stale-context" not in reply["hookSpecificOutput"]["additionalContext"]
    assert gc("config", "set", "gates.stale_context_after", "0s").returncode == 0
    gc("inbox", "push", "--to", "dog", "old news", env={"GC_AGENT": "mayor"})
    reply = hook(gc, "UserPromptSubmit", prompt="go on")
    text = reply["hookSpecificOutput"]["additionalContext"]
    assert "old news" in text and "stale-context" in text


def test_pre_compact_warns_of_pending_items_and_dirty_work(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    assert hook(gc, "PreCompact", trigger="auto", custom_instructions="") is None
    (project / "file.txt").write_text("edited\n")
    gc("inbox", "push", "--to", "dog", "keep me", env={"GC_AGENT": "mayor"})
    reply = hook(gc, "PreCompact", trigger="manual", custom_instructions="")
    assert set(reply) == {"systemMessage"}  # decision-only: no hookSpecificOutput
    assert "state-checkpoint" in reply["systemMessage"]
    assert "dirty-work" in reply["systemMessage"]


def test_registered_pre_compact_gate_blocks_then_its_passing_check_marks_it(
    project: Path, gc: GcRunner
) -> None:
    hook(gc, "SessionStart", source="startup")
    flag = project / ".beads" / "ready"  # ignored: the work tree stays clean
    result = gc("gate", "register", "notes-saved", "--hook", "PreCompact", "--mode", "strict",
                "--check", f"test -e {flag}", "--description", "notes saved")  # fmt: skip
    assert result.returncode == 0, result.stderr
    reply = hook(gc, "PreCompact", trigger="auto", custom_instructions="")
    assert reply["decision"] == "block" and "notes-saved" in reply["reason"]
    assert "hookSpecificOutput" not in reply
    flag.touch()
    assert hook(gc, "PreCompact", trigger="auto", custom_instructions="") is None
    marker = project / ".beads" / ".runtime" / "gates" / "s1" / "notes-saved"
    assert marker.exists()
    flag.unlink()  # marked: satisfied for the rest of the session
    assert hook(gc, "PreCompact", trigger="auto", custom_instructions="") is None


def test_registered_user_prompt_submit_gate_refuses_the_prompt(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    gc("gate", "register", "plan", "--hook", "UserPromptSubmit", "--mode", "strict")
    gc("inbox", "push", "--to", "dog", "not yet", env={"GC_AGENT": "mayor"})
    reply = hook(gc, "UserPromptSubmit", prompt="go")
    assert set(reply) == {"decision", "reason"} and reply["decision"] == "block"
    assert gc("gate", "mark", "plan", "--session", "s1").returncode == 0
    reply = hook(gc, "UserPromptSubmit", prompt="go")
    assert "not yet" in reply["hookSpecificOutput"]["additionalContext"]  # kept, not lost


def test_passing_stop_check_writes_the_marker(project: Path, gc: GcRunner) -> None:
    hook(gc, "SessionStart", source="startup")
    gc("gate", "register", "tests", "--mode", "strict", "--check", "true")
    assert hook(gc, "Stop", stop_hook_active=False) is None
    assert (project / ".beads" / ".runtime" / "gates" / "s1" / "tests").exists()


def test_a_fault_fails_open(project: Path, gc: GcRunner) -> None:
    reply = hook(gc, "PreToolUse", tool_name="Bash", tool_input="not an object")
    assert reply is None


def test_pre_tool_use_loads_only_its_own_path(project: Path, gc: GcRunner) -> None:
    # Run before every tool call: no click, git, YAML, typing, dataclasses, pathlib (~3 ms,
    # with urllib and ipaddress), and not even the delivery database (inbox) or the other
    # events' gates.
    code = (
        "import json, sys; sys.argv = ['gc', 'hook', 'run']\n"
        "from beads.cli.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('click', 'dulwich', 'ruamel', 'mail', 'inbox', 'typing', 'dataclasses',\n"
        "         'subprocess', 'pathlib', 'gates.hooks', 'gates.events', 'gates.session_gates')\n"
        "print(json.dumps(sorted(m for m in sys.modules\n"
        "                        if m in heavy or m.split('.')[0] in heavy)))"
    )
    payload = {"session_id": "s", "hook_event_name": "PreToolUse", "cwd": str(project),
               "tool_name": "Bash", "tool_input": {"command": "sudo rm -rf / && ls"}}  # fmt: skip
    env = {k: v for k, v in gc.env.items() if not k.startswith("GC_")}
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload), cwd=project,
                         capture_output=True, text=True, env=env, check=True).stdout  # fmt: skip
    reply, loaded = out.strip().splitlines()
    assert denied(json.loads(reply))
    assert json.loads(loaded) == []
