"""A sync's arrivals, announced here as a local write's are (seed 001: wake an idle agent).

Commits that come in by `gc sync` (or the background syncer) carry mail, decisions and gate
resolutions for agents of this machine. Without this, nothing would derive their items, nor
nudge an idle session, until that session's next hook. `announce` derives the items of the
new commits (`Delivery.refresh`, which nudges idle recipients as a push does), then runs every
producer's reconciler for the agents of idle sessions here, so items recovered by
reconciliation wake them too.
"""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from inbox.producers import ProducerSet


def announce(root: Path, producers: ProducerSet | None = None) -> int:
    """Derive the items of commits new to the delivery database of the store at `root`, then
    reconcile the agents of its idle sessions (each push nudging as usual); returns how many
    items were new. `producers`: who derives (None: the program's default set)."""
    from inbox.delivery import Delivery

    with Delivery(root, producers) as delivery:
        made = delivery.refresh()
        idle = dict.fromkeys(s.agent for s in delivery.sessions() if s.state == "idle")
        for agent in idle:
            delivery.reconcile(agent)
    return made
