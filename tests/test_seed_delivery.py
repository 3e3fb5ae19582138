"""Seeds 000/001 in delivery: what fits in one injection, the seed's JSONL queue, the
heartbeat (reconcile and reaping), broadcasts to agents that start later."""

from __future__ import annotations

import pytest

from beads.store import Store
from inbox import Delivery


@pytest.fixture
def delivery(store: Store) -> Delivery:
    opened = Delivery(store.root)
    yield opened
    opened.close()


def test_twenty_long_items_fit_the_cap_over_several_drains(delivery: Delivery) -> None:
    contents = {f"k{n}": f"<{n}> " + "x" * 2995 for n in range(20)}
    for key, content in contents.items():
        delivery.push(["dog"], content, key=key)
    seen: dict[int, str] = {}
    for _ in range(20):
        drained = delivery.drain("s1", "dog")
        if not drained.items:
            break
        assert len(drained.text) <= 10_000
        for item in drained.items:
            marker = item.content.split()[0]
            (line,) = [ln for ln in drained.text.splitlines() if marker in ln]
            whole = item.content in line
            pointer = f"the whole item {item.id}: gc inbox list --delivered --json" in line
            assert whole or pointer
            seen[item.id] = item.key
    assert sorted(seen.values()) == sorted(contents)  # none lost, each once
    assert len(set(seen)) == 20


def test_priority_zero_items_alone_over_the_cap_are_shortened(delivery: Delivery) -> None:
    for n in range(8):
        delivery.push(["dog"], f"urgent {n} " + "y" * 3000, key=f"u{n}", priority=0)
    delivery.push(["dog"], "later", key="low", priority=3)
    drained = delivery.drain("s1", "dog")
    assert len(drained.text) <= 10_000
    assert sorted(i.key for i in drained.items) == [f"u{n}" for n in range(8)]
    assert drained.text.count("gc inbox list --delivered --json") == 8
    assert drained.deferred == 1
    assert [i.key for i in delivery.drain("s1", "dog").items] == ["low"]


def test_the_cap_is_a_setting(store: Store) -> None:
    config = {"hooks": {"max_context_chars": 2000}}
    with Delivery(store.root, config=lambda: config) as delivery:
        for n in range(5):
            delivery.push(["dog"], "z" * 900, key=f"k{n}")
        drained = delivery.drain("s1", "dog")
        assert len(drained.text) <= 2000 and len(drained.items) == 2
