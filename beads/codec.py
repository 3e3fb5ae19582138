"""YAML codec: one bead per file, canonical field order, `|` block scalars for multi-line text.

ruamel.yaml's safe mode is used with its C emitter and parser when ruamel.yaml.clib is
installed (about 5x faster than the pure-Python round-trip mode; comments are never kept
because files are always rewritten by gc in canonical form).

`dump_bead` first tries `_fast_dump`, a direct writer for the common shape of a bead (single
line text, ints, booleans, nulls, nested mappings, lists of scalars) that produces exactly
the bytes ruamel would; anything else (multi-line text, floats, control characters, very long
lines, shared containers) goes through ruamel. ruamel's representer costs ~0.8 ms a bead,
the direct writer ~40 us: it dominated a batch of 10,000 changed beads (`gc gate check`).
"""

from __future__ import annotations

import io
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.resolver import Resolver
from ruamel.yaml.tag import Tag

from beads.errors import InvalidInput
from beads.record import Bead


def _represent_str(representer: Any, data: str) -> Any:
    # Multi-line text reads best as a literal block; the emitter falls back to a quoted
    # style by itself when the text cannot be a block (trailing spaces, special characters).
    style = "|" if "\n" in data else None
    return representer.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _share_tags(representer: Any) -> None:
    """Give every node of one tag the same `Tag` object.

    ruamel makes a new `Tag` per node and decodes its name again each time (about half of
    the time of a dump); a shared `Tag` decodes once. Tags are never changed on output.
    """
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
    yaml = YAML(typ="safe", pure=False)
    yaml.default_flow_style = False
    yaml.allow_unicode = True
    yaml.width = 4096  # don't fold long lines: a one-word change stays a one-line diff
    yaml.representer.sort_base_mapping_type_on_output = False
    yaml.representer.add_representer(str, _represent_str)
    _share_tags(yaml.representer)
    return yaml


_YAML = _make_yaml()
# The direct writer mirrors libyaml: without ruamel.yaml.clib, ruamel's pure emitter decides.
_FAST = _YAML.Emitter.__name__ == "CEmitter"


def dump_data(data: Any) -> bytes:
    """Serialise plain data (mappings keep their order) to UTF-8 YAML."""
    out = io.StringIO()
    _YAML.dump(data, out)
    return out.getvalue().encode("utf-8")


def load_data(raw: bytes | str, *, what: str = "YAML") -> Any:
    """Parse YAML; malformed input raises InvalidInput naming `what`."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return _YAML.load(text)
    except UnicodeDecodeError:
        raise InvalidInput(f"{what} is not valid UTF-8") from None
    except YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise InvalidInput(f"{what} is not valid YAML: {detail}") from None


def dump_bead(bead: Bead) -> bytes:
    """The bead's file content (the same bytes as `dump_data(bead.to_dict())`)."""
    data = bead.to_dict()
    fast = _fast_dump(data) if _FAST else None
    return fast if fast is not None else dump_data(data)


# -- the direct writer ------------------------------------------------------------------------
#
# It mirrors the choices of libyaml's emitter (ruamel's C emitter) for the values it accepts,
# and gives up (None) on everything else. Block mappings indent by 2, sequences in a mapping
# are not indented (`key:` then `- item` in the key's column), empty containers are `[]` and
# `{}`. A scalar is plain when libyaml's analysis allows it and the resolver would read it
# back as text; otherwise single-quoted. tests/test_codec.py checks it byte for byte against
# ruamel with hypothesis.

# One line of characters libyaml prints as they are with allow_unicode (no tabs, no control
# characters, no line breaks: U+0085, U+2028 and U+2029 are breaks to YAML; U+FEFF is not
# printable, and ruamel escapes everything past U+FFFF); anything else needs a double-quoted
# or block scalar, left to ruamel.
_SIMPLE_LINE = re.compile(r"[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]+")
# Far below the emitter's width (4096) even nested 8 deep under 64-character keys, so
# libyaml never folds the line.
_MAX_SCALAR = 1000
_MAX_KEY = 100  # libyaml writes keys past 128 characters as `? key`
# Indicators that forbid a plain scalar when they come first (libyaml's analyze_scalar).
_FIRST_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`")
_STR_TAG = "tag:yaml.org,2002:str"


def _implicit_rules() -> dict[str | None, tuple[re.Pattern[str], ...]]:
    # The implicit rules of the resolver ruamel's C dumper uses for typ="safe" (YAML 1.2),
    # by first character: plain text one of them matches would be read back as something
    # else, so it is quoted. Read once here: `Resolver.resolve` builds `Tag` objects per call.
    table = Resolver().yaml_implicit_resolvers
    return {
        first: tuple(regexp for tag, regexp in rules if tag != _STR_TAG)
        for first, rules in table.items()
    }


_IMPLICIT = _implicit_rules()
_IMPLICIT_ANY = _IMPLICIT.get(None, ())
# gc's own times (beads.record.TIME_RE) are YAML timestamps, so always quoted; knowing that
# saves the resolver's three number and time patterns on the three or four times of a bead.
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
_SCALARS: dict[str, str | None] = {}  # text -> how it is written (None: ruamel must do it)
_SCALARS_MAX = 8192


def _text_scalar(text: str) -> str | None:
    """How libyaml writes `text` in block context, or None when it is not a simple case."""
    known = _SCALARS.get(text, "")
    if known != "":
        return known
    if text == "":
        return "''"
    if _STAMP.fullmatch(text):
        return f"'{text}'"  # not cached: times are rarely written twice
    if len(text) > _MAX_SCALAR or not _SIMPLE_LINE.fullmatch(text):
        out = None
    elif _plain_allowed(text):
        out = text
    else:
        out = "'" + text.replace("'", "''") + "'"
    if len(_SCALARS) >= _SCALARS_MAX:
        _SCALARS.clear()  # ids and times rarely repeat: keep the cache small, not clever
    _SCALARS[text] = out
    return out


def _plain_allowed(text: str) -> bool:
    # libyaml: no leading or trailing space, no indicator that means something in block
    # context, no document marker; then the resolver must read the plain text back as a str.
    first = text[0]
    if first == " " or text[-1] == " " or first in _FIRST_INDICATORS:
        return False
    if first in "?:-" and (len(text) == 1 or text[1] == " "):
        return False
    if text.startswith(("---", "...")) or ": " in text or " #" in text or text[-1] == ":":
        return False
    for regexp in _IMPLICIT.get(first, ()) + _IMPLICIT_ANY:
        if regexp.match(text):
            return False
    return True


def _fast_scalar(value: Any) -> str | None:
    kind = type(value)
    if kind is str:
        return _text_scalar(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    return None  # floats (ruamel's float repr is subtle), subclasses, anything else


def _fast_dump(data: dict[str, Any]) -> bytes | None:
    """`data` (a mapping) as ruamel would dump it, or None when it is not a simple case."""
    lines: list[str] = []
    if not _fast_mapping(data, "", lines, set()):
        return None
    lines.append("")
    return "\n".join(lines).encode("utf-8")


def _fast_mapping(data: dict[str, Any], indent: str, lines: list[str], seen: set[int]) -> bool:
    # A container met twice would be written by ruamel as an anchor and an alias.
    if id(data) in seen:
        return False
    seen.add(id(data))
    for key, value in data.items():
        if type(key) is not str or len(key) > _MAX_KEY:
            return False
        name = _text_scalar(key)
        if name is None or name != key:
            return False  # a key that needs quotes: leave it to ruamel
        kind = type(value)
        if kind is dict:
            if not value:
                lines.append(f"{indent}{name}: {{}}")
                continue
            lines.append(f"{indent}{name}:")
            if not _fast_mapping(value, indent + "  ", lines, seen):
                return False
        elif kind is list:
            if not value:
                lines.append(f"{indent}{name}: []")
                continue
            if id(value) in seen:
                return False
            seen.add(id(value))
            lines.append(f"{indent}{name}:")
            for item in value:
                text = _fast_scalar(item)
                if text is None:
                    return False  # nested containers in lists: ruamel
                lines.append(f"{indent}- {text}")
        else:
            text = _fast_scalar(value)
            if text is None:
                return False
            lines.append(f"{indent}{name}: {text}")
    return True


def load_bead(raw: bytes | str, *, what: str = "bead file", max_body: int | None = None) -> Bead:
    """Parse and validate a bead file."""
    return Bead.from_dict(load_data(raw, what=what), max_body=max_body)
