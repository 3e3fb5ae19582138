"""PreToolUse: judged before every tool call, so it must cost little more than Python's start.

`gc hook run` comes here first (`gates.hookrun`): a PreToolUse event is answered without
the delivery database, the heartbeat side jobs or the session table (each tool call is judged
on its own); any other event goes on to `gates.hooks.main`. The gates:

- `destructive-op` (strict): `gates.destructive` judges a Bash command on its syntax tree
  (after `gates.prescreen` lets the plainest through without the parser) and a
  Write/Edit path (`gates.filetools`); it answers `permissionDecision` "deny" (Claude shows
  the agent the reason) or "ask" (the person decides), or nothing: never "allow". A call it
  cannot read, a store it cannot find (built-in defaults then) or a fault of its own is
  never silence; with `gates.destructive.unjudged: deny` (machine-local) an "ask" is a deny;
- `sandbox-boundary` (soft): a Write/Edit `file_path`, or a Bash command's write targets
  (`>` redirections, the paths of rm, mv, cp, touch, mkdir, tee, ln, chmod, chown), outside
  the project (the hook's `cwd`) and `gates.sandbox.roots` (default: the temporary
  directory) warn through `systemMessage`;
- registered PreToolUse gates: their check runs for each call and is never marked; a failing
  strict one denies, a failing soft one warns.

The configuration is the index's copy of config.yaml, read with one query.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

WRITERS = frozenset(("rm", "mv", "cp", "touch", "mkdir", "tee", "ln", "chmod", "chown", "install"))
FILE_TOOLS = frozenset(("Write", "Edit", "MultiEdit", "NotebookEdit"))
MAX_INPUT_BYTES = 1024 * 1024
# The soft sandbox-boundary gate reads commands up to this size (its split is linear but
# slow per character); a longer one is the strict gate's alone.
SANDBOX_MAX_BYTES = 16 * 1024
MAX_TARGETS = 256  # write targets the sandbox gate places (it names three at most)
PATH_MAX = 4096  # no file system takes a longer path


UNREADABLE = "the tool call is larger than the gate reads, or not a JSON object"
UNTRUSTED = "the call names PreToolUse, or carries a tool call, in a form the gate cannot trust"
# Claude Code's hook events other than PreToolUse: a payload naming one exactly is not ours.
OTHER_EVENTS = frozenset(
    (
        "SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure",
        "PermissionRequest", "Notification", "Stop", "SubagentStart", "SubagentStop",
        "PreCompact", "SessionEnd",
    )
)  # fmt: skip


def read_payload(raw: bytes) -> Any:
    """The payload's JSON (None when it is over the size read, not JSON, or nested deeper
    than Python's parser goes)."""
    if len(raw) > MAX_INPUT_BYTES:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def event_kind(payload: Any, raw: bytes) -> str:
    """The kind of call, for a hook run without `--event`: "pretool" (a PreToolUse call to
    judge), "untrusted" (a tool call the hook cannot trust: answered "ask") or "other" (an
    event for `gates.hooks`)."""
    if not isinstance(payload, dict):
        # Unreadable: if it might be a tool call, ask; other events fail open in gates.hooks.
        return "untrusted" if b"pretooluse" in raw.lower() or b"tool_" in raw else "other"
    named = payload.get("hook_event_name")
    if named == "PreToolUse":
        return "pretool"
    if isinstance(named, str) and named in OTHER_EVENTS:
        return "other"
    spelled = "".join(c for c in str(named).lower() if c.isalnum())
    if "pretool" in spelled or "tool_name" in payload or "tool_input" in payload:
        return "untrusted"
    return "other"


def send_reply(reply: dict[str, Any]) -> bool:
    """Write a hook's reply to stdout; True once it is written and flushed. False when stdout
    is closed, absent or gone: nobody reads the reply, and that is no fault of ours."""
    try:
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
        return True
    except (OSError, AttributeError, ValueError):
        return False


def ask_reply(reason: str) -> dict[str, Any]:
    """A PreToolUse reply that leaves the call to the person."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "ask",
            "permissionDecisionReason": f"gc destructive-op: {reason}",
        }
    }


def store_dir(beads_dir: str | None, cwd: str | None) -> str | None:
    """The store above `cwd` (None: there is none, and the gates use their defaults)."""
    from beads.errors import GcError
    from beads.location import find_store_dir  # paths as strings: no pathlib here

    try:
        return find_store_dir(beads_dir, cwd=cwd)
    except GcError:
        return None


def pre_tool_use(payload: dict[str, Any], root: str | None, config: dict[str, Any]) -> dict | None:
    """The reply to a PreToolUse event (None: no decision, Claude Code's own rules apply)."""
    settings = config.get("gates") or {}
    settings = settings if isinstance(settings, dict) else {}
    disabled = _names(settings.get("disabled"))
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    cwd = payload.get("cwd")
    cwd = cwd if isinstance(cwd, str) and cwd else os.path.dirname(root) if root else os.getcwd()
    denials: list[str] = []
    asks: list[str] = []
    warnings: list[str] = []
    if "destructive-op" not in disabled:
        answer, reason = destructive(tool, tool_input, cwd, _mapping(settings.get("destructive")))
        if answer == "ask" and unjudged(root) == "deny":
            answer, reason = "deny", reason + UNJUDGED_DENY
        if answer == "deny":
            denials.append(reason)
        elif answer == "ask":
            asks.append(reason)
    tool_input = tool_input if isinstance(tool_input, dict) else {}
    command = tool_input.get("command") if tool == "Bash" else None
    command = command if isinstance(command, str) else None
    if "sandbox-boundary" not in disabled and len(command or "") <= SANDBOX_MAX_BYTES:
        outside = _outside(tool, tool_input, command, cwd, _mapping(settings.get("sandbox")))
        if outside:
            warnings.append(
                f"gc: soft gate sandbox-boundary: {tool} writes outside the project {cwd}: "
                + ", ".join(outside[:3])
            )
    registered = [
        (gate_id, spec)
        for gate_id, spec in sorted(_mapping(settings.get("session")).items())
        if isinstance(spec, dict) and spec.get("hook") == "PreToolUse"
    ]
    if registered:
        _registered(registered, payload, cwd, denials, warnings)
    reply: dict[str, Any] = {}
    if denials or asks:
        reply["hookSpecificOutput"] = {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny" if denials else "ask",
            "permissionDecisionReason": "\n".join(denials or asks),
        }
    if warnings:
        reply["systemMessage"] = "\n".join(warnings)
    return reply or None


UNJUDGED_DENY = (
    " (gates.destructive.unjudged is deny on this machine: no person is there to ask). "
    "Rewrite the command so the gate can read it: literal paths inside the work tree, no "
    "variables or substitutions in what it removes, one plain command per call; or leave "
    "it to a person."
)


def _mapping(value: Any) -> dict:
    """A setting expected to be a mapping; anything else is ignored (its default)."""
    return value if isinstance(value, dict) else {}


def _names(value: Any) -> set[str]:
    """A setting expected to be a list of names; anything else is ignored (none)."""
    return {x for x in value if isinstance(x, str)} if isinstance(value, list) else set()


def destructive(tool: Any, tool_input: Any, cwd: str, settings: dict) -> tuple[str | None, str]:
    """The destructive-op gate's answer to one tool call ("deny", "ask" or None)."""
    from gates.destructive import message

    if tool == "Bash":
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if not isinstance(command, str):
            return "ask", "gc destructive-op: the Bash call holds no command the gate can read"
        from gates.destructive import unreadable

        unread = unreadable(command)
        if unread:  # before any other work: an oversized command costs one scan
            return "ask", message(command, unread)
        from gates.prescreen import undecided

        # The screen knows the built-in rules only: configured patterns need the parser.
        if not settings.get("patterns") and undecided(command):
            return None, ""
        from gates.destructive import judge

        answer, reason = judge(command, cwd, settings)
        return answer, message(command, reason) if answer else ""
    if tool in FILE_TOOLS:
        if not isinstance(tool_input, dict):
            return "ask", "gc destructive-op: the call holds no path the gate can read"
        from gates.filetools import judge_file_tool

        answer, reason = judge_file_tool(tool_input, cwd)
        return answer, f"gc destructive-op: {tool}: {reason}." if answer else ""
    return None, ""


def unjudged(root: str | None) -> str:
    """`gates.destructive.unjudged` of this machine: "ask" (the default) or "deny"."""
    if root is None:
        return "ask"
    from pathlib import Path

    from beads.sync.auto import read_local

    value = read_local(Path(root) / ".git").get("gates.destructive.unjudged", "ask")
    return "deny" if value.strip().lower() == "deny" else "ask"


def _registered(
    gates: list[tuple[str, dict]],
    payload: dict[str, Any],
    cwd: str,
    denials: list[str],
    warnings: list[str],
) -> None:
    """Run the registered PreToolUse gates' checks (never marked: each call on its own)."""
    from pathlib import Path

    from beads.process import budget
    from gates.session_gates import CHECK_TIMEOUT, SessionGate, let_by, run_check, warning

    with budget(CHECK_TIMEOUT):
        for gate_id, spec in gates:
            gate = SessionGate(gate_id, "PreToolUse", str(spec.get("mode", "soft")),
                               str(spec.get("description", "")), spec.get("check"))  # fmt: skip
            status = run_check(gate, Path(cwd), stdin=json.dumps(payload).encode())
            line = f"{gate.id} ({gate.description or gate.check or 'no check'}): {status.how}"
            if status.satisfied:
                if let_by(status):
                    warnings.append(warning(status))
            elif gate.mode == "strict":
                denials.append(f"gc gate {line}")
            else:
                warnings.append(warning(status))


def _outside(
    tool: Any, tool_input: dict[str, Any], command: str | None, cwd: str, sandbox: dict
) -> list[str]:
    """The paths a tool call writes outside the project and the allowed roots."""
    targets: list[str] = []
    if tool in FILE_TOOLS:
        for name in ("file_path", "notebook_path"):
            if isinstance(tool_input.get(name), str):
                targets.append(tool_input[name])
    elif command:
        targets = _written_paths(command)
    if not targets:
        return []
    roots = [os.path.realpath(cwd)]
    extra = sandbox.get("roots")
    tmp = os.environ.get("TMPDIR") or "/tmp"
    for root in extra if isinstance(extra, list) else [tmp]:
        if isinstance(root, str) and root:
            roots.append(os.path.realpath(os.path.expanduser(root)))
    outside = []
    for target in targets[:MAX_TARGETS]:
        if len(target) > PATH_MAX:
            continue  # no such path can be written; resolving it costs per component
        if "$" in target or target.startswith("/dev/"):
            continue  # a variable we cannot know; a device is destructive-op's business
        path = os.path.realpath(os.path.join(cwd, os.path.expanduser(target)))
        if not any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
            outside.append(path)
    return outside


def _written_paths(command: str) -> list[str]:
    from gates.shellsplit import simple_commands

    paths = []
    for argv in simple_commands(command):
        words = iter(argv)
        for word in words:
            if word in (">", ">>", ">|"):
                paths.append(next(words, ""))
            elif word.startswith((">", "1>", "2>")) and len(word.lstrip("12>|")) > 0:
                paths.append(word.lstrip("12>|"))
        if os.path.basename(argv[0]) in WRITERS:
            paths += [a for a in argv[1:] if not a.startswith("-") and a not in (">", ">>")]
    return [p for p in paths if p]


def read_config(root: str) -> dict[str, Any]:
    """config.yaml as the index last recorded it (one read-only query; {} when unreadable,
    the defaults then apply)."""
    import sqlite3

    path = os.path.join(root, ".runtime", "index.sqlite3")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()
        finally:
            db.close()
        config = json.loads(row[0]) if row else {}
    except (sqlite3.Error, ValueError):
        return {}
    return config if isinstance(config, dict) else {}
