"""The index's tables, and the `beads` table's row of one bead file: what `Index.apply` and a
rebuild (`beads.index.rebuild`) both write."""

from __future__ import annotations

import json

from beads.records.record import FIELD_ORDER

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

    from beads.records.record import Bead

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS beads(
    id TEXT PRIMARY KEY, path TEXT NOT NULL UNIQUE, blob TEXT NOT NULL,
    type TEXT NOT NULL, status TEXT NOT NULL, assignee TEXT, sender TEXT NOT NULL,
    thread TEXT, parent TEXT, priority INTEGER NOT NULL,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS beads_assignee ON beads(assignee, status, created_at);
CREATE INDEX IF NOT EXISTS beads_type ON beads(type, status, created_at);
-- An agent's beads of one type and status by priority: inboxes. Three equality columns, so
-- the planner prefers it to the type index (a type holds many more beads than an agent).
CREATE INDEX IF NOT EXISTS beads_inbox ON beads(assignee, type, status, priority, created_at);
-- The same narrowed by a `read` meta flag (unread mail): the query spells the JSON path as
-- this literal, so the planner can use the index instead of reading every row's JSON.
CREATE INDEX IF NOT EXISTS beads_unread ON beads(
    assignee, type, status, json_extract(data, '$.meta."read"'), priority, created_at);
CREATE INDEX IF NOT EXISTS beads_sender ON beads(sender, created_at);
CREATE INDEX IF NOT EXISTS beads_thread ON beads(thread, created_at);
CREATE INDEX IF NOT EXISTS beads_parent ON beads(parent, created_at);
CREATE INDEX IF NOT EXISTS beads_created ON beads(created_at);
CREATE INDEX IF NOT EXISTS beads_updated ON beads(updated_at);
CREATE TABLE IF NOT EXISTS labels(label TEXT NOT NULL, id TEXT NOT NULL,
    PRIMARY KEY(label, id)) WITHOUT ROWID;
-- Writers delete a bead's labels by id: without this, each write scans every label.
CREATE INDEX IF NOT EXISTS labels_id ON labels(id);
CREATE TABLE IF NOT EXISTS invalid(path TEXT PRIMARY KEY, error TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS agents(name TEXT PRIMARY KEY) WITHOUT ROWID;
-- Per applied commit, the commit it was applied from and the bead types changed in between
-- (space-separated): a follower skips commits that change no type it derives from without
-- reading git (inbox.follow). The last LINKS_KEPT only, by rowid.
CREATE TABLE IF NOT EXISTS links(id TEXT PRIMARY KEY, parent TEXT NOT NULL, types TEXT NOT NULL);
-- Full-text search (`Query.text`) of the words each bead's row holds, by the row's rowid. The
-- table keeps its own copy of the text: a row changed behind the index's back (a tampered
-- file) cannot leave it unable to forget what it indexed, as an external-content table would.
-- `apply` keeps it in step with `beads` (nothing VACUUMs this file, which could renumber the
-- rowids), and a rebuild fills it afresh. No semicolons in these comments: the schema is
-- split on them.
CREATE VIEW IF NOT EXISTS beads_text(rowid, title, body, labels, agents) AS SELECT rowid,
    json_extract(data, '$.title'), json_extract(data, '$.body'),
    (SELECT group_concat(value, ' ') FROM json_each(data, '$.labels')),
    sender || ' ' || coalesce(assignee, '') || ' '
        || coalesce((SELECT group_concat(value, ' ') FROM json_each(data, '$.cc')), '')
    FROM beads;
CREATE VIRTUAL TABLE IF NOT EXISTS beads_fts USING fts5(title, body, labels, agents,
    tokenize='unicode61 remove_diacritics 2');
"""


def bead_row(bead: Bead, path: str, blob: str, read: Any = None) -> tuple[Any, ...]:
    """The `beads` table's row of one bead file; `read` as `Rebuild.add` takes it."""
    # A canonical file's mapping has every field in order and no null where `Bead.from_dict`
    # puts an empty list, mapping or text: it is `to_dict()` already, not made again here.
    if not (
        type(read) is dict
        and tuple(read) == FIELD_ORDER
        and read["body"] is not None
        and read["cc"] is not None
        and read["labels"] is not None
        and read["meta"] is not None
    ):
        read = bead.to_dict()
    return (
        bead.id,
        path,
        blob,
        bead.type,
        bead.status,
        bead.assignee,
        bead.sender,
        bead.thread,
        bead.parent,
        bead.priority,
        bead.created_at,
        bead.updated_at,
        json.dumps(read, separators=(",", ":")),
    )
