"""Mail's settings in `config.yaml`: the `mail` section, registered with
`beads.settings.registry` as the `mail` package is imported."""

from __future__ import annotations

from beads.errors import InvalidInput
from beads.settings.registry import flag, register_section

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EXEC = "exec:"


def parse_provider(value: Any) -> tuple[str, str]:
    """`beadmail`, or `exec:` and a program: `("beadmail", "")` or `("exec", PROGRAM)`.
    How `mail.provider`, `$GC_MAIL` and a city's `[mail] provider` are read
    (`mail.select.open_provider`), and what `gc config set` accepts."""
    if value == "beadmail":
        return "beadmail", ""
    if isinstance(value, str) and value.startswith(EXEC) and value[len(EXEC) :].strip():
        return "exec", value[len(EXEC) :]
    raise InvalidInput(f"must be beadmail or {EXEC}/path/to/program")


MAX_EXEC_TIMEOUT = 86400.0  # a day: a program still running then is hung


def exec_timeout(value: Any) -> float:
    """`mail.exec_timeout` in seconds: a duration (`30s`, `2m`) or a number of seconds, more
    than none and at most a day. What `gc config set` accepts and what the exec provider
    reads (`mail.select.exec_timeout`)."""
    from beads.records.times import parse_duration

    seconds = None
    if type(value) in (int, float):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except InvalidInput:
            pass
    if seconds is None or not 0 < seconds <= MAX_EXEC_TIMEOUT:
        raise InvalidInput(
            "must be a duration such as 30s or a number of seconds, above 0, at most 1d"
        )
    return seconds


register_section(
    "mail",
    {"provider": "beadmail", "strict_recipients": False},
    {
        "mail.provider": parse_provider,
        "mail.strict_recipients": flag,
        "mail.exec_timeout": exec_timeout,
    },
    position=1,  # after the store layer's own sections
)
