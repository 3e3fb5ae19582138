"""Session gates: per-session rules checked at a hook event (Stop, UserPromptSubmit,
PreCompact, PreToolUse).

A gate is satisfied by its marker (`.runtime/gates/<session>/<gate>`, made by
`gc gate mark`) or by its auto-check. `strict` gates block; `soft` gates warn. Built-ins:

- `decision` (strict, only when `gates.require_decision` is true): the session asked a human
  (`create_decision(..., session=S)` marks it); the stop-decision handler reports it;
- `commit-push` (soft): the project's git work tree is clean (`commit_push_status`);
- `bead-update` (soft): every open bead assigned to the session's agent was touched in this
  session (`bead_update_status`).

The built-ins of the other events judge the event itself, not the session, and live with
their event: `destructive-op` and `sandbox-boundary` (PreToolUse) in `gates.pretool`,
`context-injection`, `stale-context` (UserPromptSubmit), `state-checkpoint` and `dirty-work`
(PreCompact) in `gates.promptchains`.

Each built-in has one evaluation, given what it needs (the delivery database knows the
session's agent, start and directory); `gate_statuses` runs them for `gc gate status` and the
Stop chain alike, so the two never disagree.

Gates registered with `gc gate register` live in `config.yaml` (`gates.session`) and apply to
every session, on the event they name. A passing check writes the gate's marker (so it runs
once per session) except on PreToolUse, where each tool call is judged on its own. A check
that cannot run or hangs counts as satisfied with a warning: a broken check must never trap
an agent.
"""

from __future__ import annotations

import re
from collections import namedtuple
from pathlib import Path

from beads.errors import GcError, InvalidInput, NotFound
from gates.settings import GATE_ID, session_gate  # importing it registers `gates`
from inbox.queue import check_session

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

    from beads.store import Store
    from inbox.delivery import Delivery

GATE_ID_RE = re.compile(GATE_ID)
CHECK_TIMEOUT = 10.0
NOT_RUN = "not run: "  # a check the shared budget left no time for: why, after it
BUILTIN = ("decision", "commit-push", "bead-update")
# The built-ins of the other events (gates.pretool, gates.promptchains): ids no registered
# gate takes.
EVENT_BUILTIN = {
    "destructive-op": "PreToolUse",
    "sandbox-boundary": "PreToolUse",
    "context-injection": "UserPromptSubmit",
    "stale-context": "UserPromptSubmit",
    "state-checkpoint": "PreCompact",
    "dirty-work": "PreCompact",
}


# namedtuples, not dataclasses: the Stop hook builds them, and importing `dataclasses`
# would slow every hook.


class SessionGate(
    namedtuple("SessionGate", "id hook mode description check builtin", defaults=(None, False))
):
    """A session gate: a built-in, or one registered in config.yaml (with its `check`)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


class GateStatus(namedtuple("GateStatus", "gate satisfied how")):
    """A session gate's state for one session; `how` says why (marker, check, failed, ...)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return {**self.gate.to_json(), "satisfied": self.satisfied, "how": self.how}


def check_gate_id(gate_id: str) -> str:
    if not isinstance(gate_id, str) or not GATE_ID_RE.fullmatch(gate_id):
        raise InvalidInput(f"invalid gate id {gate_id!r}: use [a-z][a-z0-9_-]{{0,63}}")
    return gate_id


def gate_definition(gate_id: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A registered gate as config.yaml keeps it, checked."""
    check_gate_id(gate_id)
    if gate_id in BUILTIN or gate_id in EVENT_BUILTIN:
        raise InvalidInput(f"{gate_id!r} is a built-in gate")
    session_gate(spec)  # the keys are there: a hook or mode of None is refused too
    return {k: spec.get(k) for k in ("hook", "mode", "description", "check") if spec.get(k)}


def register(
    store: Store,
    gate_id: str,
    *,
    mode: str,
    hook: str = "Stop",
    description: str | None = None,
    check: str | None = None,
) -> dict[str, Any]:
    """Register a session gate for every session (`gates.session.<id>` in config.yaml, one
    commit); returns its definition as kept there."""
    spec = gate_definition(gate_id, {"hook": hook, "mode": mode, "description": description,
                                     "check": check})  # fmt: skip
    store.set_setting(f"gates.session.{gate_id}", spec)
    return spec


def unregister(store: Store, gate_id: str) -> None:
    """Remove a registered session gate (NotFound when there is none of that id)."""
    from beads.settings.config import UNSET

    try:
        store.set_setting(f"gates.session.{check_gate_id(gate_id)}", UNSET)
    except NotFound:
        raise NotFound(f"no registered gate {gate_id}") from None


def session_gates(config: dict[str, Any]) -> list[SessionGate]:
    """Built-ins that apply under this config, then the registered gates."""
    settings = config.get("gates") or {}
    disabled = set(settings.get("disabled") or [])
    gates = []
    if settings.get("require_decision") and "decision" not in disabled:
        gates.append(SessionGate("decision", "Stop", "strict",
                                 "ask a human with gc decision create", builtin=True))  # fmt: skip
    if "commit-push" not in disabled:
        gates.append(SessionGate("commit-push", "Stop", "soft",
                                 "the project's git work tree is clean", builtin=True))  # fmt: skip
    if "bead-update" not in disabled:
        what = "your open beads were updated this session"
        gates.append(SessionGate("bead-update", "Stop", "soft", what, builtin=True))
    for gate_id, spec in sorted((settings.get("session") or {}).items()):
        if isinstance(spec, dict):
            hook, mode = str(spec.get("hook", "Stop")), str(spec.get("mode", "soft"))
            what = str(spec.get("description", ""))
            gates.append(SessionGate(gate_id, hook, mode, what, spec.get("check")))
    return gates


def marker_dir(root: Path, session: str) -> Path:
    return root / ".runtime" / "gates" / check_session(session)


def mark(root: Path, session: str, gate_id: str) -> Path:
    """Satisfy `gate_id` for `session` by hand."""
    from beads import files

    path = marker_dir(root, session) / check_gate_id(gate_id)
    files.create(str(root), str(path))  # never through a link
    return path


def clear(root: Path, session: str, gate_id: str | None = None) -> int:
    """Remove one marker (or all of the session's); returns how many."""
    from beads import files

    directory = marker_dir(root, session)
    if not files.real_dir(str(root), str(directory)):
        targets = []  # no markers, or behind a link: nothing of ours to remove
    else:
        targets = [directory / check_gate_id(gate_id)] if gate_id else list(directory.glob("*"))
    removed = 0
    for path in targets:
        try:
            path.unlink()
            removed += 1
        except FileNotFoundError:
            if gate_id:
                raise NotFound(f"gate {gate_id} is not marked for session {session}") from None
    return removed


def gate_statuses(
    config: dict[str, Any],
    delivery: Delivery,
    session: str,
    *,
    cwd: Path | None = None,
    hook: str | None = None,
    skip: tuple[str, ...] = (),
) -> list[GateStatus]:
    """Every session gate of `session` (those of `hook`, when given, but the ids in `skip`),
    evaluated: what `gc gate status` shows and the Stop chain judges by. The checks share one
    timeout."""
    gates = [g for g in session_gates(config)
             if (hook is None or g.hook == hook) and g.id not in skip]  # fmt: skip
    if not gates:
        return []  # the common prompt: no gate, so subprocess is not imported
    from beads.process import budget  # lazy, as the checks that need it

    where = cwd or session_cwd(delivery, session)
    with budget(CHECK_TIMEOUT):
        return [evaluate(gate, delivery, session, cwd=where) for gate in gates]


def judged(
    config: dict[str, Any],
    delivery: Delivery,
    session: str,
    cwd: Any,
    *,
    hook: str,
    skip: tuple[str, ...] = (),
) -> tuple[list[str], list[str]]:
    """The session gates of `hook` judged for a hook reply: the lines of the failing strict
    ones, and the warnings (failing soft gates, broken checks). `cwd` is the hook input's."""
    where = Path(cwd) if isinstance(cwd, str) and Path(cwd).is_dir() else None
    strict, warnings = [], []
    for status in gate_statuses(config, delivery, session, cwd=where, hook=hook, skip=skip):
        gate = status.gate
        line = f"{gate.id} ({gate.description or gate.check or 'no description'}): {status.how}"
        if status.satisfied:
            if let_by(status):
                warnings.append(warning(status))
        elif gate.mode == "strict":
            strict.append(line)
        else:
            warnings.append(warning(status))
    return strict, warnings


def let_by(status: GateStatus) -> bool:
    """Whether `status` counts as satisfied without its check's answer: the check is broken,
    or the hook's shared budget was spent before its turn (a warning says so)."""
    return status.satisfied and status.how.startswith(("broken check", NOT_RUN))


def warning(status: GateStatus) -> str:
    """The one-sentence warning of a failing soft gate, or of a gate let by for a broken
    check or one that did not run."""
    gate = status.gate
    if status.satisfied and status.how.startswith(NOT_RUN):
        why = status.how.removeprefix(NOT_RUN)
        return f"gc: gate {gate.id} counts as satisfied: its check did not run because {why}"
    if status.satisfied:
        broken = status.how.removeprefix("broken check: ")
        return f"gc: gate {gate.id} counts as satisfied because its check is broken: {broken}"
    return f"gc: soft gate {gate.id} is not satisfied{_why_not(status)}"


def _why_not(status: GateStatus) -> str:
    """The end of a failing soft gate's warning sentence: what is missing, in plain words."""
    gate, how = status.gate, status.how
    if gate.id == "bead-update" and gate.builtin:
        stale = how.removeprefix("not updated this session: ")
        return f": these open beads of yours were not updated this session: {stale}"
    if gate.builtin:
        return f": {how}"
    said = f" ({gate.description})" if gate.description else ""
    if how == "not marked":
        return f"{said}: it is not marked for this session"
    return f"{said}: its {how}" if how.startswith("check exited") else f"{said}: {how}"


def session_cwd(delivery: Delivery, session: str) -> Path:
    """Where the session works: the directory its SessionStart reported, else the project
    around the store."""
    known = delivery.session(session)
    if known is not None and known.cwd and Path(known.cwd).is_dir():
        return Path(known.cwd)
    return delivery.root.parent


def evaluate(gate: SessionGate, delivery: Delivery, session: str, *, cwd: Path) -> GateStatus:
    """Whether `gate` is satisfied for `session`: marker first, then the built-in's own
    evaluation or the registered gate's check."""
    if (marker_dir(delivery.root, session) / gate.id).exists():
        return GateStatus(gate, True, "marker")
    if gate.builtin and gate.id == "decision":
        return GateStatus(gate, False, "no decision this session")
    if gate.builtin and gate.id == "commit-push":
        return commit_push_status(gate, cwd)
    if gate.builtin and gate.id == "bead-update":
        return bead_update_status(gate, delivery, session)
    if gate.check:
        status = run_check(gate, cwd)
        if status.how == "check" and gate.hook != "PreToolUse":
            try:
                mark(delivery.root, session, gate.id)  # passed once: for the whole session
            except (OSError, GcError):
                pass  # marked meanwhile, or unwritable: the check runs again next time
        return status
    return GateStatus(gate, False, "not marked")


def bead_update_status(gate: SessionGate, delivery: Delivery, session: str) -> GateStatus:
    """`bead-update`: every open work bead of the session's agent was updated since the
    session started."""
    stale = stale_beads(delivery, session)
    if stale:
        return GateStatus(gate, False, f"not updated this session: {', '.join(stale[:5])}")
    return GateStatus(gate, True, "check")


def stale_beads(delivery: Delivery, session: str) -> list[str]:
    """The open work beads of the session's agent not updated since the session started
    (none for a session the hooks never registered)."""
    from beads.index.query import Query
    from beads.records.times import stamp_at

    known = delivery.session(session)
    if known is None:
        return []
    started = stamp_at(known.started_at)
    rows = delivery.reader.index.query(Query(assignee=known.agent, status="open", limit=200))
    skip = ("message", "gate", "decision")
    return [b.id for b in rows if b.type not in skip and b.updated_at < started]


def commit_push_status(gate: SessionGate, cwd: Path) -> GateStatus:
    """`commit-push`: the git work tree at `cwd` holds no uncommitted work (gc's own hook
    entries in Claude Code's settings aside: `gates.worktree`)."""
    import subprocess  # lazy, here and below: a Stop hook whose gates need no check skips it

    from gates.worktree import NotAWorkTree, uncommitted

    try:
        changed = uncommitted(cwd, CHECK_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return GateStatus(gate, True, "broken check: git did not run")
    except NotAWorkTree:
        return GateStatus(gate, True, "not a git work tree")
    if changed:
        noun = "change" if changed == 1 else "changes"
        return GateStatus(gate, False, f"the work tree has {changed} uncommitted {noun}")
    return GateStatus(gate, True, "check")


def run_check(gate: SessionGate, cwd: Path, stdin: bytes = b"") -> GateStatus:
    """Run a registered gate's check in `cwd` (`stdin` its input): exit 0 satisfies it."""
    import shlex
    import subprocess

    from beads.process import BudgetSpent, reaping, run_bounded

    if not isinstance(gate.check, str):  # a synced config.yaml is a stranger's: never trusted
        return GateStatus(gate, True, "broken check: not a command line (text)")
    try:
        with reaping():  # what it leaves running, even in a session of its own, is ended
            code, _out, _err = run_bounded(shlex.split(gate.check), CHECK_TIMEOUT, cwd, stdin=stdin)
    except BudgetSpent:  # let by as a check that hangs is, which it may well be
        spent = f"the hook's {CHECK_TIMEOUT:g} s budget was spent by earlier checks"
        return GateStatus(gate, True, NOT_RUN + spent)
    except subprocess.TimeoutExpired:
        return GateStatus(gate, True, f"broken check: ran past {CHECK_TIMEOUT:g}s")
    except (OSError, ValueError) as exc:
        return GateStatus(gate, True, f"broken check: {exc}")
    if code == 0:
        return GateStatus(gate, True, "check")
    return GateStatus(gate, False, f"check exited {code}")
