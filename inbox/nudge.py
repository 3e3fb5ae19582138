"""Nudges: wake an idle agent by running its configured command.

`config.yaml` gives an agent a nudge command as an argv template, for example
`agents: {mayor: {nudge: [tmux, send-keys, -t, "{session}", "{text}", Enter]}}`. The command
runs without a shell in a detached supervisor process (`python -m inbox.nudge`), which kills it
(and its children) after `delivery.nudge_timeout` and records the outcome on the session, so
the producer never waits. An agent is nudged only when one of its live sessions is idle (its
last hook was Stop), and at most once per `delivery.nudge_interval`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from beads import files
from beads.errors import InvalidInput, telling_line
from beads.process import not_started, run_bounded
from beads.settings.config import check_argv_template
from inbox.render import preview
from inbox.sessions import Sessions

if TYPE_CHECKING:
    from inbox.deliveryconfig import DeliveryConfig
    from inbox.items import Item
    from inbox.names import AgentNames
    from inbox.sessions import Session


class Nudger:
    """Nudges of one store's agents: its config.yaml's commands, its sessions' state."""

    def __init__(
        self, root: Path, settings: DeliveryConfig, names: AgentNames, sessions: Sessions
    ) -> None:
        """`root`: the store's `.beads/`; `settings`: config.yaml; `names`: agents' full
        names; `sessions`: which sessions are idle, and where outcomes are recorded."""
        self.root = root
        self.settings = settings
        self.names = names
        self.sessions = sessions

    def command(self, agent: str) -> list[str] | None:
        """The agent's nudge argv template from config.yaml, or None; InvalidInput if it is
        not a list of strings with plain `{session}`, `{agent}`, `{text}` substitutions (an
        older config.yaml may hold one that `gc config set` now refuses)."""
        agents = self.settings.store_config().get("agents")
        entry = None
        for name in self.settings.spellings(agent):  # `agents.mayor` configures `gastown/mayor`
            entry = agents.get(name) if isinstance(agents, dict) else None
            if entry is not None:
                break
        spec = entry.get("nudge") if isinstance(entry, dict) else None
        if spec is None:
            return None
        try:
            return check_argv_template(spec)
        except InvalidInput as exc:
            raise InvalidInput(f"agents.{agent}.nudge: {exc.message}") from None

    def nudge_agents(self, items: Sequence[Item]) -> None:
        """Nudge each agent of `items` that has a command, an idle session and is due."""
        by_agent: dict[str, Item] = {}
        for item in items:
            by_agent.setdefault(item.agent, item)
        for agent, item in by_agent.items():
            self.nudge(
                agent, f"[gc] new {item.type} from {item.source}: {preview(item.content, 120)}"
            )

    def nudge_now(self, agent: str, text: str, since: float) -> str | None:
        """Nudge `agent` now, whatever `delivery.nudge_interval` says (`gc mail send
        --notify`), unless a nudge went out after `since`; None when it is nudged, else why
        it is not."""
        try:
            template = self.command(agent)
        except InvalidInput as exc:
            return exc.message
        if template is None:
            return f"it has no nudge command; set agents.{agent}.nudge in config.yaml"
        if not any(s.state == "idle" for s in self._live(agent)):
            return "it has no idle session, and a busy one sees its mail at its next prompt"
        self.nudge(agent, text, since=since)
        return None

    def _live(self, agent: str) -> list[Session]:
        return self.sessions.live_sessions(self.names.own(agent))

    def nudge(self, agent: str, text: str, *, since: float | None = None) -> str | None:
        """Start a nudge of `agent`'s most recent idle session; returns the session or None.
        At most one per `delivery.nudge_interval`; with `since`, one unless a nudge went out
        after `since`."""
        try:
            template, problem = self.command(agent), None
        except InvalidInput as exc:  # a bad template fails this nudge, shown on the session
            template, problem = [], exc.message
        if template is None:
            return None
        idle = [s for s in self._live(agent) if s.state == "idle"]
        if not idle:
            return None
        now = time.time()
        threshold = now - self.settings.setting("nudge_interval") if since is None else since
        # Claim the interval atomically: racing producers nudge once.
        with self.sessions.write() as db:
            claimed = db.execute(
                "INSERT INTO nudges(agent, last_at) VALUES (?, ?) ON CONFLICT(agent) DO UPDATE "
                "SET last_at = excluded.last_at WHERE nudges.last_at <= ?",
                (agent, now, threshold),
            ).rowcount
        if not claimed:
            return None
        session = idle[0].session
        if problem is not None:
            self.sessions.record_nudge(session, "failed", f"bad nudge template: {problem}")
            return None
        # Checked: only plain {session}, {agent} and {text}, each of bounded length.
        argv = [part.format(session=session, agent=agent, text=text) for part in template]
        job = {
            "db": str(self.root),
            "session": session,
            "argv": argv,
            "timeout": self.settings.setting("nudge_timeout"),
        }
        subprocess.Popen(
            [sys.executable, "-m", "inbox.nudge", json.dumps(job)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            umask=files.started_umask(),  # the user's, not the one gc keeps for the store
        )
        return session


def run_job(job: dict[str, Any]) -> tuple[str, str]:
    """Run one nudge command with its timeout; returns `(outcome, detail)`."""
    argv, timeout = job["argv"], float(job["timeout"])
    try:
        code, _out, err = run_bounded(argv, timeout)
    except subprocess.TimeoutExpired:
        return "timed out", f"{argv[0]} ran past {timeout:g}s and was killed"
    except OSError as exc:
        return "failed", f"{argv[0]!r} {not_started(argv[0], exc)}"
    if code != 0:
        return (
            "failed",
            f"{argv[0]} exited {code}: {telling_line(err.decode('utf-8', 'replace'), 200)}",
        )
    return "ok", f"{argv[0]} exited 0"


def main(argv: list[str]) -> None:
    """The detached supervisor: run the job, record its outcome on the session."""
    job = json.loads(argv[0])
    outcome, detail = run_job(job)
    runtime = Path(job["db"]) / ".runtime"
    sessions = Sessions(runtime, idle_timeout=lambda: 0.0)  # only the outcome is written
    try:
        sessions.record_nudge(job["session"], outcome, detail)
    finally:
        sessions.close()


if __name__ == "__main__":
    main(sys.argv[1:])
