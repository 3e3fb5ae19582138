"""The gates' settings in `config.yaml`: the `gates` section, registered with
`beads.settings.registry` when a module that reads or writes them is imported (not the
package: the PreToolUse path, run before every tool call, reads none of them through it)."""

from __future__ import annotations

from beads.errors import InvalidInput
from beads.settings.registry import (
    count,
    duration,
    flag,
    keys_named,
    names,
    register_section,
    text,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GATE_ID = r"[a-z][a-z0-9_-]{0,63}"  # a registered session gate's id: a file name too
MODES = ("strict", "soft")
HOOKS = ("Stop", "UserPromptSubmit", "PreCompact", "PreToolUse")


def session_gate(spec: Any) -> None:
    """A registered session gate (`gc gate register`): a mapping whose `hook` is Stop,
    UserPromptSubmit, PreCompact or PreToolUse and whose `mode` is strict or soft (either
    left out: Stop, soft, as `gates.session_gates` reads them), with a text `description`
    and a `check` that splits into a command, as `gates.session_gates.run_check` runs it."""
    if not isinstance(spec, dict):
        raise InvalidInput("must be a mapping")
    if spec.get("hook", "Stop") not in HOOKS:
        raise InvalidInput(f"hook must be one of {', '.join(HOOKS)}")
    if spec.get("mode", "soft") not in MODES:
        raise InvalidInput("mode must be strict or soft")
    if not isinstance(spec.get("description") or "", str):
        raise InvalidInput("description must be text")
    check = spec.get("check")
    if check:
        if not isinstance(check, str):
            raise InvalidInput("check must be a command line (text), as a shell would read it")
        import shlex  # lazy: only setting a gate splits its command here

        try:
            if not shlex.split(check):
                raise ValueError("empty")
        except ValueError as exc:
            raise InvalidInput(f"cannot split the check command: {exc}") from None


register_section(
    "gates",
    {},
    {
        "gates.max_stop_blocks": count,
        "gates.require_decision": flag,
        "gates.gh_path": text,
        "gates.disabled": names,
        "gates.session": keys_named(GATE_ID, "a gate id ([a-z][a-z0-9_-]{0,63})"),
        "gates.session.*": session_gate,
        "gates.destructive.patterns": names,
        "gates.destructive.allow": names,
        "gates.destructive.protected_branches": names,
        "gates.sandbox.roots": names,
        "gates.stale_context_after": duration,
    },
    free_form=["gates.session.*"],
    position=3,  # after delivery's and hooks'
)
