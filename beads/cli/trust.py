"""`gc trust`: a person approves, on this machine, the guarded settings of `config.yaml` that
changed since the last approval (`beads.settings.trust` says which and why)."""

from __future__ import annotations

import json
from typing import Any

import click

from beads.cli.common import emit, global_options, open_store
from beads.errors import InvalidInput, StorageError

QUESTION = "Approve these settings on this machine? Type yes to approve: "


@click.command()
@click.option("--yes", is_flag=True, help="Approve without the question (a person's terminal).")
@click.option("--show", is_flag=True, help="Show what changed since the last approval, only.")
@click.option("--log", "show_log", is_flag=True, help="Show the history of approvals here.")
@global_options
def trust(yes: bool, show: bool, show_log: bool) -> None:
    """Approve the synced settings that run programs or weaken a protection.

    Shows what changed since the last approval on this machine and asks for `yes` typed at
    the controlling terminal (never read from stdin). Refused inside an agent's session.
    """
    from beads.settings import approvals
    from beads.settings.person import agent_session, confirm, has_terminal
    from beads.settings.trust import changes, checked, snapshot

    store = open_store()
    mine = snapshot(checked(store.committed_config)[0])
    store.config  # noqa: B018 - the first read here records the approvals' first entry
    try:
        found = approvals.read(store.root) or {"approved": {}, "log": []}
        damaged = None
    except approvals.Damaged as exc:  # nothing approved: every change shown, none recorded
        found, damaged = {"approved": {}, "log": []}, f"{exc.path} ({exc.why})"
    if show_log:
        entries = found["log"]
        emit({"store": approvals.store_key(store.root), "log": entries},
             "\n".join(_log_line(e) for e in entries) or "no approvals yet")  # fmt: skip
        return
    diff = changes(found["approved"], mine)
    held = [c for c in diff if c["held"]]
    payload: dict[str, Any] = {"changes": diff, "held": len(held), "approved": False}
    if damaged:
        payload["damaged"] = damaged
    if not diff and not damaged:
        emit(payload, "nothing changed since the last approval on this machine")
        return
    text = "\n".join(_change_line(c) for c in diff)
    if damaged:
        text = f"the approval file {damaged} cannot be used: nothing is approved here\n{text}"
    if show:
        emit(payload, f"{text}\n{len(held)} change(s) wait for approval: run gc trust")
        return
    who = agent_session()
    if who:  # before anything is recorded, even a change that only strengthens
        raise InvalidInput(
            f"{len(held)} setting(s) wait for a person's approval; an agent session ({who} is "
            "set) cannot give it or record approvals: run gc trust in your own terminal"
        )
    head = store.index.head()
    commit = head.decode() if head else None
    if not held and not damaged:  # every change only strengthens: already in force, recorded
        _record(store.root, mine, how="gc trust (strengthening only)", changes=diff,
                commit=commit)  # fmt: skip
        emit({**payload, "approved": True}, f"{text}\nrecorded (every change only strengthens)")
        return
    if yes:
        if not has_terminal():
            raise InvalidInput("gc trust --yes needs a terminal: run it in your own terminal")
    else:
        try:
            agreed = confirm(f"Changed since the last approval on this machine:\n{text}", QUESTION)
        except OSError:
            raise InvalidInput(
                "gc trust asks at the terminal, and there is no terminal: run it in your own"
            ) from None
        if not agreed:
            raise InvalidInput("not approved: nothing changed")
    _record(store.root, mine, how="gc trust --yes" if yes else "gc trust", changes=diff,
            commit=commit)  # fmt: skip
    emit({**payload, "approved": True}, f"{text}\napproved {len(diff)} change(s) on this machine")


def _record(root: Any, approved: dict[str, Any], **entry: Any) -> None:
    """Write the approval; a data folder that cannot be written is a storage error."""
    from beads.settings import approvals

    try:
        approvals.record(root, approved, **entry)
    except OSError as exc:
        raise StorageError(
            f"cannot write the approvals in {approvals.trust_dir()}: {exc.strerror}"
        ) from None


def _shown(value: Any) -> str:
    return "(unset)" if value is None else json.dumps(value, ensure_ascii=False)


def _change_line(change: dict[str, Any]) -> str:
    how = "waits for approval" if change["held"] else "in force: only strengthens"
    old, new = _shown(change["approved"]), _shown(change["committed"])
    return f"  {change['key']}: {old} -> {new}  ({how})"


def _log_line(entry: dict[str, Any]) -> str:
    keys = ", ".join(str(c.get("key")) for c in entry.get("changes") or [])
    commit = f" at {str(entry['commit'])[:10]}" if entry.get("commit") else ""
    what = f": {keys}" if keys else ": the settings then in force"
    return f"{entry.get('at')}  {entry.get('how')}  by {entry.get('by')}{commit}{what}"
