"""Decisions: a question put to a human, whose answer comes back to the requester's inbox.

A decision is a bead of type `decision` (meta: prompt, options, default, requested_by, gate)
plus a `human` gate that waits on it. `respond` records the answer and resolves the gate in
one commit, then records the answer for the requester (`decision:<id>`, self-contained), then
nudges; the order matters: whoever sees the item finds the gate already resolved. The item
follows git (`derive`, `inbox.follow`): a respond killed after its commit is announced by the
next drain. When the timeout passes, `gc gate check` answers with the default option the same
way (marked as a default), or escalates when there is none.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from beads.errors import InvalidInput, NoMatch
from beads.records.record import Bead, expect_type
from beads.records.times import now_stamp
from beads.runtime import runs_long
from beads.store import Store
from beads.waiting import pause
from gates import session_gates
from gates.beadgates import (
    GATE,
    Outcome,
    changed_paths,
    check_gates,
    close_resolved,
    gate_meta,
    recent_changes,
)
from inbox.commits import followed_batch
from inbox.delivery import Delivery
from inbox.follow import Change, reconciled, record
from inbox.items import Item, clip
from inbox.producers import ProducerSet
from inbox.queue import check_session

DECISION = "decision"


def parse_options(specs: Sequence[str]) -> list[dict[str, str]]:
    """`KEY[=LABEL]` options, keys unique."""
    options = []
    for spec in specs:
        key, _, label = spec.partition("=")
        key = key.strip()
        if not key or any(c.isspace() for c in key) or len(key) > 64:
            raise InvalidInput(f"invalid option {spec!r}: use KEY or KEY=LABEL")
        if key in {o["key"] for o in options}:
            raise InvalidInput(f"option {key!r} is given twice")
        options.append({"key": key, "label": label.strip() or key})
    if len(options) < 2:
        raise InvalidInput("a decision needs at least two options")
    return options


def create_decision(
    store: Store,
    prompt: str,
    options: Sequence[str],
    *,
    default: str | None = None,
    timeout: str | None = None,
    assignee: str = "human",
    body: str = "",
    session: str | None = None,
) -> tuple[Bead, Bead]:
    """Create the decision and its gate in one commit; returns `(decision, gate)`.

    `session`: the session asking, whose `decision` session gate is then marked (the Stop
    hook lets it stop)."""
    parsed = parse_options(options)
    if session is not None:
        check_session(session)  # before the commit: a refused input leaves the store as it was
    if not prompt.strip():
        raise InvalidInput("a decision needs a prompt")
    if default is not None and default not in {o["key"] for o in parsed}:
        raise InvalidInput(f"the default {default!r} is not one of the options")
    with followed_batch(store) as (batch, changes):
        decision_id, gate_id = batch.new_id(), batch.new_id()
        title = " ".join(prompt.split())[:200]
        decision = batch.create(
            DECISION,
            title,
            body,
            assignee=assignee,
            bead_id=decision_id,
            meta={
                "prompt": prompt,
                "options": parsed,
                "default": default,
                "requested_by": store.agent,
                "gate": gate_id,
                "guarded": True,
            },
        )
        gate = batch.create(
            GATE,
            f"Wait for the decision {decision_id}",
            "",
            parent=decision_id,
            bead_id=gate_id,
            meta=gate_meta("human", decision_id, waiters=[store.agent], timeout=timeout),
        )
        batch.message = f'decision create {decision_id}: "{title[:60]}" (gate {gate_id})'
        changes += [Change(decision), Change(gate)]
    if session is not None:
        session_gates.mark(store.root, session, "decision")
    return decision, gate


def respond(
    store: Store,
    decision_ref: str,
    select: str,
    text: str | None = None,
    *,
    by_default: bool = False,
) -> Bead:
    """Answer: record it and resolve the gate (one commit), push the answer, then nudge."""
    decision = expect_type(store.get(decision_ref), DECISION)
    keys = [o["key"] for o in decision.meta.get("options") or []]
    if select not in keys:
        raise InvalidInput(f"{select!r} is not an option of {decision.id}: {', '.join(keys)}")
    if decision.status != "open" and decision.meta.get("answer") == select:
        push_answer(store, decision)  # the same answer again: tell the requester (dedup)
        return decision
    with followed_batch(store) as (batch, changes):
        current = batch.get(decision.id)
        if current.status != "open":
            raise InvalidInput(f"{decision.id} is already answered ({current.meta.get('answer')})")
        answer = {"answer": select, "answer_text": text, "answered_by": store.agent,
                  "answered_at": now_stamp(), "by_default": by_default}  # fmt: skip
        batch.update(decision.id, meta=answer)
        changes.append(
            Change(batch.close_bead(decision.id, f"answered: {select}", force=True), current)
        )
        gate_id = current.meta.get("gate")
        if gate_id:
            gate = batch.get(gate_id)
            if gate.status == "open":
                reason = f"decision {decision.id} answered: {select}"
                changes.append(Change(close_resolved(batch, gate_id, reason), gate))
        how = " (default)" if by_default else ""
        batch.message = f"decision respond {decision.id}: {select}{how} by {store.agent}"
    return store.get(decision.id)


def answer_text(decision: Bead) -> str:
    """The self-contained answer: prompt, options, choice, text."""
    meta = decision.meta
    options = ", ".join(f"{o['key']} ({o['label']})" for o in meta.get("options") or [])
    how = " by default (the decision timed out)" if meta.get("by_default") else ""
    lines = [
        f"Decision {decision.id} answered{how}: {meta.get('answer')}",
        f"Question: {meta.get('prompt')}",
        f"Options: {options}",
    ]
    if meta.get("answer_text"):
        lines.append(f"Note from {meta.get('answered_by')}: {meta['answer_text']}")
    return "\n".join(lines)


def answered_elsewhere(store: Store, decision: Bead) -> str:
    """The origin of `decision`'s last change when another machine (or plain git) committed
    it, as items show it (`"(from human on build-01) "`, inbox/origin.py); "" when it was
    made here. An origin informs: one that cannot be read is ""."""
    from inbox.origin import note_of

    return note_of(store.root, decision.type, decision.id, git=store.git, ever=False)


def answer_item(decision: Bead) -> Item:
    """The answer for the requester (dedup `decision:<id>`)."""
    requester = decision.meta.get("requested_by") or decision.sender
    return Item.new(requester, clip(answer_text(decision)), key=f"decision:{decision.id}",
                    type="decision", source=str(decision.meta.get("answered_by") or "human"),
                    priority=min(decision.priority, 1))  # fmt: skip


def answered(change: Change) -> bool:
    """True when the change answers a decision (it was open, or not there, before)."""
    new, old = change.new, change.old
    return (
        new is not None
        and new.type == DECISION
        and new.status == "closed"
        and new.meta.get("answer") is not None
        and (old is None or old.status == "open")
    )


def derive(changes: Sequence[Change]) -> list[Item]:
    """The decision items of a commit range: the answer of each decision answered in it."""
    return [answer_item(c.new) for c in changes if c.new is not None and answered(c)]


def reconcile(delivery: Delivery, agent: str) -> int:
    """Record the answers of `agent`'s decisions answered lately (idempotent: dedup keys;
    `gc inbox drain --reconcile`, SessionStart and the hooks' heartbeat run it); returns how
    many it derived."""
    agent = delivery.agent_of(agent)
    changes = recent_changes(delivery, (DECISION,))
    items = [item for item in derive(changes) if delivery.agent_of(item.agent) == agent]
    reconciled(delivery, items, changed_paths(changes))
    return len(items)


def add_to(producers: ProducerSet) -> None:
    """Add the decisions' deriver (bead type `decision`) and reconciler to `producers`."""
    producers.add_deriver(DECISION, derive)
    producers.add_reconciler(reconcile)


def push_answer(store: Store, decision: Bead) -> None:
    """Record the answer for the requester again (a no-op if it is still there); nudges."""
    with Delivery(store.root) as delivery:
        record(delivery, [answer_item(decision)])


def check_due(
    store: Store, *, only_timers: bool = False, unreadable: dict[str, str] | None = None
) -> tuple[list[str], list[Outcome]]:
    """What `gc gate check` does, and the hooks too: answer every timed-out decision with its
    default, then resolve or escalate the gates whose condition holds (`only_timers`: due
    timers only, no `gh`, no escalations, as a hook does). Returns the decisions answered and
    the gates' outcomes; the named stores that could not be read go in `unreadable`."""
    answered = answer_timed_out(store)
    return answered, check_gates(store, only_timers=only_timers, unreadable=unreadable)


def answer_timed_out(store: Store) -> list[str]:
    """Answer every open decision whose gate timed out and that has a default."""
    answered = []
    now = now_stamp()
    for decision in store.list(type=DECISION, status="open", limit=None):
        gate_id = decision.meta.get("gate")
        default = decision.meta.get("default")
        if not gate_id or not default:
            continue
        gate = store.get(str(gate_id))
        if gate.status == "open" and gate.meta.get("timeout_at") and gate.meta["timeout_at"] <= now:
            try:
                respond(store, decision.id, str(default), by_default=True)
            except InvalidInput:
                if store.get(decision.id).status == "open":
                    raise
                continue  # answered meanwhile (a racing check, or a person): not ours to tell
            answered.append(decision.id)
    return answered


def wait_for_answer(store: Store, decision_id: str, timeout: float | None) -> Bead:
    """Block until the decision is answered (polling the index), or raise NoMatch."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        decision = store.get(decision_id)
        if decision.status == "closed":
            return decision
        if deadline is not None and time.monotonic() >= deadline:
            raise NoMatch(f"no answer to {decision_id} yet")
        runs_long()  # a wait: the garbage collector's usual collections back
        pause(0.05)


def wait_or_default(store: Store, decision_id: str, timeout: float | None) -> Bead:
    """`--wait`: the answer, or at the timeout the default answer; NoMatch with no default."""
    try:
        return wait_for_answer(store, decision_id, timeout)
    except NoMatch:
        decision = store.get(decision_id)
        default = decision.meta.get("default")
        if decision.status == "open" and default:
            return respond(store, decision_id, str(default), by_default=True)
        if decision.status == "closed":
            return decision
        raise
