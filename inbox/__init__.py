"""Delivery: inbox items pushed to agents, drained into their sessions, nudges, durable inbox.

Public surface: `Delivery` (push, drain, items, wait, sessions), `Item`, `Drained`, `Session`,
`AgentInbox` and its `Entry`, `render`.
"""

from __future__ import annotations

from inbox.delivery import Delivery, Drained, Session
from inbox.durable import AgentInbox, Entry
from inbox.items import Item
from inbox.render import render

__all__ = ["AgentInbox", "Delivery", "Drained", "Entry", "Item", "Session", "render"]
