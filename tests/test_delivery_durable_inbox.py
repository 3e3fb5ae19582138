"""`inbox.AgentInbox`: persisted before post returns, in order, replayed after a kill."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from beads.errors import InvalidInput
from beads.store import Store
from inbox import AgentInbox

WORKER = """
import os, signal, sys
from inbox import AgentInbox
inbox = AgentInbox(sys.argv[1], "worker")
for entry in inbox:
    if entry.kind == "restore":  # first whenever stored entries are replayed
        continue
    with open(sys.argv[2], "a") as log:
        log.write(entry.content + "\\n")
    if entry.content == "task 3":
        os.kill(os.getpid(), signal.SIGKILL)  # dies mid-processing, before the ack
    inbox.ack(entry)
"""


def test_killed_worker_replays_unacked_entries_after_restore(store: Store, tmp_path) -> None:
    with AgentInbox(store, "worker") as inbox:
        for n in range(1, 6):
            inbox.post("task", f"task {n}")
    log = tmp_path / "processed.log"
    worker = subprocess.run([sys.executable, "-c", WORKER, str(store.root), str(log)])
    assert worker.returncode == -signal.SIGKILL
    assert log.read_text().splitlines() == ["task 1", "task 2", "task 3"]

    with AgentInbox(store, "worker") as inbox:
        first = inbox.next()
        assert first is not None and first.kind == "restore"
        inbox.ack(first)
        rest = []
        for entry in inbox:
            rest.append(entry.content)
            inbox.ack(entry)
        assert rest == ["task 3", "task 4", "task 5"]  # at least once: task 3 again
        assert inbox.pending() == 0
    with AgentInbox(store, "worker") as inbox:
        assert inbox.next() is None  # nothing to restore once all is acked


def test_consecutive_messages_from_one_sender_merge(store: Store) -> None:
    with AgentInbox(store, "worker") as inbox:
        inbox.post("message", "hello", sender="mayor")
        inbox.post("message", "are you there?", sender="mayor")
        inbox.post("message", "me too", sender="dog")
        inbox.post("message", "and again", sender="mayor")
        assert inbox.pending() == 3
        got = [(e.sender, e.content) for e in inbox]
    assert got == [("mayor", "hello\nare you there?"), ("dog", "me too"), ("mayor", "and again")]


def test_steering_is_transient_and_jumps_the_queue(store: Store) -> None:
    with AgentInbox(store, "worker") as inbox:
        inbox.post("task", "first")
        inbox.post("steering", "stop what you are doing")
        entry = inbox.next()
        assert entry is not None and entry.kind == "steering" and entry.seq is None
        assert inbox.pending() == 1
    with AgentInbox(store, "worker") as inbox:
        assert [(e.kind, e.content) for e in inbox][1:] == [("task", "first")]


def test_entries_are_per_agent_and_removed_on_retire(store: Store) -> None:
    with AgentInbox(store, "a") as a, AgentInbox(store, "b") as b:
        a.post("task", "for a")
        b.post("task", "for b")
        assert [e.content for e in b] == ["for b"]
        assert a.retire() == 1
        assert a.next() is None and b.pending() == 1


def test_next_waits_for_a_post_from_another_process(store: Store) -> None:
    poster = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from inbox import AgentInbox; time.sleep(0.3);"
         "AgentInbox(sys.argv[1], 'worker').post('task', 'late')", str(store.root)]
    )  # fmt: skip
    with AgentInbox(store, "worker") as inbox:
        entry = inbox.next(timeout=10)
    poster.wait(timeout=30)
    assert entry is not None and entry.content == "late"


@pytest.mark.parametrize(
    ("kind", "content", "sender"),
    [("bad kind!", "x", None), ("restore", "x", None), ("task", "a\x00b", None),
     ("task", "x", "../evil")],
)  # fmt: skip
def test_bad_entries_are_refused(store: Store, kind: str, content: str, sender: str) -> None:
    with AgentInbox(store, "worker") as inbox:
        with pytest.raises(InvalidInput):
            inbox.post(kind, content, sender=sender)
        assert inbox.pending() == 0


PAYLOADS = {
    "message": {"text": "hi", "files": ["a.py", "b.py"], "urgent": True},
    "system_message": {"level": "warn", "lines": [1, 2.5, None]},
    "signal": {"name": "SIGUSR1", "number": 10},
    "reset": None,
    "compact": {"keep_last": 20, "nested": {"deep": {"deeper": ["x"]}}},
}


def test_entries_carry_a_structured_payload_that_round_trips(store: Store) -> None:
    with AgentInbox(store, "worker") as inbox:
        for kind, payload in PAYLOADS.items():
            inbox.post(kind, f"a {kind}", sender="mayor", payload=payload)
        # Messages with payloads stay apart: each keeps its own data.
        inbox.post("message", "second", sender="mayor", payload={"n": 2})
        fresh = [(e.kind, e.payload) for e in inbox]
    assert fresh == [*PAYLOADS.items(), ("message", {"n": 2})]
    with AgentInbox(store, "worker") as inbox:  # replayed after a restart: the same data
        replayed = [(e.kind, e.payload) for e in inbox]
    assert replayed[0] == ("restore", {"entries": 6, "unacknowledged": 6})
    assert replayed[1:] == fresh


@pytest.mark.parametrize("payload", [{1, 2}, {"x": float("nan")}, {1: "int key"}, object()])
def test_a_payload_that_is_not_json_data_is_refused(store: Store, payload: object) -> None:
    with AgentInbox(store, "worker") as inbox:
        with pytest.raises(InvalidInput, match="payload"):
            inbox.post("task", "x", payload=payload)
        assert inbox.pending() == 0


def test_every_reopen_that_replays_starts_with_restore(store: Store) -> None:
    with AgentInbox(store, "worker") as inbox:
        inbox.post("task", "t1")
        inbox.post("task", "t2")  # never taken
    with AgentInbox(store, "worker") as inbox:
        got = [(e.kind, e.content) for e in inbox]
    assert got[0][0] == "restore" and got[1:] == [("task", "t1"), ("task", "t2")]
    assert "2 stored entries" in got[0][1]
