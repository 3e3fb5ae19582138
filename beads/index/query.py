"""Which beads a list asks for: one `Query`, validated when it is made, and the SQL for it.

`Store.list` and every direct reader of the index (the hooks, the Stop chain) build the same
`Query`, so a filter means one thing everywhere; `select` turns it into the index's SQL.
On the hook path: no typing, no dataclasses (each costs a hook milliseconds to import).
"""

from __future__ import annotations

import re

from beads.errors import InvalidInput
from beads.records.ids import check_id_prefix
from beads.records.record import check_agent, check_label, check_meta_key

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

# How each `order` sorts (ties broken by id).
ORDERS = {"created": "created_at", "updated": "updated_at", "priority": "priority, created_at"}
# Filters that are plain equality on a column of the index.
_COLUMNS = ("type", "status", "assignee", "sender", "thread", "parent")


# The words a search takes: more says nothing a person means, and each costs a prefix scan.
MAX_SEARCH_WORDS = 64


class Query:
    """Filters (None = any), order and limit of a list of beads; raises InvalidInput when made
    with a bad one, so whatever holds a Query holds a valid one.

    `meta` matches scalar meta values exactly (`{"read": False}`; None = absent or null);
    `since`/`until` bound `created_at` (RFC 3339 text); `thread`/`parent` are ids or id
    prefixes (`Store.list` resolves a prefix, the index matches it as given); `order` is
    created, updated or priority (then age). `text`: beads whose title, body, labels or
    agents hold a word starting with each of its words (the index's full-text table);
    `offset` skips that many beads of the order (a page of a list).
    """

    __slots__ = (
        "type",
        "status",
        "assignee",
        "sender",
        "label",
        "thread",
        "parent",
        "since",
        "until",
        "meta",
        "text",
        "order",
        "descending",
        "limit",
        "offset",
    )

    def __init__(
        self,
        *,
        type: str | None = None,
        status: str | None = None,
        assignee: str | None = None,
        sender: str | None = None,
        label: str | None = None,
        thread: str | None = None,
        parent: str | None = None,
        since: str | None = None,
        until: str | None = None,
        meta: dict[str, Any] | None = None,
        text: str | None = None,
        order: str = "created",
        descending: bool = False,
        limit: int | None = None,
        offset: int | None = None,
    ) -> None:
        if status not in (None, "open", "closed"):
            raise InvalidInput(f"status must be open or closed, not {status!r}")
        for what, name in (("assignee", assignee), ("from", sender)):
            # A tuple: every spelling of one agent (`beads.records.agents.spellings`, the index's
            # own).
            for one in name if isinstance(name, tuple) and name else (name,):
                if one is not None:
                    check_agent(one, what=what)
        if label is not None:
            check_label(label)
        for ref in (thread, parent):
            if ref is not None:
                check_id_prefix(ref)
        for key, value in (meta or {}).items():
            check_meta_key(key)
            if isinstance(value, list | dict):
                raise InvalidInput(f"meta filter {key!r} must be a scalar")
        if text is not None:
            found = words(text)
            if not found:
                raise InvalidInput("the search text has no words")
            if len(found) > MAX_SEARCH_WORDS:  # each is a prefix scan of the full-text table
                raise InvalidInput(
                    f"the search text has {len(found)} words; a search takes at most "
                    f"{MAX_SEARCH_WORDS}"
                )
        if order not in ORDERS:
            raise InvalidInput(f"order must be created, updated or priority, not {order!r}")
        # (`type` is a parameter here: isinstance, and bool is no count)
        for what, count in (("limit", limit), ("offset", offset)):
            if count is not None and (
                isinstance(count, bool) or not isinstance(count, int) or not 0 <= count < 2**63
            ):
                raise InvalidInput(f"{what} must be an integer from 0 to 2**63-1")
        self.type = type
        self.status = status
        self.assignee = assignee
        self.sender = sender
        self.label = label
        self.thread = thread
        self.parent = parent
        self.since = since
        self.until = until
        self.meta = dict(meta) if meta else None
        self.text = text
        self.order = order
        self.descending = descending
        self.limit = limit
        self.offset = offset

    def replace(self, **changes: Any) -> Query:
        """A copy with these fields changed (validated again)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        return Query(**{**fields, **changes})


def select(what: str, q: Query, *, ordered: bool = True) -> tuple[str, list[Any]]:
    """`SELECT what` over the index's `beads b` for the beads `q` matches, with its
    parameters; `ordered` adds its ORDER BY and LIMIT (a count needs neither)."""
    where, params = [], []
    for column in _COLUMNS:
        value = getattr(q, column)
        if isinstance(value, tuple):
            where.append(f"b.{column} IN ({', '.join('?' for _ in value)})")
            params.extend(value)
        elif value is not None:
            where.append(f"b.{column} = ?")
            params.append(value)
    if q.since is not None:
        where.append("b.created_at >= ?")
        params.append(q.since)
    if q.until is not None:
        where.append("b.created_at < ?")
        params.append(q.until)
    for key, value in (q.meta or {}).items():
        # Keys follow META_KEY_RE (no quotes; `Query` checked them), so the path is safe to
        # spell as a literal, which lets an expression index (beads_unread) serve it.
        path = f"json_extract(b.data, '$.meta.\"{key}\"')"
        if value is None:
            where.append(f"{path} IS NULL")
        else:
            where.append(f"{path} = ?")
            params.append(value)
    if q.text is not None:
        # Each word quoted (FTS5 syntax in the text is searched for, never obeyed), as a prefix.
        # The unary + keeps the planner walking the order's index, probing the matches, and
        # stopping at the limit: else it sorts every match (a word in every bead: the store).
        where.append("+b.rowid IN (SELECT rowid FROM beads_fts WHERE beads_fts MATCH ?)")
        params.append(" ".join(f'"{word}"*' for word in words(q.text)))
    sql = f"SELECT {what} FROM beads b"
    if q.label is not None:
        sql += " JOIN labels l ON l.id = b.id AND l.label = ?"
        params.insert(0, q.label)
    if where:
        sql += " WHERE " + " AND ".join(where)
    if ordered:
        direction = " DESC" if q.descending else ""
        columns = ORDERS[q.order].split(", ") + ["id"]
        sql += " ORDER BY " + ", ".join(f"b.{c}{direction}" for c in columns)
        if q.limit is not None or q.offset:
            sql += " LIMIT ?"  # sqlite has no OFFSET without a LIMIT: -1 is none
            params.append(-1 if q.limit is None else q.limit)
        if q.offset:
            sql += " OFFSET ?"
            params.append(q.offset)
    return sql, params


def words(text: str) -> list[str]:
    """The words of a search text, as the index's full-text table splits them."""
    return re.findall(r"\w+", text)
