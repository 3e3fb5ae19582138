"""Every layer's settings, registered with `beads.settings.registry` by importing each layer's own
`settings` module: `gc config set` checks, `gc doctor` reports and a new store's config.yaml
holds all of them. Importing this module is all it takes (`load()` names the intent).

In the layers' order, which is the order of the sections in a new store's config.yaml (after
the store layer's own `store`, `agents` and `rigs`).
"""

from __future__ import annotations

# isort: off
import mail.settings  # noqa: F401 - registers `mail`
import inbox.settings  # noqa: F401 - registers `delivery` and `hooks`
import gates.settings  # noqa: F401 - registers `gates`

# isort: on


def load() -> None:
    """Make sure every layer's settings are registered (done on this module's import)."""
