"""One query path: a `Query` is checked when it is made, and `Store.list`, `Store.count` and a
direct reader of the index (the hooks) get the same beads for it."""

from __future__ import annotations

import pytest

from beads import InvalidInput, Store
from beads.index.query import Query
from beads.index.reader import IndexReader


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"status": "done"}, "status must be open or closed"),
        ({"assignee": "no one"}, "assignee"),
        ({"sender": "no one"}, "from"),
        ({"label": "two words"}, "invalid label"),
        ({"thread": "not an id!"}, "invalid id"),
        ({"meta": {"bad key": 1}}, "invalid meta key"),
        ({"meta": {"tags": ["a"]}}, "must be a scalar"),
        ({"order": "title"}, "order must be created, updated or priority"),
        ({"limit": -1}, "limit must be an integer"),
        ({"limit": True}, "limit must be an integer"),
        ({"text": "word " * 65}, "has 65 words; a search takes at most 64"),
    ],
)
def test_a_bad_filter_is_refused_when_the_query_is_made(
    store: Store, filters: dict, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        Query(**filters)
    with pytest.raises(InvalidInput, match=message):  # the store says the same
        store.list(**filters)


def test_the_store_and_a_reader_of_the_index_answer_a_query_alike(store: Store) -> None:
    first = store.create("task", "first", assignee="dog", labels=["x"], meta={"read": False})
    store.create("task", "second", assignee="dog", priority=0)
    store.create("gate", "a gate", assignee="dog")
    store.create("task", "other's", assignee="cat", labels=["x"])
    store.update(first.id, title="first, updated")
    queries = [
        Query(assignee="dog", status="open", order="priority"),
        Query(type="task", label="x", order="updated", descending=True),
        Query(assignee="dog", meta={"read": False}),
        Query(type="task", limit=1),
    ]
    with IndexReader(store.root) as reader:
        for query in queries:
            fields = {name: getattr(query, name) for name in Query.__slots__}
            listed = store.list(**fields)
            assert reader.index.query(query) == listed and listed
            assert store.count(**fields) == reader.index.count_matching(query)
    assert store.count(type="task", limit=1) == 3  # a count ignores the limit


def test_a_thread_prefix_is_resolved_by_the_store(store: Store) -> None:
    root = store.create("message", "hello")
    reply = store.create("message", "re: hello", thread=root.id)
    assert store.list(thread=root.id[: len(root.id) - 2]) == [reply]
    assert Query(thread=root.id).replace(limit=1).thread == root.id
