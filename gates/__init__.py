"""Gates, the top layer: session gates, bead gates, decisions, `gc hook run` and its Stop chain.

It is also the composition root of delivery's producers: mail and the gates register how they
derive inbox items with `inbox.producers` when imported, and `register_producers()` declares
where they are, so each is imported only when a change of its bead type is to be derived. `gc`
(beads/cli/main.py) and `gc hook run` (gates/hooks.py) call it before they run; so does a Python
program that drains, or sends mail, with the library directly.
"""

from __future__ import annotations


def register_producers() -> None:
    """Declare the built-in producers (mail, decisions, bead gates) to delivery; imports
    none of them (each is imported when first needed). Safe to call more than once."""
    from inbox import producers

    producers.declare({"message": _mail, "decision": _decisions, "gate": _bead_gates})


def _mail() -> None:
    import mail.notify  # noqa: F401 - registers the message deriver and the reconciler


def _decisions() -> None:
    import gates.decisions  # noqa: F401 - registers the decision deriver


def _bead_gates() -> None:
    import gates.beadgates  # noqa: F401 - registers the gate deriver
