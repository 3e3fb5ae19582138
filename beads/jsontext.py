"""JSON a person gives as text (`--payload-json`, `--artifact-metadata-json`, the value of
`gc config set`): read one way everywhere. A key given twice in one object is refused, where
`json.loads` would keep the last one without a word; so is JSON nested deeper than the parser
can follow.
"""

from __future__ import annotations

import json
from typing import Any

from beads.errors import InvalidInput
from beads.records.record import shown


def loads(text: str, what: str) -> Any:
    """The JSON value of `text`, given by the user as `what` (an option, a setting's value).

    Raise ValueError (json's own, saying where) when `text` is not JSON, for the caller to
    word or to take the text as it is; InvalidInput naming `what` when an object holds a key
    twice, or the value nests too deeply to read."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, value in pairs:
            if key in found:
                raise InvalidInput(f"{what} has the key {shown(key)} twice")
            found[key] = value
        return found

    try:
        return json.loads(text, object_pairs_hook=unique)
    except RecursionError:  # the decoder recurses once per nested array or object
        raise InvalidInput(f"{what} nests too deeply") from None


def parse_json(text: str, what: str) -> Any:
    """The JSON value of `text` (`loads`), or InvalidInput naming `what` in one line."""
    try:
        return loads(text, what)
    except ValueError as exc:
        raise InvalidInput(f"{what} is not valid JSON: {exc}") from None
