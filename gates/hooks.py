"""`gc hook run`: Claude Code's hook protocol over delivery and gates.

Claude Code runs the hook with the event's JSON on stdin (`session_id`, `hook_event_name`,
`cwd`, `source`, `stop_hook_active`, ...) and reads JSON from stdout:

- SessionStart and UserPromptSubmit drain the session's items into
  `{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}`; UserPromptSubmit
  and PreCompact run their gates (`gates.promptchains`); PreCompact marks nothing delivered (Claude
  Code shows no context from it); SessionEnd ends the session;
- PreToolUse is judged by `gates.pretool` (which `gc hook run` reaches first, skipping this
  module's imports and side jobs);
- Stop runs the stop chain (`gates.stop`): handlers by priority, the first block wins
  (`{"decision": "block", "reason": ...}`); with no block the session is idle;
- every event first resolves due timer gates and answers timed-out decisions that have a
  default, as `gc gate check` does (`resolve_due_gates`).

The items a reply shows are marked delivered only once it is written and flushed: a hook
killed or cut off before hands them to the session again at its next drain.

The hook fails open: any fault of ours is logged in `.runtime/hooks.log` and the agent goes on.
On the common path (nothing pending, the delivery database at the branch's commit) it imports
neither dulwich nor ruamel.yaml.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from beads.errors import InvalidInput
from beads.faults import fault
from beads.location import find_store
from beads.records.record import acting_agent
from beads.sync.auto import fetch_if_due
from gates import settings as _settings  # noqa: F401 - registers the `gates` section
from gates.hookbase import HookContext, log_failure
from gates.pretool import MAX_INPUT_BYTES, send_reply
from inbox.delivery import Delivery

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any


def main(
    *,
    beads_dir: str | None = None,
    agent: str | None = None,
    debug: bool = False,
    raw: bytes | None = None,
) -> int:
    """`gc hook run`: the event's JSON from stdin (or `raw`, already read), the reply (if any)
    on stdout; exit 0 (130, quietly, when interrupted).

    `gc` reaches this without click, through `gates.hookrun.main`, when its arguments are
    exactly `hook run`.
    """
    payload: dict[str, Any] | None = None
    try:
        if raw is None:
            raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        payload = parse_payload(raw)
        run_hook(payload, beads_dir=beads_dir, agent=agent, output=send_reply)
    except Exception as exc:  # fail open: log it, exit 0, no block
        if debug:
            raise
        log_failure(beads_dir, payload, exc)
        return 0
    except KeyboardInterrupt:
        return 130  # Claude Code cancelled the hook: no traceback, nothing to block
    return 0


def parse_payload(raw: bytes) -> dict[str, Any]:
    """The hook's stdin JSON, checked for the fields we need."""
    if len(raw) > MAX_INPUT_BYTES:
        raise InvalidInput(f"hook input is larger than {MAX_INPUT_BYTES} bytes")
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"hook input is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise InvalidInput("hook input must be a JSON object")
    for name in ("hook_event_name", "session_id"):
        if not isinstance(payload.get(name), str) or not payload[name]:
            raise InvalidInput(f"hook input has no {name}")
    return payload


def run_hook(
    payload: dict[str, Any],
    *,
    beads_dir: str | None = None,
    agent: str | None = None,
    output: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any] | None:
    """Handle one hook event; returns the JSON reply for Claude Code, or None for none.

    `output` writes the reply (True once it is out); the items the reply shows are marked
    delivered only then, so a hook killed or cut off before can hand them out again
    (at-least-once). Without `output` they are marked delivered before this returns.
    """
    cwd = payload.get("cwd")
    root = find_store(beads_dir, cwd=Path(cwd) if isinstance(cwd, str) and cwd else None)
    # The producers: the runtime's (`gc` hands its set over there), else the installed set.
    with Delivery(root) as delivery:
        ctx = HookContext(
            event=payload["hook_event_name"],
            session=payload["session_id"],
            agent=acting_agent(agent),
            payload=payload,
            delivery=delivery,
            root=root,
        )
        _side_job(ctx, lambda: resolve_due_gates(delivery))
        _side_job(ctx, lambda: fetch_if_due(root))  # `sync.auto`: in the background
        # Reconcile every producer and reap: at SessionStart, else once per interval.
        _side_job(ctx, lambda: delivery.heartbeat(ctx.agent, force=ctx.event == "SessionStart"))
        reply = _dispatch(ctx)
        claimed = [drained for drained in ctx.drained if drained.items]
        if claimed:
            fault("drain-before-output")
        shown = reply is not None and output(reply) if output is not None else True
        if shown:
            for drained in claimed:
                delivery.delivered(drained)
        return reply


def _dispatch(ctx: HookContext) -> dict[str, Any] | None:
    d = ctx.delivery
    if ctx.event == "SessionStart":
        cwd = ctx.payload.get("cwd")
        d.register(ctx.session, ctx.agent, cwd=cwd if isinstance(cwd, str) else None)
    elif ctx.event == "SessionEnd":
        d.end(ctx.session)
        return None
    elif ctx.event == "Stop":
        return _stop(ctx)
    elif ctx.event == "PreToolUse":
        from gates.pretool import pre_tool_use

        return pre_tool_use(ctx.payload, ctx.root, ctx.config)
    else:
        d.hook_seen(ctx.session, ctx.agent, ctx.event, state="busy")
    if ctx.event == "PreCompact":
        from gates.promptchains import pre_compact

        return pre_compact(ctx)
    if ctx.event not in ("SessionStart", "UserPromptSubmit"):
        return None
    _side_job(ctx, lambda: _reconcile_exec_mail(ctx))
    if ctx.event == "UserPromptSubmit":
        from gates.promptchains import user_prompt_submit

        return user_prompt_submit(ctx)
    text = ctx.drain().text
    reply: dict[str, Any] = {}
    if text:
        reply["hookSpecificOutput"] = {"hookEventName": ctx.event, "additionalContext": text}
    waiting = _trust_notice(ctx)
    if waiting:
        reply["systemMessage"] = waiting  # to the person, never into the model's context
    return reply or None


def _trust_notice(ctx: HookContext) -> str | None:
    """At SessionStart: the line telling the person that synced settings wait for them."""
    if ctx.event != "SessionStart":
        return None
    from beads.settings.trust import notices

    try:
        return " ".join(notices(ctx.config)) or None
    except Exception as exc:  # a notice must never cost the session its context
        log_failure(str(ctx.root), ctx.payload, exc)
        return None


def _stop(ctx: HookContext) -> dict[str, Any] | None:
    from gates.stop import CHAIN, count_stop_block  # Stop only: loads subprocess, the gates

    warnings: list[str] = []
    for _priority, handler in sorted(CHAIN, key=lambda entry: entry[0]):
        verdict = handler(ctx)
        if verdict is None:
            continue
        warnings += verdict.warnings
        if verdict.allow:
            break
        if verdict.block:
            ctx.delivery.hook_seen(ctx.session, ctx.agent, "Stop", state="busy")
            count_stop_block(ctx.delivery, ctx.session, blocked=True)
            reply: dict[str, Any] = {"decision": "block", "reason": verdict.block}
            if warnings:
                reply["systemMessage"] = "\n".join(warnings)
            return reply
    ctx.delivery.hook_seen(ctx.session, ctx.agent, "Stop", state="idle")
    return {"systemMessage": "\n".join(warnings)} if warnings else None


def _side_job(ctx: HookContext, job: Callable[[], None]) -> None:
    """Run a side job of the hook; its fault is logged and never stops the hook's main job."""
    try:
        job()
    except Exception as exc:
        log_failure(str(ctx.root), ctx.payload, exc)


def resolve_due_gates(delivery: Delivery) -> None:
    """What `gc gate check` does that a hook may: resolve due timer gates and answer decisions
    whose gate timed out with their default (`gates.decisions.check_due`, without `gh` or
    escalations). Found through the index first: no dulwich unless something is due."""
    from beads.index.query import Query
    from beads.records.times import now_stamp

    now = now_stamp()
    index = delivery.reader.index
    timers = index.query(Query(type="gate", status="open", meta={"await_type": "timer"}))
    due = any((g.meta.get("due_at") or "~") <= now for g in timers)
    if not due:
        decisions = index.query(Query(type="decision", status="open"))
        waiting = [
            d.meta["gate"] for d in decisions if d.meta.get("default") and d.meta.get("gate")
        ]
        gates = index.get_many(waiting).values() if waiting else ()
        due = any(g.status == "open" and (g.meta.get("timeout_at") or "~") <= now for g in gates)
    if due:
        from beads.store import Store
        from gates.decisions import check_due

        with Store(delivery.root) as store:
            check_due(store, only_timers=True)


def _reconcile_exec_mail(ctx: HookContext) -> None:
    """With an exec mail provider, ask its `check` and push "you have mail" items."""
    from beads.settings.config import mail_provider_spec
    from beads.settings.trust import provider_waits

    if provider_waits(ctx.delivery.store_config()):
        return  # neither provider is asked until a person approves the change
    spec = mail_provider_spec(lambda: ctx.delivery.store_config().get("mail") or {})
    if spec.startswith("exec:"):
        from mail.notify import reconcile

        reconcile(ctx.delivery, ctx.agent)
