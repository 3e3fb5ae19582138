"""The three-way merge of two histories of the store, built from objects: never a worktree,
never conflict markers, never a question to a person.

`merge_trees` takes the files changed on each side since the merge base (two tree diffs:
its cost follows the change, not the store). A file changed on one side is taken from that
side; a bead changed on both is merged field by field by `merge_bead` (the rules are in the
README, "Sync: how two histories merge"); `config.yaml` is merged key by key the same way.
Every rule is symmetric: whichever machine merges, the result is the same.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from beads.errors import InvalidInput
from beads.records.ids import parse_bead_path
from beads.records.record import FIELD_ORDER, Bead, shorten
from beads.settings.config import CONFIG_PATH, parse_config

if TYPE_CHECKING:
    from beads.git import GitRepo

# Fields merged as sets (three-way: what either side added, less what either removed).
SET_FIELDS = ("labels", "cc")
# Fields that go together: the bead's state of being closed.
CLOSE_FIELDS = ("status", "closed_at", "close_reason")
# The meta key recording the values a merge dropped, and how many entries it keeps.
CONFLICTS_KEY = "merge_conflicts"
KEEP_CONFLICTS = 20
LEASE_KEY = "lease"
_MISSING = object()


class Merged:
    """What a tree merge decided: path -> new content (None deletes), and what it dropped."""

    def __init__(self) -> None:
        self.files: dict[str, bytes | None] = {}
        self.taken: dict[str, bytes | None] = {}  # path -> blob id taken whole from theirs
        self.conflicts: list[str] = []  # lines for the commit message


def merge_trees(
    git: GitRepo, base: bytes | None, ours: bytes, theirs: bytes, now: str | None = None
) -> Merged:
    """The changes to make to `ours` so it holds `theirs`'s work too (merge base `base`)."""
    from beads.records.codec import dump_bead, dump_data, load_bead

    ours_changes = {c.path: c for c in git.changes(base, ours)}
    merged = Merged()
    stamp = now or _now()
    for change in git.changes(base, theirs):
        mine = ours_changes.get(change.path)
        if mine is None:  # only theirs changed it
            merged.taken[change.path] = change.new_sha
            continue
        if mine.new_sha == change.new_sha:
            continue
        if mine.new_sha is None or change.new_sha is None:
            # Deleted on one side, changed on the other: the change is kept (nothing lost).
            if mine.new_sha is None:
                merged.taken[change.path] = change.new_sha
            continue
        old = git.read(change.old_sha) if change.old_sha is not None else None
        if change.path == CONFIG_PATH:
            result, lines = merge_config(old, git.read(mine.new_sha), git.read(change.new_sha))
            merged.files[change.path] = dump_data(result)
            merged.conflicts += lines
            continue
        located = parse_bead_path(change.path)
        try:
            if located is None:
                raise InvalidInput("not a bead")
            base_bead = load_bead(old, max_body=1 << 62) if old is not None else None
            bead, lines = merge_bead(
                base_bead,
                load_bead(git.read(mine.new_sha), max_body=1 << 62),
                load_bead(git.read(change.new_sha), max_body=1 << 62),
                stamp,
            )
        except InvalidInput:
            # Not a bead (a file put there by hand): the larger blob id, a symmetric choice.
            if change.new_sha > mine.new_sha:
                merged.taken[change.path] = change.new_sha
            continue
        merged.files[change.path] = dump_bead(bead)
        merged.conflicts += lines
    return merged


def merge_bead(base: Bead | None, ours: Bead, theirs: Bead, now: str) -> tuple[Bead, list[str]]:
    """One bead changed on both sides, merged field by field against `base` (None: made
    on both sides with the same id). Returns the bead and a line per value dropped."""
    if base is None:
        base = _later(ours, theirs)
    winner, loser = _sides(ours, theirs, now)
    a, b, o = ours.to_dict(), theirs.to_dict(), base.to_dict()
    out: dict[str, Any] = {}
    dropped: list[dict[str, Any]] = []
    closed = _close_side(o, a, b, winner is ours)
    for key in FIELD_ORDER:
        if key in ("meta", "updated_at"):
            continue
        if key in CLOSE_FIELDS:
            out[key] = closed[key]
        elif key in SET_FIELDS:
            out[key] = _merge_set(o[key], a[key], b[key])
        else:
            out[key] = _three_way(key, o[key], a[key], b[key], winner, loser, dropped)
    out["updated_at"] = max(a["updated_at"], b["updated_at"])
    meta: dict[str, Any] = {}
    for key in _keys(o["meta"], a["meta"], b["meta"]):
        if key == CONFLICTS_KEY:
            continue
        value = _three_way(
            f"meta.{key}",
            o["meta"].get(key, _MISSING),
            a["meta"].get(key, _MISSING),
            b["meta"].get(key, _MISSING),
            winner,
            loser,
            dropped,
        )
        if value is not _MISSING:
            meta[key] = value
    history = [*a["meta"].get(CONFLICTS_KEY, []), *b["meta"].get(CONFLICTS_KEY, [])]
    history = [entry for n, entry in enumerate(history) if entry not in history[:n]]
    history.sort(key=repr)  # symmetric: the same list whichever side merges
    history += dropped
    if history:
        meta[CONFLICTS_KEY] = history[-KEEP_CONFLICTS:]
    out["meta"] = meta
    try:
        bead = Bead.from_dict(out, max_body=1 << 62)
    except InvalidInput:
        # The union broke a limit (more than 100 labels, say): the winner's bead whole.
        return winner, [f"{winner.id}: kept the bead of {winner.updated_at} whole"]
    lines = [
        f"{ours.id}: {d['field']}: kept {shorten(repr(d['kept']))}, "
        f"dropped {shorten(repr(d['dropped']))}"
        for d in dropped
    ]
    return bead, lines


def _sides(ours: Bead, theirs: Bead, now: str) -> tuple[Bead, Bead]:
    """`(winner, loser)` for values both sides changed: the bead updated later, unless a
    live lease decides. `theirs` is the remote's side, whose claims the remote has already
    accepted (a claim is confirmed by its push): between two live leases, the remote's keeps
    the thread, so a claimer told "claimed" is never overruled by a claim pushed after it."""
    lease_a, lease_b = ours.meta.get(LEASE_KEY), theirs.meta.get(LEASE_KEY)
    live_a, live_b = _live(lease_a, now), _live(lease_b, now)
    if live_a and live_b and lease_a != lease_b:
        return theirs, ours
    if live_a != live_b and lease_a != lease_b and _is_claim(ours if live_a else theirs):
        # One side claimed while the other did something else: the live claim stands.
        return (ours, theirs) if live_a else (theirs, ours)
    later = _later(ours, theirs)
    return (ours, theirs) if later is ours else (theirs, ours)


def _is_claim(bead: Bead) -> bool:
    return bead.meta.get("status") == "claimed"


def _live(lease: Any, now: str) -> bool:
    return isinstance(lease, dict) and str(lease.get("expires_at", "")) > now


def _later(ours: Bead, theirs: Bead) -> Bead:
    """The bead updated later; on a tie the one whose YAML sorts last (symmetric)."""
    if ours.updated_at != theirs.updated_at:
        return ours if ours.updated_at > theirs.updated_at else theirs
    from beads.records.codec import dump_bead

    return ours if dump_bead(ours) >= dump_bead(theirs) else theirs


def _three_way(
    field: str,
    base: Any,
    mine: Any,
    other: Any,
    winner: Bead,
    loser: Bead,
    dropped: list[dict[str, Any]],
) -> Any:
    if mine == other or other == base:
        return mine
    if mine == base:
        return other
    # Both changed it differently: the winner's value; the loser's is kept in the record.
    ours_won = _value(winner, field) == mine
    kept, lost = (mine, other) if ours_won else (other, mine)
    dropped.append(
        {
            "field": field,
            "kept": None if kept is _MISSING else kept,
            "dropped": None if lost is _MISSING else lost,
            "dropped_at": loser.updated_at,
        }
    )
    return kept


def _value(bead: Bead, field: str) -> Any:
    if field.startswith("meta."):
        return bead.meta.get(field[5:], _MISSING)
    return bead.to_dict()[field]


def _close_side(
    base: dict[str, Any], a: dict[str, Any], b: dict[str, Any], ours_win: bool
) -> dict[str, Any]:
    """Status, closed_at and close_reason, together: one side's change is taken; when both
    changed them, closed beats open (an archive is not undone by a concurrent read), and
    between two closes (or two reopens) the winner's."""

    def state(side: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(side[k] for k in CLOSE_FIELDS)

    if state(b) == state(base):
        chosen = a
    elif state(a) == state(base):
        chosen = b
    elif (a["status"] == "closed") != (b["status"] == "closed"):
        chosen = a if a["status"] == "closed" else b
    else:
        chosen = a if ours_win else b
    return {k: chosen[k] for k in CLOSE_FIELDS}


def _merge_set(base: list[str], a: list[str], b: list[str]) -> list[str]:
    """What either side added, less what either removed: the base's order, then additions
    sorted (symmetric); one side's list as it is when only that side changed it."""
    if a == b or b == base:
        return a
    if a == base:
        return b
    kept = [item for item in base if item in a and item in b]
    return kept + sorted((set(a) | set(b)) - set(base))


def _keys(base: dict[str, Any], a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The keys of a merged mapping in a symmetric order: the base's, then new ones sorted."""
    return [k for k in base if k in a or k in b] + sorted((set(a) | set(b)) - set(base))


def merge_config(old: bytes | None, mine: bytes, other: bytes) -> tuple[dict[str, Any], list[str]]:
    """`config.yaml` changed on both sides: key by key, recursively; a key both set
    differently takes the value that sorts last (symmetric), and the merge says so."""
    base = (parse_config(old)[0] if old is not None else None) or {}
    a, b = parse_config(mine)[0] or {}, parse_config(other)[0] or {}
    lines: list[str] = []
    return _merge_mapping(base, a, b, "", lines), lines


def _merge_mapping(
    base: dict[str, Any], a: dict[str, Any], b: dict[str, Any], where: str, lines: list[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in _keys(base, a, b):
        o, x, y = base.get(key, _MISSING), a.get(key, _MISSING), b.get(key, _MISSING)
        if x == y or y == o:
            value = x
        elif x == o:
            value = y
        elif isinstance(x, dict) and isinstance(y, dict):
            value = _merge_mapping(o if isinstance(o, dict) else {}, x, y, f"{where}{key}.", lines)
        else:
            value = max(x, y, key=repr)
            lines.append(f"config.yaml: {where}{key}: kept {shorten(repr(value))}")
        if value is not _MISSING:
            out[key] = value
    return out


def _now() -> str:
    from beads.records.times import stamp_at

    return stamp_at(time.time())
