"""Who an agent name means: the one identity rule, used wherever names are compared.

An agent of a rig has one full name, `rig/name`. A bare name of an agent listed in a rig
(config.yaml: `agents.<name>.rig`, else the first rig of `rigs` whose members name it, bare or
as `rig/name`) resolves to `rig/name`, wherever it is read: a `--to`, a session's agent, a
bead's assignee or sender, an item's recipient, old ones included. Any other name is itself.

So `--to gastown/mayor`, `--to mayor` and a session started with `GC_AGENT=mayor` all mean
the agent `gastown/mayor` when config.yaml lists mayor in rig `gastown`; beads and items
written before the rig was listed (under `mayor`) are still that agent's (`spellings`).

On the hook path: no imports beyond the standard library's cheapest.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any


def rig_of(name: str, config: dict[str, Any]) -> str | None:
    """The rig of agent `name`: the prefix of `rig/name`, else `agents.<name>.rig`, else the
    first rig of `rigs` listing it; None when it is in no rig."""
    if "/" in name:
        return name.split("/", 1)[0]
    agents = config.get("agents")
    entry = agents.get(name) if isinstance(agents, dict) else None
    rig = entry.get("rig") if isinstance(entry, dict) else None
    if isinstance(rig, str) and rig and "/" not in rig:
        return rig
    rigs = config.get("rigs")
    if isinstance(rigs, dict):
        for rig_name, members in rigs.items():
            if not isinstance(rig_name, str) or "/" in rig_name or not isinstance(members, list):
                continue
            if name in members or f"{rig_name}/{name}" in members:
                return rig_name
    return None


def canonical_agent(name: str, config: dict[str, Any]) -> str:
    """The full name of agent `name` (see the module's docstring): `rig/name` for a bare name
    of an agent in a rig, else `name` itself."""
    if "/" in name or name.startswith("@"):  # already full, or a broadcast's group row
        return name
    rig = rig_of(name, config)
    return f"{rig}/{name}" if rig else name


def spellings(name: str, config: dict[str, Any]) -> tuple[str, ...]:
    """Every name agent `name` may be stored under, its full name first: `rig/name`, and the
    bare `name` when that resolves to it (beads and items from before the rig was listed)."""
    full = canonical_agent(name, config)
    if "/" not in full or full.startswith("@"):
        return (full,)
    bare = full.split("/", 1)[1]
    return (full, bare) if canonical_agent(bare, config) == full else (full,)


def rig_members(rig: str, config: dict[str, Any]) -> list[str]:
    """The full names of the agents of `rig` (its `rigs` list, and every agent whose
    `agents.<name>.rig` names it), in config order; [] for a rig with none."""
    names: list[str] = []
    rigs = config.get("rigs")
    members = rigs.get(rig) if isinstance(rigs, dict) else None
    for member in members if isinstance(members, list) else []:
        if isinstance(member, str):
            names.append(member if "/" in member else f"{rig}/{member}")
    agents = config.get("agents")
    for name in agents if isinstance(agents, dict) else {}:
        if isinstance(name, str) and "/" not in name and rig_of(name, config) == rig:
            names.append(f"{rig}/{name}")
    return list(dict.fromkeys(names))


def acting_rig(agent: str, config: dict[str, Any]) -> str | None:
    """The rig a command acts in: `$GC_RIG` (trimmed), else the acting agent's rig
    (`rig_of`); None when neither names one."""
    import os

    from beads.records.record import check_agent

    rig = os.environ.get("GC_RIG", "").strip()
    if rig:
        return check_agent(rig, what="$GC_RIG")
    return rig_of(agent, config)
