"""Reading the store's trees: a file at a path, which of many paths two trees hold
differently, every file of a commit, and the files two commits differ by.

`GitRepo` reads its trees through `TreeReader`, which needs only its object lookups (`get`,
`read`, `tree_of`) and its cache of trees (`trees`, bounded: the trees read lately). Every
comparison is one walk (`_differing`): it reads only the subtrees whose ids differ, so
comparing neighbouring commits costs about what they changed, not the store's size, and a
file differs when its mode or its blob does (a regular file's; a link, a gitlink or a
directory is no file of the store's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from dulwich.objects import ShaFile, Tree

from beads.errors import StorageError
from beads.git.objects import DamagedObject, TreeCache, TreeData, damaged

DIR_MODE = 0o040000
_EMPTY = TreeData({})

Entry = tuple[int, bytes]  # a tree entry: its mode and its object's hex id


class FileChange(NamedTuple):
    """A file that differs between two commits; a side is None where the file is absent."""

    path: str
    old_sha: bytes | None
    new_sha: bytes | None


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


class TreeReader:
    """The tree readers of `GitRepo` (a mixin over its object lookups)."""

    get: Callable[[bytes], ShaFile]
    read: Callable[[bytes], bytes]
    tree_of: Callable[[bytes | None], bytes | None]
    trees: TreeCache

    def read_path(self, commit_id: bytes, path: str) -> bytes | None:
        """The content of the file at `path` in commit `commit_id`, or None when there is
        none (not there, or no regular file)."""
        sha = self.file_at(self.tree_of(commit_id), path)
        return self.read(sha) if sha is not None else None

    def file_at(self, tree: bytes | None, path: str) -> bytes | None:
        """The blob id of the file at `path` under tree `tree`, or None when there is none
        (not there, or no regular file: the files every comparison here counts). A tree on
        the way that is missing or cannot be read is a DamagedObject."""
        parts = path.encode().split(b"/")
        prefix = b""
        for part in parts[:-1]:
            tree = _dir_sha(self._tree_data(tree, prefix).entries.get(part))
            prefix += part + b"/"
        return _file_sha(self._tree_data(tree, prefix).entries.get(parts[-1]))

    def changed_files(
        self, tree: bytes | None, before: bytes | None, paths: Iterable[str] | PathTree
    ) -> set[str]:
        """Which of `paths` (files; a `PathTree` of them, for many calls) differ between the
        trees `tree` and `before` (None: an empty tree). Only the subtrees on the way to some
        of `paths` are read: comparing a commit with its parent at many paths costs about
        what the commit changed, not a lookup of every path."""
        layout = paths if isinstance(paths, PathTree) else PathTree(paths)
        return {path for path, _old, _new in self._differing(tree, before, layout.root)}

    def differing_files(self, tree: bytes | None, before: bytes | None) -> set[str]:
        """Every file that the trees `tree` and `before` (None: an empty tree) hold
        differently: the paths `changes` gives for two commits with these trees."""
        return {path for path, _old, _new in self._differing(tree, before, None)}

    def changes(self, old_commit: bytes | None, new_commit: bytes) -> list[FileChange]:
        """The files that differ between two commits (`old_commit` None: every file of
        `new_commit`), in path order: git's order of a tree's files."""
        found = self._differing(self.tree_of(new_commit), self.tree_of(old_commit), None)
        return sorted(FileChange(path, _file_sha(old), _file_sha(new)) for path, old, new in found)

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

    def _differing(
        self, tree: bytes | None, before: bytes | None, layout: dict[bytes, Any] | None
    ) -> Iterator[tuple[str, Entry | None, Entry | None]]:
        """Each file the trees `tree` and `before` hold differently, as `(path, its entry
        before, its entry now)` (None where it is no file), among the paths of `layout` (a
        `PathTree`'s root; None: every path). Subtrees whose ids are equal are skipped
        unread; the others come from the cache of trees, each compared by its entries as a
        whole. A path that is not UTF-8 (committed by plain git) is passed over."""
        todo: list[tuple[bytes | None, bytes | None, bytes, dict[bytes, Any] | None]] = [
            (tree, before, b"", layout)
        ]
        while todo:
            now, then, prefix, node = todo.pop()
            if now == then:
                continue
            new = self._tree_data(now, prefix)
            old = self._tree_data(then, prefix, new)
            for name in {name for name, _entry in new.entries.items() ^ old.entries.items()}:
                below = node.get(name) if node is not None else None
                if node is not None and below is None:
                    continue  # no path wanted there
                after, earlier = new.entries.get(name), old.entries.get(name)
                if not isinstance(below, str):  # a directory wanted, or every path
                    subtrees = (_dir_sha(after), _dir_sha(earlier))
                    if subtrees[0] != subtrees[1]:
                        todo.append((*subtrees, prefix + name + b"/", below))
                if isinstance(below, dict):
                    continue
                file_after, file_before = _file_entry(after), _file_entry(earlier)
                if file_after != file_before and (path := _text(prefix + name)) is not None:
                    yield path, file_before, file_after

    def _tree_data(
        self, sha: bytes | None, prefix: bytes, near: TreeData | None = None
    ) -> TreeData:
        """Tree `sha`, found at `prefix`, from the cache of trees (an empty one for None;
        `near`: a tree it is likely to differ from in one entry); DamagedObject when it is
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


def _is_file(mode: int | None) -> bool:
    """A regular file's mode (a gitlink, a link or a directory is not one)."""
    return mode is not None and mode & 0o170000 == 0o100000


def _file_entry(entry: Entry | None) -> Entry | None:
    """A tree entry that is a regular file (its mode and blob id), else None."""
    return entry if entry is not None and _is_file(entry[0]) else None


def _file_sha(entry: Entry | None) -> bytes | None:
    """The blob id of a tree entry that is a regular file, else None."""
    return entry[1] if entry is not None and _is_file(entry[0]) else None


def _dir_sha(entry: Entry | None) -> bytes | None:
    """The tree id of a tree entry that is a directory, else None."""
    return entry[1] if entry is not None and entry[0] & 0o170000 == DIR_MODE else None


def _text(path: bytes | None) -> str | None:
    """A file's path as text; None for one that is not UTF-8 (committed by plain git: the
    gate for incoming trees refuses it from a remote), which is no file of the store's."""
    try:
        return path.decode() if path is not None else None
    except UnicodeDecodeError:
        return None
