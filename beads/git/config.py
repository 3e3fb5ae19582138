"""The store's git config (`.git/config`): read cheaply, edited through dulwich's parser.

It holds what belongs to one machine and is never synced: the remotes (as git writes them,
so plain git sees them too), the machine-local settings, the marker section that tells the
store's repository from any other. What those values mean is decided above this package;
here they are only read and written.
"""

from __future__ import annotations

import os

from beads.errors import Conflict, StorageError
from beads.faults import fault

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path  # not at run time: the hooks' gate never loads pathlib
    from typing import Any, TypeVar

    T = TypeVar("T")

CONFIG = "config"
# How long a writer of the config waits for another's lock on it (held for one write: a
# read, a parse and a write of a small file) before a Conflict, and how often it looks.
LOCK_WAIT = 5.0
LOCK_POLL = 0.005


def read_values(git_dir: Path) -> dict[str, str]:
    """The raw `section.key` values of the config: a line-oriented read of the keys gc
    writes (no parser, no dulwich: the hooks read it). `[delivery "nats"]` holds the keys
    `delivery.nats.*` (a subsection keeps its case)."""
    try:
        text = (git_dir / CONFIG).read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            name, _, sub = line.strip("[]").strip().partition(" ")
            section = name.lower() + (f".{sub.strip().strip(chr(34))}" if sub else "")
            continue
        key, sep, value = line.partition("=")
        if sep and section:
            out[f"{section}.{key.strip().lower()}"] = value.strip().strip('"')
    return out


def has_remote(git_dir: Path) -> bool:
    """Whether the config names a remote (cheap: no parser, no dulwich)."""
    try:
        text = (git_dir / CONFIG).read_text(errors="replace")
    except OSError:
        return False
    return any(line.strip().lower().startswith("[remote ") for line in text.splitlines())


def has_section(git_dir: Path | str, section: bytes) -> bool:
    """Whether the config holds the section `[section]` (the store's marker), read as bytes."""
    try:
        with open(os.path.join(git_dir, CONFIG), "rb") as handle:
            text = handle.read()
    except OSError:
        return False
    return b"[" + section + b"]" in text


def _open(git_dir: Path) -> Any:
    from dulwich.config import ConfigFile

    path = git_dir / CONFIG
    try:
        return ConfigFile.from_path(str(path))
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise StorageError(f"{path} does not parse: {exc}") from None


def _edit(git_dir: Path, change: Callable[[Any], T]) -> T:
    """Apply `change` to the config as it is once its lock file (`config.lock`, git's) is
    ours, write the result and return what `change` returned. Two writers at once (two
    commands making the machine id on first use, a `gc config set --local` beside them): the
    second waits for the first, then edits what the first wrote, so neither fails nor undoes
    the other. A lock held past `LOCK_WAIT` is a Conflict naming it.

    The lock is taken and renamed here, as `beads.git.refs` does for the branch: dulwich
    1.0's `GitFile.close` removes the lock file's name again after renaming it into place,
    which deletes the lock a second writer took meanwhile."""
    import io
    import time

    path = git_dir / CONFIG
    lock = git_dir / (CONFIG + ".lock")
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            if time.monotonic() >= deadline:
                raise Conflict(
                    f"{lock} is held by another process writing the store's git config; "
                    "retry (a lock left by a killed git or gc is removed by hand)"
                ) from None
            time.sleep(LOCK_POLL)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            config = _open(git_dir)
            result = change(config)
            written = io.BytesIO()
            config.write_to_file(written)
            handle.write(written.getvalue())
            handle.flush()
            os.fsync(handle.fileno())
        fault("config-written")
        os.replace(lock, path)
    except BaseException as exc:
        try:
            os.unlink(lock)
        except OSError:
            pass
        if isinstance(exc, OSError):  # a full disk, say: the config is as it was
            raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise
    return result


def remotes(git_dir: Path) -> dict[str, str]:
    """The remotes the config names: name -> url, sorted by name."""
    config = _open(git_dir)
    out = {}
    for section in config.sections():
        if len(section) == 2 and section[0] == b"remote":
            try:
                out[section[1].decode()] = config.get(section, b"url").decode()
            except KeyError:
                continue
    return dict(sorted(out.items()))


def add_remote(git_dir: Path, name: str, url: str, fetch: str) -> None:
    """Write `[remote "name"]` with its url and fetch refspec."""

    def add(config: Any) -> None:
        section = (b"remote", name.encode())
        config.set(section, b"url", url.encode())
        config.set(section, b"fetch", fetch.encode())

    _edit(git_dir, add)


def remove_remote(git_dir: Path, name: str) -> bool:
    """Remove `[remote "name"]`; False when there was none."""
    section = (b"remote", name.encode())
    if section not in _open(git_dir).sections():
        return False

    def remove(config: Any) -> bool:
        if section not in config.sections():  # removed meanwhile by another writer
            return False
        del config[section]
        return True

    return _edit(git_dir, remove)


def set_value(git_dir: Path, section: tuple[bytes, ...], name: bytes, value: bytes | None) -> None:
    """Set (None: unset) one value of the config."""

    def set_(config: Any) -> None:
        if value is None:
            try:
                del config[section][name]
            except KeyError:
                pass
        else:
            config.set(section, name, value)

    _edit(git_dir, set_)


def set_default(
    git_dir: Path,
    section: tuple[bytes, ...],
    name: bytes,
    value: bytes,
    keep: Callable[[bytes], bool] = bool,
) -> bytes:
    """Set one value of the config unless it holds one that `keep` accepts (any that is not
    empty, by default); the value that stands."""

    def set_unless_set(config: Any) -> bytes:
        try:
            found = config.get(section, name)
        except KeyError:
            found = None
        if isinstance(found, bytes) and keep(found):
            return found
        config.set(section, name, value)
        return value

    return _edit(git_dir, set_unless_set)


def adopt(git_dir: Path, *, branch: bytes, marker: bytes, check: Callable[[Any], bool]) -> bool:
    """Give a bare repository the settings and `marker` of a store when `check` accepts the
    object store and the commit its `branch` holds (`check(read_path)`, where `read_path(p)`
    is the content of `p` at that commit or None); False, untouched, otherwise."""
    if not (git_dir / "objects").is_dir():  # no repository: dulwich need not load
        return False
    from dulwich.object_store import tree_lookup_path
    from dulwich.repo import Repo

    try:
        repo = Repo(str(git_dir))
    except Exception:  # not a repository at all: dulwich raises several kinds
        return False
    try:
        head = repo.refs.as_dict().get(branch)
        if head is None or not repo.bare:
            return False
        tree = repo.object_store[head].tree  # type: ignore[union-attr]

        def read_path(path: str) -> bytes | None:
            try:
                _mode, sha = tree_lookup_path(repo.object_store.__getitem__, tree, path.encode())
                return repo.object_store[sha].as_raw_string()
            except Exception:  # absent, or not a file: dulwich raises several kinds
                return None

        if not check(read_path):
            return False
        config = repo.get_config()
        config.set((b"gc",), b"auto", b"0")
        config.set((b"core",), b"logAllRefUpdates", True)
        config.set((marker,), b"format", b"1")
        config.write_to_path()
        return True
    except Exception:  # no branch, a damaged object: not a store
        return False
    finally:
        repo.close()
