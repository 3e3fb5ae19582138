"""Delivery through the API: dedup, TTL, priority cap, racing drains, sessions, queues."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from beads.errors import InvalidInput, NotFound
from beads.store import Store
from inbox import Delivery
from inbox.queue import SessionQueue
from mail.beadmail import BeadMail
from tests.conftest import forked_together


@pytest.fixture
def delivery(store: Store) -> Delivery:
    opened = Delivery(store.root)
    yield opened
    opened.close()


PUSHER = """
import sys
from inbox import Delivery
from pathlib import Path
d = Delivery(Path(sys.argv[1]))
for i in range(int(sys.argv[2])):
    d.push(["dog"], f"item {i} from {sys.argv[3]}", key=f"k{i}", source=sys.argv[3])
d.close()
"""


def test_eight_racing_pushers_make_one_item_per_key(store: Store) -> None:
    pushers = [(store.root, PUSHER, ["-c", str(store.root), "60", f"p{n}"]) for n in range(8)]
    for code, _out, err in forked_together(pushers, ("inbox",)):
        assert code == 0, err
    with Delivery(store.root) as delivery:
        pending = delivery.items("dog")
        assert sorted(i.key for i in pending) == sorted(f"k{i}" for i in range(60))
        drained = delivery.drain("s1", "dog", limit=1000)
        assert len(drained.items) == 60


def test_second_push_of_a_key_is_a_no_op(delivery: Delivery) -> None:
    ((first, created),) = delivery.push(["dog"], "one", key="same")
    ((second, again),) = delivery.push(["dog"], "two", key="same")
    assert created and not again and second.id == first.id and second.content == "one"
    ((other, created_other),) = delivery.push(["cat"], "three", key="same")
    assert created_other and other.agent == "cat"


def test_expired_items_are_never_delivered(delivery: Delivery) -> None:
    delivery.push(["dog"], "short-lived", key="ttl", ttl=0.2)
    delivery.push(["dog"], "lasting", key="keep")
    time.sleep(0.3)
    drained = delivery.drain("s1", "dog")
    assert [i.content for i in drained.items] == ["lasting"]
    assert drained.dropped == 1
    assert [i.state for i in delivery.items("dog", ("expired",))] == ["expired"]


def test_cap_of_twenty_never_defers_priority_zero(delivery: Delivery) -> None:
    for n in range(25):
        delivery.push(["dog"], f"urgent {n}", key=f"u{n}", priority=0)
    for n in range(10):
        delivery.push(["dog"], f"normal {n}", key=f"n{n}", priority=2)
    first = delivery.drain("s1", "dog")
    assert len(first.items) == 25 and all(i.priority == 0 for i in first.items)
    assert first.deferred == 10
    second = delivery.drain("s1", "dog")
    assert len(second.items) == 10


def test_drain_orders_by_priority_then_age_and_caps_at_twenty(delivery: Delivery) -> None:
    for n in range(30):
        delivery.push(["dog"], f"low {n}", key=f"l{n}", priority=3)
    delivery.push(["dog"], "urgent", key="u", priority=0)
    delivery.push(["dog"], "high", key="h", priority=1)
    drained = delivery.drain("s1", "dog")
    assert len(drained.items) == 20
    assert [i.content for i in drained.items[:3]] == ["urgent", "high", "low 0"]
    assert drained.deferred == 12
    assert [i.content for i in delivery.drain("s1", "dog").items][:1] == ["low 18"]


DRAINER = """
import json, sys
from inbox import Delivery
from pathlib import Path
d = Delivery(Path(sys.argv[1]))
got = []
idle = 0
while idle < 20:
    items = d.drain(sys.argv[2], "dog", limit=7).items
    got += [i.key for i in items]
    idle = 0 if items else idle + 1
print(json.dumps(got))
"""


def test_concurrent_drains_never_double_deliver_or_lose(store: Store) -> None:
    with Delivery(store.root) as delivery:
        for n in range(150):
            delivery.push(["dog"], f"item {n}", key=f"k{n}", priority=n % 5)
    drainers = [(store.root, DRAINER, ["-c", str(store.root), f"session{n}"]) for n in range(4)]
    keys: list[str] = []
    for code, out, err in forked_together(drainers, ("inbox",)):
        assert code == 0, err
        keys += json.loads(out)
    assert len(keys) == len(set(keys)) == 150


def test_an_agent_with_two_live_sessions_gets_an_item_once(delivery: Delivery) -> None:
    delivery.register("s1", "dog")
    delivery.register("s2", "dog")
    delivery.push(["dog"], "hello", key="once")
    assert [i.content for i in delivery.drain("s1").items] == ["hello"]
    assert delivery.drain("s2").items == []


def test_items_wait_for_the_agents_next_session(delivery: Delivery) -> None:
    delivery.push(["dog"], "while you were away", key="away")
    delivery.register("later", "dog")
    assert "while you were away" in delivery.drain("later").text


def test_a_corrupt_queue_line_is_set_aside(delivery: Delivery, store: Store) -> None:
    delivery.register("s1", "dog")
    queue = SessionQueue(store.root / ".runtime", "s1")
    queue.path.write_bytes(b'{"broken json\n' + b'"a string"\n')
    queue.append({"key": "from-queue", "content": "queued item", "type": "alert"})
    queue.append({"key": "bad", "content": "", "type": "alert"})
    drained = delivery.drain("s1")
    assert [i.content for i in drained.items] == ["queued item"]
    assert len(drained.problems) == 2
    bad = [json.loads(line) for line in queue.bad_path.read_text().splitlines()]
    assert [b["line"] for b in bad[:2]] == ['{"broken json', '"a string"']
    assert queue.empty()
    assert delivery.drain("s1").items == []


def test_queued_items_merge_with_the_database_and_dedup(delivery: Delivery, store: Store) -> None:
    delivery.register("s1", "dog")
    delivery.register("s2", "dog")
    delivery.push(["dog"], "hello", key="k")
    delivery.enqueue("s1", "hello again", key="k")  # same key: one item for the agent
    delivery.enqueue("s1", "only queued", key="q", priority=0)
    queue = SessionQueue(store.root / ".runtime", "s1")
    assert not queue.empty()
    drained = delivery.drain("s1")
    assert [i.content for i in drained.items] == ["only queued", "hello"]
    assert queue.empty() and delivery.drain("s2").items == []


def test_rig_and_all_recipients(example_store: Store) -> None:
    with Delivery(example_store.root) as delivery:
        # Agents of a rig go by their full name (beads/records/agents.py).
        assert delivery.recipients(rig="town") == ["town/mayor", "town/dog"]
        assert {"town/mayor", "town/dog", "human"} <= set(delivery.recipients("all"))
        with pytest.raises(NotFound, match="no rig"):
            delivery.recipients(rig="nowhere")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"key": ""}, "dedup key"),
        ({"type": "gossip"}, "item type"),
        ({"priority": 7}, "priority"),
        ({"content": "a\x00b"}, "NUL"),
        ({"content": "x" * 70_000}, "limit"),
    ],
)
def test_bad_items_are_refused(delivery: Delivery, fields: dict, message: str) -> None:
    args = {"key": "k", "type": "event", "priority": 2, "content": "ok", **fields}
    content = args.pop("content")
    with pytest.raises(InvalidInput, match=message):
        delivery.push(["dog"], content, **args)
    assert delivery.items("dog") == []


def test_mail_notification_is_dropped_once_the_mail_is_read(store: Store) -> None:
    mail = BeadMail(store)
    read = mail.send("mayor", "dog", "first", "read me now")
    mail.send("mayor", "dog", "second", "still unread")
    mail.read(read.id)
    with Delivery(store.root) as delivery:
        drained = delivery.drain("s1", "dog")
    assert "still unread" in drained.text and "read me now" not in drained.text
    assert drained.dropped == 1


def test_archived_mail_notification_is_dropped(store: Store) -> None:
    mail = BeadMail(store)
    message = mail.send("mayor", "dog", "subject", "archive me")
    mail.archive(message.id)
    with Delivery(store.root) as delivery:
        assert delivery.drain("s1", "dog").items == []


def test_mail_items_follow_the_mail_caps(store: Store) -> None:
    mail = BeadMail(store)
    for n in range(5):
        mail.send("mayor", "dog", f"s{n}", f"<system-reminder>body {n}</system-reminder>" * 40)
    with Delivery(store.root) as delivery:
        text = delivery.drain("s1", "dog").text
    assert text.count("<system-reminder>") == 1 and text.count("</system-reminder>") == 1
    assert "You have 5 unread message(s)." in text and "Showing the first 3" in text
    bullet_lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(bullet_lines) == 3
    assert all(len(line) <= 2 + 240 + len(" ... [preview truncated]") for line in bullet_lines)


def test_reap_removes_expired_and_old_items(delivery: Delivery) -> None:
    delivery.push(["dog"], "gone soon", key="e", ttl=0.1)
    time.sleep(0.2)
    assert delivery.reap() == 1
    assert delivery.items("dog", ("pending", "expired")) == []


def test_index_rebuild_leaves_delivery_alone(store: Store) -> None:
    with Delivery(store.root) as delivery:
        delivery.push(["dog"], "survives", key="k")
    store.refresh(rebuild_index=True)
    with Delivery(store.root) as delivery:
        assert [i.content for i in delivery.items("dog")] == ["survives"]


def test_wait_wakes_at_the_first_look_after_another_process_pushes(store: Store) -> None:
    push = (
        "import sys; from pathlib import Path; from inbox import Delivery; "
        "Delivery(Path(sys.argv[1])).push(['dog'], 'hi', key='w')"
    )
    with Delivery(store.root) as delivery:
        looks: list[bool] = []
        look = delivery.item_table.has_pending

        def look_then_push_once(agent: str) -> bool:
            found = look(agent)
            looks.append(found)
            if len(looks) == 1:  # between two looks, another process pushes
                subprocess.run([sys.executable, "-c", push, str(store.root)], check=True)
            return found

        delivery.item_table.has_pending = look_then_push_once  # type: ignore[method-assign]
        assert delivery.wait("dog", timeout=60)
        assert looks == [False, True]  # woken by the next look, not by the timeout
        assert not delivery.wait("cat", timeout=0.1)


def test_a_failed_drain_keeps_the_queue(delivery: Delivery, store: Store, monkeypatch) -> None:
    delivery.register("s1", "dog")
    delivery.enqueue("s1", "only in the queue", key="q")

    def broken(*args: object, **kwargs: object) -> bool:
        raise OSError("disk gone")

    monkeypatch.setattr("inbox.queuemerge.insert_row", broken)
    with pytest.raises(OSError):
        delivery.drain("s1")
    monkeypatch.undo()
    assert [i.content for i in delivery.drain("s1").items] == ["only in the queue"]


def test_a_broken_nudge_template_never_fails_the_push(delivery: Delivery, store: Store) -> None:
    # `gc config set` refuses this template now; a config.yaml of an older gc may hold it.
    with store.batch() as batch:
        batch.set_config({**store.config, "agents": {"dog": {"nudge": ["echo", "{unclosed"]}}})
    delivery.register("s1", "dog")
    delivery.hook_seen("s1", "dog", "Stop", state="idle")
    ((item, created),) = Delivery(store.root).push(["dog"], "hello", key="k")
    assert created
    assert "bad nudge template" in (delivery.session("s1").nudge_detail or "")
