"""Delivery: inbox items pushed to agents, drained into their sessions, nudges, durable inbox.

Public surface: `Delivery` (push, drain, items, wait, sessions), `Item`, `Drained`, `Session`,
`AgentInbox` and its `Entry`, `render`, `ProducerSet`. Loaded on first use, so a hook
importing one module does not pay for the others. The layers above make items through a
`ProducerSet` (inbox/producers.py): the one a Delivery is given, or the program's default.
"""

from __future__ import annotations

from beads.lazy import lazy_attributes
from inbox import settings as _settings  # noqa: F401 - registers `delivery` and `hooks`

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from inbox.delivery import Delivery, Session
    from inbox.drain import Drained
    from inbox.durable import AgentInbox, Entry
    from inbox.items import Item
    from inbox.producers import ProducerSet
    from inbox.render import render

__all__ = [
    "AgentInbox",
    "Delivery",
    "Drained",
    "Entry",
    "Item",
    "ProducerSet",
    "Session",
    "render",
]

_LAZY = {
    "Delivery": "inbox.delivery",
    "Drained": "inbox.drain",
    "Session": "inbox.delivery",
    "AgentInbox": "inbox.durable",
    "Entry": "inbox.durable",
    "Item": "inbox.items",
    "ProducerSet": "inbox.producers",
    "render": "inbox.render",
}


__getattr__ = lazy_attributes(__name__, _LAZY)
