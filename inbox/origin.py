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
"""

from __future__ import annotations

import re
from collections.abc import Iterable

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from beads.git import GitRepo
    from inbox.items import Item

# `name <m-0123456789abcdef@gc-beads>`: a committer this version writes.
_COMMITTER = re.compile(rb"(.*) <(m-[0-9a-f]{16})@gc-beads>")
# How far back a search for one bead's last change goes (a hint names a bead changed lately).
MAX_WALK = 2000


class Origin:
    """The agent (commit author) and machine (committer) of a commit made elsewhere."""

    __slots__ = ("author", "machine", "machine_id")

    def __init__(self, author: str, machine: str, machine_id: str) -> None:
        self.author = author
        self.machine = machine
        self.machine_id = machine_id

    def note(self) -> str:
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
    git: GitRepo, head: bytes, stop: bytes | None, paths: Iterable[str], here: str
) -> dict[str, Origin]:
    """For each of `paths`: the origin of its last change from `head` back to `stop` (not
    included), when that change was committed by another machine than `here` (a machine id).

    Merge commits are stepped over: a sync's merge brings the other side's changes, which its
    own commits made. Paths changed last here, or not found, are left out."""
    from beads.git.history import walk

    wanted = set(paths)
    found: dict[str, Origin] = {}
    if not wanted:
        return found
    for commit in walk(git, head, stop, limit=MAX_WALK):
        if len(commit.parents) > 1:
            continue
        parent = commit.parents[0] if commit.parents else None
        touched = {change.path for change in git.changes(parent, commit.id)} & wanted
        if not touched:
            continue
        origin = origin_of(commit)
        for path in touched:
            if origin.machine_id != here:
                found[path] = origin
        wanted -= touched
        if not wanted:
            break
    return found


def mark(item: Item, origin: Origin) -> Item:
    """`item` with its origin in front of its content (clipped to fit)."""
    from inbox.items import clip

    item.content = clip(origin.note() + item.content)
    return item
