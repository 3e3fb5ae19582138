"""`gc hook install`: merge our hook entries into Claude Code's `settings.json`.

Idempotent: an event that already runs our command is left alone, and everything else in the
file (other hooks, permissions, env) is kept; a file written by an older gc gains the events
it lacks (PreToolUse, matched to the tools the gates judge), and its PreToolUse entry is
brought up to date. The file is replaced atomically.

The PreToolUse entry names its event (`gc hook run --event PreToolUse`): the hook then knows a
payload it cannot read is a tool call, and asks about it rather than letting it by. Each
entry carries a `timeout` (seconds) far above what the hook takes, so Claude Code never cuts
a judgement short and goes on as if there were none.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from beads.errors import InvalidInput
from beads.jsonfile import load_object, save_object

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PreCompact", "Stop", "SessionEnd")
# The tools PreToolUse runs for: the ones destructive-op and sandbox-boundary judge.
MATCHERS = {"PreToolUse": "Bash|Write|Edit"}
DEFAULT_COMMAND = "gc hook run"
# Claude Code's `timeout` per entry: the gate judges within a second, a Stop chain's checks
# within their own budget; these leave ample room over both.
TIMEOUTS = {"PreToolUse": 30}
TIMEOUT = 120


def event_command(command: str, event: str) -> str:
    """The command the entry for `event` runs (PreToolUse's names its event)."""
    return f"{command} --event PreToolUse" if event == "PreToolUse" else command


def install(settings_path: Path, command: str = DEFAULT_COMMAND) -> list[str]:
    """Add `command` to each event of `settings_path`; returns the events it added or
    brought up to date."""
    settings = load_object(settings_path)
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidInput(f"{settings_path}: 'hooks' must be an object")
    added = []
    for event in EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InvalidInput(f"{settings_path}: hooks.{event} must be a list")
        wanted = {
            "type": "command",
            "command": event_command(command, event),
            "timeout": TIMEOUTS.get(event, TIMEOUT),
        }
        ours = [
            h
            for group in groups
            if isinstance(group, dict) and isinstance(group.get("hooks"), list)
            for h in group["hooks"]
            if isinstance(h, dict) and h.get("command") in (command, wanted["command"])
        ]
        if ours:
            # An older entry (no event named, no timeout) is brought up to date in place.
            stale = [h for h in ours if h != wanted]
            for entry in stale:
                entry.clear()
                entry.update(wanted)
            if stale:
                added.append(event)
            continue
        group: dict[str, Any] = {"hooks": [dict(wanted)]}
        if event in MATCHERS:
            group = {"matcher": MATCHERS[event], **group}
        groups.append(group)
        added.append(event)
    if added:
        save_object(settings_path, settings, make_parent=True)
    return added


def project_root(start: Path) -> Path:
    """The project whose `.claude/settings.json` `gc hook install` edits: Claude Code's
    `$CLAUDE_PROJECT_DIR`, else the nearest directory from `start` up that holds `.claude/`,
    `.git` or `.beads/`, else `start` (so a run from a subdirectory edits the project's file)."""
    given = os.environ.get("CLAUDE_PROJECT_DIR")
    if given:
        return Path(given)
    start = start.absolute()
    for directory in (start, *start.parents):
        if any((directory / name).exists() for name in (".claude", ".git", ".beads")):
            return directory
    return start
