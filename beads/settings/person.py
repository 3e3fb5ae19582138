"""Is a person at the keyboard? What approving a guarded setting (`beads.settings.trust`) asks of
the
process: not an agent's session, and a confirmation typed at the controlling terminal.

An agent is not a person. A process is taken for an agent's when its environment shows one:
Claude Code's (`CLAUDECODE`, any `CLAUDE_CODE_*`), a Gas City session's (`GC_SESSION_ID`), or
a `gc hook run` (which sets `GC_HOOK_RUN` for everything it starts: gate checks, nudges, mail
scripts). The confirmation is read from `/dev/tty`, never from stdin, so `yes | gc trust`
approves nothing.
"""

from __future__ import annotations

import os

HOOK_ENV = "GC_HOOK_RUN"  # set by `gc hook run` (beads.cli.entry) for itself and its children
AGENT_ENV = ("CLAUDECODE", "GC_SESSION_ID", HOOK_ENV)
AGENT_PREFIX = "CLAUDE_CODE_"
TERMINAL = "/dev/tty"


def agent_session() -> str | None:
    """The environment variable that shows this process runs for an agent, or None."""
    for name in AGENT_ENV:
        if os.environ.get(name):
            return name
    for name in sorted(os.environ):
        if name.startswith(AGENT_PREFIX):
            return name
    return None


def has_terminal() -> bool:
    """True when this process has a controlling terminal it can open."""
    try:
        os.close(os.open(TERMINAL, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC))
    except OSError:
        return False
    return True


def confirm(text: str, question: str, answer: str = "yes") -> bool:
    """Show `text` and `question` on the controlling terminal and read one line there; True
    when the line is `answer`. OSError when there is no terminal."""
    fd = os.open(TERMINAL, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    with open(fd, "r+b", buffering=0) as tty:
        tty.write((text.rstrip("\n") + "\n" + question).encode())
        line = b""
        while not line.endswith(b"\n") and len(line) < 1024:
            chunk = tty.read(1)
            if not chunk:
                break
            line += chunk
    return line.decode(errors="replace").strip().lower() == answer
