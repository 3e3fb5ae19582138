"""Where a command stands: the working directory, checked before a store is looked for from
it (it may have been removed under the process, or be named by bytes that are not text)."""

from __future__ import annotations

import os
import sys

from beads.errors import InvalidInput, NotFound


def start_directory(cwd: str | None = None) -> str:
    """Where a search for a store starts: `cwd` (a hook payload's, say), else the working
    directory, made absolute. NotFound when the working directory was removed under the
    process; InvalidInput for a name no file system accepts (a NUL in it, or a character no
    file name encodes)."""
    try:
        start = os.path.abspath(cwd or os.getcwd())
    except FileNotFoundError:
        raise NotFound(
            "the current directory no longer exists: cd to a store, or name one with --beads-dir"
        ) from None
    if "\0" in start:
        raise InvalidInput(f"a directory name cannot hold a NUL character: {start!r}")
    try:
        os.fsencode(start)
    except UnicodeError:  # a lone surrogate (a hook payload's `"\ud800"`): no name encodes it
        raise InvalidInput(f"a directory name must be text: {start!r}") from None
    return start


def check_text_path(path: str | os.PathLike[str]) -> None:
    """InvalidInput unless `path` is text (UTF-8): a store's files are named in SQL and in
    its settings by their paths, which must be text."""
    text = os.fspath(path)
    if text.isascii():
        return
    from beads.records.record import check_text  # only a path beyond ASCII needs it

    shown = text.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    try:
        check_text(f"the path {shown}", text)
    except InvalidInput as refusal:
        try:
            name = os.fsencode(text).decode("utf-8")
        except UnicodeError:
            raise refusal from None  # bytes that are not UTF-8: text in no locale
        # UTF-8 bytes that a locale whose encoding is not UTF-8 (`LC_ALL=C`) cannot name.
        raise InvalidInput(
            f"the path {name} is UTF-8, which this locale's encoding "
            f"({sys.getfilesystemencoding()}) cannot name: use a UTF-8 locale (LC_ALL=C.UTF-8)"
        ) from None
