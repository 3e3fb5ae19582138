"""The delivery layer's settings in `config.yaml`: `delivery` and `hooks` (what a drain
injects into a session). Registered with `beads.settings.registry` as the `inbox` package is
imported."""

from __future__ import annotations

from beads.errors import InvalidInput
from beads.settings.registry import count, duration, register_section, stream_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def context_chars(value: Any) -> None:
    """`hooks.max_context_chars`: an integer 1000..1000000."""
    if type(value) is not int or not 1000 <= value <= 1_000_000:
        raise InvalidInput("must be an integer 1000..1000000")


register_section(
    "delivery",
    {},
    {
        "delivery.max_items": count,
        "delivery.session_idle_timeout": duration,
        "delivery.nudge_interval": duration,
        "delivery.nudge_timeout": duration,
        "delivery.keep_delivered": duration,
        "delivery.reconcile_interval": duration,
        "delivery.broadcast_ttl": duration,
        "delivery.nats.stream": stream_name,
        "delivery.nats.max_age": duration,
        "delivery.nats.dedup_window": duration,
        "delivery.nats.max_msgs": count,
    },
    position=2,  # after mail's
)
register_section("hooks", {}, {"hooks.max_context_chars": context_chars}, position=2)
