"""Catching the index and the view up with git, the source of truth.

Both are derived data: each records the commit it reflects, and a store brings each forward
from the tree diff between that commit and the branch's (or rebuilds it from the branch's
tree when its commit is unknown). `Store.sync` calls these under the write lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from beads.config import CONFIG_PATH, parse_config
from beads.errors import InvalidInput
from beads.faults import fault
from beads.ids import parse_bead_path
from beads.view import git_blob_sha

if TYPE_CHECKING:
    from beads.gitrepo import GitRepo
    from beads.index import Index
    from beads.record import Bead
    from beads.view import View


def catch_up_index(git: GitRepo, index: Index, old: bytes | None, new: bytes) -> None:
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
        bead, invalid[path] = _read_bead(git, path, located, new_sha)
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
    with index.rebuild(head) as rebuilt:
        for number, (path, sha) in enumerate(git.files(head), 1):
            if number % PROGRESS_EVERY == 0:
                tell(number)
            if path == CONFIG_PATH:
                config, error = parse_config(git.read(sha))
                if config is not None:
                    rebuilt.config(config)
                else:
                    rebuilt.invalid(path, error or "invalid")
                continue
            located = parse_bead_path(path)
            if located is None:
                continue
            bead, error = _read_bead(git, path, located, sha)
            if bead is not None:
                rebuilt.add(bead, path, sha.decode())
            else:
                rebuilt.invalid(path, error or "invalid")
    tell(-1)  # done
    return rebuilt.count


def _read_bead(
    git: GitRepo, path: str, located: tuple[str, str], sha: bytes
) -> tuple[Bead | None, str | None]:
    """The bead of a file of git, or None and why it cannot be indexed."""
    from beads.codec import load_bead  # lazy, like every YAML use: reads never parse YAML

    try:
        # Committed elsewhere already: indexed whatever its size, never refused.
        bead = load_bead(git.read(sha), what=path, max_body=1 << 62)
        if (bead.type, bead.id) != located:
            raise InvalidInput(f"{path} holds {bead.type} {bead.id}, not what its path says")
    except InvalidInput as exc:
        return None, exc.message
    return bead, None


PROGRESS_EVERY = 1000  # files between two progress reports
_PROGRESS_AFTER = 1.0  # seconds: a rebuild shorter than this shows nothing


def terminal_progress() -> Callable[[int], None]:
    """A progress report for a long rebuild: a line on stderr, rewritten in place, when
    stderr is a terminal (nothing otherwise, nor for the first second); -1 ends it."""
    import sys
    import time

    stream = sys.stderr
    if stream is None or not stream.isatty():
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


def catch_up_view(git: GitRepo, view: View, old: bytes, new: bytes) -> None:
    """Write and remove the view's files that changed from commit `old` to `new`."""
    for change in git.changes(old, new):
        if change.new_sha is None:
            view.remove(change.path)
        else:
            view.write(change.path, git.read(change.new_sha))
        fault("mid-view-catch-up")
    view.mark_applied(new)


def rebuild_view(git: GitRepo, view: View, head: bytes) -> None:
    """Make the view hold exactly the files of commit `head` (its own commit is unknown)."""
    wanted = dict(git.files(head))
    for path in view.files():
        if path not in wanted:
            view.remove(path)
    for path, sha in wanted.items():
        current = view.read(path)
        if current is None or git_blob_sha(current) != sha:
            view.write(path, git.read(sha))
    view.mark_applied(head)
