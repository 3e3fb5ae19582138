"""Catching the index and the view up with git, the source of truth.

Both are derived data: each records the commit it reflects, and a store brings each forward
from the tree diff between that commit and the branch's (or rebuilds it from the branch's
tree when its commit is unknown). `Store.sync` calls these under the write lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from beads.config import CONFIG_PATH, parse_config
from beads.errors import InvalidInput, StorageError
from beads.faults import fault
from beads.files import contained
from beads.ids import parse_bead_path
from beads.view import git_blob_sha

if TYPE_CHECKING:
    from beads.git import GitRepo
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
        count = _rebuild_from(git_file_contents(git.git_dir, head), index, head, tell)
    except GitUnavailable:  # no git program, or it could not read the store: dulwich's way
        files = ((path, sha, git.read(sha)) for path, sha in git.files(head))
        count = _rebuild_from(files, index, head, tell)
    tell(-1)  # done
    return count


def _rebuild_from(
    files: Iterator[tuple[str, bytes, bytes]],
    index: Index,
    head: bytes,
    tell: Callable[[int], None],
) -> int:
    with index.rebuild(head) as rebuilt:
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


class GitUnavailable(Exception):
    """The `git` program is not installed, or failed to read the store's objects."""


def _git_program(git_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The argv start and environment that run git on the store, or GitUnavailable."""
    import os
    import shutil

    program = shutil.which("git")
    if program is None:
        raise GitUnavailable("no git program")
    # Only this repository's own settings: no variable of the caller's git (GIT_DIR,
    # GIT_OBJECT_DIRECTORY...) and no global or system config may point it elsewhere.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, LC_ALL="C")
    return [program, f"--git-dir={git_dir}"], env


def tree_files(git: GitRepo, commit: bytes | None) -> dict[str, bytes]:
    """Every file of `commit` (none for None) the view may hold, path -> blob sha: listed by
    `git ls-tree` when it can (a tenth of a second at 100k files, dulwich's tree walk ~3 s),
    else by dulwich. Paths out of the store (`files.contained`) are left out: `gc doctor`
    reports them from the history (`beads.historycheck`)."""
    import subprocess

    if commit is None:
        return {}
    try:
        base, env = _git_program(git.git_dir)
        listed = subprocess.run(
            [*base, "ls-tree", "-r", "-z", "--full-tree", commit.decode()],
            capture_output=True, stdin=subprocess.DEVNULL, env=env, check=True,
        ).stdout  # fmt: skip
        found = {}
        for entry in listed.split(b"\0")[:-1]:
            info, _, path = entry.partition(b"\t")
            mode, kind, sha = info.split(b" ")
            if kind == b"blob" and mode.startswith(b"100"):  # files: no symbolic links
                found[path.decode()] = sha
    except (GitUnavailable, OSError, subprocess.CalledProcessError, ValueError, UnicodeError):
        found = dict(git.files(commit))
    return {path: sha for path, sha in found.items() if contained(path)}


def git_file_contents(git_dir: Path, commit: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """Every file of `commit` as `(path, blob sha, content)`, read by the `git` program: a
    tree walk and a blob read through dulwich cost ~80 us a file in Python, `git ls-tree` and
    `git cat-file --batch` ~15 us. Raises GitUnavailable (before yielding anything, when
    git is missing) so the caller can read through dulwich instead; streaming, a few pipe
    buffers of files at a time."""
    import subprocess
    import threading
    from collections import deque

    base, env = _git_program(git_dir)
    listing = subprocess.Popen(
        [*base, "ls-tree", "-r", "-z", "--full-tree", commit.decode()],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    reader = subprocess.Popen(
        [*base, "cat-file", "--batch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert listing.stdout is not None and reader.stdin is not None and reader.stdout is not None
    paths: deque[tuple[str, bytes]] = deque()
    fed = [True]

    def feed() -> None:
        # ls-tree's entries go to cat-file's input as they come; their paths wait in order.
        pending = b""
        try:
            with reader.stdin:  # type: ignore[union-attr]
                while chunk := listing.stdout.read1(65536):  # type: ignore[union-attr]
                    entries = (pending + chunk).split(b"\0")
                    pending = entries.pop()
                    shas = []
                    for entry in entries:
                        info, _, path = entry.partition(b"\t")
                        mode, kind, sha = info.split(b" ")
                        if kind == b"blob" and mode.startswith(b"100"):  # no links
                            paths.append((path.decode(), sha))
                            shas.append(sha)
                    if shas:
                        reader.stdin.write(b"\n".join(shas) + b"\n")  # type: ignore[union-attr]
                        reader.stdin.flush()  # type: ignore[union-attr]
        except (OSError, ValueError, UnicodeError):
            fed[0] = False

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    out = reader.stdout
    started = False
    try:
        while True:
            header = out.readline()
            if not header:
                break
            sha, kind, size = header.split()
            path, wanted = paths.popleft()
            if sha != wanted or kind != b"blob":
                raise GitUnavailable(f"git cat-file: {header!r}")
            content = out.read(int(size) + 1)[:-1]
            started = True
            yield path, sha, content
        feeder.join()
        if listing.wait() != 0 or reader.wait() != 0 or not fed[0] or paths:
            if started:
                raise StorageError("git could not read all the files of the commit")
            raise GitUnavailable("git ls-tree or cat-file failed")
    except ValueError:
        raise GitUnavailable("git cat-file: unexpected output") from None
    finally:
        for process in (listing, reader):
            if process.poll() is None:
                process.kill()
            process.wait()
        out.close()
        listing.stdout.close()


def _read_bead(
    content: bytes, path: str, located: tuple[str, str]
) -> tuple[Bead | None, str | None, Any]:
    """The bead of a file of git and the mapping it was read from, or None and why it cannot
    be indexed."""
    from beads.codec import load_data  # lazy, like every YAML use: reads never parse YAML
    from beads.record import Bead

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
SHOW_PROGRESS = True  # False: never (the command line's --json sets it)
_PROGRESS_AFTER = 1.0  # seconds: a rebuild shorter than this shows nothing


def terminal_progress() -> Callable[[int], None]:
    """A progress report for a long rebuild: a line on stderr, rewritten in place, when
    stderr is a terminal (nothing otherwise, nor for the first second); -1 ends it."""
    import sys
    import time

    stream = sys.stderr
    if not SHOW_PROGRESS or stream is None or not stream.isatty():
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
    """Make the view hold exactly the files of commit `head` that its setting keeps (its own
    commit, or the setting it was made under, is unknown)."""
    try:
        _rebuild_view_from(git_file_contents(git.git_dir, head), view)
    except GitUnavailable:  # as for the index; writing a file twice does no harm
        _rebuild_view_from(((path, sha, git.read(sha)) for path, sha in git.files(head)), view)
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
