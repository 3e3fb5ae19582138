"""What every hook event shares: the context of one hook call, and the log of a hook's own
faults (`.runtime/hooks.log`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from beads.errors import GcError
from beads.location import find_store

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

    from inbox.delivery import Delivery, Drained


class HookContext:
    """One hook call: the event's fields, the agent, and the delivery database."""

    __slots__ = ("event", "session", "agent", "payload", "delivery", "root", "drained")

    def __init__(
        self,
        event: str,
        session: str,
        agent: str,
        payload: dict[str, Any],
        delivery: Delivery,
        root: Path,
    ) -> None:
        self.event = event
        self.session = session
        self.agent = agent
        self.payload = payload
        self.delivery = delivery
        self.root = root
        # What this hook's drains claimed: delivered once the reply is written (see `drain`).
        self.drained: list[Drained] = []

    def drain(self, **options: Any) -> Drained:
        """Claim the session's items for this hook's reply."""
        drained = self.delivery.drain(self.session, self.agent, deliver=False, **options)
        self.drained.append(drained)
        return drained

    @property
    def config(self) -> dict[str, Any]:
        return self.delivery.store_config()


def log_failure(beads_dir: str | None, payload: dict[str, Any] | None, exc: BaseException) -> None:
    """Append the fault to `.runtime/hooks.log` of the store, if there is one."""
    try:
        cwd = (payload or {}).get("cwd")
        root = find_store(beads_dir, cwd=Path(cwd) if isinstance(cwd, str) and cwd else None)
    except Exception:  # no store (or no path to one): nowhere to log, nothing to protect
        return
    event = (payload or {}).get("hook_event_name", "?")
    import traceback

    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if not isinstance(exc, GcError):
        detail += "\n" + "".join(traceback.format_tb(exc.__traceback__))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    from beads import files

    try:
        fd = files.open_file(str(root), str(root / ".runtime" / "hooks.log"))
        try:
            os.write(fd, f"{stamp}Z {event}: {detail}\n".encode())
        finally:
            os.close(fd)
    except (OSError, GcError):
        pass  # a log we cannot write (a link planted there) must not fail the hook
