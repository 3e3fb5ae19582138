"""The program's producer set: how delivery derives inbox items from what mail, decisions and
bead gates commit, without importing any of them until a change of theirs is to be derived.

`gc` hands this set to delivery through the run's runtime (`gc_beads.entry`). It is also the
entry point `default` of the group `gc-beads.producers` (pyproject.toml), so a
`Delivery(root)` made by a Python program without producers finds the same set.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from pathlib import Path

    from inbox.producers import ProducerSet


def default_producers() -> ProducerSet:
    """The built-in producers (mail, decisions, bead gates) as a new `ProducerSet`; imports
    none of them (each is imported when a change of its bead type is first derived)."""
    from inbox.producers import ProducerSet

    return ProducerSet(
        # In this order, reconcilers run mail's first, then the gates', then the decisions'.
        {"message": _mail, "gate": _bead_gates, "decision": _decisions},
        sections={"mail": _mail_section},
    )


def register_arrivals() -> None:
    """Have every sync of this process announce what it brings to the agents here (items
    derived, idle sessions nudged). Safe to call more than once."""
    from beads.sync import arrivals

    arrivals.register("gc_beads.producers:announce_arrivals")


def announce_arrivals(root: Path) -> None:
    """What a sync brought into the store at `root`, told to the agents here (the announcer
    `register_arrivals` registers with `beads.sync.arrivals`)."""
    from inbox.arrivals import announce

    announce(root)


def _mail(producers: ProducerSet) -> None:
    from mail import notify

    notify.add_to(producers)


def _mail_section(producers: ProducerSet) -> None:
    from mail import section

    section.add_to(producers)


def _decisions(producers: ProducerSet) -> None:
    from gates import decisions

    decisions.add_to(producers)


def _bead_gates(producers: ProducerSet) -> None:
    from gates import beadgates

    beadgates.add_to(producers)
