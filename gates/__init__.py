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

It is also, for now, the composition root of delivery's producers: `default_producers()` is the
program's default `inbox.producers.ProducerSet` (mail, decisions, bead gates), which
`Delivery(root)` finds through the entry point `gc_beads.producers:default`; each producer is
imported only when a change of its bead type is to be derived. `register_arrivals()` (which
`gc` calls before a command runs) has a sync's arrivals announced to the agents here.
"""

from __future__ import annotations

TYPE_CHECKING = False  # importing typing costs a hook ~7 ms
if TYPE_CHECKING:
    from pathlib import Path

    from inbox.producers import ProducerSet


def default_producers() -> ProducerSet:
    """The built-in producers (mail, decisions, bead gates) as a new `ProducerSet`; imports
    none of them (each is imported when first needed)."""
    from inbox.producers import ProducerSet

    return ProducerSet(
        # In this order, reconcilers run mail's first, then the gates', then the decisions'.
        {"message": _mail, "gate": _bead_gates, "decision": _decisions},
        sections={"mail": _mail_section},
    )


def register_arrivals() -> None:
    """Have every sync of this process announce its arrivals (`announce_arrivals`) to the
    agents here: items derived, idle sessions nudged. Safe to call more than once."""
    from beads import arrivals

    arrivals.register("gates:announce_arrivals")


def register_producers() -> None:
    """Deprecated: `Delivery(root)` derives with the program's default producer set (the
    `gc_beads.producers` entry point) without it; this registers the sync announcer
    (`register_arrivals`) as it did."""
    import warnings

    warnings.warn(
        "gates.register_producers() is deprecated: Delivery(root) uses the installed "
        "producer set (or give it one: Delivery(root, gates.default_producers()))",
        DeprecationWarning,
        stacklevel=2,
    )
    register_arrivals()


def announce_arrivals(root: Path) -> None:
    """What a sync brought into the store at `root`, told to the agents here (the
    announcer `register_arrivals` registers with `beads.arrivals`)."""
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
