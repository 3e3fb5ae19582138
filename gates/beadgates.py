"""Bead gates: beads of type `gate` that wait for a condition, then tell their waiters.

A gate's meta holds `await_type` (timer, human, mail, bead, gh:run, gh:pr), `await_id`,
`timeout`, `waiters` and its `state` (open, escalated; a resolved gate is closed). It is
`guarded`: closing one that has not resolved needs `--force`.

`check_gates` evaluates every open gate outside the store's lock (the `gh` calls can be slow),
then commits all resolutions in one batch, re-reading each gate under the lock so that two
checks running at once resolve it once; the waiters' items are deduplicated by key
(`gate:<id>`, `gate:<id>:escalated`), so each waiter hears of it once. The items follow git
(`derive`, `inbox.follow`): a check killed after its commit is announced by the next drain.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from beads.errors import GcError, Interrupted, InvalidInput, NotFound, telling_line
from beads.index.query import Query
from beads.process import BudgetSpent, budget, not_started, run_bounded
from beads.records.record import Bead, check_agent, expect_type
from beads.records.times import now_stamp, parse_duration, stamp_at, to_stamp
from beads.store import Store
from gates import settings as _settings  # noqa: F401 - registers the `gates` section
from inbox.commits import followed_batch
from inbox.follow import Change, reconciled
from inbox.items import Item, clip

if TYPE_CHECKING:
    from beads.store import Batch
    from inbox.delivery import Delivery
    from inbox.producers import ProducerSet

GATE = "gate"
AWAIT_TYPES = ("timer", "human", "mail", "bead", "gh:run", "gh:pr")
GH_TIMEOUT = 30.0


@dataclass
class Outcome:
    """What a check found for one gate: resolve, escalate, wait (with an error, maybe)."""

    gate_id: str
    action: str  # resolve, escalate, wait
    reason: str = ""
    error: str | None = None


def parse_await(spec: str) -> tuple[str, str | None]:
    """`timer:30m`, `human`, `mail:<id>`, `bead:<id>`, `bead:<store>:<id>` (a bead of a store
    named in the machine-local settings), `gh:run:<workflow>`, `gh:pr:<n>`."""
    for kind in ("gh:run", "gh:pr", "timer", "mail", "bead"):
        if spec.startswith(kind + ":"):
            target = spec[len(kind) + 1 :]
            if not target:
                break
            if kind == "timer":
                parse_duration(target)
            if kind == "gh:pr" and not target.isdigit():
                raise InvalidInput(f"gh:pr needs a pull request number, not {target!r}")
            return kind, target
    if spec == "human":
        return "human", None
    raise InvalidInput(
        f"invalid --await {spec!r}: use timer:30m, human, mail:<id>, bead:<id>, "
        "bead:<store>:<id>, gh:run:<workflow> or gh:pr:<n>"
    )


def _stamp_after(seconds: float) -> str:
    return to_stamp(datetime.now(UTC) + timedelta(seconds=seconds))


def gate_meta(
    await_type: str,
    await_id: str | None,
    *,
    waiters: Sequence[str],
    timeout: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The meta of a new gate bead."""
    meta: dict[str, Any] = {
        "guarded": True,
        "await_type": await_type,
        "await_id": await_id,
        "waiters": [check_agent(w, what="waiter") for w in dict.fromkeys(waiters)],
        "state": "open",
        "timeout": timeout,
        "timeout_at": _stamp_after(parse_duration(timeout)) if timeout else None,
        "due_at": _stamp_after(parse_duration(await_id or "")) if await_type == "timer" else None,
    }
    meta.update(extra or {})
    return meta


def create_gate(
    store: Store,
    await_spec: str,
    *,
    waiters: Sequence[str] = (),
    timeout: str | None = None,
    parent: str | None = None,
    title: str | None = None,
) -> Bead:
    """Create a gate bead (the acting agent waits on it when no waiter is given)."""
    kind, target = parse_await(await_spec)
    if kind == "bead" and target is not None and ":" in target:
        name, _, bead_id = target.partition(":")
        if _other_bead(store, target) is None:
            raise NotFound(f"no bead {bead_id} in store {name}")
    elif kind in ("mail", "bead") and target is not None:
        target = store.get(target).id
    meta = gate_meta(kind, target, waiters=list(waiters) or [store.agent], timeout=timeout)
    label = title or f"Wait for {await_spec}"
    with followed_batch(store) as (batch, changes):
        gate = batch.create(GATE, label, "", parent=parent, meta=meta)
        changes.append(Change(gate))
    return gate


def open_gates(store: Store) -> list[Bead]:
    return store.list(type=GATE, status="open", limit=None)


def evaluate(
    store: Store,
    gate: Bead,
    *,
    gh: str = "gh",
    now: str | None = None,
    known: Mapping[str, Bead] | None = None,
    unreadable: dict[str, str] | None = None,
) -> Outcome:
    """Decide what to do with one open gate (no writes).

    `known`: beads already read by id (`Store.get_many`), looked up before the store.
    `unreadable`: the named stores found broken so far, each with what is wrong (filled in;
    one is not tried twice)."""
    meta = gate.meta
    now = now or now_stamp()
    kind, target = meta.get("await_type"), meta.get("await_id")
    outcome = Outcome(gate.id, "wait")
    if kind == "timer":
        if meta.get("due_at") and meta["due_at"] <= now:
            outcome = Outcome(gate.id, "resolve", f"timer {target} elapsed")
    elif kind == "bead":
        if target and ":" in target:  # `bead:<store>:<id>`: a bead of another store
            other, problem = _bead_elsewhere(
                store, target, {} if unreadable is None else unreadable
            )
            if problem is not None:
                outcome = Outcome(gate.id, "wait", error=problem)
        else:
            other = _bead_or_none(store, target, known)
        if other is not None and other.status == "closed":
            outcome = Outcome(gate.id, "resolve", f"{other.id} closed")
    elif kind == "mail":
        outcome = _mail_outcome(store, gate.id, target)
    elif kind == "gh:run":
        outcome = _gh_run(gate, target or "", gh)
    elif kind == "gh:pr":
        outcome = _gh_pr(gate, target or "", gh)
    if outcome.action == "wait" and meta.get("timeout_at") and meta["timeout_at"] <= now:
        return Outcome(gate.id, "escalate", f"timed out after {meta.get('timeout')}")
    return outcome


def _bead_or_none(
    store: Store, bead_id: str | None, known: Mapping[str, Bead] | None = None
) -> Bead | None:
    if known and bead_id in known:
        return known[bead_id]  # what store.get gives for a whole id
    try:
        return store.get(bead_id) if bead_id else None
    except NotFound:
        return None


def _other_bead(store: Store, target: str) -> Bead | None:
    """The bead `<store>:<id>` read through that store's index (the store named with
    `gc config set --local stores.NAME PATH`; NotFound when it is not); None: no such bead."""
    from beads.index.reader import IndexReader
    from beads.settings.localconfig import other_store

    name, _, bead_id = target.partition(":")
    with IndexReader(other_store(store.root / ".git", name)) as reader:
        return reader.get(bead_id)


def _bead_elsewhere(
    store: Store, target: str, unreadable: dict[str, str]
) -> tuple[Bead | None, str | None]:
    """`_other_bead`, and what is wrong with the other store when it cannot be read (named on
    this machine, but missing, damaged, another tool's, not a directory): its gates wait with
    that as their error, and the check goes on with every other gate. A store this machine
    does not name (yet) is waited for quietly. `unreadable` records the broken stores."""
    name = target.partition(":")[0]
    if name in unreadable:
        return None, unreadable[name]
    try:
        return _other_bead(store, target), None
    except Interrupted:
        raise
    except (GcError, OSError, sqlite3.Error) as exc:
        from beads.settings.localconfig import local_settings

        if isinstance(exc, NotFound) and f"stores.{name}" not in local_settings(
            store.root / ".git"
        ):
            return None, None
        if isinstance(exc, GcError):
            why = exc.message
        elif isinstance(exc, OSError):
            why = f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}"
        else:
            why = f"its index: {exc}"
        unreadable[name] = f"store {name} cannot be read (its gates wait): {why}"
        return None, unreadable[name]


def _mail_outcome(store: Store, gate_id: str, message_id: str | None) -> Outcome:
    message = _bead_or_none(store, message_id)
    if message is None:
        return Outcome(gate_id, "wait", error=f"no message {message_id}")
    for reply in store.list(type="message", thread=message.thread or message.id, limit=None):
        if reply.reply_to == message.id:
            return Outcome(gate_id, "resolve", f"{message.id} answered by {reply.id}")
    return Outcome(gate_id, "wait")


def _run_gh(gh: str, args: list[str]) -> Any:
    try:
        code, out, err = run_bounded([gh, *args], GH_TIMEOUT)
    except FileNotFoundError:
        raise InvalidInput(f"the gh CLI was not found ({gh}); set gates.gh_path") from None
    except BudgetSpent:  # earlier gates' `gh` runs of this check took all its time
        spent = f"the gate check's {GH_TIMEOUT:g} s budget was spent by earlier gates"
        raise InvalidInput(f"gh {' '.join(args[:2])} did not run: {spent}") from None
    except subprocess.TimeoutExpired:
        raise InvalidInput(f"gh {' '.join(args[:2])} ran past {GH_TIMEOUT:g}s") from None
    except OSError as exc:
        raise InvalidInput(f"the gh CLI {gh} {not_started(gh, exc)}") from None
    if code != 0:
        said = telling_line(err.decode("utf-8", "replace"), 200)
        raise InvalidInput(f"gh {' '.join(args[:2])} exited {code}: {said}")
    try:
        return json.loads(out)
    except ValueError:
        raise InvalidInput(f"gh {' '.join(args[:2])} printed something that is not JSON") from None


def _gh_run(gate: Bead, workflow: str, gh: str) -> Outcome:
    fields = "databaseId,status,conclusion,createdAt"
    try:
        runs = _run_gh(gh, ["run", "list", "--workflow", workflow, "--json", fields])
    except InvalidInput as exc:
        return Outcome(gate.id, "wait", error=str(exc))
    created = gate.created_at.replace("Z", "")[:19]
    newer = [r for r in runs if isinstance(r, dict) and str(r.get("createdAt", ""))[:19] >= created]
    if not newer:
        return Outcome(gate.id, "wait")
    run = max(newer, key=lambda r: str(r.get("createdAt", "")))
    if run.get("status") != "completed":
        return Outcome(gate.id, "wait")
    if run.get("conclusion") == "success":
        return Outcome(
            gate.id, "resolve", f"workflow {workflow} run {run.get('databaseId')} succeeded"
        )
    return Outcome(
        gate.id,
        "escalate",
        f"workflow {workflow} run {run.get('databaseId')}: {run.get('conclusion')}",
    )


def _gh_pr(gate: Bead, number: str, gh: str) -> Outcome:
    try:
        pr = _run_gh(gh, ["pr", "view", number, "--json", "state,mergedAt"])
    except InvalidInput as exc:
        return Outcome(gate.id, "wait", error=str(exc))
    state = str((pr or {}).get("state", "")).upper()
    if state == "MERGED" or (pr or {}).get("mergedAt"):
        return Outcome(gate.id, "resolve", f"pull request #{number} merged")
    if state == "CLOSED":
        return Outcome(gate.id, "escalate", f"pull request #{number} closed without merging")
    return Outcome(gate.id, "wait")


def check_gates(
    store: Store,
    *,
    gh: str | None = None,
    only_timers: bool = False,
    unreadable: dict[str, str] | None = None,
) -> list[Outcome]:
    """Resolve or escalate every open gate whose condition holds; returns what changed.

    A named store that cannot be read keeps only its own gates waiting (their error says
    why); it is put in `unreadable` (name: what is wrong), for the caller to report."""
    unreadable = {} if unreadable is None else unreadable
    gh = gh or (store.config.get("gates") or {}).get("gh_path") or "gh"
    now = now_stamp()
    outcomes = []
    gates = open_gates(store)
    if only_timers:
        # hooks: due timers only (no gh, no escalations; `gate check` does those)
        gates = [gate for gate in gates if gate.meta.get("await_type") == "timer"]
    # The beads that bead gates wait on, in one query rather than two per gate.
    targets = [
        gate.meta["await_id"]
        for gate in gates
        if gate.meta.get("await_type") == "bead"
        and isinstance(gate.meta.get("await_id"), str)
        and ":" not in gate.meta["await_id"]  # another store's bead: read through its index
    ]
    known = store.get_many(targets) if targets else {}
    with budget(GH_TIMEOUT):  # every `gh` of this check shares one timeout
        for gate in gates:
            outcome = evaluate(store, gate, gh=gh, now=now, known=known, unreadable=unreadable)
            if outcome.action != "wait" or outcome.error != gate.meta.get("error"):
                outcomes.append(outcome)
    return apply_outcomes(store, outcomes)


def apply_outcomes(store: Store, outcomes: Sequence[Outcome]) -> list[Outcome]:
    """Commit the outcomes in one batch (each gate re-read under the lock), then notify."""
    done: list[Outcome] = []
    with followed_batch(store) as (batch, changes):
        # Every gate is read again under the lock (the index is at HEAD there), all at once.
        batch.prefetch(o.gate_id for o in outcomes)
        for outcome in outcomes:
            gate = batch.get(outcome.gate_id)
            if gate.status != "open":
                continue  # another check got here first
            if outcome.action == "wait":
                changes.append(Change(batch.update(gate.id, meta={"error": outcome.error}), gate))
                continue
            if gate.meta.get("state") == "escalated" and outcome.action == "escalate":
                continue
            if outcome.action == "resolve":
                changed = close_resolved(batch, gate.id, outcome.reason)
            else:
                escalation = {"state": "escalated", "resolution": outcome.reason}
                changed = batch.update(gate.id, meta=escalation)
            done.append(outcome)
            changes.append(Change(changed, gate))
        batch.message = _message(done) if done else None
    return done


def _message(done: Sequence[Outcome]) -> str:
    lines = [f"gate {o.action} {o.gate_id}: {o.reason}" for o in done]
    return (
        lines[0] if len(lines) == 1 else "\n".join([f"gate check: {len(lines)} gates", "", *lines])
    )


def resolve_gate(store: Store, gate_ref: str, reason: str | None = None) -> Bead:
    """Resolve a gate by hand (human gates, or any gate a person declares done)."""
    gate = expect_type(store.get(gate_ref), GATE)
    if gate.status != "open":
        raise InvalidInput(f"{gate.id} is already {gate.close_reason or 'closed'}")
    apply_outcomes(store, [Outcome(gate.id, "resolve", reason or f"resolved by {store.agent}")])
    return store.get(gate.id)


def close_resolved(batch: Batch, gate_id: str, reason: str) -> Bead:
    """Close the gate as resolved (`state: resolved`, its `resolution`) in `batch`: the one
    way a gate resolves, whether a check, a person or a decision's answer resolves it."""
    resolution = {"state": "resolved", "resolution": reason}
    return batch.close_bead(gate_id, f"resolved: {reason}", force=True, meta=resolution)


def derive(changes: Sequence[Change]) -> list[Item]:
    """The gate items of a commit range, one per waiter: `gate:<id>` when a gate resolved,
    `gate:<id>:escalated` (priority 0) when it escalated. A decision's gate resolved by its
    answer makes none: the answer (`decision:<id>`) says it all."""
    answered = {c.new.id for c in changes if c.new is not None and c.new.type == "decision"
                and c.new.status == "closed" and c.new.meta.get("answer") is not None}  # fmt: skip
    items = []
    for change in changes:
        gate, old = change.new, change.old
        if gate is None or gate.type != GATE:
            continue
        state = gate.meta.get("state")
        was = (
            None
            if old is None
            else ("resolved" if old.status == "closed" else old.meta.get("state"))
        )
        if state == "resolved" and gate.status == "closed" and was != "resolved":
            if gate.parent in answered:
                continue
            key, what, priority = f"gate:{gate.id}", "resolved", gate.priority
        elif state == "escalated" and gate.status == "open" and was != "escalated":
            key, what, priority = f"gate:{gate.id}:escalated", "ESCALATED", 0
        else:
            continue
        text = clip(f"Gate {gate.id} {what} ({gate.title}): {gate.meta.get('resolution') or ''}")
        for waiter in dict.fromkeys(str(w) for w in gate.meta.get("waiters") or []):
            items.append(Item.new(waiter, text.rstrip(": "), key=key, type="gate", source="gc",
                                  priority=priority))  # fmt: skip
    return items


def recent_changes(delivery: Delivery, bead_types: Sequence[str]) -> list[Change]:
    """The beads of `bead_types` changed within `delivery.keep_delivered`, as changes from
    nothing: what a reconcile derives again. Older ones are left out: their items may have
    been reaped, and deriving them anew would announce them twice."""
    since = stamp_at(time.time() - delivery.setting("keep_delivered"))
    index = delivery.reader.index
    return [
        Change(bead)
        for bead_type in bead_types
        for bead in index.query(Query(type=bead_type, order="updated", descending=True))
        if bead.updated_at >= since
    ]


def changed_paths(changes: Sequence[Change]) -> dict[str, str]:
    """Each changed bead's file, by id: where a reconcile looks for the origin of its items
    (`inbox.follow.reconciled`)."""
    from beads.records.ids import bead_path

    return {c.new.id: bead_path(c.new.type, c.new.id) for c in changes if c.new is not None}


def reconcile(delivery: Delivery, agent: str) -> int:
    """Record `agent`'s items of gates resolved or escalated lately (idempotent: dedup keys;
    `gc inbox drain --reconcile`, SessionStart and the hooks' heartbeat run it); returns how
    many it derived."""
    agent = delivery.agent_of(agent)
    changes = recent_changes(delivery, (GATE, "decision"))
    items = [item for item in derive(changes) if delivery.agent_of(item.agent) == agent]
    reconciled(delivery, items, changed_paths(changes))
    return len(items)


def add_to(producers: ProducerSet) -> None:
    """Add the bead gates' deriver (bead type `gate`) and reconciler to `producers`."""
    producers.add_deriver(GATE, derive)
    producers.add_reconciler(reconcile)
