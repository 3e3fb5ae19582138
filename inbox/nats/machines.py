"""Which machine a relay's durable consumer belongs to.

A consumer is named for its machine (`relay-<machine name>`, the host name by default), and
host names repeat: two relays of one name would share one consumer and split each other's
items. So each clone has a machine id (`beads.settings.localconfig.machine_id`), written into its
consumer's metadata (`gc_machine_id`). A relay finding its consumer held by another id
refuses to start, naming both ids and the fix; a consumer made before machines had ids is
claimed as it is (it keeps its name); a change of this machine's agents updates its own
consumer in place.

Stale consumers are those no machine uses: one that names this machine's id under an earlier
name (the machine was renamed), and one no relay is bound to that has delivered nothing for
longer than the stream keeps messages (whatever it still had for its machine is gone).
`gc nats status` lists them, `gc nats setup --prune` removes them.
"""

from __future__ import annotations

import datetime
from typing import Any

from beads.errors import Conflict
from inbox.nats.settings import Settings

ID_KEY = "gc_machine_id"
NAME_KEY = "gc_machine"
PREFIX = "relay-"


def metadata(settings: Settings) -> dict[str, str]:
    """What this machine writes into its consumer."""
    return {ID_KEY: settings.machine_id, NAME_KEY: settings.machine}


def check_owner(settings: Settings, info: Any) -> None:
    """Conflict when the consumer `info` belongs to another machine id."""
    owner = (info.config.metadata or {}).get(ID_KEY)
    if owner is not None and owner != settings.machine_id:
        raise Conflict(
            f"the consumer {settings.consumer} belongs to machine id {owner}, and this machine "
            f"is {settings.machine_id}: two machines are named {settings.machine!r} (cloned "
            "VMs and containers share a host name). Give this one its own name: gc config "
            "set --local delivery.nats.machine NAME"
        )


def stale(settings: Settings, infos: list[Any], max_age: float | None) -> list[dict[str, Any]]:
    """The relay consumers of the stream no machine uses (see the module's docstring)."""
    now = datetime.datetime.now(datetime.UTC)
    out = []
    for info in infos:
        name = info.name
        if not name.startswith(PREFIX) or name == settings.consumer:
            continue
        owner = (info.config.metadata or {}).get(ID_KEY)
        # Older nats-py clients (2.9) read neither field: the consumer's age is then unknown.
        last = getattr(info.delivered, "last_active", None) if info.delivered else None
        last = last or getattr(info, "created", None)
        idle = (now - last).total_seconds() if last else None
        if owner == settings.machine_id:
            why = f"this machine's consumer under an earlier name (now {settings.consumer})"
        elif not info.push_bound and max_age and idle is not None and idle > max_age:
            why = (
                f"no relay bound, nothing delivered for {idle:.0f}s (the stream keeps {max_age:g}s)"
            )
        else:
            continue
        out.append({"name": name, "machine_id": owner, "why": why,
                    "lag": info.num_pending})  # fmt: skip
    return out
