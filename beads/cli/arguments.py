"""The command line's text in any locale: arguments checked as UTF-8 text once, and the
paths among them handed to the file system in the form it names them by."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import click

from beads.errors import InvalidInput
from beads.records.record import shown


def check_arguments(args: Sequence[str]) -> list[str]:
    """The command line's arguments as text; refuse bytes that are not UTF-8, or NUL
    (README: text is valid UTF-8 without NUL).

    Python hands undecodable bytes over as lone surrogates, which fail later at the first
    encode (a commit, a database row): checked once here, every option of every command is
    covered. In a locale whose encoding is ASCII (`LC_ALL=C` without Python's UTF-8 mode)
    every byte past ASCII comes so, valid UTF-8 too (`é`): such an argument is decoded again
    from its bytes, as UTF-8. A path among them is handed to the file system in its bytes
    again (`fs_path`).
    """
    checked: list[str] = []
    for position, arg in enumerate(args, 1):
        if "\x00" in arg:  # never from a real command line; main(argv) from Python could
            raise InvalidInput(f"argument {position} contains a NUL character")
        if not arg.isascii():
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError:
                try:
                    arg = os.fsencode(arg).decode("utf-8")
                except UnicodeError:
                    raise InvalidInput(
                        f"argument {position} is not valid UTF-8: {shown(arg)}"
                    ) from None
        checked.append(arg)
    return checked


def fs_path(text: str) -> str:
    """`text` (a path given as text) as the file system's functions take it: its UTF-8
    bytes decoded as Python decodes file names. The same text in a UTF-8 locale; in an ASCII
    one, the form Python gave the argument in (`check_arguments`), which names the same file."""
    if text.isascii():
        return text
    return os.fsdecode(text.encode("utf-8", "surrogateescape"))


class FsPath(click.Path):
    """click's Path for an argument that names a file or directory: converted to `fs_path`
    first, so a name past ASCII is found in any locale, as it was given."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(fs_path(value) if isinstance(value, str) else value, param, ctx)
