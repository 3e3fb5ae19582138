"""Gates: what keeps an agent from stopping, and what it waits on.

- `gates.session_gates`: per-session rules judged at a hook (markers, built-ins, registered
  checks): `gate_statuses`, `register`, `unregister`, `mark`, `clear`;
- `gates.beadgates`: beads of type `gate` that wait for a timer, a human, a mail reply, a bead
  or GitHub, then tell their waiters: `create_gate`, `check_gates`, `resolve_gate`;
- `gates.decisions`: questions to a human whose answer comes back to the requester's inbox:
  `create_decision`, `respond`, `wait_or_default`, and `check_due` (timed-out decisions
  answered with their default, then the gates checked: `gc gate check` and every hook);
- `gates.hooks`: `gc hook run`, Claude Code's hook protocol (`run_hook`), with the Stop chain
  in `gates.stop`, the UserPromptSubmit and PreCompact chains in `gates.events`, and
  PreToolUse in `gates.pretool` (its `destructive-op` analysis in `gates.destructive`).

The command-line groups (`gc gate`, `gc decision`, `gc hook`) are thin over these, in
`gates.cli` and `gates.hook_cli`.

Mail and the gates register how they derive inbox items with `inbox.producers` when
imported; the program declares where they are (its producer set). `register_producers()` is
the former way to declare them, kept for one release: it warns.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from pathlib import Path


def register_producers() -> None:
    """Deprecated: the program declares the producers (its producer set, which a `Delivery`
    made without producers loads too). Declares the built-in producers (mail, decisions,
    bead gates) to delivery as before; imports none of them."""
    import warnings

    from beads import arrivals
    from inbox import producers

    warnings.warn(
        "gates.register_producers() is deprecated: the gc-beads program declares the "
        "producers (its default producer set)",
        DeprecationWarning,
        stacklevel=2,
    )
    producers.declare(
        {"message": _mail, "decision": _decisions, "gate": _bead_gates},
        sections={"mail": _mail_section},
    )
    # A sync's commits announced as a local write's are: items derived, idle sessions nudged.
    arrivals.register("gates:announce_arrivals")


def announce_arrivals(root: Path) -> None:
    """What a sync brought into the store at `root`, told to the agents here (the
    announcer the deprecated `register_producers` registers with `beads.arrivals`)."""
    import warnings

    with warnings.catch_warnings():  # a syncer started by a program that used the old way
        warnings.simplefilter("ignore", DeprecationWarning)
        register_producers()
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
