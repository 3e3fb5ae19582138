"""Guarded settings: those of `config.yaml` that run a program or weaken a protection take
effect on this machine only once a person here approved them (`gc trust`).

`config.yaml` is synced: whoever can push to the remote writes it. `in_force` is the one door
every reader of the settings goes through (`Store.config`, `IndexReader.config`, the
PreToolUse hook): it lays this machine's approved values (`beads.approvals`) over the
committed ones, key by key, by the rule of each guarded key (GUARDED):

- `program`: any change waits (`mail.provider`, `gates.gh_path`);
- `nudge`: a command added or changed waits, one removed goes at once (`agents.*.nudge`);
- `gate`: a registered session gate removed, loosened (strict to soft, another event) or
  given another check command waits; one added without a check, or made strict, goes at once;
- `fewer`: a list where fewer is stronger (`gates.disabled`, `gates.destructive.allow`,
  `gates.sandbox.roots`): entries removed go at once, entries added wait;
- `more`: a list where more is stronger (`gates.destructive.patterns`,
  `gates.destructive.protected_branches`): entries added go at once, entries removed wait;
- `on`: a switch where on is stronger (`gates.require_decision`);
- `private`: `store.shared` (group access waits; private goes at once);
- `lower`: a bound where lower is stronger (`store.max_body_bytes`).

What waits keeps its approved value in force; the settings returned carry what waits
(`InForce.held`), so the person is told (SessionStart's `systemMessage`, `gc trust`,
`gc doctor`) and mail refuses to switch provider halfway. The first time a store is read
here, the values then committed are recorded as approved (`gc trust --log` shows it). A
machine-local `trust.follow_team true` takes every change as it comes (and records it).

This runs in every hook: no YAML, no dulwich, a few dictionary looks.
"""

from __future__ import annotations

import os

from beads import approvals

TYPE_CHECKING = False  # importing typing costs a hook ~7 ms
if TYPE_CHECKING:
    from typing import Any

# Dotted key (`*`: any one name) -> its rule (see the module's docstring).
GUARDED: dict[str, str] = {
    "mail.provider": "program",
    "gates.gh_path": "program",
    "agents.*.nudge": "nudge",
    "gates.session.*": "gate",
    "gates.disabled": "fewer",
    "gates.destructive.allow": "fewer",
    "gates.sandbox.roots": "fewer",
    "gates.destructive.patterns": "more",
    "gates.destructive.protected_branches": "more",
    "gates.require_decision": "on",
    "store.shared": "private",
    "store.max_body_bytes": "lower",
}
# What an absent key means, where the rule must compare it (a value equal to its default is
# recorded as absent). `protected_branches` is the destructive gate's default (an empty list
# means it too); `sandbox.roots` has none here (the temporary directory: compared whole).
DEFAULTS: dict[str, Any] = {
    "mail.provider": "beadmail",
    "gates.disabled": [],
    "gates.destructive.allow": [],
    "gates.destructive.patterns": [],
    "gates.destructive.protected_branches": ["main", "master"],
    "gates.require_decision": False,
    "store.shared": "private",
}
FOLLOW_TEAM = "trust.follow-team"  # `trust.follow_team` as the store's git config keeps it
_MISSING: Any = object()
MODE_RANK = {"soft": 0, "strict": 1}


class InForce(dict):
    """A store's settings as in force on this machine; `held` maps each guarded key whose
    committed value waits for approval to that committed value (absent: None)."""

    held: dict[str, Any]

    def __init__(self, settings: dict[str, Any], held: dict[str, Any] | None = None) -> None:
        super().__init__(settings)
        self.held = held or {}


def in_force(root: str | os.PathLike[str], committed: dict[str, Any]) -> InForce:
    """The settings in force for the store at `root` (its `.beads/`), given those committed
    in its `config.yaml`: the one door for every reader of a guarded setting."""
    mine = snapshot(committed)
    found = approvals.read(root)
    if found is None:  # the first run here: what is committed now is what was in force
        try:
            approvals.record(root, mine, how="first run", changes=[])
        except OSError:
            pass  # a data folder we cannot write: the next run tries again
        return InForce(committed)
    settings, held = combine(committed, found["approved"], mine)
    if held and follow_team(root):
        try:
            approvals.record(root, mine, how="follow_team",
                             changes=changes(found["approved"], mine))  # fmt: skip
        except OSError:
            pass
        return InForce(committed)
    return InForce(settings, held)


def follow_team(root: str | os.PathLike[str]) -> bool:
    """`trust.follow_team` of this machine (the store's git config): take every change."""
    from pathlib import Path

    from beads.autosync import read_local

    value = read_local(Path(root) / ".git").get(FOLLOW_TEAM, "")
    return value.strip().lower() in ("true", "yes", "on", "1")


def snapshot(config: dict[str, Any]) -> dict[str, Any]:
    """The guarded keys of `config`, dotted key -> value (a value equal to its default, or
    an empty protected-branch list, is left out: absent means the default)."""
    out: dict[str, Any] = {}
    for pattern in GUARDED:
        for key, value in _found(config, pattern.split("."), ""):
            default = _default(pattern)
            if value is None or value == default:
                continue
            if pattern == "gates.destructive.protected_branches" and not value:
                continue
            out[key] = value
    return out


def combine(
    committed: dict[str, Any], approved: dict[str, Any], mine: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`(settings in force, held)`: `committed` with each guarded key's value decided by its
    rule between the approved value and the committed one; `held` maps each key whose
    committed value waits to that value (None when the change removes it)."""
    mine = snapshot(committed) if mine is None else mine
    held: dict[str, Any] = {}
    chosen: dict[str, Any] = {}
    for key in sorted(set(mine) | set(approved)):
        pattern = _pattern(key)
        if pattern is None:
            continue  # an approval of a key this version does not guard
        new, old = mine.get(key, _MISSING), approved.get(key, _MISSING)
        if new == old:
            continue
        value, waits = _decide(pattern, old, new)
        if waits:
            held[key] = None if new is _MISSING else new
        if value is _MISSING:  # written out: readers index the defaults that config fills in
            value = _default(pattern)
        if value != new:
            chosen[key] = value
    if not chosen:
        return committed, held
    import copy

    settings = copy.deepcopy(committed)
    for key, value in chosen.items():
        _put(settings, key, value if value is _MISSING else copy.deepcopy(value))
    return settings, held


def changes(approved: dict[str, Any], committed: dict[str, Any]) -> list[dict[str, Any]]:
    """What differs between two snapshots: `{"key", "approved", "committed", "held"}` each
    (absent values as None), in key order."""
    out = []
    for key in sorted(set(approved) | set(committed)):
        pattern = _pattern(key)
        old, new = approved.get(key, _MISSING), committed.get(key, _MISSING)
        if pattern is None or old == new:
            continue
        out.append({
            "key": key,
            "approved": None if old is _MISSING else old,
            "committed": None if new is _MISSING else new,
            "held": _decide(pattern, old, new)[1],
        })  # fmt: skip
    return out


def approve_setting(root: str | os.PathLike[str], key: str, committed: dict[str, Any]) -> bool:
    """After a change of `config.yaml` at `key` made on this machine (`gc config set`, `gc
    gate register`): a person's change of a guarded key is approved here as it is made; an
    agent's (`beads.person.agent_session`) waits for `gc trust` like a synced change. True
    when something was approved."""
    from beads.person import agent_session

    if not _touches(key) or agent_session():
        return False
    found = approvals.read(root)
    mine = snapshot(committed)
    old = {k: v for k, v in (found or {}).get("approved", {}).items() if within(k, key)}
    new = {k: v for k, v in mine.items() if within(k, key)}
    if found is not None and old == new:
        return False
    return _approve(root, mine, [key], f"set {key} here", changes(old, new))


def approve_written(
    root: str | os.PathLike[str], before: dict[str, Any], after: dict[str, Any]
) -> bool:
    """After `config.yaml` was written on this machine (`Batch.set_config`) from `before` to
    `after`: the guarded keys it changed are approved when a person wrote it; an agent's
    change waits. True when something was approved."""
    from beads.person import agent_session

    mine = snapshot(after)
    diff = changes(snapshot(before), mine)
    if not diff or agent_session():
        return False
    keys = [change["key"] for change in diff]
    return _approve(root, mine, keys, f"written here: {', '.join(keys)}", diff)


def _approve(
    root: str | os.PathLike[str], mine: dict[str, Any], keys: list[str], how: str, diff: list
) -> bool:
    try:
        approvals.record(root, mine, how=how, changes=diff, keys=keys)
    except OSError:
        return False  # a data folder we cannot write: the change waits, as a synced one
    return True


def notice(held: dict[str, Any]) -> str | None:
    """The line that tells a person settings wait for them (None when none waits)."""
    if not held:
        return None
    keys = ", ".join(sorted(held))
    return (
        f"gc: {len(held)} setting(s) of config.yaml changed and wait for a person's approval "
        f"on this machine ({keys}); the approved values stay in force. Review and approve "
        "them with 'gc trust' in your own terminal."
    )


def provider_waits(config: dict[str, Any]) -> str | None:
    """The refusal of a mail command while `mail.provider` waits for approval (None when it
    does not, or `$GC_MAIL` chooses the provider): mail never splits between two providers."""
    held = getattr(config, "held", None) or {}
    if "mail.provider" not in held or os.environ.get("GC_MAIL"):
        return None
    proposed = held["mail.provider"] or "beadmail"
    in_force = (config.get("mail") or {}).get("provider") or "beadmail"
    return (
        f"mail.provider changed from {in_force} to {proposed} in config.yaml and waits for "
        "a person's approval on this machine: run 'gc trust' in your own terminal (mail is "
        "not split between two providers)"
    )


# -- the rules -------------------------------------------------------------------------------


def _decide(pattern: str, old: Any, new: Any) -> tuple[Any, bool]:
    """`(value in force, waits)` for a guarded key whose approved value is `old` and whose
    committed value is `new` (either may be _MISSING: the default)."""
    rule = GUARDED[pattern]
    default = _default(pattern)
    if rule == "nudge" and new is _MISSING:
        return new, False  # a nudge removed runs nothing
    if rule == "gate":
        return _gate(old, new)
    if rule in ("fewer", "more"):
        a = default if old is _MISSING else old
        b = default if new is _MISSING else new
        if isinstance(a, list) and isinstance(b, list):
            if rule == "fewer":
                kept = [x for x in b if x in a]
                return (new if len(kept) == len(b) else kept), len(kept) < len(b)
            joined = b + [x for x in a if x not in b]
            return (new if len(joined) == len(b) else joined), len(joined) > len(b)
        if rule == "fewer" and b == []:
            return new, False
    elif rule == "on":
        if new is True or (new is _MISSING and old is _MISSING):
            return new, False
        if old is True:
            return old, True
        return new, False  # neither switches it on
    elif rule == "private":
        if new is _MISSING or new == "private":
            return new, False
    elif rule == "lower":
        a = default if old is _MISSING else old
        b = default if new is _MISSING else new
        if all(type(v) is int for v in (a, b)) and b <= a:
            return new, False
    return old, True  # `program`, and what no rule can judge: the approved value stays


def _default(pattern: str) -> Any:
    """What an absent `pattern` means (_MISSING: nothing this module can compare)."""
    if pattern == "store.max_body_bytes":
        from beads.record import DEFAULT_MAX_BODY_BYTES  # lazy: the hook never needs it

        return DEFAULT_MAX_BODY_BYTES
    return DEFAULTS.get(pattern, _MISSING)


def _gate(old: Any, new: Any) -> tuple[Any, bool]:
    """A registered session gate: adding one without a check, making one strict, or changing
    its description goes at once; anything that runs another program or loosens it waits."""
    if old is _MISSING:
        if isinstance(new, dict) and not new.get("check"):
            return new, False
        return old, True
    if new is _MISSING or not (isinstance(old, dict) and isinstance(new, dict)):
        return old, True
    same = all(old.get(k) == new.get(k) for k in ("check", "hook"))
    stricter = MODE_RANK.get(new.get("mode", "soft"), -1) >= MODE_RANK.get(
        old.get("mode", "soft"), 0
    )
    return (new, False) if same and stricter else (old, True)


# -- dotted keys -----------------------------------------------------------------------------


def within(guarded: str, key: str) -> bool:
    """Whether the guarded dotted key `guarded` is `key`, under it, or holds it."""
    return guarded == key or guarded.startswith(key + ".") or key.startswith(guarded + ".")


def _touches(key: str) -> bool:
    """Whether setting the dotted `key` can change a guarded setting."""
    parts = key.split(".")
    for pattern in GUARDED:
        wanted = pattern.split(".")
        if all(w in ("*", p) for w, p in zip(wanted, parts, strict=False)):
            return True
    return False


def _pattern(key: str) -> str | None:
    parts = key.split(".")
    for pattern in GUARDED:
        wanted = pattern.split(".")
        if len(wanted) != len(parts):
            continue
        if all(w in ("*", p) for w, p in zip(wanted, parts, strict=True)):
            return pattern
    return None


def _found(node: Any, parts: list[str], prefix: str) -> list[tuple[str, Any]]:
    if not parts:
        return [(prefix, node)]
    if not isinstance(node, dict):
        return []
    head, rest = parts[0], parts[1:]
    if head == "*":
        names = [name for name in node if isinstance(name, str)]
    else:
        names = [head] if head in node else []
    out = []
    for name in names:
        out += _found(node[name], rest, f"{prefix}.{name}" if prefix else name)
    return out


def _put(config: dict[str, Any], key: str, value: Any) -> None:
    """Set (or, for _MISSING, remove) the dotted `key` in `config` in place."""
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            if value is _MISSING:
                return
            child = node[part] = {}
        node = child
    if value is _MISSING:
        node.pop(leaf, None)
    else:
        node[leaf] = value
