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

It is also the composition root of delivery's producers: mail and the gates register how they
derive inbox items with `inbox.producers` when imported, and `register_producers()` declares
where they are, so each is imported only when a change of its bead type is to be derived. `gc`
(beads/cli/main.py) and `gc hook run` (gates/hooks.py) call it before they run; so does a Python
program that drains, or sends mail, with the library directly.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from pathlib import Path


def register_producers() -> None:
    """Declare the built-in producers (mail, decisions, bead gates) to delivery; imports
    none of them (each is imported when first needed). Safe to call more than once."""
    from beads import arrivals
    from inbox import producers

    producers.declare(
        {"message": _mail, "decision": _decisions, "gate": _bead_gates},
        sections={"mail": _mail_section},
    )
    # A sync's commits announced as a local write's are: items derived, idle sessions nudged.
    arrivals.register("gates:announce_arrivals")


def announce_arrivals(root: Path) -> None:
    """What a sync brought into the store at `root`, told to the agents here (the
    announcer `register_producers` registers with `beads.arrivals`)."""
    register_producers()  # the background syncer's process has not declared them yet
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
