"""This machine's approvals of a store's guarded settings: one small JSON file per store,
outside the store and the project (`beads.trust` says which settings are guarded).

Where: `$GC_TRUST_DIR`, else `$XDG_DATA_HOME/gc-beads/trust/`, else
`~/.local/share/gc-beads/trust/` (as direnv keeps its allow list in the user's data folder);
never in `.beads/`, so nothing a sync, a push or a clone brings can approve itself. A file is
named by the store's path (its `.beads/` directory, resolved) and records that path, the
approved values (dotted key -> value) and the log of approvals. It is written whole to a new
file and renamed into place (mode 0600, folder 0700), under an advisory lock, so a reader
never meets half a file and two writers never lose each other's log entry.

Read on every hook (PreToolUse included): a stat-free open and one `json.loads`, no heavy
imports.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # importing typing costs a hook ~7 ms
if TYPE_CHECKING:
    from typing import Any

FORMAT = 1
MAX_LOG = 200  # the oldest entries go first; the first-run entry is always kept
MAX_NAME = 200  # a file name longer than this is cut and given a checksum of the whole path
MAX_FILE = 4 * 1024 * 1024  # an approval file larger than this is damage, not approvals


def trust_dir() -> str:
    """The folder of this user's approvals (`$GC_TRUST_DIR` for tests and odd setups)."""
    chosen = os.environ.get("GC_TRUST_DIR")
    if chosen:
        return os.path.abspath(chosen)
    data = os.environ.get("XDG_DATA_HOME")
    if not data or not os.path.isabs(data):  # the XDG rule: a relative value is ignored
        data = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "gc-beads", "trust")


_keys: dict[str, str] = {}  # resolved once a process: readers ask on every settings read


def store_key(root: str | os.PathLike[str]) -> str:
    """The resolved path of a store's `.beads/` directory: what its approvals are filed by."""
    given = os.fspath(root)
    found = _keys.get(given)
    if found is None:
        found = _keys[given] = os.path.realpath(given)
    return found


def approval_path(root: str | os.PathLike[str]) -> str:
    """The approval file of the store at `root` (its `.beads/` directory)."""
    key = store_key(root)
    name = key.strip("/").replace("%", "%25").replace("/", "%2F") or "%2F"
    if len(name) > MAX_NAME:
        import binascii

        name = f"{name[: MAX_NAME - 9]}-{binascii.crc32(key.encode()):08x}"
    return os.path.join(trust_dir(), name + ".json")


def read(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The approvals of this store (`{"store", "approved", "log"}`), or None when there is no
    file yet (or one of another store, or damaged: the caller records anew)."""
    path = approval_path(root)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        raw = os.read(fd, MAX_FILE + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        data = json.loads(raw) if len(raw) <= MAX_FILE else None
    except ValueError:
        return None
    if not (
        isinstance(data, dict)
        and data.get("store") == store_key(root)
        and isinstance(data.get("approved"), dict)
        and isinstance(data.get("log"), list)
    ):
        return None
    return data


def stamp(root: str | os.PathLike[str]) -> tuple[int, int] | None:
    """What changes when the approvals change (`(mtime_ns, inode)` of the file): a reader that
    cached the settings in force reads them again when this moves."""
    try:
        found = os.stat(approval_path(root), follow_symlinks=False)
    except OSError:
        return None
    return found.st_mtime_ns, found.st_ino


def record(
    root: str | os.PathLike[str],
    approved: dict[str, Any],
    *,
    how: str,
    changes: list[dict[str, Any]],
    commit: str | None = None,
    keys: list[str] | None = None,
) -> dict[str, Any]:
    """Approve `approved` (dotted key -> value) for this store and log it; `keys`: approve
    only those keys (and the keys under them), leaving the others' approvals as they were.
    Returns the file's new content. OSError when the folder cannot be written."""
    import fcntl
    import time

    folder = trust_dir()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    lock_fd = os.open(approval_path(root) + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                      | os.O_CLOEXEC, 0o600)  # fmt: skip
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        current = read(root)
        first = current is None
        data = current or {"format": FORMAT, "store": store_key(root), "approved": {}, "log": []}
        if keys is None or first:
            data["approved"] = dict(approved)
        else:
            for key in list(data["approved"]):
                if _under(key, keys):
                    del data["approved"][key]
            data["approved"].update({k: v for k, v in approved.items() if _under(k, keys)})
        entry: dict[str, Any] = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "how": "first run" if first else how,
            "by": _user(),
            "changes": changes,
        }
        if commit:
            entry["commit"] = commit
        log = [*data["log"], entry]
        if len(log) > MAX_LOG:  # keep the first entry: when approvals began on this machine
            log = [log[0], *log[len(log) - MAX_LOG + 1 :]]
        data["log"] = log
        _write(approval_path(root), json.dumps(data, indent=1, sort_keys=True).encode())
        return data
    finally:
        os.close(lock_fd)


def _under(key: str, keys: list[str]) -> bool:
    return any(key == k or key.startswith(k + ".") or k.startswith(key + ".") for k in keys)


def _user() -> str:
    """Who approved, for the log: the login name of this process."""
    for name in ("USER", "LOGNAME"):
        if os.environ.get(name):
            return os.environ[name]
    return str(os.getuid())


def _write(path: str, data: bytes) -> None:
    """Replace `path` by a new file holding `data` (mode 0600), flushed to disk first."""
    folder = os.path.dirname(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.unlink(tmp)  # left by a killed writer of this pid
    except FileNotFoundError:
        pass
    fd = os.open(tmp, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
