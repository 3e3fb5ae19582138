"""Where a command stands: the working directory, checked before a store is looked for from
it (it may have been removed under the process, or be named by bytes that are not text)."""

from __future__ import annotations

import os

from beads.errors import InvalidInput, NotFound


def start_directory(cwd: str | None = None) -> str:
    """Where a search for a store starts: `cwd` (a hook payload's, say), else the working
    directory, made absolute. NotFound when the working directory was removed under the
    process; InvalidInput for a name no file system accepts (a NUL in it)."""
    try:
        start = os.path.abspath(cwd or os.getcwd())
    except FileNotFoundError:
        raise NotFound(
            "the current directory no longer exists: cd to a store, or name one with --beads-dir"
        ) from None
    if "\0" in start:
        raise InvalidInput(f"a directory name cannot hold a NUL character: {start!r}")
    return start


def check_text_path(path: str | os.PathLike[str]) -> None:
    """InvalidInput unless `path` is text (UTF-8): a store's files are named in SQL and in
    its settings by their paths, which must be text."""
    text = os.fspath(path)
    if text.isascii():
        return
    from beads.records.record import check_text  # only a path beyond ASCII needs it

    shown = text.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    check_text(f"the path {shown}", text)
