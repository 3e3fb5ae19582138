"""The store's branch: reading it, moving it by compare-and-swap, and its reflog.

Every write runs under the store's write lock, so a git lock file found by a writer was left
by a writer that died, or belongs to a git process that is not gc (a `git push` into the
store, which holds `refs/heads/main.lock` for milliseconds). A lock older than
`stale_lock_seconds` is the first kind and is removed; a younger one is waited for briefly,
then reported as a conflict naming the file. gc's own ref locks carry a 1970 mtime, so one
left by a killed gc writer is removed at once, not after `stale_lock_seconds`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from pathlib import Path

from beads.errors import Conflict, StorageError
from beads.faults import fault

# The store's one branch, as git names it (its ref file is `.git/` + this).
BRANCH = "refs/heads/main"
ZERO_SHA = b"0" * 40
# A git lock file this many seconds old is a dead writer's (`store.stale_lock_seconds`).
STALE_LOCK_SECONDS = 5
# How long a writer waits for a young git lock (someone's `git push`) before a conflict.
LOCK_WAIT = 1.0
LOCK_POLL = 0.005
# `gc doctor --gc` drops reflog entries older than this, as `git gc` does (90 days).
REFLOG_KEEP_SECONDS = 90 * 86400
# gc stamps the ref locks it makes with this mtime (1970): found by a writer that holds the
# write lock, such a lock is a dead gc writer's, and its age clears it at once.
GC_LOCK_MTIME = 1


class BranchRef:
    """`refs/heads/main` of the bare repository at `git_dir` (`GitRepo` is one)."""

    git_dir: Path
    stale_lock_seconds: float

    def head(self) -> bytes | None:
        """The commit the branch points at; None before the first commit, or when the ref is
        lost or holds no commit id (the store refuses to go on; `gc doctor` restores it)."""
        sha = read_ref(self.git_dir)
        return sha if sha is not None and is_sha(sha) else None

    @property
    def reflog_path(self) -> Path:
        return self.git_dir / "logs" / BRANCH

    def swap_head(
        self,
        old: bytes | None,
        new: bytes,
        reflog: str,
        author: str,
        *,
        force: bool = False,
        logged_from: bytes | None = None,
    ) -> None:
        """Move the branch from `old` to `new`, failing if someone moved it meanwhile (with
        `force`, from whatever it holds: `gc doctor` restoring a lost ref). Call it holding
        the store's write lock. `logged_from`: the commit the reflog says the branch moved
        from, when not the one it held (`gc doctor` making a lost commit again).

        Git's protocol, done here rather than by dulwich so a lock left by a killed writer
        is recognised: create `main.lock` exclusively, compare, write and fsync the new id
        into it, rename it over the ref; then append one line (`reflog`, the reason) to the
        reflog.
        """
        ref = self.git_dir / BRANCH
        lock = ref.with_name(ref.name + ".lock")
        fd = self._take_lock(lock)
        try:
            fault("ref-locked")
            current = read_ref(self.git_dir)
            if not force and current != old:
                raise Conflict(
                    "the store's branch moved during the write; nothing was changed, retry"
                )
            line = new + b"\n"
            if os.write(fd, line) != len(line):  # a full disk
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.utime(fd, (GC_LOCK_MTIME, GC_LOCK_MTIME))  # the write dated it now: stamp again
            os.fsync(fd)  # the ref is the one file that must survive a power cut whole
            fault("ref-written")
            os.close(fd)
            fd = -1
            os.replace(lock, ref)
        except BaseException as exc:
            if fd >= 0:
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)
            if isinstance(exc, OSError):
                raise StorageError(
                    f"cannot update the store's branch: {exc.strerror or exc}; nothing was changed"
                ) from None
            raise
        with contextlib.suppress(OSError):
            os.utime(ref)  # the ref is dated now, not 1970
        before = current if force and current and is_sha(current) else old
        self._log_ref(logged_from or before or ZERO_SHA, new, reflog, author)

    def _take_lock(self, lock: Path) -> int:
        """Create `lock` exclusively (git's lock protocol); returns its open descriptor."""
        while True:
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.utime(fd, (GC_LOCK_MTIME, GC_LOCK_MTIME))
                return fd
            except FileExistsError:
                self.await_lock(lock)
            except FileNotFoundError:  # `refs/heads/` was removed: git remakes it too
                try:
                    lock.parent.mkdir(exist_ok=True)
                except FileNotFoundError:
                    raise StorageError(
                        f"the store's git repository has no {lock.parent.parent}"
                    ) from None

    def await_lock(self, lock: Path) -> None:
        """Return once `lock` is gone: removed as stale when older than `stale_lock_seconds`
        (a dead writer's), else waited for up to `LOCK_WAIT`; then a Conflict naming it."""
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            age = lock_age(lock)
            if age is None:
                return
            if age >= self.stale_lock_seconds:
                # Under our write lock no gc writer owns it, and a git process finishes a ref
                # update in milliseconds: its owner is dead. Git would never remove it itself.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)
                return
            if time.monotonic() >= deadline:
                raise Conflict(
                    f"{lock} is held by another git process (a push into the store?); retry. "
                    f"It is removed as stale once {self.stale_lock_seconds:g}s old"
                )
            time.sleep(LOCK_POLL)

    def _log_ref(self, old: bytes, new: bytes, reason: str, author: str) -> None:
        """Append the move to the reflog, in git's format (`git -C .beads reflog` reads it):
        a person can find every commit the branch ever held, even after losing the ref."""
        first = reason.split("\n", 1)[0]
        line = (
            f"{old.decode()} {new.decode()} {author} <{author}@gc-beads> {int(time.time())} "
            f"+0000\t{first}\n"
        )
        path = self.reflog_path
        try:
            try:
                handle = open(path, "ab")
            except FileNotFoundError:
                path.parent.mkdir(parents=True, exist_ok=True)
                handle = open(path, "ab")
            with handle:
                handle.write(line.encode())
        except OSError:
            pass  # an aid for people: failing to append must not fail a commit that is in

    def drop_reflog_entries(self, sha: bytes) -> int:
        """Drop the reflog entries that name commit `sha` (one whose object is lost: git fsck
        fails on them, as `git reflog expire --stale-fix` knows); returns how many."""
        try:
            lines = self.reflog_path.read_bytes().splitlines(keepends=True)
        except FileNotFoundError:
            return 0
        kept = [line for line in lines if sha not in line.partition(b"\t")[0].split(b" ")[:2]]
        if len(kept) == len(lines):
            return 0
        from dulwich.file import GitFile  # lazy: hooks read refs without loading dulwich

        with GitFile(self.reflog_path, "wb") as handle:  # git's lock protocol, as git does
            handle.write(b"".join(kept))
        return len(lines) - len(kept)

    def expire_reflog(self, keep_seconds: float = REFLOG_KEEP_SECONDS) -> int:
        """Drop reflog entries older than `keep_seconds`, always keeping the newest (the log
        grows by a line a write); returns how many were dropped."""
        try:
            lines = self.reflog_path.read_bytes().splitlines(keepends=True)
        except FileNotFoundError:
            return 0
        cutoff = time.time() - keep_seconds
        kept = [line for line in lines[:-1] if _reflog_time(line) >= cutoff] + lines[-1:]
        if len(kept) == len(lines):
            return 0
        from dulwich.file import GitFile  # lazy: hooks read refs without loading dulwich

        with GitFile(self.reflog_path, "wb") as handle:  # git's lock protocol, as git does
            handle.write(b"".join(kept))
        return len(lines) - len(kept)


def read_ref(git_dir: Path) -> bytes | None:
    """The raw content of the branch ref (loose, else packed), None when there is none."""
    try:
        return (git_dir / BRANCH).read_bytes().strip()
    except FileNotFoundError:
        pass
    except OSError as exc:  # a directory in its place, no permission: damage, not absence
        return _unreadable(exc)
    try:
        packed = (git_dir / "packed-refs").read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _unreadable(exc)
    for line in packed.splitlines():
        sha, _, name = line.partition(b" ")
        if name.strip() == BRANCH.encode():
            return sha
    return None


def _unreadable(exc: OSError) -> bytes:
    """What a ref that cannot be read holds for `read_ref`'s callers: its error, shown as
    damage; running out of descriptors or memory is this process's trouble, not the
    store's, and is raised as such."""
    if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
        raise StorageError(f"cannot read the store's branch: {exc.strerror}") from None
    return f"<{exc.strerror}>".encode()


def is_sha(text: bytes) -> bool:
    """True for a 40-digit lowercase hex object id."""
    return len(text) == 40 and text.strip(b"0123456789abcdef") == b""


def valid_ref_name(name: bytes) -> bool:
    """Whether git accepts `name` (`refs/...`) as a ref name (git check-ref-format's rules)."""
    from dulwich.refs import check_ref_format

    return check_ref_format(name)


def _reflog_time(line: bytes) -> float:
    """The time of a reflog line (`old new name <email> time tz\tmessage`); a line that
    does not parse counts as new: it is kept, never dropped unread."""
    try:
        return float(line.split(b"\t", 1)[0].rsplit(b" ", 2)[1])
    except (IndexError, ValueError):
        return float("inf")


def lock_age(path: Path) -> float | None:
    """Seconds since `path` was last written, or None when it does not exist."""
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except FileNotFoundError:
        return None


# -- other refs: where each remote's branch was last seen ------------------------------------


def write_ref(git_dir: Path, name: bytes, sha: bytes) -> None:
    """Set the loose ref `name` (`refs/remotes/origin/main`) to `sha`, replaced whole (a
    temporary file renamed into place). For refs only gc moves, under its write lock."""
    path = git_dir / name.decode()
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_bytes(sha + b"\n")
    os.replace(temp, path)


def read_named_ref(git_dir: Path, name: bytes) -> bytes | None:
    """The commit id the loose ref `name` holds; None when it is absent or holds no id."""
    try:
        sha = (git_dir / name.decode()).read_bytes().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return sha if is_sha(sha) else None


def delete_refs_under(git_dir: Path, prefix: bytes) -> None:
    """Remove every ref whose name starts with `prefix` (`refs/remotes/origin/`), loose or
    packed, through dulwich's ref container, which also removes the directories it leaves
    empty (a remote's `refs/remotes/NAME/`, as `git remote remove` leaves none)."""
    from dulwich.file import FileLocked
    from dulwich.refs import DiskRefsContainer

    container = DiskRefsContainer(str(git_dir))
    try:
        for name in container.keys(base=prefix):  # named without the prefix
            container.remove_if_equals(prefix + name, None)
    except FileLocked as exc:
        raise Conflict(
            f"{os.fsdecode(exc.lockfilename)} is held by another git process; retry"
        ) from None
    except OSError as exc:
        raise StorageError(f"cannot remove the refs {prefix.decode()}*: {exc}") from None


def remote_names(git_dir: Path) -> list[str]:
    """The remotes that have a branch `main` recorded under `refs/remotes/`."""
    return sorted(path.parent.name for path in git_dir.glob("refs/remotes/*/main"))
