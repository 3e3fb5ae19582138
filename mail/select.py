"""Which provider: `$GC_MAIL` (`beadmail`, `exec:<program>`), else `mail.provider` in
config.yaml, else beadmail (`beads.settings.config.mail_provider_spec`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from beads.errors import InvalidInput, NotFound
from beads.settings.config import mail_provider_spec
from mail.provider import Provider
from mail.settings import exec_timeout as seconds_of
from mail.settings import parse_provider

if TYPE_CHECKING:
    from beads.store import Store


def open_provider(
    open_store: Callable[[], Store],
    *,
    config: Callable[[], dict[str, Any]] | None = None,
    spec: str | None = None,
    timeout: float | None = None,
) -> Provider:
    """The provider to use (`beads.settings.config.mail_provider_spec`). The store is opened only
    for
    beadmail; `mail.provider` (when `$GC_MAIL` is unset) and `mail.exec_timeout` come from
    `config` (config.yaml, read the fast way: `read_config`), else from the opened store. An
    exec provider works without any store (the timeout is then the default). A caller that
    passes `spec` has read the configuration itself, and passes its `timeout`."""
    opened: list[Store] = []

    def store() -> Store:
        if not opened:
            opened.append(open_store())
        return opened[0]

    read = config or (lambda: store().config)
    cached: list[dict[str, Any]] = []

    def mail_settings() -> dict[str, Any]:
        if not cached:
            from beads.settings.trust import provider_waits

            settings = read()
            waits = provider_waits(settings)
            if waits:
                raise InvalidInput(waits)
            cached.append(settings.get("mail") or {})
        return cached[0]

    chosen = spec or mail_provider_spec(mail_settings)
    try:
        kind, program = parse_provider(chosen)
    except InvalidInput as exc:
        raise InvalidInput(f"unknown mail provider {chosen!r}: {exc.message}") from None
    if kind == "beadmail":
        from mail.beadmail import BeadMail

        return BeadMail(store())
    from mail.execmail import DEFAULT_TIMEOUT, ExecMail

    if timeout is None and spec is None:
        try:
            timeout = mail_settings().get("exec_timeout")
        except NotFound:
            pass  # no store: the default
    return ExecMail(program, timeout=exec_timeout(timeout, DEFAULT_TIMEOUT), config=read)


def read_config(beads_dir: str | None = None) -> dict[str, Any]:
    """config.yaml as the index holds it, as the hooks read it: no dulwich, no YAML parser
    (importing ruamel would slow every exec command); NotFound without a store."""
    from beads.index.reader import IndexReader
    from beads.location import find_store

    with IndexReader(find_store(beads_dir)) as reader:
        return reader.config()


def exec_timeout(value: Any, default: float) -> float:
    """`mail.exec_timeout` checked, in seconds (`mail.settings.exec_timeout`; unset:
    `default`)."""
    if value is None:
        return default
    try:
        return seconds_of(value)
    except InvalidInput as exc:
        raise InvalidInput(f"mail.exec_timeout {exc.message}, not {value!r}") from None
