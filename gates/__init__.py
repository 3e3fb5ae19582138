"""Gates: what keeps an agent from stopping, and what it waits on.

- `gates.session_gates`: per-session rules judged at a hook (markers, built-ins, registered
  checks): `gate_statuses`, `register`, `unregister`, `mark`, `clear`;
- `gates.beadgates`: beads of type `gate` that wait for a timer, a human, a mail reply, a bead
  or GitHub, then tell their waiters: `create_gate`, `check_gates`, `resolve_gate`;
- `gates.decisions`: questions to a human whose answer comes back to the requester's inbox:
  `create_decision`, `respond`, `wait_or_default`, and `check_due` (timed-out decisions
  answered with their default, then the gates checked: `gc gate check` and every hook);
- `gates.hooks`: `gc hook run`, Claude Code's hook protocol (`run_hook`), with the Stop chain
  in `gates.stop`, the UserPromptSubmit and PreCompact chains in `gates.promptchains`, and
  PreToolUse in `gates.pretool` (its `destructive-op` analysis in `gates.destructive`).

The command-line groups (`gc gate`, `gc decision`, `gc hook`) are thin over these, in
`gates.cli` and `gates.hook_cli`.

The program (`gc_beads`) puts the producers of inbox items together (its producer set:
mail, decisions, bead gates) and hands them to delivery. `register_producers()`, the former
way to declare them, is kept for one release: it warns, and has a sync's arrivals announced.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from pathlib import Path


def register_producers() -> None:
    """Deprecated: `Delivery(root)` derives with the program's producer set without it. Has
    every sync of this process announce its arrivals to the agents here, as it did."""
    import warnings

    from beads.sync import arrivals

    warnings.warn(
        "gates.register_producers() is deprecated: Delivery(root) uses the installed "
        "producer set (or give it one: Delivery(root, producers))",
        DeprecationWarning,
        stacklevel=2,
    )
    arrivals.register("gates:announce_arrivals")


def announce_arrivals(root: Path) -> None:
    """What a sync brought into the store at `root`, told to the agents here (the announcer
    the deprecated `register_producers` registers with `beads.sync.arrivals`)."""
    from inbox.arrivals import announce

    announce(root)
