"""Mail between agents: the `Provider` interface, beadmail (default) and exec providers.

Public surface: `Message`, `Provider` (and what a provider declares it supports,
`Provider.capabilities`: `mail.provider.PRIORITY`, `ARCHIVED`, `DIRECTORY`), `Counts`, the
errors `MessageNotFound`, `AlreadyArchived` and `ProviderError`, `BeadMail`, `ExecMail`,
`open_provider`, and `mail.api`: the policy of `gc mail` for any provider (`send` and
`reply` with recipient checks, `to_all`, strict recipients, `notify`; `inbox`/`check` in Gas
City's order; `change`: several ids all or nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beads.lazy import lazy_attributes
from mail import settings as _settings  # noqa: F401 - registers the `mail` section

if TYPE_CHECKING:
    from mail.beadmail import BeadMail
    from mail.execmail import ExecMail
    from mail.message import AlreadyArchived, Message, MessageNotFound, ProviderError
    from mail.provider import Counts, Provider
    from mail.select import open_provider

__all__ = [
    "AlreadyArchived",
    "BeadMail",
    "Counts",
    "ExecMail",
    "Message",
    "MessageNotFound",
    "Provider",
    "ProviderError",
    "open_provider",
]

# Loaded at first use: `import mail.threads` (a claim, say) needs none of them.
_LAZY = {
    "AlreadyArchived": "mail.message",
    "Message": "mail.message",
    "MessageNotFound": "mail.message",
    "ProviderError": "mail.message",
    "Counts": "mail.provider",
    "Provider": "mail.provider",
    "BeadMail": "mail.beadmail",
    "ExecMail": "mail.execmail",
    "open_provider": "mail.select",
}


__getattr__ = lazy_attributes(__name__, _LAZY)
