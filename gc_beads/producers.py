"""The program's producer set: how delivery derives inbox items from what mail, decisions and
bead gates commit, without importing any of them until a change of theirs is to be derived.

Declared in pyproject.toml as the entry point `default` of the group `gc_beads.producers`, so
a `Delivery(root)` made without producers (a Python program using the library) finds the same
set as `gc`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from pathlib import Path


def default_producers() -> None:
    """Declare the built-in producers (mail, decisions, bead gates) and the announcer of a
    sync's arrivals; imports none of the producers. Safe to call more than once.

    Returns None for now: delivery still keeps the declared producers in `inbox.producers`
    (its `declare`); once delivery receives its producers as a value (`ProducerSet`), this
    returns that value built from the same loaders and sections.
    """
    from beads import arrivals
    from inbox import producers

    producers.declare(
        {"message": _mail, "decision": _decisions, "gate": _bead_gates},
        sections={"mail": _mail_section},
    )
    # A sync's commits announced as a local write's are: items derived, idle sessions nudged.
    arrivals.register("gc_beads.producers:announce_arrivals")


def announce_arrivals(root: Path) -> None:
    """What a sync brought into the store at `root`, told to the agents here (the
    announcer `default_producers` registers with `beads.arrivals`; a detached background
    syncer calls it in a process of its own, which has not declared the producers yet)."""
    default_producers()
    from inbox.arrivals import announce

    announce(root)


def _mail() -> None:
    import mail.notify  # noqa: F401 - registers the message deriver and the reconciler


def _mail_section() -> None:
    import mail.section  # noqa: F401 - registers how a drain shows mail


def _decisions() -> None:
    import gates.decisions  # noqa: F401 - registers the decision deriver


def _bead_gates() -> None:
    import gates.beadgates  # noqa: F401 - registers the gate deriver
