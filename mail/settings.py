"""Mail's settings in `config.yaml`: the `mail` section, registered with
`beads.settings.registry` as the `mail` package is imported."""

from __future__ import annotations

from beads.errors import InvalidInput
from beads.settings.registry import duration, flag, register_section

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


register_section(
    "mail",
    {"provider": "beadmail", "strict_recipients": False},
    {
        "mail.provider": parse_provider,
        "mail.strict_recipients": flag,
        "mail.exec_timeout": duration,
    },
    position=1,  # after the store layer's own sections
)
