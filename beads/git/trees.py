"""Reading the store's trees: a file at a path, which of many paths two trees hold
differently, every file of a commit, and the files two commits differ by.

`GitRepo` reads its trees through `TreeReader`, which needs only its object lookups (`get`,
`read`, `tree_of`). Comparisons read only the subtrees whose ids differ on the way to the
paths asked about: identical subtrees are skipped unread, so comparing neighbouring commits
costs about what they changed, not the store's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, MutableMapping
from typing import Any, NamedTuple

from dulwich.errors import NotTreeError
from dulwich.objects import ShaFile, Tree

from beads.errors import StorageError
from beads.git.objects import DamagedObject, TreeCache, TreeData, damaged

DIR_MODE = 0o040000
_EMPTY = TreeData({})


class FileChange(NamedTuple):
    """A file that differs between two commits; a side is None where the file is absent."""

    path: str
    old_sha: bytes | None
    new_sha: bytes | None


class TreeReader:
    """The tree readers of `GitRepo` (a mixin over its object lookups)."""

    get: Callable[[bytes], ShaFile]
    read: Callable[[bytes], bytes]
    tree_of: Callable[[bytes | None], bytes | None]
    trees: TreeCache

    def read_path(self, commit_id: bytes, path: str) -> bytes | None:
        """The content of `path` at `commit_id`, or None when it is not there."""
        from dulwich.object_store import tree_lookup_path

        tree = self.tree_of(commit_id)
        try:
            _mode, sha = tree_lookup_path(self.get, tree, path.encode())
        except (KeyError, NotTreeError):
            return None
        return self.read(sha)

    def file_at(
        self, tree: bytes | None, path: str, trees: MutableMapping[bytes, Tree] | None = None
    ) -> bytes | None:
        """The blob id of the file at `path` under tree `tree`, or None when there is none
        (not there, or no regular file: `changes` counts the same files). `trees`: where to
        keep the trees read, by id, and find them again (a walk that compares neighbouring
        commits at a few paths reads each tree once)."""
        kept = _TreesKept(self.get, {} if trees is None else trees)
        parts = path.encode().split(b"/")
        for depth, part in enumerate(parts):
            if tree is None:
                return None
            node = kept[tree]
            if not isinstance(node, Tree) or part not in node:
                return None
            mode, sha = node[part]
            if depth == len(parts) - 1:
                return sha if _is_file(mode) else None
            tree = sha if mode & 0o170000 == 0o040000 else None  # a directory
        return None

    def changed_files(
        self,
        tree: bytes | None,
        before: bytes | None,
        paths: Iterable[str] | PathTree,
        trees: MutableMapping[bytes, Tree] | None = None,
    ) -> set[str]:
        """Which of `paths` (files; a `PathTree` of them, for many calls) differ between the
        trees `tree` and `before` (None: an empty tree), each judged as `file_at` reads it.
        Only the subtrees whose ids differ on the way to some of `paths` are read: comparing
        a commit with its parent at many paths costs about what the commit changed, not a
        lookup of every path. `trees`: as for `file_at`."""
        kept = _TreesKept(self.get, {} if trees is None else trees)
        layout = paths if isinstance(paths, PathTree) else PathTree(paths)
        changed: set[str] = set()
        todo: list[tuple[bytes | None, bytes | None, dict[bytes, Any]]] = [
            (tree, before, layout.root)
        ]
        while todo:
            now, then, node = todo.pop()
            if now == then:
                continue
            now_tree, then_tree = _tree_or_none(kept, now), _tree_or_none(kept, then)
            for part, below in node.items():
                new = now_tree[part] if now_tree is not None and part in now_tree else None
                old = then_tree[part] if then_tree is not None and part in then_tree else None
                if new == old:
                    continue
                if isinstance(below, str):
                    if _file_sha(new) != _file_sha(old):
                        changed.add(below)
                else:
                    todo.append((_dir_sha(new), _dir_sha(old), below))
        return changed

    def differing_files(self, tree: bytes | None, before: bytes | None) -> set[str]:
        """Every file that the trees `tree` and `before` (None: an empty tree) hold
        differently: the paths `changes` gives for two commits with these trees. Only the
        subtrees whose ids differ are read, through the repository's cache of trees
        (`trees`, bounded), and each is compared by its entries as a whole: a walk that
        compares every commit of a long history with its parent costs about what the
        commits changed, and holds only the trees read lately. A tree that is missing,
        cannot be read or is no tree is a DamagedObject naming it and its path."""
        changed: set[str] = set()
        todo: list[tuple[bytes | None, bytes | None, bytes]] = [(tree, before, b"")]
        while todo:
            now, then, prefix = todo.pop()
            if now == then:
                continue
            new = self._tree_data(now, prefix)
            old = self._tree_data(then, prefix, new)
            for name in {name for name, _entry in new.entries.items() ^ old.entries.items()}:
                after, earlier = new.entries.get(name), old.entries.get(name)
                below = (_dir_sha(after), _dir_sha(earlier))
                if below[0] != below[1]:
                    todo.append((*below, prefix + name + b"/"))
                path = _text(prefix + name)
                if _file_entry(after) != _file_entry(earlier) and path is not None:
                    changed.add(path)
        return changed

    def _tree_data(
        self, sha: bytes | None, prefix: bytes, near: TreeData | None = None
    ) -> TreeData:
        """Tree `sha` (an empty one for None), found at `prefix`, from the cache of trees
        (`near`: a tree it is likely to differ from in one entry); DamagedObject when it is
        missing, cannot be read or is no tree."""
        if sha is None:
            return _EMPTY
        found: TreeData | None
        try:
            found = self.trees.get(sha, near)
        except DamagedObject:
            found = None
        except StorageError:  # the object store cannot be opened: said as it is
            raise
        except Exception:  # absent (KeyError), malformed (ValueError)
            found = None
        if found is None:
            raise damaged(sha, prefix.decode(errors="replace").rstrip("/") or "the root tree")
        return found

    def files(self, commit_id: bytes | None) -> Iterator[tuple[str, bytes]]:
        """Every file of the commit as `(path, blob sha)`, in git's order (a directory's
        entries by name, each subdirectory's files where it stands). A tree that is missing,
        cannot be read or is no tree is a DamagedObject naming it and its path."""
        tree = self.tree_of(commit_id)
        if tree is None:
            return
        todo: list[tuple[bytes, bytes]] = [(tree, b"")]
        while todo:
            tree_id, prefix = todo.pop()
            subtrees = []
            for entry in self._tree(tree_id, prefix).iteritems(name_order=True):
                path = prefix + entry.path
                if entry.mode is not None and entry.mode & 0o170000 == DIR_MODE:
                    subtrees.append((entry.sha, path + b"/"))
                elif _is_file(entry.mode) and (text := _text(path)) is not None:
                    yield text, entry.sha
            todo.extend(reversed(subtrees))

    def _tree(self, sha: bytes, prefix: bytes) -> Tree:
        """Tree `sha`, found at `prefix` (its path, with a trailing slash); DamagedObject
        when it is missing, cannot be read or is no tree."""
        obj: ShaFile | None
        try:
            obj = self.get(sha)
        except DamagedObject:
            obj = None
        except StorageError:  # the object store cannot be opened: said as it is
            raise
        except Exception:  # absent (KeyError), malformed: dulwich raises several kinds
            obj = None
        if not isinstance(obj, Tree):
            raise damaged(sha, prefix.decode(errors="replace").rstrip("/") or "the root tree")
        return obj

    def changes(
        self,
        old_commit: bytes | None,
        new_commit: bytes,
        *,
        trees: MutableMapping[bytes, Tree] | None = None,
    ) -> Iterator[FileChange]:
        """Files that differ between two commits; identical subtrees are skipped unread.
        `trees`: where to keep the trees read, by id, and find them again (a caller diffing
        many neighbouring commits, as a page of history does, reads each tree once)."""
        from dulwich.diff_tree import tree_changes  # only catch-up needs it: lazy for start-up

        objects = _TreesKept(self.get, {} if trees is None else trees)
        for change in tree_changes(
            objects,  # type: ignore[arg-type]  # it only looks objects up by id
            self.tree_of(old_commit),
            self.tree_of(new_commit),
        ):
            # Only files: a gitlink or a symbolic link (in a history from before the gate for
            # incoming trees, `beads.sync.treegate`) is no file of the store's.
            old = change.old if change.old is not None and _is_file(change.old.mode) else None
            new = change.new if change.new is not None and _is_file(change.new.mode) else None
            if old is None and new is None:
                continue
            path = _text(new.path if new is not None and new.path is not None else old.path)
            if path is not None:
                yield FileChange(path, old.sha if old else None, new.sha if new else None)


def _is_file(mode: int | None) -> bool:
    """A regular file's mode (a gitlink, a link or a directory is not one)."""
    return mode is not None and mode & 0o170000 == 0o100000


def _file_sha(entry: tuple[int, bytes] | None) -> bytes | None:
    """The blob id of a tree entry that is a regular file, else None (as `file_at`)."""
    return entry[1] if entry is not None and _is_file(entry[0]) else None


def _text(path: bytes | None) -> str | None:
    """A file's path as text; None for one that is not UTF-8 (committed by plain git: the
    gate for incoming trees refuses it from a remote), which is no file of the store's."""
    try:
        return path.decode() if path is not None else None
    except UnicodeDecodeError:
        return None


def _file_entry(entry: tuple[int, bytes] | None) -> tuple[int, bytes] | None:
    """A tree entry that is a regular file (its mode and blob id), else None: `changes`
    tells a file's mode change too."""
    return entry if entry is not None and _is_file(entry[0]) else None


def _dir_sha(entry: tuple[int, bytes] | None) -> bytes | None:
    """The tree id of a tree entry that is a directory, else None (as `file_at`)."""
    return entry[1] if entry is not None and entry[0] & 0o170000 == 0o040000 else None


def _tree_or_none(kept: _TreesKept, sha: bytes | None) -> Tree | None:
    """The tree `sha` names; None for none, or for an object that is no tree."""
    if sha is None:
        return None
    node = kept[sha]
    return node if isinstance(node, Tree) else None


class PathTree:
    """File paths as a tree of their parts (`changed_files`), made once for many
    comparisons: a directory is a dict by name, a file the whole path."""

    __slots__ = ("root",)

    def __init__(self, paths: Iterable[str]) -> None:
        self.root: dict[bytes, Any] = {}
        for path in paths:
            *dirs, name = path.encode().split(b"/")
            node = self.root
            for part in dirs:
                if not isinstance(node.get(part), dict):  # a file's name taken as a directory
                    node[part] = {}
                node = node[part]
            node.setdefault(name, path)


class _TreesKept:
    """The object store as `tree_changes` reads it (by id), keeping the trees in `trees`
    (a tree's id names its content: a kept tree is never stale)."""

    def __init__(self, get: Callable[[bytes], ShaFile], trees: MutableMapping[bytes, Tree]) -> None:
        self.get = get
        self.trees = trees

    def __getitem__(self, sha: bytes) -> ShaFile:
        found = self.trees.get(sha)
        if found is None:
            obj = self.get(sha)
            if not isinstance(obj, Tree):
                return obj
            self.trees[sha] = found = obj
        return found
