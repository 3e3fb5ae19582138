"""The Stop chain: handlers run by priority; the first block wins, warnings accumulate.

14 stop-loop detector: after `gates.max_stop_blocks` (3) consecutive blocked stops, let the
   agent stop, and say so;
15 stop-decision: when `gates.require_decision` is on and the session has not asked a human,
   block and say what to run;
20 gates: session gates by mode (strict blocks, soft warns), and a warning for each open bead
   gate the agent waits on (a human gate may take days: never a block);
30 inbox: priority-0 items block; the rest wait for the next prompt.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable

from beads.index.query import Query
from gates import session_gates

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    import sqlite3

    from gates.hookbase import HookContext
    from inbox.delivery import Delivery

DEFAULT_MAX_STOP_BLOCKS = 3
# The loop detector's count of consecutive blocked stops, per session: gates' own table in
# the sessions database (runtime state, dropped with it if damaged: the count starts over).
STOP_BLOCKS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS stop_blocks(session TEXT PRIMARY KEY, blocks INTEGER NOT NULL)"
)


class StopVerdict(namedtuple("StopVerdict", "block warnings allow", defaults=(None, (), False))):
    """What one Stop handler says: block with a reason (`block`), warn (`warnings`), or let
    the agent stop now, skipping later handlers (`allow`, the loop detector).

    A namedtuple, not a dataclass: importing `dataclasses` would slow every hook."""

    __slots__ = ()


StopHandler = Callable[["HookContext"], "StopVerdict | None"]


def count_stop_block(delivery: Delivery, session: str, blocked: bool) -> int:
    """Count a blocked Stop of `session` (or, not blocked, reset the count); returns the
    new count."""

    def count(db: sqlite3.Connection) -> int:
        db.execute(STOP_BLOCKS_SCHEMA)
        if not blocked:
            db.execute("DELETE FROM stop_blocks WHERE session = ?", (session,))
            return 0
        db.execute(
            "INSERT INTO stop_blocks VALUES (?, 1) "
            "ON CONFLICT(session) DO UPDATE SET blocks = blocks + 1",
            (session,),
        )
        return stop_blocks(db, session)

    return delivery.on_sessions(count)


def stop_blocks(db: sqlite3.Connection, session: str) -> int:
    """The consecutive blocked stops of `session` counted so far."""
    db.execute(STOP_BLOCKS_SCHEMA)
    row = db.execute("SELECT blocks FROM stop_blocks WHERE session = ?", (session,)).fetchone()
    return row[0] if row else 0


def stop_loop(ctx: HookContext) -> StopVerdict | None:
    if not ctx.payload.get("stop_hook_active"):
        count_stop_block(ctx.delivery, ctx.session, blocked=False)
        return None
    limit = (ctx.config.get("gates") or {}).get("max_stop_blocks", DEFAULT_MAX_STOP_BLOCKS)
    blocks = ctx.delivery.on_sessions(lambda db: stop_blocks(db, ctx.session))
    if blocks >= int(limit):
        count_stop_block(ctx.delivery, ctx.session, blocked=False)
        return StopVerdict(
            allow=True,
            warnings=[f"gc: letting the agent stop after {blocks} blocked stops in a row"],
        )
    return None


def stop_decision(ctx: HookContext) -> StopVerdict | None:
    # The `decision` session gate, judged as `gc gate status` judges it; absent unless
    # `gates.require_decision` is on.
    gate = next((g for g in session_gates.session_gates(ctx.config) if g.id == "decision"), None)
    if (
        gate is None
        or session_gates.evaluate(gate, ctx.delivery, ctx.session, cwd=ctx.root).satisfied
    ):
        return None
    return StopVerdict(
        block=(
            "This project asks for a human decision before you stop. Put your question to the "
            f'human: gc decision create --session {ctx.session} --prompt "..." '
            "--option KEY=LABEL --option KEY=LABEL [--default KEY] [--wait]. The answer comes "
            "back to your inbox."
        )
    )


def stop_gates(ctx: HookContext) -> StopVerdict | None:
    strict, warnings = session_gates.judged(
        ctx.config, ctx.delivery, ctx.session, ctx.payload.get("cwd"), hook="Stop",
        skip=("decision",),  # the decision gate is stop_decision's
    )  # fmt: skip
    warnings += _waiting_on(ctx)
    if strict:
        mark = f"gc gate mark ID --session {ctx.session}"
        reason = "Session gates not satisfied:\n" + "\n".join(f"- {s}" for s in strict)
        return StopVerdict(block=f"{reason}\nSatisfy them, or run `{mark}` once done.",
                           warnings=warnings)  # fmt: skip
    return StopVerdict(warnings=warnings) if warnings else None


def stop_inbox(ctx: HookContext) -> StopVerdict | None:
    drained = ctx.drain(max_priority=0)
    return StopVerdict(block=drained.text) if drained.items else None


CHAIN: list[tuple[int, StopHandler]] = [
    (14, stop_loop),
    (15, stop_decision),
    (20, stop_gates),
    (30, stop_inbox),
]


def _open_gates(ctx: HookContext) -> list[dict]:
    rows = ctx.delivery.reader.index.query(Query(type="gate", status="open", limit=None))
    return [bead.to_dict() for bead in rows]


def _waiting_on(ctx: HookContext) -> list[str]:
    lines = []
    for gate in _open_gates(ctx):
        meta = gate.get("meta") or {}
        if ctx.agent in (meta.get("waiters") or []):
            target = meta.get("await_type", "?")
            if meta.get("await_id"):
                target += f":{meta['await_id']}"
            state = " ESCALATED" if meta.get("state") == "escalated" else ""
            lines.append(f"gc: you wait on gate {gate['id']} ({target}){state}: {gate['title']}")
    return lines
