"""Mail's settings in `config.yaml`: the `mail` section. Registered with `beads.settings.registry`
on
import; the program imports it."""

from __future__ import annotations

from beads.settings.registry import duration, flag, register_section, text

register_section(
    "mail",
    {"provider": "beadmail", "strict_recipients": False},
    {"mail.provider": text, "mail.strict_recipients": flag, "mail.exec_timeout": duration},
)
