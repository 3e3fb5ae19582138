"""Catching the index and the view up with git, the source of truth.

Both are derived data: each records the commit it reflects, and a store brings each forward
from the tree diff between that commit and the branch's (or rebuilds it from the branch's
tree when its commit is unknown). `Store.refresh` calls these under the write lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from beads.errors import InvalidInput
from beads.faults import fault
from beads.files import contained
from beads.git.program import GitUnavailable
from beads.records.ids import parse_bead_path
from beads.settings.config import CONFIG_PATH, parse_config
from beads.view.view import git_blob_sha

if TYPE_CHECKING:
    from beads.git import GitRepo
    from beads.index.index import Index
    from beads.records.record import Bead
    from beads.view.view import View


def refresh_index(git: GitRepo, index: Index, old: bytes | None, new: bytes) -> None:
    """Index the files that changed from commit `old` to `new`, in one transaction (from an
    empty index, when `old` is None: `rebuild_index`)."""
    if old is None:
        rebuild_index(git, index, new)
        return
    upserts: list[tuple[Bead, str, str]] = []
    deleted: list[str] = []
    invalid: dict[str, str | None] = {}
    types: set[str] = set()  # of every bead file changed, as its path says
    config = None
    for path, old_sha, new_sha in git.changes(old, new):
        if path == CONFIG_PATH:
            if new_sha is not None:
                config, invalid[path] = parse_config(git.read(new_sha))
            continue
        located = parse_bead_path(path)
        if located is None:
            continue
        types.add(located[0])
        if old_sha is not None:
            deleted.append(path)
        if new_sha is None:
            continue
        bead, invalid[path], _data = _read_bead(git.read(new_sha), path, located)
        if bead is not None:
            upserts.append((bead, path, new_sha.decode()))
    index.apply(
        head=new,
        upserts=upserts,
        deleted_paths=deleted,
        invalid=invalid,
        config=config,
        link=(old, types),
    )


def rebuild_index(
    git: GitRepo, index: Index, head: bytes, progress: Callable[[int], None] | None = None
) -> int:
    """Fill the index from the files of commit `head` alone, streaming them from git (one
    bead in memory at a time, one transaction); returns how many beads it indexed.

    `progress` is told the number of files read so far, every `PROGRESS_EVERY` files; by
    default a terminal on stderr shows it (`terminal_progress`)."""
    tell = terminal_progress() if progress is None else progress
    try:
        count = _rebuild_from(_file_contents(git, head), index, head, tell)
    except GitUnavailable:  # no git program, or it could not read the store: dulwich's way
        count = _rebuild_from(_dulwich_file_contents(git, head), index, head, tell)
    tell(-1)  # done
    return count


def _rebuild_from(
    files: Iterator[tuple[str, bytes, bytes]],
    index: Index,
    head: bytes,
    tell: Callable[[int], None],
) -> int:
    from beads.index.rebuild import Rebuild  # only a rebuild needs it

    with Rebuild(index, head) as rebuilt:
        for number, (path, sha, content) in enumerate(files, 1):
            if number % PROGRESS_EVERY == 0:
                tell(number)
            if path == CONFIG_PATH:
                config, error = parse_config(content)
                if config is not None:
                    rebuilt.config(config)
                else:
                    rebuilt.invalid(path, error or "invalid")
                continue
            located = parse_bead_path(path)
            if located is None:
                continue
            bead, error, data = _read_bead(content, path, located)
            if bead is not None:
                rebuilt.add(bead, path, sha.decode(), data)
            else:
                rebuilt.invalid(path, error or "invalid")
    return rebuilt.count


def tree_files(git: GitRepo, commit: bytes | None) -> dict[str, bytes]:
    """Every file of `commit` (none for None) the view may hold, path -> blob sha: listed by
    `git ls-tree` when git is installed and the store big enough to gain by it
    (`beads.git.program.worth_starting`), else by dulwich. Paths out of the store
    (`files.contained`) are left out: `gc doctor` reports them from the history
    (`beads.health.historycheck`)."""
    from beads.git.program import list_files, worth_starting

    if commit is None:
        return {}
    found = None
    if worth_starting(git.git_dir):
        with contextlib.suppress(GitUnavailable):  # no git program: dulwich's way
            found = list_files(git.git_dir, commit)
    if found is None:
        found = dict(git.files(commit))
    return {path: sha for path, sha in found.items() if contained(path)}


def _file_contents(git: GitRepo, commit: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """Every file of `commit` with its content: read by the git program when the store is
    big enough to gain by it (GitUnavailable when it cannot), else by dulwich."""
    from beads.git.program import worth_starting

    if worth_starting(git.git_dir):
        return git_file_contents(git.git_dir, commit)
    return _dulwich_file_contents(git, commit)


def _dulwich_file_contents(git: GitRepo, commit: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """As `git_file_contents`, read by dulwich: a file whose blob is missing, not a blob or
    damaged is a DamagedObject naming its path, as the git program's reader raises."""
    from beads.git.objects import DamagedObject, damaged

    for path, sha in git.files(commit):
        try:
            content = git.read(sha)
        except (KeyError, DamagedObject):
            raise damaged(sha, path) from None
        yield path, sha, content


def git_file_contents(git_dir: Path, commit: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """Every file of `commit` as `(path, blob sha, content)`, read by the `git` program
    (`beads.git.program.file_contents`); GitUnavailable when git is missing."""
    from beads.git.program import file_contents

    return file_contents(git_dir, commit)


def _read_bead(
    content: bytes, path: str, located: tuple[str, str]
) -> tuple[Bead | None, str | None, Any]:
    """The bead of a file of git and the mapping it was read from, or None and why it cannot
    be indexed."""
    from beads.records.codec import load_data  # lazy, like every YAML use: reads never parse YAML
    from beads.records.record import Bead

    try:
        data = load_data(content, what=path)
        # Committed elsewhere already: indexed whatever its size, never refused.
        bead = Bead.from_dict(data, max_body=1 << 62)
        if (bead.type, bead.id) != located:
            raise InvalidInput(f"{path} holds {bead.type} {bead.id}, not what its path says")
    except InvalidInput as exc:
        return None, exc.message, None
    return bead, None, data


PROGRESS_EVERY = 1000  # files between two progress reports
_PROGRESS_AFTER = 1.0  # seconds: a rebuild shorter than this shows nothing


def terminal_progress() -> Callable[[int], None]:
    """A progress report for a long rebuild: a line on stderr, rewritten in place, when
    stderr is a terminal and the runtime shows progress (not under --json; nothing either for
    the first second); -1 ends it."""
    import sys
    import time

    from beads.runtime import current

    stream = sys.stderr
    if not current().progress or stream is None or not stream.isatty():
        return lambda done: None
    started = time.monotonic()
    shown = [False]

    def tell(done: int) -> None:
        elapsed = time.monotonic() - started
        if done < 0:
            if shown[0]:
                stream.write("\n")
                stream.flush()
            return
        if elapsed >= _PROGRESS_AFTER:
            shown[0] = True
            stream.write(f"\rgc: indexing the store: {done:,} files ({done / elapsed:,.0f}/s)")
            stream.flush()

    return tell


def refresh_view(git: GitRepo, view: View, old: bytes, new: bytes) -> None:
    """Write and remove the view's files that changed from commit `old` to `new`."""
    for change in git.changes(old, new):
        if change.new_sha is None:
            view.remove(change.path)
        else:
            view.write(change.path, git.read(change.new_sha))
        fault("mid-view-refresh")
    view.mark_applied(new)


def rebuild_view(git: GitRepo, view: View, head: bytes) -> None:
    """Make the view hold exactly the files of commit `head` that its setting keeps (its own
    commit, or the setting it was made under, is unknown)."""
    try:
        _rebuild_view_from(_file_contents(git, head), view)
    except GitUnavailable:  # as for the index; writing a file twice does no harm
        _rebuild_view_from(_dulwich_file_contents(git, head), view)
    view.mark_applied(head, rebuilt=True)


def _rebuild_view_from(files: Iterator[tuple[str, bytes, bytes]], view: View) -> None:
    present = set(view.files())
    for path, sha, content in files:
        if not view.keeps(path, content):
            continue
        present.discard(path)
        current = view.read(path)
        if current is None or git_blob_sha(current) != sha:
            view.write(path, content)
    for path in present:
        view.remove(path)
