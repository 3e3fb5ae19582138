"""The UserPromptSubmit and PreCompact chains: built-in soft gates, then registered gates.

UserPromptSubmit (the reply is `hookSpecificOutput.additionalContext`, which the agent reads;
a failing strict registered gate refuses the prompt with top-level `decision: "block"`):
- `context-injection` (soft): the session's pending items are injected; when some had to wait
  for a later drain (`delivery.max_items`), the agent is told how many and where to see them;
- `stale-context` (soft): an item of this drain waited undrained longer than
  `gates.stale_context_after` (default 30m): the session went that long without a prompt,
  so what it knows of the store may be out of date, and it is told to re-read it.

PreCompact (decision-only: no `additionalContext`; a warning goes in `systemMessage`, a
failing strict registered gate answers `decision: "block"`):
- `state-checkpoint` (soft): items are pending for the agent; compaction would not lose them
  (they come back at SessionStart with `source: compact`), but the user is told;
- `dirty-work` (soft): the work tree has uncommitted changes.

Registered gates of either event are judged as the Stop chain judges its gates
(`session_gates.gate_statuses`): marker first, then the check, whose pass marks it.
"""

from __future__ import annotations

import time
from pathlib import Path

from gates import session_gates

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

    from gates.hookbase import HookContext

DEFAULT_STALE_AFTER = 30 * 60.0


def _registered(ctx: HookContext, event: str) -> tuple[list[str], list[str]]:
    """The failing strict registered gates of `event` and the warnings of the others."""
    return session_gates.judged(
        ctx.config, ctx.delivery, ctx.session, ctx.payload.get("cwd"), hook=event
    )


def _block(ctx: HookContext, strict: list[str], warnings: list[str]) -> dict[str, Any]:
    mark = f"gc gate mark ID --session {ctx.session}"
    reason = "Session gates not satisfied:\n" + "\n".join(f"- {s}" for s in strict)
    reply: dict[str, Any] = {
        "decision": "block",
        "reason": f"{reason}\nSatisfy them, or run `{mark}` once done.",
    }
    if warnings:
        reply["systemMessage"] = "\n".join(warnings)
    return reply


def _items(count: int) -> str:
    return "1 more item" if count == 1 else f"{count} more items"


def _disabled(ctx: HookContext) -> set[str]:
    return set((ctx.config.get("gates") or {}).get("disabled") or ())


def user_prompt_submit(ctx: HookContext) -> dict[str, Any] | None:
    """Registered gates first (a strict one refuses the prompt, draining nothing), then the
    drain into `additionalContext` with the built-ins' notes."""
    strict, warnings = _registered(ctx, "UserPromptSubmit")
    if strict:
        return _block(ctx, strict, warnings)
    drained = ctx.drain()
    disabled = _disabled(ctx)
    notes = list(warnings)
    if drained.deferred and "context-injection" not in disabled:
        notes.append(
            f"gc: soft gate context-injection: {_items(drained.deferred)} wait for the next "
            "prompt; see them now with `gc inbox list`"
        )
    if drained.items and "stale-context" not in disabled:
        after = (ctx.config.get("gates") or {}).get("stale_context_after", DEFAULT_STALE_AFTER)
        if not isinstance(after, int | float):
            from beads.records.times import parse_duration

            after = parse_duration(str(after))
        oldest = min(item.created_at for item in drained.items)
        waited = time.time() - oldest
        if waited > after:
            notes.append(
                f"gc: soft gate stale-context: an item waited {int(waited // 60)} minutes "
                "undrained; what you know of the store may be out of date: re-read your work "
                "(`gc inbox list`, `gc bead list --assignee me`) before going on"
            )
    text = "\n".join(filter(None, [drained.text, *notes]))
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": text}}


def pre_compact(ctx: HookContext) -> dict[str, Any] | None:
    """Warnings (and a strict registered gate's block) before Claude compacts the context."""
    strict, warnings = _registered(ctx, "PreCompact")
    if strict:
        return _block(ctx, strict, warnings)
    disabled = _disabled(ctx)
    if "state-checkpoint" not in disabled and ctx.delivery.has_pending(ctx.agent):
        warnings.append(
            "gc: soft gate state-checkpoint: items wait undrained for this agent; they are "
            "injected after compaction (SessionStart) or with `gc inbox list`"
        )
    if "dirty-work" not in disabled:
        cwd = ctx.payload.get("cwd")
        where = Path(cwd) if isinstance(cwd, str) and Path(cwd).is_dir() else ctx.root.parent
        gate = session_gates.SessionGate("dirty-work", "PreCompact", "soft", "", builtin=True)
        status = session_gates.commit_push_status(gate, where)
        if not status.satisfied:
            warnings.append(f"gc: soft gate dirty-work is not satisfied: {status.how}")
    return {"systemMessage": "\n".join(warnings)} if warnings else None
