"""Which provider: `$GC_MAIL` (`beadmail`, `exec:<program>`), else `mail.provider` in
config.yaml, else beadmail (`beads.config.mail_provider_spec`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from beads.config import mail_provider_spec
from beads.errors import InvalidInput, NotFound
from mail.provider import Provider

if TYPE_CHECKING:
    from beads.store import Store


def open_provider(
    open_store: Callable[[], Store], *, spec: str | None = None, timeout: float | None = None
) -> Provider:
    """The provider to use (`beads.config.mail_provider_spec`). The store is opened only when
    needed: beadmail, or to read `mail.provider` when `$GC_MAIL` is unset, or
    `mail.exec_timeout` for an exec provider (an exec provider works without any store: the
    timeout is then the default). A caller that passes `spec` has read the configuration
    itself, and passes its `timeout`."""
    store = None

    def mail_settings() -> dict[str, Any]:
        nonlocal store
        store = open_store()
        return store.config.get("mail") or {}

    chosen = spec or mail_provider_spec(mail_settings)
    if store is not None:
        timeout = timeout or (store.config.get("mail") or {}).get("exec_timeout")
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
