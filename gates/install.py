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

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from beads.errors import InvalidInput, StorageError

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
    settings = _load(settings_path)
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
        _save(settings_path, settings)
    return added


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"{path} is not valid JSON ({exc}); fix it first") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} must hold a JSON object")
    return data


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


def _save(path: Path, settings: dict[str, Any]) -> None:
    """Replace `path` atomically, keeping its mode (a new file gets the umask's)."""
    temp = None
    try:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0o022)
            os.umask(umask)
            mode = 0o666 & ~umask
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.fchmod(fd, mode)  # mkstemp makes it 0600: a shared settings file stays readable
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(settings, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError as exc:
        if temp is not None:  # never leave a half-written copy beside the user's file
            Path(temp).unlink(missing_ok=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StorageError(f"no space left on device: cannot write {path}") from None
        raise StorageError(f"cannot write {path}: {exc}") from None
