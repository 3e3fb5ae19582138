"""YAML codec: one bead per file, canonical field order, `|` block scalars for multi-line text.

ruamel.yaml's safe mode is used with its C emitter and parser when ruamel.yaml.clib is
installed (about 5x faster than the pure-Python round-trip mode; comments are never kept
because files are always rewritten by gc in canonical form).
"""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
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
    """The bead's file content."""
    return dump_data(bead.to_dict())


def load_bead(raw: bytes | str, *, what: str = "bead file", max_body: int | None = None) -> Bead:
    """Parse and validate a bead file."""
    return Bead.from_dict(load_data(raw, what=what), max_body=max_body)
