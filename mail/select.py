"""Which provider: `$GC_MAIL` (`beadmail`, `exec:<program>`), else `mail.provider` in
config.yaml, else beadmail."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from beads.errors import InvalidInput
from mail.provider import Provider

if TYPE_CHECKING:
    from beads.store import Store


def provider_spec(configured: str | None = None) -> str:
    """The provider named by the environment, else by config, else `beadmail`."""
    return os.environ.get("GC_MAIL") or configured or "beadmail"


def open_provider(
    open_store: Callable[[], Store], *, spec: str | None = None, timeout: float | None = None
) -> Provider:
    """The provider to use. The store is opened only when needed: beadmail, or to read
    `mail.provider` when `$GC_MAIL` is unset (an exec provider set by the environment never
    touches the store)."""
    chosen = spec or os.environ.get("GC_MAIL")
    store = None
    if not chosen:
        store = open_store()
        mail_config = store.config.get("mail") or {}
        chosen = provider_spec(mail_config.get("provider"))
        timeout = timeout or mail_config.get("exec_timeout")
    if chosen == "beadmail":
        from mail.beadmail import BeadMail

        return BeadMail(store or open_store())
    if chosen.startswith("exec:"):
        from mail.execmail import DEFAULT_TIMEOUT, ExecMail

        return ExecMail(chosen[len("exec:") :], timeout=float(timeout or DEFAULT_TIMEOUT))
    raise InvalidInput(f"unknown mail provider {chosen!r}: use beadmail or exec:<program>")
