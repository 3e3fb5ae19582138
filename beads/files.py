"""Writing under `.beads/`: never through a symbolic link, with the store's file modes.

Every directory gc writes into is checked component by component from the store's directory
(`lstat`: a link is never followed) and made when missing. Inside a `checking` block (each
write under the store's lock is one) a directory checked once is trusted to the block's end,
so a batch writing thousands of view files pays a set lookup per file; outside one nothing is
trusted. So every write looks afresh, as a new command would, and a process that runs for
hours (`gc mcp`, the NATS relay, a program holding a `Store`) makes again a directory another
process removed since its last write (an emptied shard a prune dropped, a person's `rm`), and
notices one replaced by a link. Files are opened with O_NOFOLLOW; temporary files are new
(O_EXCL) under a random name.
A link met in the view (derived from git) is replaced by a real directory; one met under
`.runtime/` is refused, and `gc doctor` reports both.

Modes: a store is private to its owner (directories 0700, files 0600) unless config.yaml sets
`store.shared: group` (directories 2770, files 0660). The mode of the store's directory carries
that choice (`Store` applies it when it opens), so a hook learns it from one `stat`.
"""

from __future__ import annotations

import errno
import os
import stat

from beads import runtime
from beads.errors import StorageError

PRIVATE = (0o700, 0o600)
GROUP = (0o2770, 0o660)
SHARED_VALUES = ("private", "group")

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def started_umask() -> int:
    """The umask the process started with, for the programs gc runs (mail scripts, checks,
    nudges), so their own files are as their user expects; -1 while gc has not changed it
    (the runtime's `own_umask`: the program's, never a library caller's)."""
    return runtime.current().started_umask


def contained(path: str) -> bool:
    """Whether `path` (relative, `/`-separated, as a git tree names it) is a place under the
    store's directory outside `.git` and `.runtime`: no absolute, empty, `.` or `..` part,
    no backslash or NUL, no `.git` part in any case. The view writes and removes nothing
    else, whatever a tree says."""
    if not path or path.startswith("/") or "\\" in path or "\0" in path:
        return False
    parts = path.split("/")
    if any(part in ("", ".", "..") or is_dot_git(part.encode()) for part in parts):
        return False
    return parts[0].rstrip(". ").casefold() not in (".git", ".runtime")


def is_dot_git(name: bytes) -> bool:
    """Whether a file system could take `name` for `.git`: in any case, with the trailing
    dots and spaces Windows drops, or by its short name."""
    folded = name.rstrip(b". ").lower()
    return folded in (b".git", b"git~1")


class checking:  # noqa: N801 - used as a function: `with files.checking():`
    """Run a block of writes (or reads) over the store's files trusting what it checks: a
    directory found real, from its first check to the block's end, and the store's modes
    from their first look. `Store.locked` runs each write in one: gc's own removals of
    directories (`View.remove`) take that lock, so within it only a person could remove one.
    A block inside another shares the outer one's trust; once the outermost ends, the next
    write checks again (the module's docstring says why)."""

    def __init__(self) -> None:
        self._run: runtime.Runtime | None = None

    def __enter__(self) -> None:
        run = runtime.current()
        if run.checked_dirs is None:  # the outermost block: its trust starts empty
            self._run = run
            run.checked_dirs, run.modes = set(), {}

    def __exit__(self, *exc: object) -> None:
        if self._run is not None:
            self._run.checked_dirs = self._run.modes = None


def _checked_dirs() -> set[str]:
    # The block's trusted directories; outside a block, a set of this check's alone.
    checked = runtime.current().checked_dirs
    return set() if checked is None else checked


def modes(root: str) -> tuple[int, int]:
    """`(directory mode, file mode)` of the store at `root`, from its directory's mode."""
    run = runtime.current()
    known = run.modes  # read once: another thread's write may end its block meanwhile
    if known is None:
        known = {}
    found = known.get(root)
    if found is None:
        try:
            shared = os.stat(root).st_mode & 0o070 == 0o070
        except OSError:
            shared = False
        found = known[root] = GROUP if shared else PRIVATE
        if run.own_umask:
            previous = os.umask(0o007 if shared else 0o077)
            if run.started_umask == -1:
                run.started_umask = previous
    return found


def apply_shared(root: str, shared: object) -> None:
    """Give the store the modes `store.shared` asks for (`private`, the default, or `group`).

    The store's directory carries the choice; when it changes (a store made before modes
    existed, or the setting changed) every file and directory is brought to the new modes
    once, never following a link.
    """
    wanted = GROUP if shared == "group" else PRIVATE
    try:
        current = stat.S_IMODE(os.stat(root).st_mode)
    except OSError:
        return
    known = runtime.current().modes
    if known is not None:
        known.pop(root, None)
    if current == wanted[0]:
        modes(root)
        return
    try:
        os.chmod(root, wanted[0])
    except PermissionError:
        return  # a group store opened by a member: only its owner can change its modes
    except OSError as exc:
        if exc.errno == errno.EROFS:
            return  # a read-only mount: reads go on with the modes it has
        raise
    modes(root)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            try:
                info = os.lstat(path)
                if stat.S_ISDIR(info.st_mode):
                    os.chmod(path, wanted[0])
                elif stat.S_ISREG(info.st_mode):
                    # git's objects are read-only: keep them so, within the new modes
                    writable = info.st_mode & stat.S_IWUSR
                    mode = wanted[1] if writable else wanted[1] & 0o444
                    if info.st_mode & stat.S_IXUSR:  # the store's git hook stays runnable
                        mode |= (wanted[1] & 0o440) >> 2  # x wherever r is
                    os.chmod(path, mode)
            except OSError:
                pass  # gone meanwhile, or not ours to change: the next write fixes it


def make_dirs(root: str, directory: str, *, replace_links: bool = False) -> bool:
    """Make sure `directory` (a path under `root`) is a real directory, making what is
    missing; True when a link had to be replaced (only with `replace_links`)."""
    checked = _checked_dirs()
    if directory in checked or directory == root:
        return False
    parent = os.path.dirname(directory)
    if len(parent) < len(root):
        raise ValueError(f"{directory} is not inside {root}")
    replaced = make_dirs(root, parent, replace_links=replace_links)
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        _mkdir(root, directory)
        info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode) and replace_links:
        os.unlink(directory)  # the link only: whatever it points to is left alone
        _mkdir(root, directory)
        info = os.lstat(directory)
        replaced = True
    if not stat.S_ISDIR(info.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
        raise _refused(directory, what)
    checked.add(directory)
    return replaced


def real_dir(root: str, directory: str) -> bool:
    """True when `directory` under `root` exists and no component of it is a link."""
    checked = _checked_dirs()
    if directory in checked or directory == root:
        return True
    try:
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
            return False
    except OSError:
        return False
    if not real_dir(root, os.path.dirname(directory)):
        return False
    checked.add(directory)
    return True


def links(top: str, skip: frozenset[str] = frozenset()) -> list[str]:
    """Every symbolic link under `top` (never followed), as paths relative to it; names in
    `skip` are left out at the top level."""
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath == top:
            dirnames[:] = [d for d in dirnames if d not in skip]
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                found.append(os.path.relpath(path, top).replace(os.sep, "/"))
    return sorted(found)


def forget(directory: str) -> None:
    """`directory` was removed: check it and every directory above it again before the next
    write (one above may be what was removed, though `directory` itself was never checked)."""
    checked = runtime.current().checked_dirs
    if not checked:
        return  # nothing trusted: outside a `checking` block, or none checked yet
    while directory != os.path.dirname(directory):  # up to "/" ("" for a relative path)
        checked.discard(directory)
        directory = os.path.dirname(directory)


def write_atomic(
    root: str, target: str, data: bytes, tmp_dir: str, *, replace_links: bool = False
) -> bool:
    """Write `target` whole or not at all (a new temporary file in `tmp_dir`, then a rename,
    which replaces a link at `target` rather than follow it); True when a directory link was
    replaced on the way."""
    directory = os.path.dirname(target)
    try:
        return _write_atomic(root, target, data, tmp_dir, replace_links)
    except FileNotFoundError:  # a directory checked earlier was removed meanwhile
        forget(directory)
        forget(tmp_dir)
        return _write_atomic(root, target, data, tmp_dir, replace_links)


def _write_atomic(root: str, target: str, data: bytes, tmp_dir: str, replace_links: bool) -> bool:
    replaced = make_dirs(root, os.path.dirname(target), replace_links=replace_links)
    make_dirs(root, tmp_dir)
    tmp = os.path.join(tmp_dir, f"{os.path.basename(target)}.{os.urandom(6).hex()}.tmp")
    mode = modes(root)[1]
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode)
    try:
        try:
            if mode != PRIVATE[1]:
                os.fchmod(fd, mode)  # the umask may have taken the group's bits
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return replaced


def open_file(root: str, path: str, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """A descriptor on `path` under `root` (created if missing), never through a link."""
    make_dirs(root, os.path.dirname(path))
    try:
        fd = os.open(path, flags | os.O_CREAT | _NOFOLLOW, modes(root)[1])
    except OSError:
        if os.path.islink(path):
            raise _refused(path) from None
        raise
    _fit_mode(root, fd)
    return fd


def create(root: str, path: str) -> None:
    """Make the file `path` exist (a marker, a lock, a database before sqlite opens it), never
    through a link; a database's `-wal` and `-shm` files are made by sqlite with its mode."""
    os.close(open_file(root, path, os.O_RDONLY))


def prepare_db(root: str, path: str) -> None:
    """Before sqlite opens `path` by name: the file exists (with the store's mode, which
    sqlite gives its `-wal` and `-shm` files too) and none of them is a link.

    An existing database is only looked at, never opened: closing any descriptor of a file
    drops every POSIX lock this process holds on it, so an open-and-close here would silently
    release the locks of a connection this process already has on the database (another
    `Store` of the same directory), and a writer elsewhere could then damage what it reads.
    """
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        create(root, path)
    else:
        if stat.S_ISLNK(found.st_mode):
            raise _refused(path)
        if not stat.S_ISREG(found.st_mode):
            raise not_a_regular_file(path)
        if stat.S_IMODE(found.st_mode) != modes(root)[1] and found.st_uid == os.geteuid():
            _fit_mode_by_name(root, path)
    for suffix in ("-wal", "-shm", "-journal"):
        if os.path.islink(path + suffix):
            raise _refused(path + suffix)


def not_a_regular_file(path: str) -> StorageError:
    """The error for a database path that holds something else (a directory), of which
    sqlite says only "disk I/O error"."""
    return StorageError(f"{path} is not a regular file: move it away")


def _refused(path: str, what: str = "a symbolic link") -> StorageError:
    return StorageError(
        f"{path} is {what}: gc-beads never writes through one; move it away (gc doctor lists links)"
    )


def _mkdir(root: str, directory: str) -> None:
    mode = modes(root)[0]
    try:
        os.mkdir(directory, mode)
    except FileExistsError:
        return  # made meanwhile by another process: checked by the caller's lstat
    if mode != PRIVATE[0]:
        os.chmod(directory, mode)  # the umask may have taken the group's bits


def _fit_mode_by_name(root: str, path: str) -> None:
    # By name: a file this process may hold sqlite locks on is never opened here. The caller
    # saw a regular file (Linux has no lchmod); the store's own directories hold it.
    try:
        os.chmod(path, modes(root)[1])
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EACCES, errno.EROFS):
            raise


def _fit_mode(root: str, fd: int) -> None:
    # A file made before modes existed (0644) gets the store's mode at its next write; a new
    # one may have lost the group's bits to the umask.
    try:
        os.fchmod(fd, modes(root)[1])
    except OSError as exc:
        # Another member's file in a group store (its owner's writes fix it), or a read-only
        # store, which is read as it is.
        if exc.errno not in (errno.EPERM, errno.EACCES, errno.EROFS):
            raise
