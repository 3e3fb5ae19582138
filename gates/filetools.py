"""The destructive-op gate on Write, Edit, MultiEdit and NotebookEdit: the path written.

Deny: the store `.beads/`, a repository's `.git/` (objects, refs, config, ...), devices,
Claude Code's settings (`.claude/settings*.json`) and the approvals of `gc trust`. Ask: a
git hook (`.git/hooks/`), a shell start-up file, `~/.ssh`. A path is judged as written and
with its links resolved; a call without a readable path is "ask".
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILE_TOOLS = frozenset(("Write", "Edit", "MultiEdit", "NotebookEdit"))
ANSWERS = (None, "ask", "deny")


def judge_file_tool(tool_input: dict[str, Any], cwd: str) -> tuple[str | None, str]:
    """The gate's answer to a file tool call: ("deny" | "ask" | None, reason)."""
    from gates.shellpaths import protected_file

    paths = [tool_input.get(key) for key in ("file_path", "notebook_path") if key in tool_input]
    if not paths or not all(isinstance(p, str) and p and "\x00" not in p for p in paths):
        return "ask", "the tool call names no path the gate can read"
    level, reason = 0, ""
    for path in paths:
        full = os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
        for candidate in dict.fromkeys((full, os.path.realpath(full))):
            found, why = protected_file(candidate, path, file_tool=True)
            if found > level:
                level, reason = found, why
    return ANSWERS[level], reason
