"""The store repository's hooks (`.git/hooks/NAME`): read, and written whole."""

from __future__ import annotations

import os
from pathlib import Path

HOOKS = "hooks"


def read_hook(git_dir: Path, name: str) -> tuple[str | None, bool, bool]:
    """`(text, is_link, executable)` of hook `name`: its text is None when it is absent or
    unreadable (not a file); a symbolic link is reported as one, never followed for writing."""
    path = git_dir / HOOKS / name
    try:
        text = path.read_text(errors="replace") if path.is_file() else None
    except OSError:
        text = None
    return text, path.is_symlink(), os.access(path, os.X_OK)


def write_hook(git_dir: Path, name: str, text: str) -> None:
    """Write hook `name` whole (a temporary file renamed into place), executable by whoever
    may write the repository: its owner, and its group when the directory is the group's."""
    path = git_dir / HOOKS / name
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{name}.{os.getpid()}.tmp")
    temp.write_text(text)
    temp.chmod(0o770 if git_dir.stat().st_mode & 0o070 == 0o070 else 0o700)
    os.replace(temp, path)
