"""The `destructive-op` gate: which tool calls an agent must not make unasked.

Three answers, never "allow": **deny** what the rules know is destructive; **ask** (the
person decides) what the gate cannot judge; and for everything else no decision at all, so
Claude Code's own permission rules apply as if the gate were not there. The rules and the
answers for common cases are in docs/gates.md.

- A Bash command is read on its shell syntax tree (`gates.shelljudge`, rules in
  `gates.rules` and `gates.rules_git`), after `gates.prescreen` has let the plainest
  commands through without loading the parser.
- A Write/Edit/MultiEdit/NotebookEdit path is judged by `gates.filetools`.
- It never fails open: a command with a NUL or another control character, one over
  `MAX_COMMAND_BYTES`, or one whose reading runs past `BUDGET` seconds or `MAX_NODES` nodes
  is "ask".

`gates.destructive.patterns` adds rules and `gates.destructive.allow` exempts commands, both
as lists of command patterns: a pattern's first word is the program and its other words
must each match some argument, in any order (`fnmatch` wildcards), e.g. `git push --mirror`
or `rm -r* /srv/cache/*`.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

BUDGET = 0.3  # seconds to read one command, the parser's loading included
MAX_COMMAND_BYTES = 256 * 1024
ANSWERS = (None, "ask", "deny")


def judge(command: str, cwd: str, settings: dict[str, Any] | None = None) -> tuple[str | None, str]:
    """The gate's answer to running `command` in `cwd`: ("deny" | "ask" | None, reason)."""
    from time import monotonic

    started = monotonic()
    unread = unreadable(command)
    if unread:
        return "ask", unread
    from gates import rules
    from gates.shelljudge import Judge, Stop

    judging = Judge(
        work_tree(cwd), os.path.realpath(cwd), settings or {}, started + BUDGET, rules.judge
    )
    try:
        judging.script(command)
    except Stop:
        pass
    except RecursionError:
        judging.note(2 if judging.level == 2 else 1, "it nests too deeply to read")
    return ANSWERS[judging.level], judging.reason


def unreadable(command: str) -> str | None:
    """Why the gate will not read `command` at all (None: it will): checked before any other
    work, so an oversized command costs one scan."""
    if len(command) > MAX_COMMAND_BYTES or len(command.encode("utf-8", "replace")) > (
        MAX_COMMAND_BYTES
    ):
        return f"it is longer than the {MAX_COMMAND_BYTES // 1024} KiB the gate reads"
    import re  # loaded already with json: one scan in C rather than a loop per character

    if re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", command):
        return "it holds a NUL or another control character, which the gate cannot read"
    return None


def work_tree(cwd: str) -> str:
    """The top of the git work tree holding `cwd` (`cwd` itself outside any)."""
    start = os.path.realpath(cwd)
    directory = start
    while True:
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return start
        directory = parent


def destructive_reason(
    command: str, cwd: str, settings: dict[str, Any] | None = None
) -> str | None:
    """Why `command` is refused, as the gate words a deny (None when it is not denied)."""
    answer, reason = judge(command, cwd, settings)
    return message(command, reason) if answer == "deny" else None


def message(command: str, reason: str) -> str:
    """The reason Claude Code shows, with the command it is about."""
    shown = " ".join(command.split())
    shown = shown if len(shown) <= 120 else shown[:117] + "..."
    return f"gc destructive-op: `{shown}`: {reason}."
