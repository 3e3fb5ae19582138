"""The gates' settings in `config.yaml`: the `gates` section, registered with
`beads.settings.registry` when a module that reads or writes them is imported (not the
package: the PreToolUse path, run before every tool call, reads none of them through it)."""

from __future__ import annotations

from beads.errors import InvalidInput
from beads.settings.registry import count, duration, flag, names, register_section, text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MODES = ("strict", "soft")
HOOKS = ("Stop", "UserPromptSubmit", "PreCompact", "PreToolUse")


def session_gate(spec: Any) -> None:
    """A registered session gate (`gc gate register`): a mapping whose `hook` is Stop,
    UserPromptSubmit, PreCompact or PreToolUse and whose `mode` is strict or soft (either
    left out: Stop, soft, as `gates.session_gates` reads them)."""
    if not isinstance(spec, dict):
        raise InvalidInput("must be a mapping")
    if spec.get("hook", "Stop") not in HOOKS:
        raise InvalidInput(f"hook must be one of {', '.join(HOOKS)}")
    if spec.get("mode", "soft") not in MODES:
        raise InvalidInput("mode must be strict or soft")


register_section(
    "gates",
    {},
    {
        "gates.max_stop_blocks": count,
        "gates.require_decision": flag,
        "gates.gh_path": text,
        "gates.disabled": names,
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
