"""Times as the store writes them (RFC 3339, UTC, microseconds) and durations as users type them."""

from __future__ import annotations

import re
import time

from beads.errors import InvalidInput
from beads.records.record import shown

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from datetime import datetime

STAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
# Compiled by `re` on first use: a command given no duration never compiles it.
_DURATION = r"([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d|w)?"
_UNITS = {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# Longer than any wait, TTL or look-back a user means, and far inside what datetime, sqlite
# and JSON take: past it a typo like `99999999999999d` is refused, not an overflow.
MAX_DURATION = 100 * 365 * 86400
# The last second a stamp can show (9999-12-31T23:59:59Z): a stored time past it (or before
# the epoch) could never be written as a stamp, and every listing of it would fail.
LATEST_TIME = 253402300799


def check_time(name: str, value: object) -> None:
    """Refuse a Unix time (seconds) that is not a number between the epoch and the year 9999."""
    if type(value) not in (int, float) or not 0 <= value <= LATEST_TIME:  # NaN fails too
        raise InvalidInput(f"{name} must be a time in Unix seconds between 1970 and 9999")


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
    """Seconds in `90`, `45s`, `10m`, `2h`, `3d`, `1w` or `250ms` (at most 100 years)."""
    match = re.fullmatch(_DURATION, text.strip()) if isinstance(text, str) else None
    if not match:
        raise InvalidInput(f"invalid duration {shown(text)}: use e.g. 45s, 10m, 2h, 3d")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]  # 5,000 digits: inf, refused
    if seconds > MAX_DURATION:
        raise InvalidInput(f"duration {shown(text)} is longer than 100 years")
    return seconds


def parse_time(text: str) -> str:
    """A stamp for `text`: an RFC 3339 time, a date, or a duration ago (`2h` = two hours ago)."""
    from datetime import UTC, datetime, timedelta

    value = text.strip()
    if re.fullmatch(_DURATION, value):
        return to_stamp(datetime.now(UTC) - timedelta(seconds=parse_duration(value)))
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return to_stamp(moment)
    except (ValueError, OverflowError):  # OverflowError: year 1 with an offset east of UTC
        raise InvalidInput(
            f"invalid time {shown(text)}: use 2026-01-31, 2026-01-31T12:00:00Z or 2h"
        ) from None
