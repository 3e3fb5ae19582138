"""The gate for incoming trees: what a commit that arrives from elsewhere may hold.

A store's tree holds `config.yaml` and `<type>s/<aa>/<bb>/<id>.yaml` (with `aa/bb` the
shard the id hashes to, `beads.records.ids.bead_path`), all regular blobs (mode 100644), and nothing
else. Every commit new to the store, whether it comes by `gc sync`, `gc clone` or a plain
`git push` into the store (the `pre-receive` hook, `beads.receivehook`), is checked here
before anything is merged, written to the view or indexed: each commit's tree against its
parents' trees, so only what the commit changed is read, and a bad entry in any commit of
the range refuses it, not only one at the tip.

Refused: gitlinks (submodules), symbolic links, a directory where a file belongs or a file
where a directory belongs, another file mode, `.`, `..` and `.git` parts in any case,
absolute, empty or NUL names, names holding `/` or a backslash, names that are not UTF-8 or
are too long, names that collide after case folding or Unicode normalisation (NFC), two
entries of one name, a bead at another shard than its id's, an object missing or of another
kind than its entry says, and anything else outside the layout.

Trees are parsed here from their raw bytes (dulwich's `Tree` keeps one entry per name, so it
would hide a name given twice).
"""

from __future__ import annotations

import hashlib
import heapq
import re
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from beads.errors import InvalidInput
from beads.files import is_dot_git
from beads.records.ids import ID_RE
from beads.records.record import TYPE_RE
from beads.settings.config import CONFIG_PATH

BLOB, TREE, COMMIT = 3, 2, 1
FILE_MODE = b"100644"
DIR_MODE = b"40000"
MAX_NAME = 255  # bytes: what most file systems take in one name
MISSING_TREE = "its tree object is missing"
# How many bad entries one check lists at most (the first is named in the error).
MAX_FOUND = 20
# The tree entries a check keeps parsed trees for (a store's trees hold up to 256 entries).
KEPT_ENTRIES = 256 * 1024
_SHARD_RE = re.compile(rb"[0-9a-f]{2}")
_KINDS = {
    b"160000": "a submodule (gitlink)",
    b"120000": "a symbolic link",
    b"100755": "an executable file (mode 100755; store files are 100644)",
    b"100664": "a file of mode 100664 (store files are 100644)",
    b"040000": "a directory of the non-canonical mode 040000",
}


class ObjectReader(Protocol):
    """What the gate reads objects through: dulwich's object stores fit."""

    def get_raw(self, name: bytes) -> tuple[int, bytes]: ...


@dataclass(frozen=True)
class BadEntry:
    """One entry the gate refuses: in which commit, at which path (as shown), and why;
    `missing`, the id (hex) of the tree or file object that is not there, when that is why
    (`gc doctor` fetches it again rather than calling the history bad)."""

    commit: str
    path: str
    reason: str
    missing: str = ""

    def to_json(self) -> dict[str, str]:
        out = {"commit": self.commit, "path": self.path, "reason": self.reason}
        if self.missing:
            out["missing"] = self.missing
        return out

    def describe(self) -> str:
        return f"commit {self.commit[:12]} holds {self.path}: {self.reason}"


class RefusedHistory(InvalidInput):
    """Commits that arrived from elsewhere hold entries outside the store's layout (exit 30):
    nothing of them was merged, written or indexed."""

    def __init__(self, source: str, found: list[BadEntry]) -> None:
        first = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        super().__init__(
            f"refused {source}: {first.describe()}{more}; nothing was merged. Repair: a person "
            f"with git pushes a history without it: a commit that removes the entry, made in "
            f"place of {first.commit[:12]} (git rebase -i or git reset, then git push "
            "--force-with-lease); a commit added on top leaves it in the history",
            refused=[entry.to_json() for entry in found],
        )
        self.source = source
        self.found = found


def check_commits(objects: ObjectReader, commits: Iterable[bytes], *, source: str) -> None:
    """Refuse (`RefusedHistory`) when any of `commits` (hex ids, any order) holds an entry
    outside the layout; each is checked against its parents' trees."""
    found = find_bad(objects, commits)
    if found:
        raise RefusedHistory(source, found)


def find_bad(
    objects: ObjectReader,
    commits: Iterable[bytes],
    *,
    limit: int = MAX_FOUND,
    checked: list[bytes] | None = None,
) -> list[BadEntry]:
    """The bad entries of `commits`, each commit after its parents, oldest first (at most
    `limit`).

    `checked`, when given, is told each commit read whole, in the order read: at `limit`
    the check stops, and the commit it stopped in and those after are not among them."""
    checker = _Checker(objects)
    found: list[BadEntry] = []
    for sha in _parents_first(checker, commits):
        for path, reason, missing in checker.commit(sha):
            found.append(BadEntry(sha.decode(), path, reason, missing))
            if len(found) >= limit:
                return found
        if checked is not None:
            checked.append(sha)
    return found


def _parents_first(checker: _Checker, commits: Iterable[bytes]) -> list[bytes]:
    """`commits`, each after those of its parents among them, the oldest of those ready
    first: by the parents, then the commit times (which a clock set back leaves out of
    order). Each commit then reads its parents' trees, read just before."""
    wanted = set(commits)
    waiting: dict[bytes, int] = {}
    children: dict[bytes, list[bytes]] = {}
    for sha in wanted:
        parsed = checker.parsed(sha)
        parents = {p for p in parsed[2] if p in wanted} if isinstance(parsed, tuple) else set()
        waiting[sha] = len(parents)
        for parent in parents:
            children.setdefault(parent, []).append(sha)
    ready = [(checker.commit_time(sha), sha) for sha, left in waiting.items() if not left]
    heapq.heapify(ready)
    order: list[bytes] = []
    while ready:
        _time, sha = heapq.heappop(ready)
        order.append(sha)
        for child in children.get(sha, ()):
            waiting[child] -= 1
            if not waiting[child]:
                heapq.heappush(ready, (checker.commit_time(child), child))
    return order


def layout_problem(path: str) -> str | None:
    """Why a path (as `/`-joined text) is outside the layout, or None for `config.yaml` and
    a bead file at its id's shard. For callers holding paths, not trees (defence in depth)."""
    if path == CONFIG_PATH:
        return None
    parts = path.split("/")
    if len(parts) != 4:
        return "outside the store's layout"
    for level, part in enumerate(parts):
        why = _name_problem(part.encode(), level, [p.encode() for p in parts[:level]], False)
        if why is not None:
            return why
    return None


class _Checker:
    def __init__(self, objects: ObjectReader) -> None:
        self.objects = objects
        # The trees read lately (least lately used dropped first, past `KEPT_ENTRIES`
        # entries in all): commits are checked oldest first, and each reads its parents'
        # trees, checked just before. Kept whole, a deep history's would fill the memory.
        self.trees: OrderedDict[bytes, list[tuple[bytes, bytes, bytes]] | str] = OrderedDict()
        self.kept_entries = 0
        self.commits: dict[bytes, tuple[int, bytes, list[bytes]] | str] = {}
        self.folds: dict[bytes, str] = {}  # `_fold` of each name met: trees share most names

    def fold(self, name: bytes) -> str:
        """`_fold(name)`, worked out once a check."""
        found = self.folds.get(name)
        if found is None:
            found = self.folds[name] = _fold(name)
        return found

    def read(self, sha: bytes) -> tuple[int, bytes] | None:
        """The type and bytes of object `sha`, or None when it is absent or unreadable."""
        try:
            return self.objects.get_raw(sha)
        except Exception:  # absent or unreadable: dulwich raises several kinds
            return None

    def parsed(self, sha: bytes) -> tuple[int, bytes, list[bytes]] | str:
        """`(time, tree, parents)` of a commit, or why it cannot be read."""
        found = self.commits.get(sha)
        if found is None:
            found = self.commits[sha] = _parse_commit(self.read(sha))
        return found

    def commit_time(self, sha: bytes) -> int:
        found = self.parsed(sha)
        return found[0] if isinstance(found, tuple) else 0

    def tree(self, sha: bytes) -> list[tuple[bytes, bytes, bytes]] | str:
        """A tree's entries `(mode, name, hex sha)` in order, or why it cannot be read."""
        found = self.trees.get(sha)
        if found is not None:
            self.trees.move_to_end(sha)
        if found is None:
            raw = self.read(sha)
            if raw is None:
                found = MISSING_TREE
            elif raw[0] != TREE:
                found = "a file where a directory belongs"
            else:
                found = _parse_tree(raw[1])
            self.trees[sha] = found
            self.kept_entries += len(found) if isinstance(found, list) else 1
            while self.kept_entries > KEPT_ENTRIES and len(self.trees) > 1:
                _sha, dropped = self.trees.popitem(last=False)
                self.kept_entries -= len(dropped) if isinstance(dropped, list) else 1
        return found

    def commit(self, sha: bytes) -> list[tuple[str, str, str]]:
        """`(path, reason, missing)` of each bad entry the commit brings (against its
        parents); `missing` is the id of the tree or file object that is not there, when
        that is the reason, else ""."""
        parsed = self.parsed(sha)
        if isinstance(parsed, str):
            return [("(the commit)", parsed, "")]
        _time, tree, parents = parsed
        olds: list[bytes] = []
        for parent in parents:
            info = self.parsed(parent)
            if isinstance(info, str):
                return [("(the commit)", f"its parent {parent.decode()[:12]}: {info}", "")]
            olds.append(info[1])
        out: list[tuple[str, str, str]] = []
        self._walk(tree, olds, [], out)
        return out

    def _walk(
        self,
        tree: bytes,
        olds: list[bytes],
        parts: list[bytes],
        out: list[tuple[str, str, str]],
    ) -> None:
        """Check tree `tree` at path `parts` against the trees `olds` its parents hold
        there; entries a parent holds unchanged are not looked into."""
        entries = self.tree(tree)
        if isinstance(entries, str):
            missing = tree.decode() if entries == MISSING_TREE else ""
            out.append((_shown(parts) if parts else "(the root)", entries, missing))
            return
        before: set[tuple[bytes, bytes, bytes]] = set()
        old_names: set[bytes] = set()
        for old in olds:
            listed = self.tree(old)
            if isinstance(listed, list):
                before.update(listed)
                old_names.update(name for _m, name, _s in listed)
        folds = [self.fold(name) for _mode, name, _sha in entries]
        folded: dict[str, list[bytes]] = {}
        for (_mode, name, _sha), fold in zip(entries, folds, strict=True):
            folded.setdefault(fold, []).append(name)
        level = len(parts)
        for entry, fold in zip(entries, folds, strict=True):
            mode, name, sha = entry
            alike = folded[fold]
            path = parts + [name]
            if alike.count(name) > 1:  # git's trees never hold a name twice: a forged tree
                out.append((_shown(path), "the same name twice in one directory", ""))
                continue
            if entry in before:
                continue
            others = [other for other in alike if other != name]
            if others and not all(other in old_names for other in [name, *others]):
                why = "collides with " + _shown(others[:1])
                out.append((_shown(path), why + " after case folding or Unicode normalisation", ""))
                continue
            why = (
                _odd_mode(mode)
                or _name_problem(name, level, parts, True)
                or _mode_problem(mode, level, name)
            )
            if why is not None:
                out.append((_shown(path), why, ""))
                continue
            if mode == DIR_MODE:
                subs = [self._child(old, name) for old in olds]
                self._walk(sha, [s for s in subs if s is not None], path, out)
            else:
                raw = self.read(sha)
                if raw is None:
                    out.append((_shown(path), "its object is missing", sha.decode()))
                elif raw[0] != BLOB:
                    why = "its entry says file, its object is not a blob"
                    out.append((_shown(path), why, ""))

    def _child(self, tree: bytes, name: bytes) -> bytes | None:
        entries = self.tree(tree)
        if isinstance(entries, str):
            return None
        for mode, each, sha in entries:
            if each == name and mode == DIR_MODE:
                return sha
        return None


def _name_problem(name: bytes, level: int, parents: list[bytes], raw: bool) -> str | None:
    """Why one name at depth `level` (under the names `parents`) is refused, or None."""
    if not name:
        return "an empty name"
    if b"\0" in name:
        return "a NUL in a name"
    if name.startswith(b"/"):
        return "an absolute path"
    if b"/" in name and raw:
        return "a '/' inside one name (a path hidden in a single entry)"
    if b"\\" in name:
        return "a backslash in a name"
    if name in (b".", b".."):
        return f"a {name.decode()!r} part"
    if is_dot_git(name):
        return "a '.git' part (in any case)"
    if len(name) > MAX_NAME:
        return f"a name of {len(name)} bytes (at most {MAX_NAME})"
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return "a name that is not UTF-8"
    outside = "outside the store's layout (config.yaml and <type>s/<aa>/<bb>/<id>.yaml)"
    if level == 0:
        if text == CONFIG_PATH or (text.endswith("s") and TYPE_RE.fullmatch(text[:-1])):
            return None
        return outside
    if parents[0] == CONFIG_PATH.encode():
        return outside
    if level in (1, 2):
        return None if _SHARD_RE.fullmatch(name) else outside
    if level == 3 and text.endswith(".yaml") and ID_RE.fullmatch(text[:-5]):
        digest = hashlib.sha1(text[:-5].encode("ascii")).hexdigest()
        shard = f"{digest[:2]}/{digest[2:4]}"
        if b"/".join(parents[1:3]).decode() != shard:
            return f"a bead at the wrong shard (its id belongs under {shard})"
        return None
    return outside


def _odd_mode(mode: bytes) -> str | None:
    """Why a mode that is neither a regular file's nor a directory's is refused."""
    if mode in (FILE_MODE, DIR_MODE):
        return None
    return _KINDS.get(mode, f"an entry of mode {mode.decode('ascii', 'replace')!r}")


def _mode_problem(mode: bytes, level: int, name: bytes) -> str | None:
    """Why an entry's mode is refused at depth `level` (`config.yaml` and the bead files
    are files, the directories between are directories), or None."""
    is_file = level == 3 or (level == 0 and name == CONFIG_PATH.encode())
    if mode == FILE_MODE:
        return None if is_file else "a file where a directory belongs"
    if mode == DIR_MODE:
        return "a directory where a file belongs" if is_file else None
    return _KINDS.get(mode, f"an entry of mode {mode.decode('ascii', 'replace')!r}")


def _fold(name: bytes) -> str:
    """A name as a case-insensitive, normalising file system compares it."""
    text = name.decode("utf-8", "surrogateescape")
    return unicodedata.normalize("NFC", text).casefold()


def _shown(parts: list[bytes]) -> str:
    """A path for an error line: printable, with anything else escaped, cut when long."""
    text = "/".join(part.decode("utf-8", "backslashreplace") for part in parts)
    text = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return repr(text if len(text) <= 120 else text[:117] + "...")


def _parse_tree(raw: bytes) -> list[tuple[bytes, bytes, bytes]] | str:
    """A tree's entries as git stores them, or why the bytes are not a tree."""
    entries = []
    pos, end = 0, len(raw)
    while pos < end:
        space, nul = raw.find(b" ", pos), raw.find(b"\0", pos)
        if space < 0 or nul < space or nul + 21 > end:
            return "a damaged tree object"
        entries.append(
            (raw[pos:space], raw[space + 1 : nul], raw[nul + 1 : nul + 21].hex().encode())
        )
        pos = nul + 21
    return entries


def _parse_commit(raw: tuple[int, bytes] | None) -> tuple[int, bytes, list[bytes]] | str:
    """`(commit time, tree, parents)` from a commit's header, or why it is not a commit.

    Only a header in git's canonical order is taken: `tree`, the `parent` lines, `author`,
    `committer`, then other headers (`encoding`, `gpgsig`, `mergetag`...). git and dulwich
    take as parents only the `parent` lines right after `tree`; a `parent` placed elsewhere
    would be a parent to a reader that takes every one and none to git, so the commit
    would be checked against a tree git never diffs it with: such a commit is refused."""
    if raw is None:
        return "the commit object is missing"
    if raw[0] != COMMIT:
        return "not a commit object"
    header = raw[1].split(b"\n\n", 1)[0].split(b"\n")
    tree, parents, when = b"", [], 0
    last = b""  # the key of the header line before (continuation lines excluded)
    for line in header:
        if line.startswith(b" "):
            if not last:
                return "a damaged commit object"
            continue  # a continuation of the header before (a signature, a merge tag)
        key, _, value = line.partition(b" ")
        if key == b"tree" and last == b"":
            tree = value
        elif key == b"parent" and last in (b"tree", b"parent"):
            parents.append(value)
        elif key == b"author" and last in (b"tree", b"parent"):
            pass
        elif key == b"committer" and last == b"author":
            try:
                when = int(value.rsplit(b" ", 2)[-2])
            except (ValueError, IndexError):
                when = 0
        elif key in (b"tree", b"parent", b"author", b"committer") or last in (
            b"",
            b"tree",
            b"parent",
            b"author",
        ):
            shown_key = key.decode("ascii", "replace")
            return (
                f"a commit whose header lines are out of git's order ({shown_key!r} where git "
                "expects tree, then parents, author, committer)"
            )
        last = key
    if last in (b"", b"tree", b"parent", b"author"):
        return "a damaged commit object (no author or committer)"
    hexes = [tree, *parents]
    if not all(len(h) == 40 and re.fullmatch(rb"[0-9a-f]{40}", h) for h in hexes):
        return "a damaged commit object"
    return when, tree, parents


def holds_config(objects: ObjectReader, commit: bytes) -> bool:
    """Whether the commit's root holds an entry `config.yaml` (of any kind: the gate judges
    it): a branch without one is not a store at all, told apart from a store's history that
    breaks the layout."""
    checker = _Checker(objects)
    raw = checker.read(commit)
    if raw is None or raw[0] != COMMIT:
        return False
    # The tree as git reads it (the first line), whatever the gate then says of the rest.
    first = raw[1].split(b"\n", 1)[0]
    if not first.startswith(b"tree "):
        return False
    entries = checker.tree(first[5:])
    return isinstance(entries, list) and any(e[1] == CONFIG_PATH.encode() for e in entries)
