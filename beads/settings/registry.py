"""The settings of `config.yaml`: a registry every layer adds its own section(s) to.

Each layer documents the keys it reads: its defaults (what a new store's `config.yaml`
starts with) and, per dotted key (`*` = any one name), the check of its value. This layer
registers its own (`store`, `agents`, `rigs`) here; the layers above register theirs in
their own `settings` module, which the program imports, so this layer names none of them.
A store opened without them works: a section nobody registered is kept as it is, never
refused, and its keys are not checked.

The value checks below are offered to every layer for its settings.
"""

from __future__ import annotations

import re

from beads.errors import InvalidInput
from beads.records.record import AGENT_RE, DEFAULT_MAX_BODY_BYTES, MAX_INT, NAME, shown

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

    Check = Callable[[Any], object]

FORMAT = 1
# A git lock file (`*.lock` under .git) older than STALE_LOCK_SECONDS, found by a writer that
# holds the write lock, was left by a dead writer and is removed (`store.stale_lock_seconds`).
from beads.git.refs import STALE_LOCK_SECONDS  # noqa: E402

# Section -> its defaults, in the order a new `config.yaml` lists them.
DEFAULTS: dict[str, Any] = {"format": FORMAT}
# Section -> its place in that order (lower first, ties in the order of registration): the
# file reads the same whichever layer a program happened to import first.
_POSITIONS: dict[str, int] = {"format": -1}
# Dotted key (`*` = any one name) -> its check, as the sections were registered.
SETTINGS: dict[str, Check] = {}
# Settings whose value is a mapping of the user's own keys (a session gate's spec).
FREE_FORM: list[str] = []


def register_section(
    name: str,
    defaults: Mapping[str, Any] | None,
    settings: Mapping[str, Check],
    *,
    free_form: Iterable[str] = (),
    position: int = 0,
) -> None:
    """Declare the section `name` of `config.yaml`: its `defaults` (None: a section not
    written in a new store's file), its settings (dotted keys under `name`, each with the
    check of its value), those of them whose value is a mapping of the user's own keys, and
    its `position` among the sections of a new store's file (the store layer's own are 0).
    Registering a section again replaces it (a module reloaded)."""
    if not name or "." in name or name == "format":
        raise ValueError(f"not a section name: {name!r}")
    for key in [*settings, *free_form]:
        if key.split(".", 1)[0] != name:
            raise ValueError(f"setting {key!r} is not in section {name!r}")
    if defaults is not None:
        DEFAULTS[name] = dict(defaults)
        _POSITIONS[name] = position
        ordered = sorted(DEFAULTS.items(), key=lambda section: _POSITIONS[section[0]])
        DEFAULTS.clear()
        DEFAULTS.update(ordered)
    for key in [k for k in SETTINGS if k.split(".", 1)[0] == name]:
        del SETTINGS[key]
    SETTINGS.update(settings)
    FREE_FORM[:] = [k for k in FREE_FORM if k.split(".", 1)[0] != name] + list(free_form)


# -- checks of a value, for every layer's settings ------------------------------------------


def duration(value: Any) -> None:
    """A duration: `30s`, `10m`, `8h`, or a number of seconds."""
    from beads.records.times import parse_duration

    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInput("must be a duration such as 30s, 10m or 8h")
    if isinstance(value, str):
        parse_duration(value)
    elif not 0 <= value <= MAX_INT:
        raise InvalidInput("must be a number of seconds, not negative")


def count(value: Any) -> None:
    """An integer 1..1000000."""
    if type(value) is not int or not 1 <= value <= 1_000_000:
        raise InvalidInput("must be an integer 1..1000000")


def flag(value: Any) -> None:
    """`true` or `false` (not `yes`, `on`, `1`: YAML 1.1 and 1.2 disagree on them)."""
    if type(value) is not bool:
        raise InvalidInput("must be true or false")


def text(value: Any) -> None:
    """Non-empty text."""
    if not isinstance(value, str) or not value:
        raise InvalidInput("must be non-empty text")


def stream_name(value: Any) -> None:
    """A JetStream stream name (`delivery.nats.stream`): no dots, wildcards or spaces."""
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", value):
        raise InvalidInput("must be a stream name: letters, digits, _ and - (at most 64)")


def mapping(value: Any) -> None:
    """A mapping."""
    if not isinstance(value, dict):
        raise InvalidInput("must be a mapping")


def names(value: Any) -> None:
    """A list of non-empty names."""
    if not isinstance(value, list) or not all(isinstance(n, str) and n for n in value):
        raise InvalidInput("must be a list of names")


def rig_name(value: Any) -> None:
    """A rig's name, the `rig` of an agent's full name `rig/name`."""
    if not isinstance(value, str) or not re.fullmatch(NAME, value):
        raise InvalidInput("must be a rig name: letters, digits, '.', '_' or '-' (at most 64)")


def keys_named(pattern: str, what: str) -> Check:
    """The check of a mapping whose keys are each a `what` (`pattern`, matched whole): the
    names of `agents`, `rigs` or `gates.session`, which mail and the gates read as such."""
    whole = re.compile(pattern)

    def check(value: Any) -> None:
        if not isinstance(value, dict):
            raise InvalidInput(f"must be a mapping, each key {what}")
        bad = next((k for k in value if not isinstance(k, str) or not whole.fullmatch(k)), None)
        if bad is not None:
            raise InvalidInput(f"names {shown(bad)}, which is not {what}")

    check.__doc__ = f"A mapping, each key {what}."
    return check


def agent_names(value: Any) -> None:
    """A list of agent names."""
    if not isinstance(value, list) or not all(
        isinstance(n, str) and AGENT_RE.fullmatch(n) for n in value
    ):
        raise InvalidInput("must be a list of agent names")


TEMPLATE_FIELDS = ("session", "agent", "text")


def check_argv_template(template: Any, fields: tuple[str, ...] = TEMPLATE_FIELDS) -> list[str]:
    """Return `template` if it is an argv template: a non-empty list of strings whose only
    substitutions are plain `{field}`s of `fields` (`{{` and `}}` for literal braces).

    A format spec or conversion (`{text:>3000000000}`, `{text!r}`), an attribute or index
    (`{text.x}`) or an unknown name is refused: a width alone made a nudge allocate 11 GB.
    """
    import string

    if not (isinstance(template, list) and template and all(isinstance(a, str) for a in template)):
        raise InvalidInput("must be a list of strings (an argv template)")
    allowed = ", ".join("{" + name + "}" for name in fields)
    for part in template:
        try:
            parsed = list(string.Formatter().parse(part))
        except ValueError as exc:
            raise InvalidInput(f"{shown(part)}: {exc} (write {{{{ and }}}} for braces)") from None
        for _literal, name, spec, conversion in parsed:
            if name is None:
                continue
            if name not in fields or spec or conversion:
                raise InvalidInput(
                    f"{shown(part)}: only plain {allowed} are substituted "
                    "(write {{ and }} for literal braces)"
                )
    return template


def _opened(value: Any) -> None:
    """The `store` settings: `check_config` checks them whenever a config is committed."""


# -- this layer's own sections -----------------------------------------------------------------

register_section(
    "store",
    {
        "prefix": "gc",
        "max_body_bytes": DEFAULT_MAX_BODY_BYTES,
        "stale_lock_seconds": STALE_LOCK_SECONDS,
    },
    {
        "store.prefix": _opened,
        "store.max_body_bytes": _opened,
        "store.stale_lock_seconds": _opened,
        "store.shared": _opened,
        "store.view": _opened,
        "store.view_days": _opened,
    },
)
register_section("agents", {}, {"agents": keys_named(AGENT_RE.pattern, "an agent name"),
                                 "agents.*": mapping, "agents.*.nudge": check_argv_template,
                                 "agents.*.rig": rig_name})  # fmt: skip
register_section("rigs", {}, {"rigs": keys_named(NAME, "a rig name"), "rigs.*": agent_names})
