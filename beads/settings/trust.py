"""Guarded settings: those of `config.yaml` that run a program or weaken a protection take
effect on this machine only once a person here approved them (`gc trust`).

`config.yaml` is synced: whoever can push to the remote writes it. `in_force` is the one door
every reader of the settings goes through (`Store.config`, `IndexReader.config`, the
PreToolUse hook): it lays this machine's approved values (`beads.settings.approvals`) over the
committed ones, key by key, by the rule of each guarded key (GUARDED):

- `program`: any change waits (`mail.provider`, `gates.gh_path`, and any key under `gates`
  or under an agent that this version does not recognise: unknown is held);
- `nudge`: a command added or changed waits, one removed goes at once (`agents.*.nudge`);
- `gate`: a registered session gate removed, loosened (strict to soft, another event) or
  given another check command or any other field waits; one added without a check, made
  strict, or given another description goes at once;
- `fewer`: a list where fewer is stronger (`gates.disabled`, `gates.destructive.allow`,
  `gates.sandbox.roots`): entries removed go at once, entries added wait;
- `more`: a list where more is stronger (`gates.destructive.patterns`,
  `gates.destructive.protected_branches`): entries added go at once, entries removed wait;
- `on`: a switch where on is stronger (`gates.require_decision`);
- `private`: `store.shared` (group access waits; private goes at once);
- `lower`: a bound where lower is stronger (`store.max_body_bytes`), down to a floor
  (`MIN_BODY_BYTES`): lowered below it, or raised, waits.

Keys are found by walking the mapping: a gate id or an agent name is one name even when it
holds a dot (its dotted key quotes it: `gates.session."lint.ci"`). A guarded value of a type
no reader can use is ignored (`InForce.ignored`: the default is in force, `gc doctor` says
so). An approval file that cannot be read (too large, damaged, unreadable) is never a first
run: nothing is approved, the defaults are in force and the notice names the file.
What waits keeps its approved value in force; the settings returned carry what waits
(`InForce.held`), so the person is told (SessionStart's `systemMessage`, `gc trust`,
`gc doctor`) and mail refuses to switch provider halfway. The first time a store is read
here, the values then committed are recorded as approved, each bounded in size
(`beads.settings.approvals.bounded`: a larger one stays held; `gc trust --log` shows it). A
machine-local `trust.follow_team true` takes every change as it comes (and records it).

This runs in every hook: no YAML, no dulwich, a few dictionary looks.
"""

from __future__ import annotations

import os

from beads.settings import approvals

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

# Dotted key (`*`: any one name; `other`: any name not listed beside it) -> its rule (see the
# module's docstring). A rule of None: recognised as harmless, not guarded. Keys are found by
# walking the mapping (`SHAPE`), never by splitting names: a gate id or an agent name may hold
# a dot. Under `gates` and under each agent, what is not recognised is held (`program`).
GUARDED: dict[str, str | None] = {
    "mail.provider": "program",
    "gates.gh_path": "program",
    "agents.*.nudge": "nudge",
    "agents.*.rig": None,
    "agents.*.other": "program",
    "gates.session.*": "gate",
    "gates.disabled": "fewer",
    "gates.destructive.allow": "fewer",
    "gates.sandbox.roots": "fewer",
    "gates.destructive.patterns": "more",
    "gates.destructive.protected_branches": "more",
    "gates.destructive.other": "program",
    "gates.sandbox.other": "program",
    "gates.require_decision": "on",
    "gates.max_stop_blocks": None,
    "gates.stale_context_after": None,
    "gates.other": "program",
    "store.shared": "private",
    "store.max_body_bytes": "lower",
}
# The shape a reader expects of each guarded section: a value of another type is ignored by
# every reader (the default is in force) and reported by `gc doctor`.
TYPES: dict[str, str] = {
    "gates": "mapping",
    "gates.session": "mapping",
    "gates.session.*": "mapping",
    "gates.destructive": "mapping",
    "gates.sandbox": "mapping",
    "gates.disabled": "names",
    "gates.destructive.allow": "names",
    "gates.destructive.patterns": "names",
    "gates.destructive.protected_branches": "names",
    "gates.sandbox.roots": "names",
    "gates.require_decision": "flag",
    "gates.gh_path": "text",
    "agents": "mapping",
    "agents.*": "mapping",
    "agents.*.nudge": "names",
    "mail.provider": "text",
}
# The smallest `store.max_body_bytes` taken from another machine without approval: a bound
# lowered below it waits, as a raised one does (it would refuse every ordinary body).
MIN_BODY_BYTES = 64 * 1024
# What an absent key means, where the rule must compare it (a value equal to its default is
# recorded as absent). `protected_branches` is the destructive gate's default; an empty list
# is recorded as itself (it removes every protected branch); `sandbox.roots` has none here
# (the temporary directory: compared whole).
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
HARMLESS_GATE_FIELDS = ("description", "mode")  # a gate's other fields are compared whole


def _shape(patterns: Any) -> dict[str, Any]:
    """The tree of `patterns` (dotted) for walking a config: name -> subtree or pattern."""
    tree: dict[str, Any] = {}
    for pattern in patterns:
        node = tree
        *parents, leaf = pattern.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node.setdefault(leaf, pattern)
    return tree


SHAPE = _shape(GUARDED)


class InForce(dict):
    """A store's settings as in force on this machine; `held` maps each guarded key whose
    committed value waits for approval to that committed value (absent: None); `ignored`
    names the guarded values of the wrong type (readers see the default); `damaged` is the
    approval file that could not be read (None: read, or a first run)."""

    held: dict[str, Any]
    ignored: list[str]
    damaged: str | None

    def __init__(
        self,
        settings: dict[str, Any],
        held: dict[str, Any] | None = None,
        ignored: list[str] | None = None,
        damaged: str | None = None,
    ) -> None:
        super().__init__(settings)
        self.held = held or {}
        self.ignored = ignored or []
        self.damaged = damaged


def in_force(root: str | os.PathLike[str], committed: dict[str, Any]) -> InForce:
    """The settings in force for the store at `root` (its `.beads/`), given those committed
    in its `config.yaml`: the one door for every reader of a guarded setting."""
    committed, ignored = checked(committed)
    mine = snapshot(committed)
    try:
        found = approvals.read(root)
    except approvals.Damaged as exc:  # never a first run: nothing is approved, the defaults
        settings, held = combine(committed, {}, mine)
        return InForce(settings, held, ignored, damaged=f"{exc.path} ({exc.why})")
    if found is None:  # the first run here: what is committed now was in force (bounded)
        approved = approvals.bounded(mine)
        try:
            approvals.record(root, approved, how="first run", changes=[])
        except OSError:
            pass  # a data folder we cannot write: the next run tries again
    else:
        approved = found["approved"]
    settings, held = combine(committed, approved, mine)
    if held and found is not None and follow_team(root):
        try:
            approvals.record(root, mine, how="follow_team", changes=changes(approved, mine))
        except OSError:
            pass
        settings, held = combine(committed, approvals.bounded(mine), mine)
    return InForce(settings, held, ignored)


def first_run(root: str | os.PathLike[str], committed: dict[str, Any]) -> None:
    """Record `committed`, the settings a store was just made with here, as the first run
    (when no approval file is there yet; bounded as every record is)."""
    try:
        if approvals.read(root) is None:
            mine = approvals.bounded(snapshot(checked(committed)[0]))
            approvals.record(root, mine, how="first run", changes=[])
    except (approvals.Damaged, OSError):
        pass  # in_force fails closed on a damaged file; an unwritable one is tried again


def follow_team(root: str | os.PathLike[str]) -> bool:
    """`trust.follow_team` of this machine (the store's git config): take every change."""
    from pathlib import Path

    from beads.git.config import read_values as read_local

    value = read_local(Path(root) / ".git").get(FOLLOW_TEAM, "")
    return value.strip().lower() in ("true", "yes", "on", "1")


def checked(config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`(config, ignored)`: `config` without the guarded values of a type no reader can use
    (`TYPES`; a name that is not text under a guarded section too), and their keys."""
    bad: list[tuple[Any, ...]] = []
    for parts, pattern, value in _walk(config):
        if not isinstance(parts[-1], str) or not _typed(TYPES.get(pattern), value):
            bad.append(parts)
    if not bad:
        return config, []
    import copy

    config = copy.deepcopy(config)
    ignored = []
    for parts in bad:
        _put(config, parts, _MISSING)
        ignored.append(_join(parts))
    return config, ignored


def snapshot(config: dict[str, Any]) -> dict[str, Any]:
    """The guarded keys of `config`, dotted key -> value (a value equal to its default is
    left out: absent means the default)."""
    out: dict[str, Any] = {}
    for parts, pattern, value in _walk(config):
        if GUARDED.get(pattern) is None or value is None or value == _default(pattern):
            continue
        out[_join(parts)] = value
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
        _put(settings, _split(key), value if value is _MISSING else copy.deepcopy(value))
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
    """After `gc config set` of the dotted `key` on this machine: a person's change is
    approved here as it is made, exactly the key written (a field of a session gate
    approves that field, the rest of the gate stays as approved); an agent's
    (`beads.settings.person.agent_session`) waits for `gc trust` like a synced change. True when
    something was approved."""
    from beads.settings.person import agent_session

    written = key.split(".")
    if not _touches(written) or agent_session():
        return False
    found = _readable(root)
    if found is False:
        return False
    approved = (found or {}).get("approved", {})
    mine = snapshot(checked(committed)[0])
    new: dict[str, Any] = {}
    for guarded in set(mine) | set(approved):
        parts = list(_split(guarded))
        if parts[: len(written)] == written:  # the key written holds it: written whole
            value = mine.get(guarded, _MISSING)
        elif written[: len(parts)] == parts:  # a field inside it was written: that field
            value = _patched(approved.get(guarded, _MISSING), mine.get(guarded, _MISSING),
                             [written[len(parts)]])  # fmt: skip
        else:
            continue
        if value is not _MISSING:
            new[guarded] = value
        elif guarded in approved:
            new[guarded] = _MISSING
    return _approve_keys(root, approved, new, f"set {key} here")


def approve_written(
    root: str | os.PathLike[str], before: dict[str, Any], after: dict[str, Any]
) -> bool:
    """After `config.yaml` was written on this machine (`Batch.set_config`) from `before` to
    `after`: what the writing changed is approved when a person wrote it, and only that (a
    field written in a session gate held for approval leaves the gate held); an agent's
    change waits. True when something was approved."""
    from beads.settings.person import agent_session

    if agent_session():
        return False
    old, mine = snapshot(checked(before)[0]), snapshot(checked(after)[0])
    diff = changes(old, mine)
    if not diff:
        return False
    found = _readable(root)
    if found is False:
        return False
    approved = (found or {}).get("approved", {})
    new: dict[str, Any] = {}
    for change in diff:
        key = change["key"]
        was, now = old.get(key, _MISSING), mine.get(key, _MISSING)
        if isinstance(was, dict) and isinstance(now, dict):
            fields = [
                f for f in set(was) | set(now) if was.get(f, _MISSING) != now.get(f, _MISSING)
            ]
            value = _patched(approved.get(key, _MISSING), now, fields)
        else:
            value = now  # a value written whole
        new[key] = value
    return _approve_keys(root, approved, new, "written here")


def _readable(root: str | os.PathLike[str]) -> dict[str, Any] | None | bool:
    """The approvals (None: none yet), or False when the file is damaged (nothing is
    approved by a write then: `gc trust` replaces the file)."""
    try:
        return approvals.read(root)
    except approvals.Damaged:
        return False


def _patched(approved: Any, committed: Any, fields: list[Any]) -> Any:
    """The approved session gate (or other mapping) with only `fields` taken from the
    committed one; _MISSING when nothing is approved to patch (the whole stays held)."""
    if not isinstance(approved, dict) or not isinstance(committed, dict):
        return _MISSING if not isinstance(approved, dict) else approved
    out = dict(approved)
    for field in fields:
        if field in committed:
            out[field] = committed[field]
        else:
            out.pop(field, None)
    return out


def _approve_keys(
    root: str | os.PathLike[str], approved: dict[str, Any], new: dict[str, Any], how: str
) -> bool:
    """Record `new` (key -> value approved now; _MISSING: approved absent) for its keys."""
    new = {k: v for k, v in new.items() if approved.get(k, _MISSING) != v}
    if not new:
        return False
    values = {k: v for k, v in new.items() if v is not _MISSING}
    diff = changes({k: approved[k] for k in new if k in approved}, values)
    keys = sorted(new)
    try:
        approvals.record(root, values, how=f"{how}: {', '.join(keys)}", changes=diff,
                         keys=keys)  # fmt: skip
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


def notices(config: dict[str, Any], *, types: bool = True) -> list[str]:
    """Every line a person is told about the guarded settings of `config` (an `InForce`):
    a damaged approval file, values of the wrong type ignored (unless `types` is False:
    `gc doctor` reports them as problems), settings that wait."""
    out = []
    damaged = getattr(config, "damaged", None)
    if damaged:
        out.append(
            f"gc: the approval file {damaged} cannot be used: no guarded setting of "
            "config.yaml is approved on this machine (the defaults are in force); review "
            "them with 'gc trust' in your own terminal, which writes it anew."
        )
    ignored = getattr(config, "ignored", None)
    if ignored and types:
        out.append(
            f"gc: config.yaml holds setting(s) of the wrong type, ignored (the defaults are "
            f"in force): {', '.join(ignored)}"
        )
    waiting = notice(getattr(config, "held", None) or {})
    if waiting:
        out.append(waiting)
    return out


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
        if all(type(v) is int for v in (a, b)) and MIN_BODY_BYTES <= b <= a:
            return new, False  # lowered, not below the floor: stronger
    return old, True  # `program`, and what no rule can judge: the approved value stays


def _default(pattern: str) -> Any:
    """What an absent `pattern` means (_MISSING: nothing this module can compare)."""
    if pattern == "store.max_body_bytes":
        from beads.records.limits import DEFAULT_MAX_BODY_BYTES

        return DEFAULT_MAX_BODY_BYTES
    return DEFAULTS.get(pattern, _MISSING)


def _gate(old: Any, new: Any) -> tuple[Any, bool]:
    """A registered session gate: adding one without a check, making one strict, or changing
    its description goes at once; any other change (another check, hook or field: what may
    run another program or loosen it) waits."""
    if old is _MISSING:
        if isinstance(new, dict) and not new.get("check"):
            return new, False
        return old, True
    if new is _MISSING or not (isinstance(old, dict) and isinstance(new, dict)):
        return old, True
    fields = (set(old) | set(new)) - set(HARMLESS_GATE_FIELDS)
    same = all(old.get(k, _MISSING) == new.get(k, _MISSING) for k in fields)
    stricter = MODE_RANK.get(new.get("mode", "soft"), -1) >= MODE_RANK.get(
        old.get("mode", "soft"), 0
    )
    return (new, False) if same and stricter else (old, True)


# -- keys ------------------------------------------------------------------------------------


def within(guarded: str, key: str) -> bool:
    """Whether the guarded dotted key `guarded` is `key`, under it, or holds it."""
    return guarded == key or guarded.startswith(key + ".") or key.startswith(guarded + ".")


def _walk(
    node: Any, shape: dict[str, Any] | None = None, parts: tuple[Any, ...] = (), at: str = ""
) -> list[tuple[tuple[Any, ...], str, Any]]:
    """Every node of `node` under a guarded section, `(names, pattern, value)`, parents
    first: mapping keys are names (a dot in one is part of the name), matched against
    `SHAPE` by name, else `*`, else `other`."""
    shape = SHAPE if shape is None else shape
    out: list[tuple[tuple[Any, ...], str, Any]] = []
    if not isinstance(node, dict):
        return out
    for name, value in node.items():
        if isinstance(name, str) and name in shape:
            step = name
        elif "*" in shape:
            step = "*"
        elif "other" in shape:
            step = "other"
        else:
            continue
        pattern = f"{at}.{step}" if at else step
        out.append(((*parts, name), pattern, value))
        if isinstance(shape[step], dict) and isinstance(value, dict):
            out += _walk(value, shape[step], (*parts, name), pattern)
    return out


def _typed(kind: str | None, value: Any) -> bool:
    """Whether `value` has the type a reader of a guarded setting expects (None: any)."""
    if kind is None or value is None:
        return True
    if kind == "mapping":
        return isinstance(value, dict)
    if kind == "names":
        return isinstance(value, list) and all(isinstance(x, str) for x in value)
    if kind == "flag":
        return isinstance(value, bool)
    return isinstance(value, str)  # text


def _join(parts: tuple[Any, ...] | list[Any]) -> str:
    """The dotted key of `parts`: a name holding a dot (or a quote, or empty) is quoted."""
    import json

    return ".".join(
        p if p and "." not in p and not p.startswith('"') else json.dumps(p)
        for p in map(str, parts)
    )


def _split(key: str) -> tuple[str, ...]:
    """The names of a dotted key `_join` made."""
    if '"' not in key:
        return tuple(key.split("."))
    import json

    decoder = json.JSONDecoder()
    parts: list[str] = []
    at = 0
    while at <= len(key):
        if key.startswith('"', at):
            try:
                name, at = decoder.raw_decode(key, at)
            except ValueError:
                name, at = key[at:], len(key)
            parts.append(str(name))
            at += 1  # the dot after it
        else:
            end = key.find(".", at)
            end = len(key) if end < 0 else end
            parts.append(key[at:end])
            at = end + 1
    return tuple(parts)


def _pattern(key: str) -> str | None:
    """The guarded pattern a dotted key falls under (None: not a guarded key)."""
    shape: Any = SHAPE
    at = ""
    for name in _split(key):
        if not isinstance(shape, dict):
            return None
        step = name if name in shape else "*" if "*" in shape else "other"
        if step not in shape:
            return None
        shape, at = shape[step], f"{at}.{step}" if at else step
    return at if isinstance(shape, str) and GUARDED.get(at) else None


def _touches(written: list[str]) -> bool:
    """Whether setting the key of names `written` can change a guarded setting."""
    shape: Any = SHAPE
    for name in written:
        if not isinstance(shape, dict):
            return True  # inside a guarded value
        step = name if name in shape else "*" if "*" in shape else "other"
        if step not in shape:
            return False
        shape = shape[step]
    return True


def _put(config: dict[str, Any], parts: tuple[Any, ...], value: Any) -> None:
    """Set (or, for _MISSING, remove) the key of names `parts` in `config` in place."""
    *parents, leaf = parts
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
