"""Which provider: `$GC_MAIL` (`beadmail`, `exec:<program>`), else `mail.provider` in
config.yaml, else beadmail."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from beads.errors import InvalidInput, NotFound
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
    `mail.provider` when `$GC_MAIL` is unset, or `mail.exec_timeout` for an exec provider
    (an exec provider works without any store: the timeout is then the default). A caller
    that passes `spec` has read the configuration itself, and passes its `timeout`."""
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

        if timeout is None and store is None and spec is None:
            try:
                store = open_store()
            except NotFound:
                pass
            else:
                timeout = (store.config.get("mail") or {}).get("exec_timeout")
        return ExecMail(chosen[len("exec:") :], timeout=exec_timeout(timeout, DEFAULT_TIMEOUT))
    raise InvalidInput(f"unknown mail provider {chosen!r}: use beadmail or exec:<program>")


def exec_timeout(value: Any, default: float) -> float:
    """`mail.exec_timeout` checked: a positive number of seconds (unset: `default`)."""
    if value is None:
        return default
    if type(value) not in (int, float) or not 0 < value <= 86400:
        raise InvalidInput(f"mail.exec_timeout must be a number of seconds, not {value!r}")
    return float(value)
