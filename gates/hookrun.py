"""`gc hook run` without click: a PreToolUse call is judged by `gates.pretool` alone (no
delivery database, no side jobs), every other event goes on to `gates.hooks.main`, which
reads the same bytes."""

from __future__ import annotations

import sys

from gates.pretool import (
    MAX_INPUT_BYTES,
    UNREADABLE,
    UNTRUSTED,
    ask_reply,
    event_kind,
    pre_tool_use,
    read_config,
    read_payload,
    send_reply,
    store_dir,
)

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def main(
    *,
    beads_dir: str | None = None,
    agent: str | None = None,
    debug: bool = False,
    event: str | None = None,
    prepare: Callable[[], object] | None = None,
) -> int:
    """`gc hook run` without click: PreToolUse here, every other event in `gates.hooks`
    (which reads the same bytes), after `prepare()` (the program declares its producers: a
    tool call needs none of them, and loads none). Other faults fail open (logged, exit 0);
    a PreToolUse the destructive-op gate cannot read or judge is "ask", never silence.

    `event` is the event the settings entry names (`gc hook run --event PreToolUse`, as
    `gc hook install` writes it): then any payload is judged as a tool call, and one it cannot
    read is "ask". Without it, a payload that names PreToolUse in a spelling the hook cannot
    trust, or carries a tool call under no known event, is "ask" too."""
    payload: Any = None
    pretool = event == "PreToolUse"
    try:
        raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        payload = read_payload(raw)
        if not pretool:
            kind = event_kind(payload, raw)
            if kind == "other":
                if prepare is not None:
                    prepare()
                from gates.hooks import main as run_other

                return run_other(beads_dir=beads_dir, agent=agent, debug=debug, raw=raw)
            pretool = True
            if kind == "untrusted":
                send_reply(ask_reply(UNTRUSTED))
                return 0
        if not isinstance(payload, dict):
            send_reply(ask_reply(UNREADABLE))
            return 0
        cwd = payload.get("cwd")
        root = store_dir(beads_dir, cwd if isinstance(cwd, str) and cwd else None)
        if root:
            from beads.settings.trust import (
                in_force,  # guarded settings: what this machine approved
            )

            config = in_force(root, read_config(root))
        else:
            config = {}
        reply = pre_tool_use(payload, root, config)
        if reply is not None:
            send_reply(reply)
    except Exception as exc:  # a fault of ours: logged; a tool call is asked about, not let by
        if debug:
            raise
        from gates.hookbase import log_failure  # a fault: rare, and it loads pathlib

        log_failure(beads_dir, payload if isinstance(payload, dict) else None, exc)
        if pretool:
            send_reply(ask_reply(f"the gate failed to judge this call ({type(exc).__name__})"))
    except KeyboardInterrupt:
        return 130
    return 0


def main_pretooluse(prepare: Callable[[], object] | None = None) -> int:
    """`gc hook run --event PreToolUse` without click (the entry `gc hook install` writes);
    a tool call needs nothing `prepare` would set up."""
    return main(event="PreToolUse")
