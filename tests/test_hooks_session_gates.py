"""Session gates on PreToolUse, UserPromptSubmit and PreCompact, through `gc hook run` with
the JSON Claude Code sends; replies checked against the shapes its hooks reference documents
(../shared/CLAUDE_HOOKS.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import GcRunner, copy_approvals, copy_tree


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
    return answer(reply) == "deny"


def answer(reply: dict | None) -> str | None:
    """The reply's permissionDecision (None: no decision)."""
    return (reply or {}).get("hookSpecificOutput", {}).get("permissionDecision")


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def made_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git work tree with one commit and a gc store, made once for the module."""
    where = tmp_path_factory.mktemp("project")
    # No template: its sample hooks are files each test's copy would copy, and git needs none.
    git(where, "init", "-q", "-b", "main", "--template=")
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
    """A copy of `made_project` in `tmp_path` (where the `gc` fixture runs), with the first
    run its `gc init` recorded (`copy_store`): twelve processes fewer a test than making it."""
    copy_tree(made_project, tmp_path)
    copy_approvals(made_project / ".beads", tmp_path / ".beads")
    return tmp_path


DESTRUCTIVE = [
    "rm -rf /",
    "rm -rf ~",
    "rm -rf .git",
    "rm -rf /etc/nginx",
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


@pytest.mark.parametrize(
    "command, reason",
    [
        ('rm -rf "$D"/x', "its target '…/x' is a variable or substitution"),
        ("sudo $CMD", "it runs the command held in '…'"),
        ("$x -rf /", "its program '…' is a variable, and as rm it would be stopped"),
        ("rm -rf /$(date)", "it removes '/…', a top-level directory"),
    ],
)
def test_a_word_the_gate_cannot_know_is_shown_as_an_ellipsis_not_shell_syntax(
    project: Path, gc: GcRunner, command: str, reason: str
) -> None:
    # `$?` read as the shell's exit status: an unknown part of a word is shown as `…`.
    said = bash(gc, command)["hookSpecificOutput"]["permissionDecisionReason"]
    assert said == f"gc destructive-op: `{command}`: {reason}."


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
    assert bash(gc, "rm -rf /srv/cache/tiles") is not None  # no decision: the soft warning only
    assert answer(bash(gc, "rm -rf /srv/cache/tiles")) is None
    assert answer(bash(gc, "rm -rf /srv/data")) == "ask"
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
    assert "context-injection: 2 more items" in out["additionalContext"]


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


def test_a_bash_call_the_gate_cannot_read_is_asked_about(project: Path, gc: GcRunner) -> None:
    reply = hook(gc, "PreToolUse", tool_name="Bash", tool_input="not an object")
    check_pre_tool_use_shape(reply)
    assert answer(reply) == "ask"


UNREADABLE_PAYLOADS = [
    b"",
    b"{not json",
    b"[]",
    b"null",
    b'{"tool_name":"Bash","tool_input":{"command":"ls\x00"}}',  # a raw NUL byte
    b'{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
]


@pytest.mark.parametrize("raw", UNREADABLE_PAYLOADS, ids=["empty", "not-json", "array", "null",
                                                         "raw-nul", "too-deep"])  # fmt: skip
def test_a_payload_the_pre_tool_use_entry_cannot_read_is_asked_about(
    project: Path, gc: GcRunner, raw: bytes
) -> None:
    result = gc("hook", "run", "--event", "PreToolUse", input=raw)
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    check_pre_tool_use_shape(reply)
    assert answer(reply) == "ask"


def test_the_pre_tool_use_entry_judges_a_call_whatever_event_it_names(
    project: Path, gc: GcRunner
) -> None:
    for named in ({}, {"hook_event_name": None}, {"hook_event_name": "PostToolUse"}):
        payload = {"cwd": str(project), "tool_name": "Bash",
                   "tool_input": {"command": "rm -rf /"}, **named}  # fmt: skip
        result = gc("hook", "run", "--event", "PreToolUse", input=json.dumps(payload))
        assert denied(json.loads(result.stdout)), named
    quiet = {"cwd": str(project), "tool_name": "Bash", "tool_input": {"command": "ls -la"}}
    assert gc("hook", "run", "--event", "PreToolUse", input=json.dumps(quiet)).stdout == ""


@pytest.mark.parametrize(
    "payload",
    [
        {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}},
        {"hook_event_name": None, "tool_name": "Bash", "tool_input": {"command": "ls"}},
        {"hook_event_name": "pretooluse", "tool_name": "Bash", "tool_input": {"command": "ls"}},
        {"hook_event_name": "Pre_Tool_Use", "tool_input": {"command": "rm -rf /"}},
        {"hook_event_name": "Other", "tool_name": "Bash", "tool_input": {"command": "ls"}},
        {"hook_event_name": ["PreToolUse"], "tool_name": "Bash"},
    ],
)
def test_a_tool_call_under_an_event_name_the_old_entry_cannot_trust_is_asked_about(
    project: Path, gc: GcRunner, payload: dict
) -> None:
    result = gc("hook", "run", input=json.dumps({"cwd": str(project), **payload}))
    assert result.returncode == 0, result.stderr
    assert answer(json.loads(result.stdout)) == "ask"


def test_the_old_entry_still_judges_pre_tool_use_and_leaves_other_events_alone(
    project: Path, gc: GcRunner
) -> None:
    assert gc("hook", "run", input=b'{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}").stdout == ""
    assert gc("hook", "run", input=b"{not json").stdout == ""  # not a tool call: fails open
    assert denied(bash(gc, "rm -rf /"))
    post = hook(gc, "PostToolUse", tool_name="Bash", tool_input={"command": "rm -rf /"})
    assert answer(post) is None


@pytest.mark.parametrize(
    ("command", "parser"), [("ls -la && git status", False), ("sudo rm -rf / && ls", True)]
)
def test_pre_tool_use_loads_only_its_own_path(
    project: Path, gc: GcRunner, command: str, parser: bool
) -> None:
    # Run before every tool call: no click, git, YAML, typing, dataclasses, pathlib (~3 ms,
    # with urllib and ipaddress), and not even the delivery database (inbox) or the other
    # events' gates. A command the pre-screen cannot answer loads the parser, whose package
    # imports typing and pathlib, and nothing else heavy.
    light = "" if parser else ", 'typing', 'pathlib'"
    code = (
        "import json, sys; sys.argv = ['gc', 'hook', 'run']\n"
        "from gc_beads.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('click', 'dulwich', 'ruamel', 'mail', 'inbox', 'dataclasses', 'subprocess',\n"
        f"         'gates.hooks', 'gates.promptchains', 'gates.session_gates',\n"
        f"         'beads.records.record',\n"
        f"         'tree_sitter'{light})\n"
        "print(json.dumps(sorted(m for m in sys.modules\n"
        "                        if m in heavy or m.split('.')[0] in heavy)))"
    )
    payload = {"session_id": "s", "hook_event_name": "PreToolUse", "cwd": str(project),
               "tool_name": "Bash", "tool_input": {"command": command}}  # fmt: skip
    env = {k: v for k, v in gc.env.items() if not k.startswith("GC_")}
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload), cwd=project,
                         capture_output=True, text=True, env=env, check=True).stdout  # fmt: skip
    if parser:
        reply, loaded = out.strip().splitlines()
        assert denied(json.loads(reply))
        assert json.loads(loaded) == ["tree_sitter", "tree_sitter._binding"]
    else:
        assert out.strip() == "[]"  # no decision: no output at all, nothing heavy loaded


# -- the destructive-op gate on its corpus (tests/data/shell_corpus) -------------------------

CORPUS = Path(__file__).parent / "data" / "shell_corpus"


def corpus(name: str) -> list[tuple[str, str]]:
    """(expected answer, command) pairs of one corpus file (`> ` lines carry on a command)."""
    entries: list[tuple[str, str]] = []
    for line in (CORPUS / f"{name}.txt").read_text().splitlines():
        if line.startswith("> ") or line == ">":
            expected, command = entries[-1]
            entries[-1] = (expected, command + "\n" + line[2:])
        elif line.strip() and not line.startswith("#"):
            expected, _, command = line.partition(" ")
            entries.append((expected, command))
    return entries


@pytest.fixture(scope="module")
def corpus_dir() -> Iterator[Path]:
    """A directory below /tmp, wherever TMPDIR points: the corpus's answers are written for a
    work tree and a home there (`rm -rf /tmp/*` removes them both)."""
    where = Path(tempfile.mkdtemp(prefix="gc-corpus-", dir="/tmp"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(scope="module")
def corpus_tree(corpus_dir: Path) -> Path:
    """The situation the corpus assumes: a work tree on main with a change not committed, a
    branch `topic` not merged and a branch `done` merged, a store, $HOME elsewhere."""
    where = corpus_dir / "project"
    where.mkdir()
    git(where, "init", "-q", "-b", "main")
    git(where, "config", "user.email", "t@example.com")
    git(where, "config", "user.name", "t")
    (where / "file.txt").write_text("one\n")
    git(where, "add", "file.txt")
    git(where, "commit", "-qm", "first")
    git(where, "branch", "done")
    git(where, "checkout", "-qb", "topic")
    (where / "topic.txt").write_text("topic\n")
    git(where, "add", "topic.txt")
    git(where, "commit", "-qm", "topic work")
    git(where, "checkout", "-q", "main")
    (where / "file.txt").write_text("changed, not committed\n")
    assert GcRunner(where)("init").returncode == 0
    return where


@pytest.fixture
def corpus_home(corpus_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The corpus's $HOME (made once: the gate only reads it), and TMPDIR unset: `$TMPDIR`
    in a command then means /tmp, as the corpus is written."""
    home = corpus_dir / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("TMPDIR", raising=False)
    return home


def corpus_mismatch(expected: str, command: str, tree: Path) -> str | None:
    """What is wrong with the gate's answer to a corpus command, or None."""
    from gates.destructive import judge
    from gates.prescreen import undecided

    answer_given, reason = judge(command, str(tree))
    if expected.startswith("miss-"):  # a known miss: once caught, its answer is written down
        if answer_given is not None:
            return f"now {answer_given}: write it down as that ({reason})"
        return None
    if (answer_given or "none") != expected:
        return f"answered {answer_given or 'none'} ({reason or 'no reason'})"
    if bool(reason) != (answer_given is not None):
        return f"a reason ({reason!r}) only goes with an answer"
    if undecided(command) and answer_given is not None:
        return "the pre-screen lets it through, but the parser decides it"
    return None


@pytest.mark.parametrize("name", ["destructive", "harmless", "attacks"])
def test_the_gate_answers_each_corpus_command_as_written_down(
    corpus_tree: Path, corpus_home: Path, name: str
) -> None:
    """Every line of one corpus file (each command judged on its own; a failure lists every
    line whose answer differs from the one written down)."""
    wrong = [
        f"{name}.txt: expected {expected} for {command!r}: {problem}"
        for expected, command in corpus(name)
        if (problem := corpus_mismatch(expected, command, corpus_tree))
    ]
    assert not wrong, "\n".join(wrong)


def test_the_corpus_is_large_and_its_destructive_half_is_all_stopped() -> None:
    destructive, harmless = corpus("destructive"), corpus("harmless")
    assert len(destructive) >= 200 and len(harmless) >= 200
    assert {answer for answer, _ in destructive} == {"deny", "ask"}
    assert {answer for answer, _ in harmless} == {"none"}
    attacks = corpus("attacks")
    assert {answer for answer, _ in attacks} <= {"deny", "ask", "none", "miss-deny", "miss-ask"}
    stopped = [a for a, _ in attacks if a in ("deny", "ask", "miss-deny", "miss-ask")]
    missed = [a for a in stopped if a.startswith("miss-")]
    assert len(attacks) >= 900 and len(missed) <= len(stopped) // 5


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git clean --force --force -d -x", "deny"),
        ("eval eval eval eval eval rm -rf .git", "deny"),
        ("echo 'rm -rf /' | sh", "deny"),
        ("rm -rf $HOMEBREW_CACHE_SUB", "ask"),
        ('rm -rf "~"', None),
        ("gc config set gates.disabled '[\"destructive-op\"]'", "deny"),
        ("pytest -x", None),
    ],
)
def test_the_hook_gives_the_gates_answer_as_claude_code_reads_it(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    reply = bash(gc, command)
    assert answer(reply) == expected
    if expected is not None:
        assert "destructive-op" in reply["hookSpecificOutput"]["permissionDecisionReason"]
    assert answer(reply) != "allow"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("r\\\nm -rf /", "deny"),
        ("rm -rf \\\n/", "deny"),
        ("git re\\\nset --ha\\\nrd", "deny"),
        ("ls \\\n  -la \\\n  src", None),
        ("echo 'a\\\nb'", None),
    ],
)
def test_a_backslash_newline_is_joined_as_bash_joins_it(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    (project / "file.txt").write_text("a change not committed\n")
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("rm -rf {~,/tmp/scratch}", "deny"),
        ("rm -rf {x,/}", "deny"),
        ("rm -rf {src,~/.ssh}", "deny"),
        ("rm -rf x/{a,{b,.git}}", "deny"),
        ("rm -rf {build,dist}", None),
        ("rm -rf ./{build,dist}/", None),
        ("cp file.txt{,.bak}", None),
    ],
)
def test_a_brace_list_is_read_as_the_words_bash_makes_of_it(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("env -C / rm -rf etc", "deny"),
        ("env --chdir=/ rm -rf etc", "deny"),
        ("sudo -D / rm -rf etc", "deny"),
        ('env -C "$D" rm -rf src', "ask"),
        ("cd - && rm -rf *", "ask"),
        ("e=eval; $e 'rm -rf /'", "ask"),
        ("env -C sub rm -rf build", None),
        ("sudo -D /tmp rm -rf scratch", None),
    ],
)
def test_a_command_run_elsewhere_is_judged_where_it_runs(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # The directory a wrapper's option names (`env -C`, `sudo -D`) was passed over, so `etc`
    # was taken as the project's; `cd -` read as a directory named "-"; a variable holding
    # `eval` was never tried as one.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("sg grp -c 'rm -rf ~'", "deny"),
        ("sg grp 'rm -rf ~'", "deny"),
        ("sg - grp -c 'rm -rf .git'", "deny"),
        ("newgrp -c 'rm -rf ~' grp", "deny"),
        ("newgrp grp <<< 'rm -rf ~'", "deny"),
        ('sg grp -c "$CMD"', "ask"),
        ("sg grp -c 'make test'", None),
        ("newgrp docker", None),
    ],
)
def test_the_command_sg_or_newgrp_hands_to_a_shell_is_judged(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # `sg GROUP -c CMD` hands CMD to `/bin/sh -c`; it was taken for a program that runs
    # nothing, so `rm -rf ~` under it passed.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("fd . ~ -x rm -rf", "deny"),
        ("fd -X rm -rf", "deny"),
        ("fd --exec rm -rf", "deny"),
        ("fd . ~ --exec-batch rm -rf", "deny"),
        ("fdfind -X rm -rf", "deny"),
        ("fd -Hx rm -rf", "deny"),
        ("fd git -x rm -rf", "deny"),
        ("fd -e py -x sh -c 'rm -rf ~'", "deny"),
        ("fd -e pyc -x rm", None),
        ("fd __pycache__ -t d -X rm -rf", None),
        ("fd . build -x rm -rf", None),
        ("fd -e py -x black", None),
    ],
)
def test_a_command_fd_runs_on_each_match_is_judged_like_find_exec(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # fd had no rule, and no wrapper runs `rm` at its start, so `fd . ~ -x rm -rf` passed.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (r"find . -name '*.txt' -exec mv {} {}.bak \;", None),
        (r"find . -type f -name '*.orig' -exec mv {} /tmp \;", None),
        (r"find . -path './src/*' -exec mv {} {}.bak \;", None),
        (r"find .. -name '*.txt' -exec mv {} {}.bak \;", None),
        ("fd -e txt -x mv {} {}.bak", None),
        ("fd txt -x mv {} {}.bak", None),
        ("fd -e orig -X mv -t /tmp", None),
        (r"find . -exec mv {} /tmp \;", "deny"),
        (r"find . -name '.*' -exec mv {} /tmp \;", "deny"),
        (r"find . -mindepth 1 -exec mv {} /tmp \;", "deny"),
        (r"find . -name '*git*' -exec mv {} /tmp \;", "deny"),
        (r"find . -exec mv {} /tmp \; -name '*.txt'", "deny"),
        (r"find . -name '*.txt' -o -exec mv {} /tmp \;", "deny"),
        (r"find .. -name '*git' -exec mv {} /tmp \;", "deny"),
        (r"find ~ -name '*ssh*' -exec mv {} /tmp \;", "deny"),
        (r"find ~ -name '*rc' -exec cp evil {} \;", "deny"),
        (r"find src -name .git -exec mv {} /tmp \;", "deny"),
        ("find ~ -name '.*' -exec rm -rf {} +", "deny"),
        ("find / -name '*' -exec rm -rf {} +", "deny"),
        ("fd -x mv {} /tmp", "deny"),
        ("fd -e txt -x mv {//} /tmp", "deny"),
        ("fd -H . -x mv {} /tmp", "deny"),
    ],
)
def test_a_command_run_on_each_match_is_judged_on_what_can_match_not_on_the_root(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # The command `find -exec` or `fd -x` runs was judged with the search root in place of
    # `{}`, so renaming every .txt file was denied as moving the work tree away; a name
    # filter that leaves the root out now puts what it can match there instead.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (r"find build -exec rm -rf / \;", "deny"),
        (r"find build -maxdepth 0 -exec rm -rf ~ \;", "deny"),
        ("find build -name x -exec rm -rf {} ~ +", "deny"),
        ("fd . build -x rm -rf ~", "deny"),
        ("fd -e txt -x rm -rf {//}", "deny"),
        ("find build -name '*.o' -exec rm -f {} +", None),
        ("fd -e pyc build -x rm -f", None),
    ],
)
def test_a_path_written_beside_the_matches_of_find_exec_rm_is_judged(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # `rm` run by `find -exec` or `fd -x` was judged only as deleting what is found, so the
    # paths written in it (`rm -rf /`) and fd's parent placeholder `{//}` passed unread.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -name '*.pack' -delete", "deny"),
        ("find . -name HEAD -delete", "deny"),
        (r"find . -name config -exec cp /evil {} \;", "deny"),
        ("find . -name '*.idx' -exec rm {} +", "deny"),
        ("find . -type f -name 'index' -delete", "deny"),
        ("find . -iname head -delete", "deny"),
        ("find . -name main -delete", "deny"),
        (r"find . -name pre-commit -exec cp evil {} \;", "deny"),
        ("find . -type f -exec sed -i s/a/b/ {} +", "deny"),
        ("find .. -name HEAD -exec cp /evil {} +", "deny"),
        ("find .beads -name config -exec cp /evil {} +", "deny"),
        ("find . -mindepth 2 -name HEAD -delete", "deny"),
        # -delete turns -depth on, and -prune does nothing under -depth.
        ("find . -path ./.git -prune -o -name HEAD -delete", "deny"),
        # Pruning .git alone leaves the store's .beads/.git.
        (r"find . -path ./.git -prune -o -name config -exec cp /evil {} \;", "deny"),
        (r"find . -name .git -prune -o -name config -exec cp /evil {} \;", None),
        (r"find . -not -path '*/.git/*' -name config -exec cp /evil {} \;", None),
        ("find . -maxdepth 1 -type f -name HEAD -delete", None),
        ("find . -path './src/*' -name HEAD -delete", None),
        ("find src -name HEAD -delete", None),
        ("find . -name '*.pyc' -delete", None),
        ("find . -name '__pycache__' -exec rm -rf {} +", None),
        ("find . -type d -name build -exec rm -rf {} +", None),
        ("find . -name '*.orig' -exec rm {} +", None),
        ("find . -name '*.log' -mtime +7 -delete", None),
        ("find . -name '*.py' -exec sed -i s/a/b/ {} +", None),
        ("find . -type f -exec grep -l TODO {} +", None),
    ],
)
def test_find_reaching_the_files_inside_git_is_judged_as_deleting_them_there(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # find goes into .git and .beads/.git, so a name filter that cannot match .git itself
    # (`-name HEAD`, `-name '*.pack'`) still reached git's own files, and passed.
    assert answer(bash(gc, command)) == expected
    if expected == "deny":
        assert answer(bash(gc, "rm .git/HEAD")) == "deny"  # what deleting there gets


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (r"find . \( -name '*.pyc' -o -name '*.pyo' \) -delete", None),
        ("find . -name node_modules -type d -prune -exec rm -rf {} +", None),
        ("find . -name '*.pyc' -o -name '*.pyo' -delete", None),
        (r"find . -type f \( -name '*.orig' -o -name '*.rej' \) -delete", None),
        ("find . -delete", "deny"),
        ("find . -name '*' -delete", "deny"),
        ("find . ! -name '*.py' -delete", "deny"),
        ("find . -o -name x -delete", "deny"),
        (r"find . \( -name '*.pyc' -o -type f \) -delete", "deny"),
        (r"find . \( -name '*.pyc' -o -newer x \) -delete", "deny"),
        (r"find . \( -name '*.pyc' -o -name .claude \) -delete", "deny"),
        ("find . -name '*.pyc' -o -regex '.*' -delete", "deny"),
        (r"find . -maxdepth 1 \( -name '*.pyc' -o -type f \) -delete", "deny"),
        ("find . -name node_modules -prune -o -exec rm -rf {} +", "deny"),
        ("find . -name .git -prune -o -name '*.pyc' -delete", None),
    ],
)
def test_a_deleting_find_with_operators_at_the_top_is_judged_on_what_it_can_reach(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # Any operator (`-o`, `!`, brackets, `-prune`) in a deleting find at the top of the work
    # tree was taken as undoing its name filters, so cleaning *.pyc and *.pyo files, or
    # every node_modules folder, was denied as deleting the whole work tree.
    (project / ".claude").mkdir(exist_ok=True)
    assert answer(bash(gc, command)) == expected


def branch(git_dir: Path, name: str, packed: bool = False) -> None:
    """Make the ref `name` (`refs/heads/build`) point at HEAD in the repository `git_dir`
    (packed into packed-refs when `packed`)."""
    subprocess.run(["git", "--git-dir", str(git_dir), "update-ref", name, "HEAD"], check=True)
    if packed:
        subprocess.run(["git", "--git-dir", str(git_dir), "pack-refs", "--all"], check=True)
        assert not (git_dir / name).exists()


@pytest.mark.parametrize(
    ("refs", "command", "expected"),
    [
        ([], "find . -name build -exec rm -rf {} +", None),
        ([], "find . -name 'v[0-9]*' -delete", None),
        (["refs/heads/build"], "find . -name build -exec rm -rf {} +", "deny"),
        (["packed refs/heads/build"], "find . -name build -exec rm -rf {} +", "deny"),
        (["refs/heads/fix/build"], "find . -name build -delete", "deny"),
        (["refs/tags/v2"], "find . -name 'v[0-9]*' -delete", "deny"),
        (["store refs/heads/build"], "find . -name build -exec rm -rf {} +", "deny"),
        (["refs/heads/feature/x"], "find . -type d -name feature -exec rm -rf {} +", "deny"),
        ([], "find . -name main -delete", "deny"),
        (["packed refs/heads/main"], "find . -name main -delete", "deny"),
    ],
)
def test_a_find_reaches_a_branch_file_only_when_a_branch_of_that_name_exists(
    project: Path, gc: GcRunner, refs: list[str], command: str, expected: str | None
) -> None:
    # A branch could be named anything, so `find . -name build -exec rm -rf {} +` was
    # denied as deleting .git/refs/heads/build; the refs the repository holds are read now.
    for ref in refs:
        where, _, name = ref.rpartition(" ")
        git_dir = project / (".beads/.git" if where == "store" else ".git")
        branch(git_dir, name, packed=where == "packed")
    assert answer(bash(gc, command)) == expected


def test_a_repository_with_more_refs_than_the_gate_reads_keeps_any_name_a_branch(
    project: Path, gc: GcRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reading refs is bounded: past the bound a branch is taken to have any name.
    assert answer(bash(gc, "find . -name build -exec rm -rf {} +")) is None
    monkeypatch.setattr("gates.findreach.REF_LIMIT", 2)
    for n in range(3):
        branch(project / ".git", f"refs/heads/b{n}")
    assert answer(bash(gc, "find . -name build -exec rm -rf {} +")) == "deny"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -name .git -prune -o -name '*.tmp' -delete", None),
        ("find . -name .git -prune -o -name '*.pyc' -delete", None),
        ("find src -name .git -prune -o -name '*.pyc' -delete", None),
        (r"find . \( -name .git -o -name .beads \) -prune -o -name '*.log' -delete", None),
        ("find . -name .git -prune -o -delete", "deny"),
        # -delete turns -prune off: find goes into .git, where HEAD is.
        ("find . -name .git -prune -o -name HEAD -delete", "deny"),
        ("find . -name .git -prune -o -type f -delete", "deny"),
        ("find . -name .git -prune -o -name '.*' -delete", "deny"),
    ],
)
def test_pruning_git_beside_a_delete_is_judged_on_what_the_delete_reaches(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # A filter naming .git anywhere in a deleting find was taken to let it delete .git, so
    # the everyday `find . -name .git -prune -o -name '*.tmp' -delete` was denied.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (r"find . \( -name '*.txt' -o -name '*.md' \) -exec mv {} {}.bak \;", None),
        (r"find . -name '*.txt' -o -name '*.md' -exec mv {} {}.bak \;", None),
        (r"find . -type f \( -name '*.orig' -o -name '*.rej' \) -exec mv {} /tmp \;", None),
        (r"find . -name .git -prune -o -name '*.txt' -exec mv {} {}.bak \;", None),
        (r"find . -name '*.txt' ! -name 'a*' -exec mv {} /tmp \;", None),
        ("find . -name .git -o -name build -exec rm -rf {} +", None),
        (r"find . \( -name a -o -name b \) -exec rm -rf {} +", None),
        (r"find . \( -name a -o -name .git \) -exec rm -rf {} +", "deny"),
        ("find . -name build -o -name .git -exec rm -rf {} +", "deny"),
        ("find . -name x -o -exec rm {} +", "deny"),
        (r"find . -name x -o -exec mv {} /tmp \;", "deny"),
        (r"find . ! -name '*.py' -exec mv {} /tmp \;", "deny"),
        (r"find . -name x , -exec mv {} /tmp \;", "deny"),
        (r"find . \( -name '*.txt' -o -name '.*' \) -exec mv {} /tmp \;", "deny"),
    ],
)
def test_an_operator_before_exec_is_read_as_find_reads_it(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # With any operator before -exec, its command was judged as run on the search root:
    # renaming every *.txt and *.md file was denied as moving the work tree away, and
    # `-name .git -o -name build -exec rm -rf {} +` as deleting the whole tree.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (r"find . -name config.yaml -exec cp /evil {} \;", "deny"),
        ("find . -name '*.yaml' -exec sed -i s/a/b/ {} +", "deny"),
        ("find .. -name config.yaml -exec sed -i s/a/b/ {} +", "deny"),
        ("find . -name '*.sqlite3' -delete", "deny"),
        ("find . -name write.lock -delete", "deny"),
        ("find . -type d -name tmp -exec rm -rf {} +", "deny"),
        ("find . -type d -name tasks -exec rm -rf {} +", "deny"),
        ("find . -name 'gc-*.yaml' -delete", "deny"),
        (r"find . -name settings.json -exec cp /evil {} \;", "deny"),
        (r"find . -name config.yaml -exec cat {} \;", None),
        ("find . -name '*.yaml' -exec yamllint {} +", None),
        (r"find . -name .beads -prune -o -name config.yaml -exec cp /evil {} \;", None),
        (r"find src -name config.yaml -exec cp /evil {} \;", None),
        ("find . -type d -name build -exec rm -rf {} +", None),
    ],
)
def test_find_reaching_the_stores_own_files_is_judged_as_writing_them_there(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # Only git's files were tried: a name filter reaching the store's config.yaml, its
    # databases, locks and view, or Claude Code's settings, passed.
    assert gc("bead", "create", "--type", "task", "--title", "t").returncode == 0
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text("{}\n")
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("fd -H -e pack -x rm", "deny"),
        ("fd -H -e pack -X rm -f", "deny"),
        ("fd -e idx -x rm", "deny"),
        ("fd -H HEAD -x rm", "deny"),
        ("fd -H '^index$' -X rm", "deny"),
        ("fd -H -g config.yaml -x cp /evil", "deny"),
        ("fd -H -e pack -x mv {} /tmp", "deny"),
        ("fd -H -e pack -x rm {.}.idx", "deny"),
        ('fd -H "$P" -x rm', "deny"),
        ("fd -H -e pack -E objects -x rm", None),
        ("fd -H -e pack -d 2 -x rm", None),
        ("fd -H -s head -t f -x rm", None),
        ("fd -H -e pack -x cat", None),
        ("fd -e pyc -x rm", None),
        ("fd -e py -x black", None),
    ],
)
def test_fd_reaching_the_files_inside_git_is_judged_as_find_reaching_them_is(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # fd's filters were only checked against the names .git and .beads, so `fd -H -e pack
    # -x rm`, which deletes git's packs, passed.
    subprocess.run(["git", "gc", "-q"], cwd=project, check=True)
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -name HEAD | xargs rm", "deny"),
        ("find . -name HEAD -print0 | xargs -0 rm -f", "deny"),
        ("find . -name HEAD 2>/dev/null | xargs -r rm", "deny"),
        ("find . -name HEAD | xargs -I{} cp /evil {}", "deny"),
        ("find . -name HEAD | xargs -I % sh -c 'cp /evil %'", "deny"),
        (r"find . -name HEAD -printf '%p\n' | xargs rm", "deny"),
        ("find . -name a -o -name HEAD | xargs rm", "deny"),
        ("find . -name config.yaml | xargs sed -i s/a/b/", "deny"),
        ("find . -type f | xargs rm -rf", "deny"),
        ("fd -H -e pack | xargs rm", "deny"),
        ("fd -H -e pack -0 | xargs -0 rm", "deny"),
        ("find . -name '*.pyc' | xargs rm", None),
        ("find . -name '*.pyc' -print0 | xargs -0 rm -f", None),
        ("find . -name .git -prune -o -name HEAD -print | xargs rm", None),
        (r"find . -name HEAD -printf '%f\n' | xargs rm", None),
        ("find . -name '*.py' | xargs grep -l TODO", None),
        ("fd -e pyc | xargs rm", None),
        ("find . -name '*.pyc' | xargs rm -rf", "ask"),
        ("find . -name HEAD | sort | xargs rm", "deny"),
        ("find . -name HEAD | sort -u | head -5 | tee log | xargs rm", "deny"),
        ("find . -name HEAD 2>/dev/null | cat | xargs rm", "deny"),
        ("find . -name '*.pyc' | sort | xargs rm", None),
        ("find . -name HEAD | grep -v .git | xargs rm", None),
    ],
)
def test_find_piped_to_xargs_is_judged_as_find_exec_running_its_command(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # xargs's input was an unknown argument whatever wrote it, so `find . -name HEAD |
    # xargs rm`, which deletes .git/HEAD as `find . -name HEAD -exec rm {} +` does, passed.
    subprocess.run(["git", "gc", "-q"], cwd=project, check=True)
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (r"find . -maxdepth 0 -exec mv {}/ /tmp \;", "deny"),
        (r"find . -maxdepth 0 -exec sh -c 'mv {} /tmp' \;", "deny"),
        (r"find . -name x -exec rm -rf {}/.. \;", "deny"),
        ("fd -e txt -x sh -c 'mv {//} /tmp'", "deny"),
        (r"find . -name '*.txt' -exec sh -c 'mv {} {}.bak' \;", None),
        ("fd -e txt -x mv {} {.}.md", None),
    ],
)
def test_a_placeholder_inside_a_longer_word_is_put_in_as_find_and_fd_do(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # `{}` was put in only as a whole word: `{}/` and the `{}` in a script `sh -c` runs
    # were read as literal text, so moving the work tree away passed.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("fd -g .git build -x mv {/} /tmp", "deny"),
        ("fd -g .git build -x mv {/.} /tmp", "deny"),
        ("fd -g .git build -x rm -rf {/}", "deny"),
        ("fd git -x mv {/} /tmp", "deny"),
        ("fd -x mv {/} /tmp", "deny"),
        ("fd -e txt -x mv {/} /tmp", None),
        ("fd -e txt build -x mv {/} {/}.bak", None),
    ],
)
def test_fd_base_name_placeholder_is_judged_as_a_name_in_the_current_directory(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # fd runs the command in the current directory, where `{/}` (a match's base name) names
    # a file of that name: `fd -g .git build -x mv {/} /tmp` moves ./.git away. It was
    # judged as the search root, so that passed and `fd -e txt -x mv {/} /tmp` was denied.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("sh -c 'rm \"$1\"' _ .git/HEAD", "deny"),
        ("sh -c 'rm \"$@\"' _ notes.txt .git/HEAD", "deny"),
        ("bash -c 'rm -rf \"${1}\"' _ .git", "deny"),
        ("sh -c 'rm -rf \"$0\"' .git", "deny"),
        ("sh -c 'eval \"$1\"' _ 'rm -rf ~'", "deny"),
        ("find . -name HEAD -exec sh -c 'rm \"$1\"' _ {} \\;", "deny"),
        ("find . -name HEAD -exec sh -c 'rm \"$@\"' _ {} +", "deny"),
        ("find . -name HEAD | xargs sh -c 'rm \"$@\"' _", "deny"),
        ("sh -c 'rm \"$1\"' _ notes.txt", None),
        ("bash -c 'set -e; rm -rf \"$1\"' _ build", None),
        ("find . -name '*.pyc' -exec sh -c 'rm \"$1\"' _ {} \\;", None),
        ("bash -c 'shift; rm -rf \"$1\"' _ build /", "ask"),
        ("bash -c 'rm -rf \"$2\"' _ build", "ask"),
    ],
)
def test_the_words_after_a_sh_c_script_are_its_positional_parameters(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # `$1` in a `sh -c` script was always unknown, so `sh -c 'rm "$1"' _ .git/HEAD` and
    # `find . -name HEAD -exec sh -c 'rm "$1"' _ {} \;`, which delete .git/HEAD, passed. A
    # script that may move them (`shift`, `set -- ...`, a function) keeps them unknown.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("rm $(find . -type f)", "deny"),
        ("rm `find . -name HEAD`", "deny"),
        ('rm "$(find . -name HEAD)"', "deny"),
        ("rm -f $(fd -H -e pack)", "deny"),
        ("cp /evil $(find . -name config)", "deny"),
        ("rm $(find . -name '*.pyc')", None),
        ("wc -l $(find . -name '*.py')", None),
        ("rm $(cat list.txt)", None),
        ("rm -rf $(ls)", "ask"),
    ],
)
def test_a_substitution_of_what_find_prints_is_judged_as_find_feeding_the_command(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # A command substitution was an unknown word whatever ran in it, so `rm $(find . -type
    # f)`, which deletes every file of .git as `find . -type f | xargs rm` does, passed.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("(find . -name HEAD) | xargs rm", "deny"),
        ("{ find . -name HEAD; } | xargs rm", "deny"),
        ("(find . -name HEAD | sort) | xargs rm", "deny"),
        ('find . -name HEAD | while read f; do rm "$f"; done', "deny"),
        ('find . -name HEAD | while IFS= read -r f; do rm "$f"; done', "deny"),
        ("find . -name HEAD -print0 | while IFS= read -r -d '' f; do rm -- \"${f}\"; done", "deny"),
        ('while read -r f; do rm "$f"; done < <(find . -name HEAD)', "deny"),
        ('for f in $(find . -name HEAD); do rm "$f"; done', "deny"),
        ("xargs rm < <(find . -name HEAD)", "deny"),
        ("xargs -a <(find . -name HEAD) rm", "deny"),
        ("find . -name HEAD | parallel rm", "deny"),
        ("find . -name HEAD | parallel -j4 rm {}", "deny"),
        ("find . -name HEAD | xargs --replace rm {}", "deny"),
        ("find . -name HEAD | xargs -i% rm %", "deny"),
        ("(find . -name '*.pyc') | xargs rm", None),
        ("find . -name '*.pyc' | while read f; do rm \"$f\"; done", None),
        ("find . -name '*.py' | while read f; do black \"$f\"; done", None),
        ("xargs rm < <(find . -name '*.pyc')", None),
        ("find . -name '*.py' | parallel black", None),
        ("find . -name '*.pyc' | xargs --replace rm {}", None),
        ("xargs rm < list.txt", None),
        ("xargs -a list.txt rm", None),
        ('ls | while read f; do rm -rf "$f"; done', "ask"),
    ],
)
def test_what_find_prints_reaches_xargs_parallel_or_a_read_loop_however_it_is_piped(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # Only `find ... | xargs CMD` itself was read as find running CMD: find in a subshell
    # or group, fed through `< <(...)` or `-a <(...)`, read by `while read f` or a `for` over
    # `$(find ...)`, piped into `parallel`, or xargs's `--replace`/`-iR` let `rm` delete
    # .git/HEAD with no decision (`--replace rm {}` was asked about as a program `{}`).
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find -O3 . -name '*.pyc' -delete", None),
        ("find -D tree . -name '*.pyc' -delete", None),
        ("find -L -O1 . -name '*.pyc' | xargs rm", None),
        ("find -O3 . -name HEAD -delete", "deny"),
        ("find -D tree . -name HEAD | xargs rm", "deny"),
    ],
)
def test_find_options_before_the_starting_points_are_skipped_as_find_skips_them(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # Only -H, -L and -P were skipped: `-O3` or `-D tree` was read as the start of the
    # expression, which then did not parse, so removing *.pyc was denied as reaching .git.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("chmod 000 .git/HEAD", "deny"),
        ("chmod a-r .git/index", "deny"),
        ("chmod 644 .git", "deny"),
        ("chmod 0400 .beads/config.yaml", "deny"),
        ("sudo chown root .git/index", "deny"),
        ("find . -name HEAD -exec chmod 000 {} +", "deny"),
        ("chmod -R 000 .git", "deny"),
        ("chmod $MODE .git/index", "ask"),
        ("chmod +x .git/hooks/pre-commit", None),
        ("chmod go-w .git/config", None),
        ("chmod 600 .git/config", None),
        ("chmod 000 notes.txt", None),
        ("find . -type f -exec chmod 644 {} +", None),
        ("find . -type d -exec chmod 755 {} +", None),
    ],
)
def test_a_mode_that_locks_git_or_the_store_out_of_its_own_files_is_denied(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # Only a recursive chmod was judged: `chmod 000 .git/HEAD` left git unable to read its
    # HEAD and passed. A mode leaving the owner reading and writing takes nothing away.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -name index.lock -delete", "deny"),
        ("find . -name index.lock | xargs rm -f", "deny"),
        ("find . -name '*.lock' -not -path './.git/*' -not -path './.beads/*' -delete", None),
    ],
)
def test_removing_a_running_gits_index_lock_by_find_is_denied_as_rm_of_it_is(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # `rm .git/index.lock` is denied (a write inside .git), but find's samples of git's
    # files had no index.lock, so `find . -name index.lock -delete` passed.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -name HEAD > >(xargs rm)", "deny"),
        ("find . -name HEAD >> >(xargs rm -f)", "deny"),
        ("find . -name HEAD 2>/dev/null 1> >(xargs rm)", "deny"),
        ("find . -name HEAD | sort > >(xargs rm)", "deny"),
        ("find . -name HEAD | tee >(xargs rm)", "deny"),
        ("find . -name HEAD | tee -a log >(xargs rm) | wc -l", "deny"),
        ("find . -name HEAD > >(xargs rm 2>/dev/null | cat)", "deny"),
        ('find . -name HEAD > >(while read f; do rm "$f"; done)', "deny"),
        ("(find . -name HEAD) > >(xargs rm)", "deny"),
        ("> >(xargs rm) find . -name HEAD", "deny"),
        ("find . -name HEAD && sort > >(xargs rm)", None),
        ("find . -name '*.pyc' > >(xargs rm)", None),
        ("find . -name '*.pyc' | tee >(xargs rm) | wc -l", None),
        ("find . -name HEAD 2> >(xargs rm)", None),
        ("find . -name HEAD > >(xargs rm < list.txt)", None),
        ("tee >(xargs rm) < list.txt", None),
    ],
)
def test_find_output_sent_into_a_process_substitution_is_judged_as_piped_there(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # Only a pipe carried what find prints to the command reading it: `find . -name HEAD >
    # >(xargs rm)` and `... | tee >(xargs rm)`, which delete .git/HEAD as `find . -name HEAD
    # | xargs rm` does, passed with no decision.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -fprint >(xargs rm) -name HEAD", "deny"),
        ("find . -name HEAD -fprint >(xargs rm)", "deny"),
        ("find . -name HEAD -fprint0 >(xargs -0 rm -f)", "deny"),
        ("find . -name HEAD -fprintf >(xargs rm) '%p\\n'", "deny"),
        ("find . -name HEAD -fprint >(sort | xargs rm)", "deny"),
        ("find . -name HEAD -print -fprint >(xargs rm) | wc -l", "deny"),
        ("find . -name '*.pyc' -fprint >(xargs rm)", None),
        ("find . -name HEAD -fprintf >(xargs rm) '%f\\n'", None),
        ("find . -name HEAD -fls >(xargs rm)", None),
        ("find . -name HEAD -fls >(xargs rm -rf)", "ask"),
        ("find . -name HEAD -print >(xargs rm)", None),
        ("find . -name HEAD -fprint .git/HEAD", "deny"),
        ("find . -fls ~/.bashrc", "deny"),
        ("find . -fprintf .beads/config.yaml '%p'", "deny"),
        ("find . -name '*.py' -fprint files.txt", None),
    ],
)
def test_find_writing_its_matches_into_a_file_or_a_process_substitution_is_judged(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # find's `-fprint FILE` (`-fprint0`, `-fprintf FILE FORMAT`, `-fls`) was read as a test:
    # FILE, which find empties and writes, was not judged (`find . -fprint .git/HEAD` passed),
    # nor was the command reading a process substitution there, so `find . -fprint >(xargs
    # rm) -name HEAD` (every path, as -fprint comes first) passed while `find . -name HEAD |
    # xargs rm` is denied. What it writes there is judged as what it would print.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat <<'EOF' > .git/HEAD\nx\nEOF", "deny"),
        ("cat <<EOF >> ~/.bashrc\nalias ls=rm\nEOF", "deny"),
        ("cat <<-EOF > .claude/settings.json\n{}\nEOF", "deny"),
        ("cat <<'EOF' > >(sh)\nrm -rf /\nEOF", "deny"),
        ("cat <<'EOF' > >(sh)\nls\nEOF", None),
        ("cat <<'EOF' > notes.txt\nx\nEOF", None),
        ("cat > .git/HEAD <<'EOF'\nx\nEOF", "deny"),
    ],
)
def test_a_redirection_written_after_a_heredoc_is_judged_as_before_it(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # tree-sitter hangs `cat <<EOF > f`'s `> f` inside the heredoc's redirection, where the
    # gate did not look: writing a heredoc onto .git/HEAD or ~/.bashrc passed with no
    # decision, while `cat > .git/HEAD <<EOF` was denied.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -name HEAD > >(sort | xargs rm)", "deny"),
        ("find . -name HEAD > >(sort -u | head -5 | xargs rm)", "deny"),
        ("find . -name HEAD > >(sort 2>/dev/null | uniq | xargs rm)", "deny"),
        ("find . -name HEAD | tee >(sort | xargs rm) | wc -l", "deny"),
        ('find . -name HEAD > >(sort | while read f; do rm "$f"; done)', "deny"),
        ("find . -name HEAD > >(sort > >(xargs rm))", "deny"),
        ("find . -name HEAD > >(tee log | xargs rm) && echo done", "deny"),
        ("echo 'rm -rf /' > >(sh)", "deny"),
        ("echo 'rm -rf /' > >(cat | sh)", "ask"),
        ("find . -name '*.pyc' > >(sort | xargs rm)", None),
        ("find . -name HEAD > >(sort < list.txt | xargs rm)", None),
        ("find . -name HEAD > >(wc -l | xargs echo)", None),
        ("ls > >(sort | xargs rm)", None),
        ("ls > >(sort | xargs rm -rf)", "ask"),
    ],
)
def test_every_command_of_a_pipeline_in_a_process_substitution_reads_what_flows_in(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # Only the first command inside `>(...)` was given what is written there: `find . -name
    # HEAD > >(sort | xargs rm)`, which deletes .git/HEAD as `find . -name HEAD | sort |
    # xargs rm` does, passed with no decision, and `echo 'rm -rf /' > >(sh)` was only
    # asked about while `echo 'rm -rf /' | sh` is denied. Each stage is judged as a pipe at
    # the top level feeds it (`cat` of a pipe fixes no text there either).
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -name HEAD | (sort | xargs rm)", "deny"),
        ("find . -name HEAD | { xargs rm; }", "deny"),
        ("find . -name HEAD | (xargs rm)", "deny"),
        ("find . -name HEAD | (xargs rm) 2>/dev/null", "deny"),
        ("find . -name HEAD | sort | (uniq | (xargs rm)) | wc -l", "deny"),
        ('find . -name HEAD | (while read f; do rm "$f"; done)', "deny"),
        ("echo 'rm -rf /' | (sh)", "deny"),
        ("ls | (sort | head)", None),
        ("ls | { xargs rm; }", None),
        ("find . -name '*.pyc' | (sort | xargs rm)", None),
        ("find . -name HEAD | (xargs rm) < list.txt", None),
        ("find . -name HEAD | { wc -l | xargs echo; }", None),
    ],
)
def test_a_subshell_or_group_a_pipe_feeds_reads_what_flows_in(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # `find . -name HEAD | xargs rm` is denied (it deletes .git/HEAD), but put in a
    # subshell or a `{ ...; }` group the same `xargs rm` read nothing: `find . -name HEAD
    # | (sort | xargs rm)` passed with no decision, and `echo 'rm -rf /' | (sh)` too.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -name HEAD | grep -v x | xargs rm", "deny"),
        ("find . -name HEAD | grep -vE 'a|b' | sort | xargs rm", "deny"),
        ("find . -name HEAD | fgrep -v x | xargs rm", "deny"),
        ("find . -name HEAD | egrep -i head | xargs rm", "deny"),
        ("find . -name HEAD | rg -v x | xargs rm", "deny"),
        ("find . -name HEAD | grep -e HEAD - | xargs rm", "deny"),
        ("find . -type f | grep -v '\\.py$' | xargs rm", "deny"),
        ("find . -name HEAD | grep -vx HEAD | xargs rm", "deny"),
        ("find . -name HEAD | grep -v '^x' | xargs rm", "deny"),
        ("rm $(find . -name HEAD | grep -v x)", "deny"),
        ("find . -name HEAD > >(grep -v x | xargs rm)", "deny"),
        ("find . -name HEAD | (grep -v x | sort | xargs rm)", "deny"),
        ("find . -name '*.txt' | grep -v x | xargs rm", None),
        ("find . -type f | grep '\\.py$' | xargs rm", None),
        ("find . -name HEAD | grep -v '\\.git/' | xargs rm", None),
        ("find . -name HEAD | grep -Fv .git | sort | xargs rm", None),
        ("find . -name HEAD | grep '^./src/' | xargs rm", None),
        ("find . -name HEAD | (grep -v .git | sort | xargs rm)", None),
        ("find . -name HEAD > >(grep -v .git | xargs rm)", None),
        ("find . -name HEAD | grep -c x | xargs rm", None),
        ("find . -name HEAD | grep -l x | xargs rm", None),
        ("find . -name HEAD | grep -q x | xargs rm", None),
        ("find . -name HEAD | grep -n x | xargs rm", None),
        ("find . -name HEAD | rg --count x | xargs rm", None),
        ("find . -name HEAD | grep x list.txt | xargs rm", None),
        ("ls | grep -v x | xargs rm", None),
    ],
)
def test_a_grep_between_find_and_xargs_passes_finds_lines_on(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # `grep` prints some of the lines it reads as they are, as `sort` and `head` do: `find .
    # -name HEAD | grep -v x | xargs rm` deletes .git/HEAD but passed with no decision. A
    # plain pattern is read as the path test it is (`grep -v .git` drops .git's files); a
    # grep printing counts, names or numbered lines, or reading a file, passes none on.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -name HEAD -fprint /dev/stdout | xargs rm", "deny"),
        ("find . -name HEAD -fprint0 /dev/fd/1 | xargs -0 rm", "deny"),
        ("find . -name HEAD -fprintf /proc/self/fd/1 '%p\\n' | xargs rm", "deny"),
        ("rm $(find . -name HEAD -fprint /dev/stdout)", "deny"),
        ("find . -name HEAD -fprintf /dev/stdout '%s\\n' | xargs rm", None),
        ("find . -name HEAD -fprint /dev/stderr | xargs rm", None),
        ("find . -name HEAD -fprint found.txt | xargs rm", None),
        ("find . -name '*.txt' -fprint /dev/stdout | xargs rm", None),
    ],
)
def test_find_printing_into_dev_stdout_prints_on_its_output(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # `-fprint /dev/stdout` (`/dev/fd/1`, `/proc/self/fd/1`) writes to find's standard
    # output, as `-print` does: `find . -name HEAD -fprint /dev/stdout | xargs rm` deletes
    # .git/HEAD but passed with no decision.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -name HEAD | parallel mv {} {.}.bak", "deny"),
        ("find . -name HEAD | parallel mv {.} old/", "deny"),
        ("find . -name HEAD | parallel cp /evil {.}", "deny"),
        ("find . -name '*.txt' | parallel rm -rf {//}", "deny"),
        ("find . -name .git | parallel mv {/} old/", "deny"),
        ("find . -name '.*' | parallel mv {/.} old/", "deny"),
        ("fd -H -e pack | parallel rm {.}.idx", "deny"),
        ("find . -name '*.c' | parallel gcc -c {} -o {.}.o", None),
        ("find . -name '*.c' | parallel gcc -c {.}.c", None),
        ("find . -name '*.txt' | parallel mv {.}.txt {.}.md", None),
        ("find . -name '*.txt' | parallel mv {/} /tmp", None),
        ("find . -name '*.txt' | parallel mv {} /tmp/{#}.txt", None),
        ("find src -name '*.txt' | parallel rm -rf {//}", "ask"),
        ("ls | parallel mv {} {.}.bak", None),
        ("ls | parallel sh -c 'rm -rf {}'", "ask"),
    ],
)
def test_parallel_replacement_strings_stand_for_what_find_prints(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # Only `{}` was read as a line parallel reads: `{.}`, `{/}`, `{//}`, `{/.}` were plain
    # text, and with no `{}` the line was taken as added at the end, so `parallel mv {.} /tmp`
    # was judged as moving /tmp away and `find . -name '*.txt' | parallel rm -rf {//}`,
    # which removes the work tree, was only asked about; `rm -rf {}` in a `sh -c` script
    # removed a file named `{}`.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("find . -name '*.txt' | parallel rm -rf {1//}", "deny"),
        ("find . -name '*.txt' | parallel rm -rf {-1//}", "deny"),
        ("find . -name HEAD | parallel mv {1} {1.}.bak", "deny"),
        ("find . -name .git | parallel mv {1/} old/", "deny"),
        ("find . -name HEAD | parallel cp /evil {=s/x/y/=}", "deny"),
        ("find . -name HEAD | parallel cp /evil {= s/x/y/ =}", "deny"),
        ("find . -name HEAD | parallel -I ,, cp /evil {1.}", "deny"),
        ("parallel rm {1} ::: .git/HEAD", "deny"),
        ("parallel cp /evil {2} ::: a ::: .git/HEAD", "deny"),
        ("parallel mv {1} {2} ::: notes.txt :::+ .git/HEAD", "deny"),
        ("parallel rm -rf {//} ::: file.txt", "deny"),
        ("parallel rm -rf {0} ::: a ::: /", "deny"),
        ("parallel --colsep , rm {2} ::: a,.git/HEAD", "deny"),
        ("parallel -C , cp {1} {2} ::: a.txt,b.txt", None),
        ("find . -name '*.txt' | parallel mv {1} /tmp", None),
        ("find . -name '*.txt' | parallel mv {=s/a/b/=} /tmp", None),
        ("find . -name '*.c' | parallel gcc -c {1} -o {1.}.o", None),
        ("find . -name HEAD | parallel -I ,, echo {1}", None),
        ("parallel mv {1} /tmp/ ::: notes.txt", None),
        ("parallel mv {} {.}.bak ::: a.txt b.txt", None),
        ("parallel cp {1} {2} ::: a.txt ::: b.txt", None),
        ("parallel rm -rf {1//} ::: build/x", None),
        ("ls | parallel sh -c 'rm -rf {1}'", "ask"),
        ("ls | parallel rm -rf {=s/x/y/=}", "ask"),
    ],
)
def test_parallel_positional_and_perl_replacement_strings_stand_for_the_input(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # GNU parallel's `{1}`, `{1.}`, `{1/}`, `{1//}` (`{-1}` from the end) and `{= perl =}`
    # were plain text, and the input taken as added at the end: `find . -name '*.txt' |
    # parallel rm -rf {1//}`, which removes `.`, was only asked about, `parallel mv {1}
    # /tmp/ ::: notes.txt` was denied as moving /tmp away; with `:::` no replacement string
    # was put in (`parallel rm -rf {//} ::: file.txt`, removing `.`, passed). Each is what
    # parallel puts there (tried with GNU parallel 20221122): a line or argument, as `{}`
    # is, or with `--colsep` a column of it; `-I R` changes `{}` and `{1}` alone.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("parallel rm :::: <(find . -name HEAD)", "deny"),
        ("parallel -a <(find . -name HEAD) rm", "deny"),
        ("parallel --arg-file <(find . -name HEAD) mv {} {.}.bak", "deny"),
        ("parallel rm :::: <(find . -name '*.pyc')", None),
        ("parallel -a <(find . -name '*.pyc') rm {1}", None),
        ("parallel rm :::: list.txt", None),
    ],
)
def test_parallel_reading_find_through_an_argument_file_is_judged_as_piped_there(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # `xargs -a <(find ...) rm` was judged as find feeding rm, but parallel's own argument
    # files (`-a FILE`, `:::: FILE`) were not: `parallel rm :::: <(find . -name HEAD)`
    # passed while `find . -name HEAD | parallel rm` is denied.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ('rm -rf ""', None),
        ("rm -rf ''", None),
        ('rm -rf "" build', None),
        ('rm -rf "" .', "deny"),
        ('rm -rf ""/', "deny"),
        ('mv "" /tmp', None),
        ('find "" -delete', None),
        ('find "" . -delete', "deny"),
        ('rimraf ""', "deny"),
        ('rm -rf "$X"', "ask"),
        ('rm -rf "$X/"', "ask"),
        ('rm -rf "$X"""', "ask"),
    ],
)
def test_an_empty_word_removes_nothing_while_an_unset_variable_stays_unknown(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    # rm of '' fails (`cannot remove ''`), find searches no '': both were read as `.` and
    # denied as removing the work tree. A variable may be set to anything, so `rm -rf "$X"`
    # is still asked about. rimraf is not rm: from version 4 it resolves '' as Node's
    # path.resolve does, to the current directory, and removes it (rimraf 4.4.1, 5.0.10 and 6.1.4
    # do; 3.0.2 prints its usage), so `rimraf ""` is `rimraf .`.
    assert answer(bash(gc, command)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("gh repo delete owner/repo --yes", "deny"),
        ("gh api -X DELETE repos/owner/repo", "ask"),
        ("gh api --method=delete repos/owner/repo/labels/bug", "ask"),
        ('gh api -X "$METHOD" repos/owner/repo', "ask"),
        ("gh api -X GET repos/owner/repo", None),
        ('gh api -H "X-Why: DELETE" repos/owner/repo', None),
        ("gh repo view owner/repo", None),
    ],
)
def test_deleting_on_github_is_judged_as_dropping_a_database_is(
    project: Path, gc: GcRunner, command: str, expected: str | None
) -> None:
    assert answer(bash(gc, command)) == expected


def test_a_removal_the_gate_cannot_judge_is_denied_when_unjudged_is_deny(
    project: Path, gc: GcRunner
) -> None:
    assert answer(bash(gc, 'rm -rf "$TARGET"')) == "ask"
    assert gc("config", "set", "--local", "gates.destructive.unjudged", "deny").returncode == 0
    reply = bash(gc, 'rm -rf "$TARGET"')
    assert answer(reply) == "deny"
    assert "Rewrite the command" in reply["hookSpecificOutput"]["permissionDecisionReason"]
    assert bash(gc, "rm -rf build") is None  # what it can judge is unchanged
    assert gc("config", "set", "--local", "gates.destructive.unjudged", "maybe").returncode == 30


def test_a_nul_byte_a_huge_command_and_a_huge_payload_are_asked_about(
    project: Path, gc: GcRunner
) -> None:
    assert answer(bash(gc, "ls\x00 -la")) == "ask"
    assert answer(bash(gc, "git reset --hard;" * 62_000)) == "ask"  # about 1 MB
    payload = {"session_id": "s1", "cwd": str(project), "hook_event_name": "PreToolUse",
               "tool_name": "Bash", "tool_input": {"command": "ls " + "x" * (2 << 20)}}  # fmt: skip
    result = gc("hook", "run", input=json.dumps(payload))
    assert result.returncode == 0
    assert answer(json.loads(result.stdout)) == "ask"


def test_an_oversized_command_is_asked_about_before_any_other_gate_reads_it(
    project: Path, gc: GcRunner
) -> None:
    # Each is under the payload's 1 MiB and over the command's 256 KiB: the answer comes from
    # the size alone, and the sandbox-boundary gate (whose split and path resolution cost per
    # character) does not read it.
    for command in ("rm -rf ~ /" + "x/" * 500_000, "echo " + "/x" * 500_000 + "; rm -rf ~",
                    "ls" + " /x" * 300_000):  # fmt: skip
        reply = bash(gc, command)
        assert answer(reply) == "ask"
        assert "256 KiB" in reply["hookSpecificOutput"]["permissionDecisionReason"]
        assert "systemMessage" not in reply


def test_a_cache_deep_under_a_home_in_a_system_directory_is_asked_about_not_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gates.destructive import judge

    monkeypatch.setenv("HOME", "/root")  # a home inside a system directory, as root's is
    answer_given, reason = judge("rm -rf ~/.cache/pip", str(tmp_path))
    assert answer_given == "ask" and "system directory" not in reason
    assert judge("rm -rf ~/.cache", str(tmp_path))[0] == "deny"  # a folder of home itself
    assert judge("rm -rf /root/../etc", str(tmp_path))[0] == "deny"


def test_a_removal_target_longer_than_any_path_is_asked_about(project: Path, gc: GcRunner) -> None:
    from gates.destructive import judge

    answer_given, reason = judge("rm -rf build/" + "x/" * 3000, str(project))
    assert answer_given == "ask" and "longer than any path" in reason
    assert judge("rm -rf build/x/y", str(project)) == (None, "")


def test_a_cwd_with_no_store_above_it_gets_the_built_in_rules(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    bare = tmp_path_factory.mktemp("nostore")
    runner = GcRunner(bare)
    for command, expected in (("rm -rf ~", "deny"), ('rm -rf "$X"', "ask"), ("ls", None)):
        payload = {"session_id": "s", "hook_event_name": "PreToolUse", "cwd": str(bare),
                   "tool_name": "Bash", "tool_input": {"command": command}}  # fmt: skip
        result = runner("hook", "run", input=json.dumps(payload))
        assert result.returncode == 0, result.stderr
        reply = json.loads(result.stdout) if result.stdout.strip() else None
        check_pre_tool_use_shape(reply)
        assert answer(reply) == expected, command


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".git/config", "deny"),
        (".git/refs/heads/main", "deny"),
        (".git/hooks/pre-commit", "ask"),
        (".beads/config.yaml", "deny"),
        (".claude/settings.json", "deny"),
        (".claude/settings.local.json", "deny"),
        ("/dev/sda", "deny"),
        ("~/.bashrc", "ask"),
        ("~/.ssh/authorized_keys", "ask"),
        ("~/.local/share/gc-beads/trust/approved.json", "deny"),
        ("src/app.py", None),
        ("README.md", None),
    ],
)
def test_file_tools_are_judged_by_the_path_they_write(
    project: Path, gc: GcRunner, path: str, expected: str | None
) -> None:
    home = Path(gc.env.get("HOME") or os.path.expanduser("~"))
    full = str(home / path[2:]) if path.startswith("~/") else path
    full = full if full.startswith("/") else str(project / full)
    for tool, tool_input in (
        ("Write", {"file_path": full, "content": "x"}),
        ("Edit", {"file_path": full, "old_string": "a", "new_string": "b"}),
        ("MultiEdit", {"file_path": full, "edits": [{"old_string": "a", "new_string": "b"}]}),
        ("NotebookEdit", {"notebook_path": full, "new_source": "x"}),
    ):
        reply = hook(gc, "PreToolUse", tool_name=tool, tool_input=tool_input)
        check_pre_tool_use_shape(reply)
        assert answer(reply) == expected, (tool, path)


def test_the_pre_screen_names_every_program_the_rules_judge() -> None:
    from gates import prescreen, rules

    judged = set(rules.RULES) | set(rules.WRAPPERS)
    assert judged <= prescreen.RISKY | {"cd"}
    assert not prescreen.INERT & (judged - {"cd"})


def test_the_pre_screen_lets_through_only_what_the_parser_leaves_undecided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from gates import prescreen, rules
    from gates.destructive import judge

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    programs = prescreen.INERT | prescreen.PLAIN_TOOLS | set(rules.RULES) | set(rules.WRAPPERS)
    arguments = {"-rf", "-f", "--force", "/", "~", ".git", ".beads", "-c", "'rm -rf /'", '"x"',
                 "push", "main", "+main", "config", "set", "gates.disabled", "trust", "reset",
                 "--hard", "clean", "-fdx", "of=/dev/sda", "*", "$X", "python", "-m"}  # fmt: skip
    words = sorted(programs | prescreen.GIT_READS | arguments | {"git", "gc"})
    joiners = [" ", " && ", " || ", "; ", " | ", " & "]
    simple = st.lists(st.sampled_from(words), min_size=1, max_size=5).map(" ".join)
    parts = st.lists(st.tuples(simple, st.sampled_from(joiners)), min_size=1, max_size=4)
    command = parts.map(lambda p: "".join(w + j for w, j in p).rstrip(" &|;"))

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(command)
    def agree(text: str) -> None:
        if prescreen.undecided(text):
            assert judge(text, str(tmp_path)) == (None, ""), text

    agree()


def test_a_word_of_countless_expansions_is_read_as_open_not_spelled_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `$x$x$x...` up to the size the gate reads: spelling out each of its 100,000 parts
    # took the gate past its budget and then some (each judgement read the word twice).
    # Past MAX_WORD_PARTS parts a word's value is left open, as a variable's is.
    from gates import shellwords
    from gates.destructive import MAX_COMMAND_BYTES, judge

    spelled = []
    variable = shellwords._variable
    monkeypatch.setattr(shellwords, "_variable", lambda node: spelled.append(1) or variable(node))
    word = ("$x" * MAX_COMMAND_BYTES)[: MAX_COMMAND_BYTES - 64]
    assert judge(word, str(tmp_path))[0] == "ask"
    assert judge(f"rm -rf {word}", str(tmp_path))[0] == "ask"
    assert len(spelled) <= 2 * shellwords.MAX_WORD_PARTS
    # A word just within the bound is still read part by part.
    spelled.clear()
    judge("rm -rf " + "$HOME" * shellwords.MAX_WORD_PARTS, str(tmp_path))
    assert len(spelled) >= shellwords.MAX_WORD_PARTS


def test_a_judgement_cut_off_by_its_budget_leaves_the_next_one_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gates import destructive
    from gates.destructive import MAX_COMMAND_BYTES, judge

    heavy = ("<<" * MAX_COMMAND_BYTES)[: MAX_COMMAND_BYTES - 64]  # slow for the parser
    monkeypatch.setattr(destructive, "BUDGET", 0.05)
    answer, reason = judge(heavy, str(tmp_path))
    assert answer == "ask" and "budget" in reason
    monkeypatch.setattr(destructive, "BUDGET", 30.0)
    # A parser cancelled mid-way resumes its old parse unless it is reset.
    assert judge("cat <<EOF | sh\nrm -rf /\nEOF\n", str(tmp_path))[0] == "deny"
    assert judge("ls -la", str(tmp_path)) == (None, "")
