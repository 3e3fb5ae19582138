"""YAML codec: one bead per file, canonical field order, `|` block scalars for multi-line text.

ruamel.yaml's safe mode is used with its C emitter and parser when ruamel.yaml.clib is
installed (about 5x faster than the pure-Python round-trip mode; comments are never kept
because files are always rewritten by gc in canonical form).

`dump_bead` and `load_data` first try the direct writer and reader (`beads.directyaml`: the
bytes libyaml writes for the common shape of a bead, without ruamel); anything else goes
through ruamel. ruamel itself is imported only when a file must be parsed or a bead is not of
that shape: importing it costs a command about as much as the rest of a mail send.
"""

from __future__ import annotations

import functools
import io
from typing import TYPE_CHECKING, Any

from beads import directyaml
from beads.directyaml import MAX_DEPTH
from beads.errors import InvalidInput
from beads.record import Bead

if TYPE_CHECKING:
    from ruamel.yaml import YAML


_STR_TAG = "tag:yaml.org,2002:str"


def _represent_str(representer: Any, data: str) -> Any:
    # Multi-line text reads best as a literal block; the emitter falls back to a quoted
    # style by itself when the text cannot be a block (trailing spaces, special characters).
    style = "|" if "\n" in data else None
    return representer.represent_scalar(_STR_TAG, data, style=style)


def _share_tags(representer: Any) -> None:
    """Give every node of one tag the same `Tag` object.

    ruamel makes a new `Tag` per node and decodes its name again each time (about half of
    the time of a dump); a shared `Tag` decodes once. Tags are never changed on output.
    """
    from ruamel.yaml.tag import Tag

    shared: dict[str, Tag] = {}

    def shared_tag(tag: Any) -> Any:
        if isinstance(tag, str):
            found = shared.get(tag)
            if found is None:
                found = shared[tag] = Tag(suffix=tag)
            return found
        return tag

    for name in ("represent_scalar", "represent_sequence", "represent_mapping"):
        method = getattr(representer, name)
        setattr(representer, name, lambda tag, *a, _m=method, **k: _m(shared_tag(tag), *a, **k))


def _make_yaml() -> YAML:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=False)
    yaml.default_flow_style = False
    yaml.allow_unicode = True
    yaml.width = 4096  # don't fold long lines: a one-word change stays a one-line diff
    yaml.representer.sort_base_mapping_type_on_output = False
    yaml.representer.add_representer(str, _represent_str)
    # A container (or text) met twice is written in full each time, never as `&id001` and
    # `*id001`: files of the store never hold anchors or aliases, which `load_data` refuses.
    yaml.representer.ignore_aliases = lambda data: True
    _share_tags(yaml.representer)
    return yaml


_YAML: YAML | None = None


def _yaml() -> YAML:
    """The configured ruamel instance, made on first use."""
    global _YAML
    if _YAML is None:
        _YAML = _make_yaml()
    return _YAML


@functools.cache
def _fast() -> bool:
    """Whether the direct reader and writer may be used: they mirror libyaml, so without
    ruamel.yaml.clib (its C emitter, the module `_ruamel_yaml`) ruamel's pure emitter
    decides. Found once, without importing either (and not at import: it costs a command
    a search of the path)."""
    import importlib.util

    return importlib.util.find_spec("_ruamel_yaml") is not None


def dump_data(data: Any) -> bytes:
    """Serialise plain data (mappings keep their order) to UTF-8 YAML."""
    out = io.StringIO()
    _yaml().dump(data, out)
    return out.getvalue().encode("utf-8")


def load_data(raw: bytes | str, *, what: str = "YAML") -> Any:
    """Parse YAML; malformed input raises InvalidInput naming `what`.

    Text in the canonical shape gc writes is read by `directyaml.load` (the direct reader);
    anything else by ruamel. Anchors and aliases (`&a`, `*a`) are refused: gc never writes
    them, and a few hundred bytes of nested aliases expand into gigabytes (an "alias bomb").
    Without them, what a parse builds is bounded by the size of its input; nesting is bounded
    by `MAX_DEPTH` (libyaml's composer recurses in C: 30,000 `[` crash the process).
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeError:
        raise InvalidInput(f"{what} is not valid UTF-8") from None
    fast = directyaml.load(text) if _fast() else None
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
        detail = " ".join(str(exc).split())
        raise InvalidInput(f"{what} is not valid YAML: {detail}") from None
    except (ValueError, TypeError, RecursionError) as exc:
        # What the constructor refuses outside YAMLError: an integer past Python's 4,300
        # digits, a date like 2026-02-31, an unhashable mapping key, nesting past the stack.
        raise InvalidInput(f"{what} is not valid YAML: {type(exc).__name__}: {exc}") from None


_SCAN_ABOVE = 256 * 1024  # characters: past this, nesting by indentation alone could be deep


def _may_be_hostile(text: str) -> bool:
    """Whether `text` may hold an anchor, an alias or deep nesting: only then are its events
    scanned before the parse (a second pass that a common bead never pays)."""
    if "&" in text or "*" in text or len(text) > _SCAN_ABOVE:
        return True
    return text.count("[") + text.count("{") + text.count("- ") + text.count("? ") > MAX_DEPTH


def _check_events(text: str, what: str) -> None:
    """Raise InvalidInput if the YAML `text` has an anchor or an alias, or nests deeper than
    MAX_DEPTH. The parser's events tell (it keeps its own stack: no recursion, no tree)."""
    from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent

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
    """The bead's file content (the same bytes as `dump_data(bead.to_dict())`)."""
    data = bead.to_dict()
    fast = directyaml.dump(data) if _fast() else None
    return fast if fast is not None else dump_data(data)


def load_bead(raw: bytes | str, *, what: str = "bead file", max_body: int | None = None) -> Bead:
    """Parse and validate a bead file."""
    return Bead.from_dict(load_data(raw, what=what), max_body=max_body)
