"""`config.yaml`: the store's settings, committed like every bead.

Sections: `store` (id prefix, body limit), `agents` (name: rig, nudge argv), `rigs`, and
those the layers above register (`beads.settings.registry.register_section`). Each layer reads its
own
section. `check_config` checks what opening a store needs (the format, plain data, registered
sections as mappings, the `store` section); `config_problems` checks the values of the
settings every layer registered: `gc config set` refuses a bad new value, `gc doctor` reports
the bad values of an older config.yaml, which still opens.
"""

from __future__ import annotations

import copy
import math
import os

from beads.errors import InvalidInput, NotFound
from beads.files import SHARED_VALUES
from beads.records.ids import PREFIX_RULE, check_prefix
from beads.records.record import MAX_INT, check_text, shown
from beads.settings.registry import (  # noqa: F401 - the settings' names, also offered from here
    DEFAULTS,
    FORMAT,
    FREE_FORM,
    SETTINGS,
    STALE_LOCK_SECONDS,
    TEMPLATE_FIELDS,
    check_argv_template,
    register_section,
)

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

CONFIG_PATH = "config.yaml"


class NewerFormat(InvalidInput):
    """config.yaml of a format newer than this gc-beads understands: the store is refused
    (never half-read), where other problems of a committed config.yaml are only reported."""


def default_config(prefix: str = "gc") -> dict[str, Any]:
    """A fresh store's configuration."""
    config = copy.deepcopy(DEFAULTS)
    config["store"]["prefix"] = check_prefix(prefix)
    return config


def check_config(data: Any) -> dict[str, Any]:
    """Validate a parsed `config.yaml` and fill in missing sections; raise InvalidInput."""
    if not isinstance(data, dict):
        raise InvalidInput("config.yaml must be a mapping")
    fmt = data.get("format")
    if type(fmt) is not int or fmt < 1:
        raise InvalidInput("config.yaml has no valid 'format' (expected format: 1)")
    if fmt > FORMAT:
        raise NewerFormat(
            f"this store has format {fmt}, newer than this gc-beads understands ({FORMAT}); "
            "upgrade gc-beads"
        )
    _check_plain(data, "", 0)
    config = copy.deepcopy(DEFAULTS)
    for key, value in data.items():
        if key in DEFAULTS and key != "format" and not isinstance(value, dict | None):
            raise InvalidInput(f"config section {key!r} must be a mapping, not {shown(value)}")
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key].update(value)
        elif value is not None or key not in DEFAULTS:
            config[key] = value
    prefix = config["store"]["prefix"]
    try:
        check_prefix(prefix)
    except InvalidInput:  # said as the setting to fix, as the other settings' refusals are
        raise InvalidInput(f"store.prefix must be {PREFIX_RULE}, not {shown(prefix)}") from None
    if config["store"].get("shared", "private") not in SHARED_VALUES:
        raise InvalidInput("store.shared must be private (the default) or group")
    limit = config["store"]["max_body_bytes"]
    if type(limit) is not int or limit <= 0:
        raise InvalidInput("store.max_body_bytes must be a positive integer")
    stale = config["store"]["stale_lock_seconds"]
    if type(stale) not in (int, float) or not 0 < stale <= 86400:
        raise InvalidInput("store.stale_lock_seconds must be a number of seconds (0 to 86400]")
    view_policy(config)
    return config


VIEW_MODES = ("full", "recent", "off")
DEFAULT_VIEW = "full"  # people `cat` and `grep` the view; `recent` and `off` save disk
DEFAULT_VIEW_DAYS = 14
MAX_VIEW_DAYS = 36500


def view_policy(config: dict[str, Any]) -> tuple[str, int]:
    """`(store.view, store.view_days)` of a config, defaults filled in; InvalidInput for a
    value outside the documented ones."""
    section = config.get("store") or {}
    mode = section.get("view", DEFAULT_VIEW)
    if mode not in VIEW_MODES:
        raise InvalidInput(f"store.view must be one of {', '.join(VIEW_MODES)}, not {shown(mode)}")
    days = section.get("view_days", DEFAULT_VIEW_DAYS)
    if type(days) is not int or not 1 <= days <= MAX_VIEW_DAYS:
        raise InvalidInput(f"store.view_days must be a number of days 1..{MAX_VIEW_DAYS}")
    return mode, days


def parse_config(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """A committed `config.yaml` read and checked: `(settings, None)`, or `(None, why)` when
    it is invalid (doctor reports it); one of a newer format raises `NewerFormat`."""
    from beads.records.codec import load_data  # lazy: reads through the index never parse YAML

    try:
        return check_config(load_data(raw, what=CONFIG_PATH)), None
    except NewerFormat:
        raise
    except InvalidInput as exc:
        return None, exc.message


MAX_CONFIG_DEPTH = 16


def _check_plain(value: Any, where: str, depth: int) -> None:
    """Config holds what YAML and JSON both carry: text keys, text, 64-bit integers, finite
    numbers, booleans, null, lists and mappings, nested at most MAX_CONFIG_DEPTH deep."""
    if depth > MAX_CONFIG_DEPTH:
        raise InvalidInput(f"config {where} nests deeper than {MAX_CONFIG_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"config key {shown(key)} in {where or 'config'} is not text")
            check_text(f"config key {shown(key)}", key)
            _check_plain(item, f"{where}.{key}" if where else key, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_plain(item, where, depth + 1)
    elif isinstance(value, str):
        check_text(f"config {where}", value)
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):
        if not -MAX_INT - 1 <= value <= MAX_INT:
            raise InvalidInput(f"config {where} is an integer outside 64 bits")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"config {where} must be a finite number")
    else:
        raise InvalidInput(f"config {where} must be text, a number, a boolean, a list or a mapping")


def mail_provider_spec(mail_settings: Callable[[], dict[str, Any]]) -> str:
    """The mail provider to use: `$GC_MAIL`, else the `[mail] provider` of the city's
    `city.toml` (Gas City's order; trusted as the project's own file), else `mail.provider` of
    the config (read, through `mail_settings`, only then), else `beadmail`. Here rather than
    in `mail` so that the hook, which must not import `mail`, resolves it the same way."""
    return (
        os.environ.get("GC_MAIL") or city_mail_provider() or mail_settings().get("provider")
        or "beadmail"
    )  # fmt: skip


def city_mail_provider() -> str | None:
    """The `[mail] provider` of the city this command runs in (`beads.city`), if any."""
    from beads.city import current_city

    city = current_city()
    if city is None:
        return None
    provider = city.section("mail").get("provider")
    if provider is not None and not isinstance(provider, str):
        raise InvalidInput(f"{city.path}/city.toml: [mail] provider must be text")
    return provider or None


UNSET: Any = object()  # `with_setting`'s value that removes the key


def with_setting(config: dict[str, Any], key: str, value: Any = UNSET) -> dict[str, Any]:
    """A copy of `config` with the dotted `key` (`agents.mayor.nudge`) set to `value`, or
    removed when `value` is UNSET (NotFound when it is not there). The new value must pass
    its documented check (`config_problems`); other keys that an older gc left invalid do
    not stop the change (`gc doctor` reports them)."""
    parts = check_text("config key", key).split(".")
    if not all(parts) or len(key) > 200:
        raise InvalidInput(f"invalid config key {shown(key)}")
    changed = copy.deepcopy(config)
    node = changed
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            if value is UNSET:
                raise NotFound(f"no setting {key}")
            node[part] = {}
        node = node[part]
    if value is not UNSET:
        unknown = _unknown_settings(parts, value)
        if unknown:
            raise InvalidInput(
                f"unknown setting {', '.join(unknown)} (the settings are listed in "
                "docs/config.md; gc config get shows the current ones)"
            )
        node[parts[-1]] = value
    elif parts[-1] in node:
        del node[parts[-1]]
    else:
        raise NotFound(f"no setting {key}")
    for where, problem in config_problems(changed, key):
        raise InvalidInput(f"config {where} {problem}")
    return changed


def _unknown_settings(parts: list[str], value: Any) -> list[str]:
    """The dotted keys that setting `parts` to `value` would add and no SETTINGS pattern
    names (a section or an agent's mapping is checked key by key)."""

    def fits(pattern: list[str]) -> bool:
        return all(p in ("*", part) for part, p in zip(parts, pattern, strict=False))

    patterns = [pattern.split(".") for pattern in SETTINGS]
    if any(len(parts) > len(p) and fits(p) for p in map(str.split, FREE_FORM, ".")):
        return []
    if not any(len(parts) <= len(p) and fits(p) for p in patterns):
        return [".".join(parts)]
    deeper = any(len(parts) < len(p) and fits(p) for p in patterns)
    if not deeper or not isinstance(value, dict):
        return []
    return [key for name, item in value.items() for key in _unknown_settings([*parts, name], item)]


def config_problems(config: dict[str, Any], under: str = "") -> list[tuple[str, str]]:
    """`(dotted key, what is wrong)` for each documented setting with a bad value (only the
    keys at or under `under`, when given), each naming the value. Unknown keys are not problems."""
    problems: list[tuple[str, str]] = []
    for pattern, check in SETTINGS.items():
        for key, value in _matches(config, pattern.split("."), ""):
            if under and not (key == under or key.startswith(under + ".")):
                if not under.startswith(key + "."):
                    continue
            try:
                check(value)
            except InvalidInput as exc:
                problems.append((key, f"is {shown(value)}: {exc.message}"))
    return problems


def _matches(node: Any, parts: list[str], prefix: str) -> list[tuple[str, Any]]:
    if not parts:
        return [(prefix, node)]
    if not isinstance(node, dict):
        return []
    head, rest = parts[0], parts[1:]
    names = list(node) if head == "*" else [head] if head in node else []
    return [
        found
        for name in names
        for found in _matches(node[name], rest, f"{prefix}.{name}" if prefix else name)
    ]
