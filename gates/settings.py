"""The gates' settings in `config.yaml`: the `gates` section, registered with
`beads.settings.registry` when a module that reads or writes them is imported (not the
package: the PreToolUse path, run before every tool call, reads none of them through it)."""

from __future__ import annotations

from beads.settings.registry import count, duration, flag, mapping, names, register_section, text

register_section(
    "gates",
    {},
    {
        "gates.max_stop_blocks": count,
        "gates.require_decision": flag,
        "gates.gh_path": text,
        "gates.disabled": names,
        "gates.session.*": mapping,
        "gates.destructive.patterns": names,
        "gates.destructive.allow": names,
        "gates.destructive.protected_branches": names,
        "gates.sandbox.roots": names,
        "gates.stale_context_after": duration,
    },
    free_form=["gates.session.*"],
    position=3,  # after delivery's and hooks'
)
