"""Where the last change of a bead was made, for items derived from beads that arrived from
another machine: "(from mayor on build-01) ...".

Every commit names its machine as committer, `<machine name> <<machine id>@gc-beads>`, and its
agent as author (beads/git/repo.py). A bead whose last change was committed under another
machine id came by sync (or a push into the store): its items say who and where, so a person
reading them can tell an answer typed here from one that came over the wire. Both names are
what that machine wrote: they inform, they do not authenticate (anyone with push access to
the remote writes commits). A commit whose committer names no gc machine (plain git, or a gc
from before machines were named) is never taken for this machine's: its items say who
committed it, "(from t, committed by t outside gc)".

That a commit was made here is not taken from the commit either: this machine's committer
line is in every commit it pushed, and anyone can copy it into a commit of their own. So this
machine records the commits that arrive from elsewhere naming it, as they arrive and before
they enter the store (`beads.sync.claimed`), and such a commit counts as made elsewhere,
whatever it says: "(from mayor, committed elsewhere under this machine's name)". Only the
commits that name this machine are looked up in that record (a set read once per lookup).

The reading commands (`ever`: the newest change made elsewhere) look up through the origins
kept on disk, `.runtime/origins.sqlite3` (`inbox.origincache`, `_through_kept`): every path's
answer at the head it was found at, so a lookup walks only the commits made since, and the
first one (or one after a reset) the whole history, however long. A hook's items (the last
change between two heads) are looked up by a walk of their own, at most `MAX_WALK` commits.
A process that holds the store's repository open (`gc mcp`, `gc web`) also keeps the answers
it read in memory with that repository (`_memo`), for the branch's head, this machine's id and
claimed record they hold at: while none of the three moves, a lookup of the same beads opens
no file. An answer at a given head never changes (the head names its whole history), so a
kept one is never stale: a commit (a write, a sync, a reset) moves the head, and the next
lookup goes to the file again.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from pathlib import Path
    from typing import Any

    from beads.git import GitRepo
    from inbox.items import Item

    Row = tuple[str, str, str, bool]  # an origin as `inbox.origincache` keeps it

# `name <m-0123456789abcdef@gc-beads>`: a committer this version writes.
_COMMITTER = re.compile(rb"(.*) <(m-[0-9a-f]{16})@gc-beads>")
# How far back a search of some paths goes (a hook's items: a bead changed lately). The
# reading commands' lookups (`ever`) have no such limit: they go through the origins kept
# on disk (`inbox.origincache`), built with one walk of the whole history.
MAX_WALK = 2000
# The most answers `_memo` keeps for one open repository (a path and a short row each);
# past it, it starts again empty.
MEMO_PATHS = 100_000


class Origin:
    """The agent (commit author) and machine (committer) of a commit made elsewhere.
    `claimed`: the committer names this machine, but the commit came from elsewhere."""

    __slots__ = ("author", "claimed", "machine", "machine_id")

    def __init__(self, author: str, machine: str, machine_id: str) -> None:
        self.author = author
        self.machine = machine
        self.machine_id = machine_id
        self.claimed = False

    def note(self) -> str:
        if self.claimed:
            return f"(from {self.author}, committed elsewhere under this machine's name) "
        if not self.machine_id:
            return f"(from {self.author}, committed by {self.machine} outside gc) "
        return f"(from {self.author} on {self.machine}) "


def origin_of(commit: object) -> Origin:
    """The origin a commit names. A committer that is not a gc machine's gives the machine
    id "" (never this machine's) and its name as the machine."""
    committer = getattr(commit, "committer", b"")
    found = _COMMITTER.fullmatch(committer)
    author = getattr(commit, "author", b"").split(b" <", 1)[0]
    if found is None:
        name = committer.split(b" <", 1)[0] or b"(nobody)"
        parts = (author, name, b"")
    else:
        parts = (author, *found.groups())
    text = [part.decode("utf-8", "replace") for part in parts]
    return Origin(*text)


def foreign_origins(
    git: GitRepo,
    head: bytes,
    stop: bytes | None,
    paths: Iterable[str] | None,
    here: str,
    *,
    ever: bool = False,
    claimed: frozenset[bytes] = frozenset(),
) -> dict[str, Origin]:
    """For each of `paths`: the origin of its last change from `head` back to `stop` (not
    included), when that change was committed by another machine than `here` (a machine id),
    or came from elsewhere naming `here` (`claimed`: those commits, `beads.sync.claimed`).
    With `ever`, the newest change committed elsewhere, whatever this machine changed since
    (a message read here is still its sender's): only other machines' commits are compared,
    so for a bead made here the walk goes to its end (`MAX_WALK` commits at most: the
    reading commands look up with `paths` None, below, through `origins`).

    A merge commit is judged as `git blame` judges it: a path it holds as one of its parents
    does came from that parent's history, where the walk goes on to find it; a path it holds
    as none of its parents does (added or changed by the merge itself: a merge made by hand,
    a conflict resolved) was changed by the merge, whose origin it takes. A merge made here
    (`gc sync`'s) is passed over whatever it changed: it only combines what its parents'
    sides brought, and settling a path there would hide a change merged in from elsewhere
    (another machine's answer) as made here. Paths changed last here (with `ever`: only
    here), or not found, are left out. Each commit is compared with its parents at the
    wanted paths only, descending only where their trees differ, the trees read kept for the
    next: one walk for any number of paths reads about what the commits changed, not whole
    tree diffs nor every path.

    `paths` None: every path the commits changed, the whole way back to `stop` (no
    `MAX_WALK`): what the origins kept on disk are built and brought up to date with
    (`inbox.origincache`); each commit is then compared with its parents at every path."""
    from beads.git import PathTree
    from beads.git.history import walk

    every = paths is None
    wanted = set(paths or ())
    found: dict[str, Origin] = {}
    if not wanted and not every:
        return found
    layout = None if every else PathTree(wanted)  # made again when the paths wanted change
    settled: set[str] = set()  # every path: those whose last change was met
    limit = None if every else MAX_WALK
    # Children first: "the last change" is the one no later commit follows, which the
    # commit times (the same second, another machine's clock) cannot tell.
    commits: Iterable[Any] = walk(git, head, stop, limit=limit, children_first=True)
    known: dict[bytes, bytes] = {}  # every path: each walked commit's tree, by its id
    if every:
        # The walk reads every commit before the first comes (children first); kept, their
        # trees spare reading each parent again for its tree.
        commits = list(commits)
        known = {commit.id: commit.tree for commit in commits}
    for commit in commits:
        merge = len(commit.parents) > 1
        origin = origin_of(commit)
        if claimed and origin.machine_id == here and commit.id in claimed:
            origin.claimed = True  # it says it was made here, but it came from elsewhere
        mine = origin.machine_id == here and not origin.claimed
        if (ever or merge) and mine:
            # Only a change made elsewhere is sought: this machine's commits are passed over
            # unread (reading their trees was most of a long walk's cost), so a bead made
            # here is looked for back to the walk's end, where it is found made here. A
            # merge made here is passed over always (see above).
            continue
        if every:
            changed = _changed_anywhere(git, commit, known) - settled
            settled |= changed
        elif merge:
            changed = _changed_by_merge(git, commit, layout)
        else:
            parent = git.tree_of(commit.parents[0]) if commit.parents else None
            changed = git.changed_files(commit.tree, parent, layout)
        for path in changed:
            if not mine:
                found[path] = origin
            wanted.discard(path)
        if every:
            continue
        if not wanted:
            break
        if changed:
            layout = PathTree(wanted)
    return found


def _changed_anywhere(git: GitRepo, commit: Any, known: Mapping[bytes, bytes]) -> set[str]:
    """Every file `commit` holds otherwise than its parent (its first: none for a root),
    or, for a merge, than each of its parents (`_changed_by_merge`'s rule, at every path).
    The trees are compared by id, reading only those that differ (`differing_files`);
    `known`: the trees of commits already read, by commit id."""
    if not commit.parents:
        return git.differing_files(commit.tree, None)
    found: set[str] | None = None
    for parent in commit.parents:
        before = known.get(parent) or git.tree_of(parent)
        differs = git.differing_files(commit.tree, before)
        found = differs if found is None else found & differs
        if not found:
            return set()
    return found or set()


def _changed_by_merge(git: GitRepo, commit: Any, layout: Any) -> set[str]:
    """Those of the paths in `layout` (a `PathTree`) that the merge `commit` holds as none of
    its parents does: what the merge itself added, changed or removed. Each parent is compared
    only while some path is left (a merge that took every path from a parent, as a sync's
    does, differs from its other parent where that side changed, not from both)."""
    found: set[str] | None = None
    for parent in commit.parents:
        differs = git.changed_files(commit.tree, git.tree_of(parent), layout)
        found = differs if found is None else found & differs
        if not found:
            return set()
    return found or set()


def origins(
    root: Path,
    paths: Iterable[str],
    *,
    git: GitRepo | None = None,
    head: bytes | None = None,
    stop: bytes | None = None,
    ever: bool = False,
) -> dict[str, Origin]:
    """`foreign_origins` of the store at `root` (its `.beads/`), from `head` (default: the
    branch) back to `stop`, as this machine sees them: the one lookup behind every item's
    origin and every reading command's. `git`: the store's, when the caller has it open.
    With `ever` and no `stop` (the reading commands'), through the origins kept on disk
    (`inbox.origincache`): the whole history counts, and only the commits made since the
    last lookup are walked. Raises what reading git or the machine id raises (GcError,
    OSError, KeyError)."""
    from beads.git import GitRepo
    from beads.index.reader import branch_head
    from beads.settings.localconfig import machine_id
    from beads.sync.claimed import recorded

    wanted = set(paths)
    head = head if head is not None else branch_head(root)
    if head is None or not wanted:
        return {}
    here = machine_id(root / ".git")
    claimed = recorded(root / ".git")
    opened = git if git is not None else GitRepo(root / ".git")
    try:
        if ever and stop is None:
            if git is None:  # opened for this lookup alone: nothing to keep answers with
                return _through_kept(root, opened, head, wanted, here, claimed)
            return _through_memo(root, git, head, wanted, here, claimed)
        return foreign_origins(opened, head, stop, wanted, here, ever=ever, claimed=claimed)
    finally:
        if git is None:
            opened.close()


# Each open repository's answers (`_memo`), dropped with the repository. Made on first use.
_MEMOS: Any = None


def _memo(git: GitRepo, state: tuple[str, str, str]) -> dict[str, Row | None]:
    """The answers kept with the open repository `git` at `state` (the head, machine id and
    digest of the claimed record of `inbox.origincache`), by path: a row, or None for a path
    changed last here (or never). Empty when the state moved since (or none are kept yet)."""
    global _MEMOS
    if _MEMOS is None:
        import weakref

        _MEMOS = weakref.WeakKeyDictionary()
    held = _MEMOS.get(git)
    if held is None or held[0] != state or len(held[1]) > MEMO_PATHS:
        held = (state, {})
        _MEMOS[git] = held  # replaced whole: a lookup under way keeps the answers of its state
    return held[1]


def _through_memo(
    root: Path, git: GitRepo, head: bytes, wanted: set[str], here: str, claimed: frozenset[bytes]
) -> dict[str, Origin]:
    """`_through_kept`, answering from the answers kept with `git` (`_memo`) those it holds
    at this head, machine id and claimed record: only the paths not read yet at them are
    looked up through the file, and kept."""
    from inbox import origincache as kept

    memo = _memo(git, (head.decode(), here, kept.digest(claimed)))
    missing = wanted.difference(memo)
    if missing:
        found = _to_rows(_through_kept(root, git, head, missing, here, claimed))
        memo.update({path: found.get(path) for path in missing})
    return {path: _from_row(row) for path in wanted if (row := memo.get(path)) is not None}


def _through_kept(
    root: Path, git: GitRepo, head: bytes, wanted: set[str], here: str, claimed: frozenset[bytes]
) -> dict[str, Origin]:
    """`foreign_origins(git, head, None, wanted, here, ever=True, claimed=claimed)` through
    the origins kept on disk (`inbox.origincache`): with the file at an ancestor of `head`,
    only the commits since are walked (at every path: a newer change made elsewhere replaces
    an answer); at `head` itself, none; else (none yet, a branch reset or rewritten, another
    machine id or claimed record, a file unusable) the whole history, with no `MAX_WALK`.
    What was walked is kept for the next lookup."""
    from beads.git.history import merge_base
    from inbox import origincache as kept

    now = (head.decode(), here, kept.digest(claimed))
    db, read, rows = kept.load(root, wanted)
    try:
        known = {path: _from_row(row) for path, row in rows.items()}
        if read is not None and read[1:] == now[1:]:
            base = read[0].encode()
            if base == head:
                return known
            if git.commit_of(base) is not None and merge_base(git, head, base) == base:
                newer = foreign_origins(git, head, base, None, here, ever=True, claimed=claimed)
                kept.save(db, read, now, _to_rows(newer), whole=False)
                found = {path: newer.get(path) or known.get(path) for path in wanted}
                return {path: origin for path, origin in found.items() if origin is not None}
        every = foreign_origins(git, head, None, None, here, ever=True, claimed=claimed)
        kept.save(db, read, now, _to_rows(every), whole=True)
        return {path: every[path] for path in wanted if path in every}
    finally:
        if db is not None:
            db.close()


def _from_row(row: tuple[str, str, str, bool]) -> Origin:
    """The origin a row of the kept file holds (`inbox.origincache`)."""
    origin = Origin(*row[:3])
    origin.claimed = row[3]
    return origin


def _to_rows(found: Mapping[str, Origin]) -> dict[str, tuple[str, str, str, bool]]:
    """`found` as rows of the kept file (`inbox.origincache`)."""
    return {path: (o.author, o.machine, o.machine_id, o.claimed) for path, o in found.items()}


def note_of(
    root: Path,
    bead_type: str,
    bead_id: str,
    *,
    git: GitRepo | None = None,
    ever: bool = True,
) -> str:
    """What a reading command puts before a bead that came from elsewhere: the note of the
    newest change to it committed by another machine (or by plain git),
    `"(from human on build-01) "`; with `ever=False`, of its last change only. "" when it
    was made here, or when the origin cannot be read (it informs)."""
    found = notes_of(root, bead_type, (bead_id,), git=git, ever=ever)
    return found.get(bead_id, "")


def notes_of(
    root: Path,
    bead_type: str,
    bead_ids: Iterable[str],
    *,
    git: GitRepo | None = None,
    ever: bool = True,
) -> dict[str, str]:
    """`note_of` of each of `bead_ids` (of one type), by id, for those that came from
    elsewhere: one walk of the history for them all, as a listing needs (a walk per row
    would read the same commits once per row)."""
    from beads.errors import GcError
    from beads.records.ids import bead_path

    paths = {bead_path(bead_type, bead_id): bead_id for bead_id in bead_ids}
    try:
        found = origins(root, paths, git=git, ever=ever)
    except (GcError, OSError, KeyError):
        return {}
    return {paths[path]: origin.note() for path, origin in found.items()}


def above(note: str, text: str) -> str:
    """`text` under `note` (a `note_of`) on a line of its own; `text` alone for no note."""
    return f"{note.strip()}\n{text}" if note else text


def named_bead(item: Item) -> str:
    """The bead a producer's item is of: its key's second part (`mail:<id>`); "" for none."""
    parts = item.key.split(":")
    return parts[1] if len(parts) > 1 else ""


def mark_items(
    root: Path,
    items: Sequence[Item],
    paths: Mapping[str, str],
    log: Callable[[str], None],
    *,
    git: GitRepo | None = None,
    head: bytes | None = None,
    stop: bytes | None = None,
) -> None:
    """Put its origin in front of each item whose bead (`named_bead`; `paths` gives each
    bead's file by id) was last changed on another machine, from `head` (default: the
    branch) back to `stop`: what a follow, a reconcile and a re-derivation all do. An origin
    informs: a fault reading one is logged, and the items go unmarked."""
    from beads.errors import GcError

    wanted = {paths[bead] for bead in map(named_bead, items) if bead in paths}
    if not wanted:
        return
    try:
        found = origins(root, wanted, git=git, head=head, stop=stop)
    except (GcError, OSError, KeyError) as exc:
        log(f"origin of items not read: {exc}")
        return
    for item in items:
        origin = found.get(paths.get(named_bead(item), ""))
        if origin is not None:
            mark(item, origin)


def mark(item: Item, origin: Origin) -> Item:
    """`item` with its origin in front of its content (clipped to fit)."""
    from inbox.items import clip

    item.content = clip(origin.note() + item.content)
    return item
