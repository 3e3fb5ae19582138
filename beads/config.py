"""`config.yaml`: the store's settings, committed like every bead.

Sections: `store` (id prefix, body limit), `mail`, `agents` (name: rig, nudge argv), `rigs`,
`delivery`, `gates`, `hooks`. Each layer reads its own section; this module checks only the
format and the `store` section.
"""

from __future__ import annotations

import copy

from beads.errors import InvalidInput
from beads.files import SHARED_VALUES
from beads.ids import check_prefix
from beads.record import DEFAULT_MAX_BODY_BYTES

TYPE_CHECKING = False  # importing typing costs a hook ~7 ms
if TYPE_CHECKING:
    from typing import Any

FORMAT = 1
CONFIG_PATH = "config.yaml"
# A git lock file (`*.lock` under .git) older than this many seconds, found by a writer that
# holds the write lock, was left by a dead writer and is removed (`store.stale_lock_seconds`).
STALE_LOCK_SECONDS = 5

_DEFAULTS: dict[str, Any] = {
    "format": FORMAT,
    "store": {
        "prefix": "gc",
        "max_body_bytes": DEFAULT_MAX_BODY_BYTES,
        "stale_lock_seconds": STALE_LOCK_SECONDS,
    },
    "mail": {"provider": "beadmail", "strict_recipients": False},
    "agents": {},
    "rigs": {},
    "delivery": {},
    "gates": {},
    "hooks": {},
}


def default_config(prefix: str = "gc") -> dict[str, Any]:
    """A fresh store's configuration."""
    config = copy.deepcopy(_DEFAULTS)
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
        raise InvalidInput(
            f"this store has format {fmt}, newer than this gc-beads understands ({FORMAT}); "
            "upgrade gc-beads"
        )
    config = copy.deepcopy(_DEFAULTS)
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key].update(value)
        else:
            config[key] = value
    check_prefix(config["store"]["prefix"])
    if config["store"].get("shared", "private") not in SHARED_VALUES:
        raise InvalidInput("store.shared must be private (the default) or group")
    limit = config["store"]["max_body_bytes"]
    if type(limit) is not int or limit <= 0:
        raise InvalidInput("store.max_body_bytes must be a positive integer")
    stale = config["store"]["stale_lock_seconds"]
    if type(stale) not in (int, float) or not 0 < stale <= 86400:
        raise InvalidInput("store.stale_lock_seconds must be a number of seconds (0 to 86400]")
    return config
