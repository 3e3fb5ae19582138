"""Mail's settings in `config.yaml`: the `mail` section, registered with
`beads.settings.registry` as the `mail` package is imported."""

from __future__ import annotations

from beads.settings.registry import duration, flag, register_section, text

register_section(
    "mail",
    {"provider": "beadmail", "strict_recipients": False},
    {"mail.provider": text, "mail.strict_recipients": flag, "mail.exec_timeout": duration},
    position=1,  # after the store layer's own sections
)
