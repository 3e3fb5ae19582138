"""A user's JSON settings file (Claude Code's `.claude/settings.json`, an `.mcp.json`): read
as one JSON object, replaced whole.

These files belong to the user and to other programs, so a file gc cannot read is an error to
report, never something to overwrite, and a write replaces the file atomically, keeping its mode.
A symbolic link (a dotfile manager's) is followed: the file it points to is replaced, and the link
stays. Only a regular file is read or replaced: a device (`/dev/null`), a FIFO or a directory at
the path is refused before anything opens it (opening a FIFO would block).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from beads.errors import InvalidInput, StorageError


def _regular_mode(path: Path, verb: str) -> int | None:
    """The mode of the file at `path` (links followed); None when there is none. Anything but
    a regular file there is refused (InvalidInput), `verb` saying what gc meant to do."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidInput(f"cannot {verb} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise InvalidInput(f"cannot {verb} {path}: not a regular file")
    return mode


def load_object(path: Path) -> dict[str, Any]:
    """The JSON object in `path`; an empty dict when the file is missing or blank."""
    if _regular_mode(path, "read") is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"{path} is not valid JSON ({exc}); fix it first") from None
    except RecursionError:  # the decoder recurses once per nested array or object
        raise InvalidInput(f"{path} is not valid JSON (nested too deeply); fix it first") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} must hold a JSON object")
    return data


def save_object(path: Path, data: dict[str, Any], *, make_parent: bool = False) -> None:
    """Replace `path` with `data`, indented, atomically and keeping its mode (a new file gets
    the umask's). A link is followed: its target is replaced, beside itself, and the link kept.
    Its directory is made with `make_parent`; else a missing one is the caller's mistake
    (InvalidInput)."""
    target = Path(os.path.realpath(path))
    if not make_parent and not target.parent.is_dir():
        raise InvalidInput(f"cannot write {path}: no directory {target.parent}")
    existing = _regular_mode(target, "write")
    temp = None
    try:
        if existing is not None:
            mode = existing & 0o7777
        else:
            umask = os.umask(0o022)
            os.umask(umask)
            mode = 0o666 & ~umask
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        os.fchmod(fd, mode)  # mkstemp makes it 0600: a shared settings file stays readable
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except OSError as exc:
        if temp is not None:  # never leave a half-written copy beside the user's file
            Path(temp).unlink(missing_ok=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StorageError(f"no space left on device: cannot write {path}") from None
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
