"""JSON a person gives as text (`--payload-json`, `--artifact-metadata-json`, the value of
`gc config set`): read one way everywhere. A key given twice in one object is refused, where
`json.loads` would keep the last one without a word; so is JSON nested deeper than the parser
can follow.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from beads.errors import InvalidInput
from beads.records.record import shown


def unique_keys(what: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """The `object_pairs_hook` of `json.loads` for JSON given as `what`: each object as a
    dict, or InvalidInput naming `what` and the key when an object holds a key twice."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) < len(pairs):  # a key twice: name the first one repeated
            seen: set[str] = set()
            for key, _value in pairs:
                if key in seen:
                    raise InvalidInput(f"{what} has the key {shown(key)} twice")
                seen.add(key)
        return found

    return unique


def loads(text: str, what: str) -> Any:
    """The JSON value of `text`, given by the user as `what` (an option, a setting's value).

    Raise ValueError (json's own, saying where) when `text` is not JSON, for the caller to
    word or to take the text as it is; InvalidInput naming `what` when an object holds a key
    twice, or the value nests too deeply to read."""
    try:
        return json.loads(text, object_pairs_hook=unique_keys(what))
    except RecursionError:  # the decoder recurses once per nested array or object
        raise InvalidInput(f"{what} nests too deeply") from None


def parse_json(text: str, what: str) -> Any:
    """The JSON value of `text` (`loads`), or InvalidInput naming `what` in one line."""
    try:
        return loads(text, what)
    except ValueError as exc:
        raise InvalidInput(f"{what} is not valid JSON: {exc}") from None
