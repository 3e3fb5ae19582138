"""Times as the store writes them (RFC 3339, UTC, microseconds) and durations as users type them."""

from __future__ import annotations

import re
import time

from beads.errors import InvalidInput

TYPE_CHECKING = False  # importing typing costs a hook ~7 ms
if TYPE_CHECKING:
    from datetime import datetime

STAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?")
_UNITS = {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def now_stamp() -> str:
    """The current time as the store writes it."""
    return stamp_at(time.time())


def stamp_at(seconds: float) -> str:
    """A Unix time as the store writes it (no datetime objects: this runs in every hook)."""
    whole = int(seconds)
    micros = int(round((seconds - whole) * 1_000_000))
    if micros == 1_000_000:
        whole, micros = whole + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{micros:06d}Z"


def to_stamp(moment: datetime) -> str:
    from datetime import UTC

    return moment.astimezone(UTC).strftime(STAMP_FORMAT)


def parse_duration(text: str) -> float:
    """Seconds in `90`, `45s`, `10m`, `2h`, `3d`, `1w` or `250ms`."""
    match = _DURATION_RE.fullmatch(text.strip())
    if not match:
        raise InvalidInput(f"invalid duration {text!r}: use e.g. 45s, 10m, 2h, 3d")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_time(text: str) -> str:
    """A stamp for `text`: an RFC 3339 time, a date, or a duration ago (`2h` = two hours ago)."""
    from datetime import UTC, datetime, timedelta

    value = text.strip()
    if _DURATION_RE.fullmatch(value):
        return to_stamp(datetime.now(UTC) - timedelta(seconds=parse_duration(value)))
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"invalid time {text!r}: use 2026-01-31, 2026-01-31T12:00:00Z or 2h"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return to_stamp(moment)
