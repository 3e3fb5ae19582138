"""Delivery's part of `config.yaml`: the `delivery.*` settings and agents' names
(`DeliveryConfig`)."""

from __future__ import annotations

from collections.abc import Callable

from beads.errors import InvalidInput
from beads.records.agents import canonical_agent, rig_of, spellings
from beads.records.times import parse_duration

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

MAX_CONTEXT_CHARS = 10_000  # `hooks.max_context_chars`: Claude Code caps a hook's context
DEFAULTS: dict[str, Any] = {
    "max_items": 20,  # per drain; priority 0 is never deferred
    "session_idle_timeout": "8h",  # a session silent this long is no longer live
    "nudge_interval": "60s",  # an agent is nudged at most once per interval
    "nudge_timeout": "10s",  # a nudge command running longer is killed
    # Settled (delivered, expired, moot) items lose their content after this (seed 001: 24 h);
    # their rows, which hold the dedup keys, stay at least `keep_keys`.
    "keep_delivered": "24h",
    "reconcile_interval": "10m",  # a hook reconciles every producer and reaps at most this often
    "broadcast_ttl": "24h",  # a broadcast (`--to all`, `--rig`) given no TTL lasts this long
}


# The NATS stream's limits (`delivery.nats.*`, the same on every machine; seed 001).
NATS_DEFAULTS: dict[str, Any] = {"max_age": "3d", "dedup_window": "2m", "max_msgs": 10_000}


def nats_setting(config: dict[str, Any], name: str) -> float:
    """A `delivery.nats.<name>` setting of `config`: durations as seconds, `max_msgs` a
    count."""
    shared = (config.get("delivery") or {}).get("nats") or {}
    value = shared.get(name, NATS_DEFAULTS[name])
    if name == "max_msgs":
        if type(value) is not int or value < 1:
            raise InvalidInput("delivery.nats.max_msgs must be a positive integer")
        return value
    return float(value) if isinstance(value, int | float) else parse_duration(str(value))


class DeliveryConfig:
    """The store's configuration as delivery reads it: config.yaml, settings, agent names."""

    def __init__(self, read: Callable[[], dict[str, Any]], *, fresh: bool = False) -> None:
        """`read()` gives the store's config.yaml; with `fresh` it is called at each use (a
        caller's own cached reader: `Store.config`), else once."""
        self._read = read
        self._fresh = fresh
        self._config: dict[str, Any] | None = None

    def store_config(self) -> dict[str, Any]:
        """The store's `config.yaml` (read from the index: no YAML parser on this path)."""
        if self._fresh:
            return self._read()
        if self._config is None:
            self._config = self._read()
        return self._config

    def setting(self, name: str) -> Any:
        """A `delivery.<name>` setting; durations come back as seconds."""
        value = (self.store_config().get("delivery") or {}).get(name, DEFAULTS[name])
        if name == "max_items":
            if type(value) is not int or value < 1:
                raise InvalidInput("delivery.max_items must be a positive integer")
            return value
        return float(value) if isinstance(value, int | float) else parse_duration(str(value))

    def keep_keys(self) -> float:
        """How long a settled item's row (its dedup key) is kept: `delivery.keep_delivered`,
        and at least the stream's max age plus its dedup window, so a message the stream
        still holds, delivered again, finds its key and is not handed out twice."""
        config = self.store_config()
        stream = nats_setting(config, "max_age") + nats_setting(config, "dedup_window")
        return max(self.setting("keep_delivered"), stream)

    def context_cap(self) -> int:
        """`hooks.max_context_chars`: the most a drain's text may hold (Claude Code cuts a
        hook's injected context near 10,000 characters)."""
        hooks = self.store_config().get("hooks") or {}
        value = hooks.get("max_context_chars", MAX_CONTEXT_CHARS)
        if type(value) is not int or not 1000 <= value <= 1_000_000:
            raise InvalidInput("hooks.max_context_chars must be an integer 1000..1000000")
        return value

    def agent_of(self, name: str) -> str:
        """The full name of agent `name` (`beads.records.agents`: `mayor` of rig `gastown` is
        `gastown/mayor`): every name delivery stores or looks up goes through it."""
        return canonical_agent(name, self.store_config())

    def spellings(self, name: str) -> tuple[str, ...]:
        """Every name agent `name` may be stored under, its full name first."""
        return spellings(name, self.store_config())

    def rig_of(self, name: str) -> str | None:
        """The rig of agent `name` as config.yaml gives it, or None."""
        return rig_of(name, self.store_config())
