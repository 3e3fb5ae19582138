"""YAML codec: one bead per file, canonical field order, `|` block scalars for multi-line text.

Every file gc writes is written by `beads.records.yamlwrite`, whose bytes are the canonical ones (no
emitter, no ruamel: the bytes do not depend on what is installed). Text in that canonical
form is read back by `beads.records.yamlread`; anything else (a file edited by hand, pushed by
another tool) by ruamel.yaml's safe loader, with its C parser when ruamel.yaml.clib is
installed. ruamel itself is imported only when such a file must be parsed: importing it
costs a command about as much as the rest of a mail send. The reader is imported when a
first file is read: a command that only writes (a send, a claim) never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from beads.errors import InvalidInput
from beads.records import yamlwrite
from beads.records.record import Bead

if TYPE_CHECKING:
    from ruamel.yaml import YAML


_YAML: YAML | None = None


def _yaml() -> YAML:
    """The ruamel loader for text that is not canonical, made on first use."""
    global _YAML
    if _YAML is None:
        from ruamel.yaml import YAML

        _YAML = YAML(typ="safe", pure=False)
    return _YAML


def dump_data(data: dict[str, Any]) -> bytes:
    """Serialise a mapping of plain data (mappings keep their order) to canonical YAML."""
    return yamlwrite.dump(data)


def load_data(raw: bytes | str, *, what: str = "YAML") -> Any:
    """Parse YAML; malformed input raises InvalidInput naming `what`.

    Canonical text (what gc writes) is read by `yamlread.load`; anything else by ruamel.
    Anchors and aliases (`&a`, `*a`) are refused: gc never writes them, and a few hundred
    bytes of nested aliases expand into gigabytes (an "alias bomb").
    Without them, what a parse builds is bounded by the size of its input; nesting is bounded
    by `MAX_DEPTH` (libyaml's composer recurses in C: 30,000 `[` crash the process).
    """
    from beads.records import yamlread

    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeError:
        raise InvalidInput(f"{what} is not valid UTF-8") from None
    fast = yamlread.load(text)
    if fast is not None:
        return fast
    from ruamel.yaml.error import YAMLError

    try:
        if _may_be_hostile(text):
            _check_events(text, what)
        return _yaml().load(text)
    except UnicodeError:  # undecodable bytes, or lone surrogates in a str
        raise InvalidInput(f"{what} is not valid UTF-8") from None
    except YAMLError as exc:
        # ruamel's advice on switching a check off in its own API is nothing a reader of
        # gc's line can act on: left out.
        detail = " ".join(str(exc).split()).split(" To suppress this check", 1)[0]
        raise InvalidInput(f"{what} is not valid YAML: {detail}") from None
    except (ValueError, TypeError, RecursionError) as exc:
        # What the constructor refuses outside YAMLError: an integer past Python's 4,300
        # digits, a date like 2026-02-31, an unhashable mapping key, nesting past the stack.
        raise InvalidInput(f"{what} is not valid YAML: {type(exc).__name__}: {exc}") from None


_SCAN_ABOVE = 256 * 1024  # characters: past this, nesting by indentation alone could be deep


def _may_be_hostile(text: str) -> bool:
    """Whether `text` may hold an anchor, an alias or deep nesting: only then are its events
    scanned before the parse (a second pass that a common bead never pays)."""
    from beads.records.yamlread import MAX_DEPTH

    if "&" in text or "*" in text or len(text) > _SCAN_ABOVE:
        return True
    return text.count("[") + text.count("{") + text.count("- ") + text.count("? ") > MAX_DEPTH


def _check_events(text: str, what: str) -> None:
    """Raise InvalidInput if the YAML `text` has an anchor or an alias, or nests deeper than
    MAX_DEPTH. The parser's events tell (it keeps its own stack: no recursion, no tree)."""
    from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent

    from beads.records.yamlread import MAX_DEPTH

    depth = 0
    for event in _yaml().parse(text):
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
            raise InvalidInput(
                f"{what} uses a YAML anchor or alias (&name, *name); beads never contain them"
            )
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise InvalidInput(f"{what} nests deeper than {MAX_DEPTH} levels")
        elif isinstance(event, CollectionEndEvent):
            depth -= 1


def dump_bead(bead: Bead) -> bytes:
    """The bead's file content: its canonical bytes (those of `dump_data(bead.to_dict())`)."""
    return yamlwrite.dump(bead.to_dict())


def load_bead(raw: bytes | str, *, what: str = "bead file", max_body: int | None = None) -> Bead:
    """Parse and validate a bead file."""
    return Bead.from_dict(load_data(raw, what=what), max_body=max_body)
