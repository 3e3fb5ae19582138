"""This machine's approvals of a store's guarded settings: one small JSON file per store,
outside the store and the project (`beads.settings.trust` says which settings are guarded).

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

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

FORMAT = 1
MAX_LOG = 200  # the oldest entries go first; the first-run entry is always kept
MAX_NAME = 200  # a file name longer than this is cut and given a checksum of the whole path
MAX_FILE = 4 * 1024 * 1024  # an approval file larger than this is damage, not approvals
MAX_VALUE = 64 * 1024  # an approved key and value encoded larger than this is not recorded
MAX_APPROVED = 1024 * 1024  # the approved values of one store, encoded, at most
MAX_LOGGED = 1024  # a value in a log entry encoded larger than this is logged by its size
MAX_CHANGES = 100  # the changes one log entry lists at most


class Damaged(Exception):
    """An approval file that exists but cannot be taken for approvals (unreadable, too
    large, damaged, another store's): never a first run, the caller fails closed."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


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
    file yet (a first run). `Damaged` when a file is there that cannot be read or taken for
    this store's approvals: that is never a first run."""
    path = approval_path(root)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Damaged(path, exc.strerror or "cannot be opened") from None
    try:
        raw = os.read(fd, MAX_FILE + 1)
    except OSError as exc:
        raise Damaged(path, exc.strerror or "cannot be read") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_FILE:
        raise Damaged(path, f"larger than {MAX_FILE} bytes")
    try:
        data = json.loads(raw)
    except ValueError:
        raise Damaged(path, "not valid JSON") from None
    if not (
        isinstance(data, dict)
        and data.get("store") == store_key(root)
        and isinstance(data.get("approved"), dict)
        and isinstance(data.get("log"), list)
    ):
        raise Damaged(path, "not the approvals of this store")
    return data


def bounded(approved: dict[str, Any]) -> dict[str, Any]:
    """`approved` without the values too large to record (`MAX_VALUE` each, `MAX_APPROVED`
    in all, in key order): what is left out stays unapproved, never approved wholesale."""
    out: dict[str, Any] = {}
    total = 0
    for key in sorted(approved):
        size = _size([key, approved[key]])
        if size > MAX_VALUE or total + size > MAX_APPROVED:
            continue
        out[key] = approved[key]
        total += size
    return out


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
        try:
            current = read(root)
            first = current is None
        except Damaged:  # replaced by what a person approves now: never a first run
            current, first = None, False
        data = current or {"format": FORMAT, "store": store_key(root), "approved": {}, "log": []}
        approved = bounded(approved)
        if keys is None or current is None:
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
            "changes": [_logged(change) for change in changes[:MAX_CHANGES]],
        }
        if len(changes) > MAX_CHANGES:
            entry["more_changes"] = len(changes) - MAX_CHANGES
        if commit:
            entry["commit"] = commit
        log = [*data["log"], entry]
        if len(log) > MAX_LOG:  # keep the first entry: when approvals began on this machine
            log = [log[0], *log[len(log) - MAX_LOG + 1 :]]
        data["log"] = log
        encoded = json.dumps(data, indent=1, sort_keys=True).encode()
        while len(encoded) > MAX_FILE // 2 and len(data["log"]) > 2:  # bounded: never damage
            del data["log"][1]
            encoded = json.dumps(data, indent=1, sort_keys=True).encode()
        _write(approval_path(root), encoded)
        return data
    finally:
        os.close(lock_fd)


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, sort_keys=True))


def _logged(change: dict[str, Any]) -> dict[str, Any]:
    """A change as a log entry keeps it: a large value by its size only."""
    out = dict(change)
    for side in ("approved", "committed"):
        size = _size(out.get(side))
        if size > MAX_LOGGED:
            out[side] = f"({size} bytes, not logged)"
    key = str(out.get("key"))
    if len(key) > MAX_LOGGED:
        out["key"] = key[:MAX_LOGGED] + "..."
    return out


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
