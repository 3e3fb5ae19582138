"""`gc gate` and `gc decision`: thin over the gates package (`gc hook` is in hook_cli)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from beads.cli.common import (
    Duration,
    answer_no,
    emit,
    global_options,
    limit_option,
    one_line,
    open_store,
    settings,
    table,
)
from beads.errors import NoMatch
from beads.records.record import expect_type

if TYPE_CHECKING:
    from beads.store import Store
    from gates.beadgates import Outcome


@click.group()
def gate() -> None:
    """Session gates (register, mark, status) and bead gates (create, check, resolve)."""


def _root() -> Path:
    from beads.location import find_store

    return find_store(settings().beads_dir)


def _session(session: str | None) -> str:
    from inbox.cli import chosen_session

    return chosen_session(session)


@gate.command()
@click.argument("gate_id")
@click.option("--hook", "hook_name", default="Stop", show_default=True, help="The hook event.")
@click.option("--mode", type=click.Choice(["strict", "soft"]), required=True)
@click.option("--description", help="What the gate asks for.")
@click.option("--check", help="A command (split like a shell would, run without one).")
@global_options
def register(gate_id: str, hook_name: str, mode: str, description: str | None,
             check: str | None) -> None:  # fmt: skip
    """Register a session gate for every session (kept in config.yaml)."""
    from gates import session_gates

    store = open_store()
    spec = session_gates.register(store, gate_id, mode=mode, hook=hook_name,
                                  description=description, check=check)  # fmt: skip
    text = f"Registered {mode} gate {gate_id} on {hook_name}"
    if f"gates.session.{gate_id}" in getattr(store.config, "held", {}):  # an agent's check
        emit(
            {"gate": {"id": gate_id, **spec}, "held": True},
            f"{text}; held until a person approves it on this machine with gc trust",
        )
        return
    emit({"gate": {"id": gate_id, **spec}}, text)


@gate.command()
@click.argument("gate_id")
@global_options
def unregister(gate_id: str) -> None:
    """Remove a registered session gate."""
    from gates import session_gates

    session_gates.unregister(open_store(), gate_id)
    emit({"gate": {"id": gate_id}}, f"Unregistered gate {gate_id}")


@gate.command()
@click.argument("gate_id")
@click.option("--session", "session", help="The session (default: $GC_SESSION_ID).")
@global_options
def mark(gate_id: str, session: str | None) -> None:
    """Mark a session gate satisfied."""
    from gates.session_gates import mark as make_marker

    chosen = _session(session)
    make_marker(_root(), chosen, gate_id)
    emit({"gate": {"id": gate_id}, "session": chosen}, f"Marked {gate_id} for session {chosen}")


@gate.command()
@click.argument("gate_id", required=False)
@click.option("--session", "session", help="The session (default: $GC_SESSION_ID).")
@global_options
def clear(gate_id: str | None, session: str | None) -> None:
    """Remove a marker (or all of the session's markers)."""
    from gates.session_gates import clear as remove_markers

    chosen = _session(session)
    removed = remove_markers(_root(), chosen, gate_id)
    emit({"session": chosen, "removed": removed}, f"Removed {removed} marker(s)")


@gate.command()
@click.option("--session", "session", help="The session (default: $GC_SESSION_ID).")
@global_options
def status(session: str | None) -> None:
    """Each session gate of the session: satisfied or not, and how.

    A report, not a yes/no question: exit 0 whether the gates are satisfied or not (a strict
    one unsatisfied too); with --json, each gate's "satisfied" says it. Only the hooks block.
    """
    from gates.session_gates import gate_statuses
    from inbox.delivery import Delivery

    chosen = _session(session)
    store = open_store()
    with Delivery(store.root, config=lambda: store.config) as delivery:
        statuses = gate_statuses(store.config, delivery, chosen)
    rows = [("ok" if s.satisfied else "NO", s.gate.mode, f"{s.gate.id}: {s.how}")
            for s in statuses]  # fmt: skip
    emit({"session": chosen, "gates": [s.to_json() for s in statuses]},
         table(rows) or "No session gates")  # fmt: skip


@gate.command()
@click.option(
    "--await",
    "await_spec",
    required=True,
    help="timer:30m | human | mail:<msg-id> | bead:<id> | gh:run:<workflow> | gh:pr:<n>",
)
@click.option("--waiter", "waiters", multiple=True, help="Who is told (default: you).")
@click.option("--timeout", help="Escalate when nothing happened after this long (e.g. 2h).")
@click.option("--parent", help="The bead this gate belongs to.")
@click.option("--title", help="A title (default: Wait for <await>).")
@global_options
def create(await_spec: str, waiters: tuple[str, ...], timeout: str | None, parent: str | None,
           title: str | None) -> None:  # fmt: skip
    """Create a bead gate."""
    from gates.beadgates import create_gate

    made = create_gate(open_store(), await_spec, waiters=waiters, timeout=timeout,
                       parent=parent, title=title)  # fmt: skip
    emit({"bead": made.to_dict()}, f"Created gate {made.id}")


@gate.command()
@global_options
def check() -> None:
    """Resolve or escalate every open gate whose condition holds (runs gh for gh gates)."""
    answered, outcomes, lines, warnings = _check_once(open_store())
    emit({"answered": answered, "outcomes": [o.__dict__ for o in outcomes], "warnings": warnings},
         "\n".join(lines) or "No gate changed")  # fmt: skip


@gate.command()
@click.option(
    "--interval", type=Duration(minimum=0.1), default="30s", show_default=True, help="e.g. 30s."
)
@click.option("--rounds", type=click.IntRange(min=1), help="Stop after this many checks.")
@global_options
def watch(interval: float, rounds: int | None) -> None:
    """Run `gc gate check` every --interval seconds (with --json, one object per round)."""
    from beads.runtime import runs_long
    from beads.waiting import pause, terminable

    store = open_store()
    done = 0
    with terminable():  # SIGTERM ends the watch in one line, never in the middle of a round
        while rounds is None or done < rounds:
            answered, outcomes, lines, warnings = _check_once(store)
            done += 1
            emit(
                {
                    "round": done,
                    "answered": answered,
                    "outcomes": [o.__dict__ for o in outcomes],
                    "warnings": warnings,
                },
                "\n".join(lines),
            )
            if rounds is None or done < rounds:
                runs_long()  # a loop: the garbage collector's usual collections back
                pause(interval)


def _check_once(store: Store) -> tuple[list[str], list[Outcome], list[str], list[str]]:
    """Timed-out decisions answered with their default, then every gate checked; returns the
    decisions answered, the outcomes, their lines and the warnings, each of which (a named
    store that cannot be read) is said on stderr in one line. Such a store keeps only its
    own gates waiting, and the exit stays the check's own (docs/gates-and-decisions.md)."""
    from gates.decisions import check_due

    unreadable: dict[str, str] = {}
    answered, outcomes = check_due(store, unreadable=unreadable)
    lines = [f"decision {d} answered with its default" for d in answered]
    lines += table(
        [(o.action, f"{o.gate_id}: {o.reason or o.error or ''}") for o in outcomes]
    ).splitlines()
    warnings = list(unreadable.values())
    for warning in warnings:
        click.echo(f"gc: warning: {one_line(warning)}", err=True)
    return answered, outcomes, lines, warnings


@gate.command()
@click.argument("gate_id")
@click.option("--reason", help="Why it is resolved.")
@global_options
def resolve(gate_id: str, reason: str | None) -> None:
    """Resolve a gate by hand (a human gate, say)."""
    from gates.beadgates import resolve_gate

    done = resolve_gate(open_store(), gate_id, reason)
    emit({"bead": done.to_dict()}, f"Resolved gate {done.id}")


@gate.command("close")
@click.argument("gate_id")
@click.option("--reason", help="Why.")
@click.option("--force", is_flag=True, help="Close a gate that has not resolved.")
@global_options
def close_gate(gate_id: str, reason: str | None, force: bool) -> None:
    """Close a gate (an unresolved one needs --force)."""
    store = open_store()
    found = expect_type(store.get(gate_id), "gate")  # `--force` closes a gate, never a task
    closed = store.close_bead(found.id, reason or "closed", force=force)
    emit({"bead": closed.to_dict()}, f"Closed gate {closed.id}")


@gate.command("list")
@click.option("--all", "show_all", is_flag=True, help="Closed gates too.")
@limit_option
@global_options
def list_gates(show_all: bool, limit: int | None) -> None:
    """Bead gates (open ones by default)."""
    gates = open_store().list(type="gate", status=None if show_all else "open", limit=limit)
    rows = [(g.id, g.status, str(g.meta.get("state", "")),
             f"{g.meta.get('await_type')}:{g.meta.get('await_id') or ''}", g.title)
            for g in gates]  # fmt: skip
    emit({"beads": [g.to_dict() for g in gates]}, table(rows) or "No gates")


@gate.command()
@click.argument("gate_id")
@global_options
def show(gate_id: str) -> None:
    """Show a gate bead."""
    found = expect_type(open_store().get(gate_id), "gate")
    emit({"bead": found.to_dict()}, lambda: json.dumps(found.to_dict(), indent=2))


@click.group()
def decision() -> None:
    """Questions for a human; the answer comes back to the requester's inbox."""


@decision.command("create")
@click.option("--prompt", required=True, help="The question.")
@click.option("--option", "options", multiple=True, required=True, help="KEY[=LABEL], twice+.")
@click.option("--default", "default", help="The option taken when the timeout passes.")
@click.option("--timeout", help="How long to wait for the answer (e.g. 2h).")
@click.option("--to", "assignee", default="human", show_default=True, help="Who answers.")
@click.option("--session", "session", help="Mark this session's decision gate.")
@click.option("--wait", "wait", is_flag=True, help="Block until the answer (or the timeout).")
@global_options
def create_decision(
    prompt: str,
    options: tuple[str, ...],
    default: str | None,
    timeout: str | None,
    assignee: str,
    session: str | None,
    wait: bool,
) -> None:
    """Ask a human; with --wait, block until the answer (exit 10 on timeout, no default)."""
    import os

    from beads.records.times import parse_duration
    from gates import decisions

    store = open_store()
    asking = session or os.environ.get("GC_SESSION_ID")
    made, gate_bead = decisions.create_decision(store, prompt, options, default=default,
                                                timeout=timeout, assignee=assignee,
                                                session=asking)  # fmt: skip
    if not wait:
        emit({"bead": made.to_dict(), "gate": gate_bead.to_dict()},
             f"Created decision {made.id} (gate {gate_bead.id})")  # fmt: skip
        return
    seconds = parse_duration(timeout) if timeout else None
    from beads.waiting import terminable

    try:
        with terminable():  # SIGTERM ends the wait in one line; the decision stays asked
            answered = decisions.wait_or_default(store, made.id, seconds)
    except NoMatch as exc:  # no answer and no default: an answer of its own, exit 10
        answer_no({"bead": made.to_dict(), "gate": gate_bead.to_dict(), "found": False},
                  exc.message)  # fmt: skip
    gate_bead = store.get(gate_bead.id)
    # An answer that arrived from another machine says so, as its item in a hook does.
    origin = decisions.answered_elsewhere(store, answered)
    emit({"bead": answered.to_dict(), "gate": gate_bead.to_dict(), "found": True,
          "origin": origin.strip() or None},
         origin + decisions.answer_text(answered))  # fmt: skip


@decision.command()
@click.argument("decision_id")
@click.option("--select", "select", required=True, help="The option's KEY.")
@click.option("--text", help="A note with the answer.")
@global_options
def respond(decision_id: str, select: str, text: str | None) -> None:
    """Answer a decision: resolves its gate, then tells the requester."""
    from gates.decisions import answer_text
    from gates.decisions import respond as answer

    done = answer(open_store(), decision_id, select, text)
    emit({"bead": done.to_dict()}, answer_text(done))


@decision.command("list")
@click.option("--all", "show_all", is_flag=True, help="Answered decisions too.")
@limit_option
@global_options
def list_decisions(show_all: bool, limit: int | None) -> None:
    """Open decisions (all with --all), each asked or answered on another machine with where
    it came from: (from human on build-01)."""
    from inbox.origin import notes_of

    store = open_store()
    found = store.list(type="decision", status=None if show_all else "open", limit=limit)
    origins = notes_of(store.root, "decision", [d.id for d in found], git=store.git)
    rows = [(d.id, d.status, f"{origins.get(d.id, '')}{d.meta.get('requested_by')} -> {d.assignee}",
             f"{d.meta.get('prompt')} [{', '.join(o['key'] for o in d.meta.get('options') or [])}]")
            for d in found]  # fmt: skip
    beads = [{**d.to_dict(), "origin": origins.get(d.id, "").strip() or None} for d in found]
    emit({"beads": beads}, table(rows) or "No decisions")


@decision.command("show")
@click.argument("decision_id")
@global_options
def show_decision(decision_id: str) -> None:
    """Show a decision (and the machine it came from, if not this one)."""
    from inbox.origin import above, note_of

    store = open_store()
    found = expect_type(store.get(decision_id), "decision")
    origin = note_of(store.root, found.type, found.id, git=store.git)
    emit({"bead": found.to_dict(), "origin": origin.strip() or None},
         lambda: above(origin, json.dumps(found.to_dict(), indent=2)))  # fmt: skip
