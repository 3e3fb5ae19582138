"""The built-in producers of inbox items, made known to delivery: the composition root.

The inbox layer names no layer above it. Mail and the gates register their derivers (and
mail its reconciler) with `inbox.producers` when they are imported; this module, at the top of
the layers, declares where they are, so each is imported only when a change of its bead type
is to be derived. `gc` (beads/cli/main.py) and `gc hook run` (gates/hooks.py) call
`register_producers()` before they run; so does a Python program that drains, or sends mail,
with the library directly.
"""

from __future__ import annotations

from inbox import producers


def _mail() -> None:
    import mail.notify  # noqa: F401 - registers the message deriver and the reconciler


def _decisions() -> None:
    import gates.decisions  # noqa: F401 - registers the decision deriver


def _bead_gates() -> None:
    import gates.beadgates  # noqa: F401 - registers the gate deriver


def register_producers() -> None:
    """Declare the built-in producers (mail, decisions, bead gates) to delivery; imports
    none of them (each is imported when first needed). Safe to call more than once."""
    producers.declare({"message": _mail, "decision": _decisions, "gate": _bead_gates})
