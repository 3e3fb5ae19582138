"""A character-class pattern compiled on first use, with an ASCII twin for ASCII text.

A class reaching past Latin-1 costs the re compiler a quarter to half a millisecond to compile
(it walks each range of the Basic Multilingual Plane one character at a time), and most text
gc handles is ASCII: a command that meets only ASCII text compiles the small twin alone.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable


# Unicode's bidirectional formatting characters (the Arabic letter mark, the left-to-right
# and right-to-left marks, embeddings, overrides and isolates), as the body of a character
# class: they reorder the text around them, so whatever shows stored text (the CLI's text
# replies, the web page) shows each as an escape, never acting.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"


class CharClass:
    """A pattern over any text (`full`) and its twin for ASCII text (`ascii`), which must match
    exactly what `full` matches in ASCII text; each compiled on first use. Offers `search`,
    `findall` and `sub` of a compiled pattern, choosing the twin by the text."""

    __slots__ = ("_ascii", "_ascii_source", "_full", "_source")

    def __init__(self, source: str, ascii_source: str) -> None:
        self._source, self._ascii_source = source, ascii_source
        self._full: re.Pattern[str] | None = None
        self._ascii: re.Pattern[str] | None = None

    @property
    def full(self) -> re.Pattern[str]:
        """The pattern for any text."""
        if self._full is None:
            self._full = re.compile(self._source)
        return self._full

    @property
    def ascii(self) -> re.Pattern[str]:
        """The pattern for ASCII text."""
        if self._ascii is None:
            self._ascii = re.compile(self._ascii_source)
        return self._ascii

    def compiled(self) -> bool:
        """Whether the full pattern was compiled (ASCII text alone never compiles it)."""
        return self._full is not None

    def search(self, text: str) -> re.Match[str] | None:
        """`re.Pattern.search` over `text`."""
        return (self.ascii if text.isascii() else self.full).search(text)

    def findall(self, text: str) -> list[str]:
        """`re.Pattern.findall` over `text`."""
        return (self.ascii if text.isascii() else self.full).findall(text)

    def sub(self, replace: Callable[[re.Match[str]], str], text: str) -> str:
        """`re.Pattern.sub` over `text`."""
        return (self.ascii if text.isascii() else self.full).sub(replace, text)
