"""Seeds 000/001 in delivery: what fits in one injection, the seed's JSONL queue, the
heartbeat (reconcile and reaping), broadcasts to agents that start later."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from beads.store import Store
from inbox import Delivery
from inbox.queue import SessionQueue
from tests.conftest import GcRunner


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


def test_a_large_backlog_fills_the_cap_in_order_and_the_next_item_would_not_fit(
    store: Store,
) -> None:
    from inbox.render import render

    config = {"delivery": {"max_items": 400}, "hooks": {"max_context_chars": 6000}}
    with Delivery(store.root, config=lambda: config) as delivery:
        for n in range(300):  # lengths vary, so where the cap falls is not a multiple of one
            delivery.push(["dog"], f"item {n:03d} " + "x" * (n * 7 % 61), key=f"k{n}")
        drained = delivery.drain("s1", "dog")
        taken = [item.content for item in drained.items]
        assert taken == [f"item {n:03d} " + "x" * (n * 7 % 61) for n in range(len(taken))]
        assert len(drained.text) <= 6000 and drained.deferred == 300 - len(taken)
        left = delivery.drain("s2", "dog", deliver=False).items
        assert len(render([*drained.items, left[0]])) > 6000  # the next one would not fit


SEED_WRITER = """
import fcntl, json, os, sys, time
path, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for n in range(start, start + count):
    line = json.dumps({"id": f"u{n}", "type": "alert", "source": "ci", "content": f"line {n}",
                       "priority": 2, "timestamp": int(time.time() * 1000),
                       "dedup_key": f"seed:{n}", "ttl_seconds": 600}) + "\\n"
    fd = os.open(path, os.O_APPEND | os.O_CREAT | os.O_WRONLY, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, line.encode())
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
"""


def test_a_seed_writer_racing_drains_loses_no_line(delivery: Delivery, store: Store) -> None:
    path = store.root / ".runtime" / "inject-queue" / "s1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    writers = [
        subprocess.Popen([sys.executable, "-c", SEED_WRITER, str(path), str(n * 150), "150"])
        for n in range(2)
    ]
    delivered: list[str] = []
    while any(w.poll() is None for w in writers):
        delivered += [i.key for i in delivery.drain("s1", "dog", limit=1000).items]
    delivered += [i.key for i in delivery.drain("s1", "dog", limit=1000).items]
    assert all(w.returncode == 0 for w in writers)
    assert sorted(delivered) == sorted(f"seed:{n}" for n in range(300))


def test_seed_lines_get_the_seeds_defaults(delivery: Delivery, store: Store) -> None:
    queue = SessionQueue(store.root / ".runtime", "s1")
    now_ms = int(time.time() * 1000)
    lines = [
        {"content": "no key, no id"},
        {"content": "no key, no id"},  # the same line twice: one item
        {"id": "a", "content": "with an id"},
        {"id": "b", "content": "gone", "timestamp": now_ms - 20_000, "ttl_seconds": 10},
        {"dedup_key": "d1", "content": "kept", "timestamp": now_ms, "ttl_seconds": 600},
        {"dedup_key": "m1", "type": "mail", "content": "forged mail"},
        {"dedup_key": "g1", "type": "gate", "content": "forged gate"},
    ]
    queue.path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    drained = delivery.drain("s1", "dog")
    by_content = {i.content: i for i in drained.items}
    assert sorted(by_content) == ["kept", "no key, no id", "with an id"]
    assert by_content["with an id"].key == "queue:a" and by_content["with an id"].priority == 2
    assert by_content["no key, no id"].expires_at is None
    assert by_content["kept"].expires_at == pytest.approx(now_ms / 1000 + 600)
    assert sum("set aside" in p for p in drained.problems) == 2
    assert queue.bad_path.read_text().count("forged") == 2


@pytest.mark.parametrize(
    "line",
    [
        {"id": "far", "content": "year 3e297", "timestamp": 1e308, "ttl_seconds": 1e308},
        {"id": "past", "content": "before the epoch", "timestamp": -1e20},
        {"key": "ours", "content": "expires at 1e300", "expires_at": 1e300},
    ],
)
def test_a_queue_line_with_a_time_no_clock_shows_is_set_aside_not_stored(
    gc_store: GcRunner, line: dict
) -> None:
    queue = gc_store.cwd / ".beads" / ".runtime" / "inject-queue" / "s1.jsonl"
    queue.parent.mkdir(parents=True, exist_ok=True)
    queue.write_text(json.dumps(line) + "\n" + json.dumps({"id": "ok", "content": "fine"}) + "\n")
    env = {"GC_AGENT": "dog", "GC_SESSION_ID": "s1"}
    drained = gc_store("inbox", "drain", env=env)
    assert drained.returncode == 0, drained.stderr
    assert "fine" in drained.stdout and line["content"] not in drained.stdout
    assert "set aside" in drained.stderr
    # Nothing stored that a later list or drain could not show.
    listed = gc_store("--json", "inbox", "list", "--all", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [i["content"] for i in json.loads(listed.stdout)["items"]] == ["fine"]


def test_two_hooks_within_the_interval_reconcile_once(store: Store, monkeypatch) -> None:
    runs: list[str] = []
    monkeypatch.setattr(Delivery, "reconcile", lambda self, agent: runs.append(agent))
    config = {"delivery": {"reconcile_interval": "10m"}}
    with Delivery(store.root, config=lambda: config) as delivery:
        assert delivery.heartbeat("dog", force=True)  # SessionStart
        assert not delivery.heartbeat("dog")  # a prompt right after
        assert not delivery.heartbeat("dog")
        assert runs == ["dog"]
        mark = store.root / ".runtime" / "heartbeat" / "dog"
        old = time.time() - 601
        os.utime(mark, (old, old))  # ten minutes later
        assert delivery.heartbeat("dog") and not delivery.heartbeat("dog")
        assert runs == ["dog", "dog"]


def test_the_heartbeat_reaps(delivery: Delivery) -> None:
    delivery.push(["dog"], "short-lived", key="k", ttl=0.01)
    time.sleep(0.05)
    delivery.heartbeat("dog", force=True)
    assert delivery.items("dog", ("pending", "expired")) == []


def test_reconcile_brings_back_lost_decision_and_gate_items(store: Store) -> None:
    from gates import beadgates, decisions

    decision, _gate = decisions.create_decision(store, "Ship?", ["y", "n"])
    requester = decision.meta.get("requested_by") or decision.sender
    decisions.respond(store, decision.id, "y")
    gate = beadgates.create_gate(store, "human", waiters=["dog"])
    beadgates.resolve_gate(store, gate.id, "done")
    with Delivery(store.root) as delivery:
        with delivery.write() as db:
            db.execute("DELETE FROM items")  # lost (a database restored from a backup)
        delivery.heartbeat(requester, force=True)
        delivery.heartbeat("dog", force=True)
        assert [i.key for i in delivery.items(requester)] == [f"decision:{decision.id}"]
        assert [i.key for i in delivery.items("dog")] == [f"gate:{gate.id}"]
        delivery.drain("s1", "dog")
        delivery.heartbeat("dog", force=True)  # delivered once: never again
        assert delivery.items("dog") == []


def test_a_broadcast_reaches_an_agent_that_starts_later_within_its_ttl(delivery: Delivery) -> None:
    delivery.register("s-dog", "dog")  # known now: its copy at once
    ((copy, created),) = delivery.broadcast("maintenance at noon", key="b1", to="all", ttl=0.5)
    assert created and copy.agent == "dog" and copy.expires_at is not None
    # `newbie` has never had a session: its first drain gets the broadcast, once.
    assert [i.content for i in delivery.drain("s-new", "newbie").items] == ["maintenance at noon"]
    assert delivery.drain("s-new", "newbie").items == []
    assert [i.key for i in delivery.drain("s-dog", "dog").items] == ["b1"]
    time.sleep(0.6)
    assert delivery.drain("s-late", "latecomer").items == []  # after the TTL: not any more
    assert delivery.reap() >= 1  # the standing row, expired
    assert delivery.drain("s-late", "latecomer").items == []


def test_a_rig_broadcast_reaches_members_only_and_always_has_a_ttl(store: Store) -> None:
    config: dict = {"rigs": {"web": ["dog"]}}
    with Delivery(store.root, config=lambda: config) as delivery:
        delivery.broadcast("deploy frozen", key="r1", rig="web")
        config["rigs"]["web"] = ["dog", "cat"]  # cat joins the rig after the push
        (item,) = delivery.drain("s-cat", "cat").items
        assert item.expires_at == pytest.approx(time.time() + 24 * 3600, abs=60)
        assert delivery.drain("s-owl", "owl").items == []  # not a member


def test_gc_push_to_all_stands_for_later_agents(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc("inbox", "push", "--to", "all", "hello everyone", "--dedup", "hi")
    drained = gc.json("inbox", "drain", "--session", "s9", env={"GC_AGENT": "fresh"})
    assert [i["content"] for i in drained["items"]] == ["hello everyone"]


def test_a_gate_waits_for_a_bead_of_another_named_store(store: Store, tmp_path) -> None:
    from beads.errors import NotFound
    from beads.settings.localconfig import set_local
    from gates import beadgates

    other, _ = Store.init(tmp_path / "web", agent="tester")
    try:
        task = other.create("task", "deploy the site")
        with pytest.raises(NotFound):  # the store is not named on this machine yet
            beadgates.create_gate(store, f"bead:web:{task.id}", waiters=["dog"])
        set_local(store.root / ".git", "stores.web", str(tmp_path / "web"))
        gate = beadgates.create_gate(store, f"bead:web:{task.id}", waiters=["dog"])
        assert beadgates.check_gates(store) == []  # still open there
        other.close_bead(task.id, "done")
        (outcome,) = beadgates.check_gates(store)
        assert outcome.gate_id == gate.id and outcome.action == "resolve"
        assert store.get(gate.id).status == "closed"
    finally:
        other.close()


@pytest.fixture
def rig_store(gc_store: GcRunner) -> GcRunner:
    """The `gc` runner in a store as `gc init` makes it (a copy), whose config puts mayor and
    dog in the rig gastown."""
    assert gc_store("config", "set", "rigs.gastown", '["mayor", "dog"]').returncode == 0
    return gc_store


def test_a_push_without_to_goes_to_every_agent_of_the_current_rig(rig_store: GcRunner) -> None:
    gc = rig_store
    # The pushing agent's rig (config.yaml lists mayor in gastown).
    pushed = gc.json("inbox", "push", "--type", "alert", "CI build failed on main",
                     env={"GC_AGENT": "mayor"})  # fmt: skip
    assert sorted(i["agent"] for i in pushed["items"]) == ["gastown/dog", "gastown/mayor"]
    assert all(i["key"].startswith("rig:gastown:mayor:") for i in pushed["items"])
    # $GC_RIG names the rig of a pusher in none (a CI script).
    pushed = gc.json("inbox", "push", "deploy done", env={"GC_RIG": "gastown"})
    assert sorted(i["agent"] for i in pushed["items"]) == ["gastown/dog", "gastown/mayor"]


def test_a_push_without_to_and_no_rig_known_is_refused_naming_to(rig_store: GcRunner) -> None:
    gc = rig_store
    refused = gc("inbox", "push", "--type", "alert", "CI build failed on main")
    assert refused.returncode == 30 and "--to" in refused.stderr
    assert gc.json("inbox", "list", "--all")["items"] == []  # not even to the pusher


def test_rig_and_to_together_are_refused_naming_the_full_name(rig_store: GcRunner) -> None:
    gc = rig_store
    refused = gc("inbox", "push", "--rig", "gastown", "--to", "mayor", "Deploy failed")
    assert refused.returncode == 30 and "--to gastown/mayor" in refused.stderr
    assert gc.json("inbox", "list", "--all", env={"GC_AGENT": "mayor"})["items"] == []


def _session_start(gc: GcRunner, session: str, agent: str) -> str:
    event = json.dumps({"session_id": session, "hook_event_name": "SessionStart",
                        "source": "startup"})  # fmt: skip
    out = gc("hook", "run", input=event, env={"GC_AGENT": agent}).stdout
    return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else ""


def test_rig_slash_name_reaches_the_session_registered_by_its_bare_name(
    gc_store: GcRunner,
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    # Written before the rig was listed: the old item and mail are under the bare name.
    gc("inbox", "push", "--to", "mayor", "old item", "--dedup", "old")
    gc("mail", "send", "mayor", "-s", "old mail", "-m", "from before the rig")
    gc("config", "set", "rigs.gastown", '["mayor", "dog"]')
    pushed = gc.json("inbox", "push", "--to", "gastown/mayor", "Deploy failed")
    assert [i["agent"] for i in pushed["items"]] == ["gastown/mayor"]
    context = _session_start(gc, "s-mayor", "mayor")
    assert "Deploy failed" in context and "old item" in context and "old mail" in context
    sessions = gc.json("session", "list")["sessions"]
    assert [(s["session"], s["agent"]) for s in sessions] == [("s-mayor", "gastown/mayor")]
    # Mail read by either name: the same mailbox.
    for name in ("mayor", "gastown/mayor"):
        inbox = gc.json("mail", "inbox", env={"GC_AGENT": name})
        assert [m["subject"] for m in inbox["messages"]] == ["old mail"]
    # Another rig's agent of the same bare name is someone else.
    assert _session_start(gc, "s-other", "web/mayor") == ""


def test_default_keys_follow_the_seed_and_only_dedup_makes_a_retry_idempotent(
    gc_store: GcRunner,
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    alert = gc.json("inbox", "push", "--to", "dog", "--type", "alert", "--source", "ci", "red")
    assert alert["items"][0]["key"].startswith("alert:ci:")
    gc("inbox", "push", "--to", "all", "maintenance")
    drained = gc.json("inbox", "drain", "--session", "s-new", env={"GC_AGENT": "newbie"})
    assert [i["key"][:10] for i in drained["items"]] == ["broadcast:"]
    # The default is not an idempotent retry: the same push twice is two items.
    for _ in range(2):
        gc("inbox", "push", "--to", "cat", "same text")
    assert len(gc.json("inbox", "list", env={"GC_AGENT": "cat"})["items"]) == 2
    for _ in range(2):
        gc("inbox", "push", "--to", "owl", "same text", "--dedup", "retry-1")
    assert len(gc.json("inbox", "list", env={"GC_AGENT": "owl"})["items"]) == 1


def test_items_recovered_by_reconciliation_nudge_an_idle_session(gc_store: GcRunner) -> None:
    import sqlite3

    from inbox.arrivals import announce

    gc = gc_store  # a store as `gc init` makes it (a copy)
    log = gc.cwd / "nudges.log"
    argv = ["sh", "-c", f'echo "$0 $1" >> {log}', "{session}", "{text}"]
    gc("config", "set", "agents.dog.nudge", json.dumps(argv))
    _session_start(gc, "s1", "dog")
    gc("mail", "send", "dog", "-s", "lost item", "-m", "body")  # busy: no nudge
    stop = json.dumps({"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": False})
    gc("hook", "run", input=stop, env={"GC_AGENT": "dog"})
    root = gc.cwd / ".beads"
    with sqlite3.connect(root / ".runtime" / "delivery.sqlite3") as db:
        assert db.execute("DELETE FROM items WHERE agent = 'dog'").rowcount == 1
    announce(root)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (log.exists() and log.read_text().strip()):
        time.sleep(0.1)
    (line,) = log.read_text().splitlines()
    assert line.startswith("s1 ") and "lost item" in line


def test_delivered_content_is_reaped_after_a_day_and_its_key_kept_past_the_stream(
    delivery: Delivery,
) -> None:
    delivery.push(["dog"], "deploy done", key="k1")
    assert [i.key for i in delivery.drain("s1", "dog").items] == ["k1"]
    assert delivery.keep_keys() == 3 * 86400 + 120  # the stream's max age + dedup window

    def settled(seconds_ago: float) -> None:
        with delivery.write() as db:
            db.execute("UPDATE items SET settled_at = ?", (time.time() - seconds_ago,))

    settled(23 * 3600)
    delivery.reap()
    assert [i.content for i in delivery.items("dog", ("delivered",))] == ["deploy done"]
    settled(25 * 3600)  # past delivery.keep_delivered (24 h): the content goes, the key stays
    delivery.reap()
    assert [i.content for i in delivery.items("dog", ("delivered",))] == [""]
    ((_, created),) = delivery.push(["dog"], "deploy done", key="k1")
    assert not created and delivery.drain("s1", "dog").items == []
    settled(3 * 86400 + 121)  # past the stream's window: nothing can bring it again
    delivery.reap()
    assert delivery.items("dog", ("delivered",)) == []


def test_the_key_window_follows_the_streams_settings(store: Store) -> None:
    config = {"delivery": {"keep_delivered": "1h", "nats": {"max_age": "7d", "dedup_window": 60}}}
    with Delivery(store.root, config=lambda: config) as delivery:
        assert delivery.keep_keys() == 7 * 86400 + 60
        config["delivery"]["keep_delivered"] = "30d"
        assert delivery.keep_keys() == 30 * 86400


def test_the_seeds_own_decision_line_is_derived_from_its_bead(rig_store: GcRunner) -> None:
    import sqlite3

    gc = rig_store  # the requester is mayor of rig gastown: the line's agent is the session's
    made = gc.json("decision", "create", "--prompt", "Deploy to prod?", "--option", "yes",
                   "--option", "no", env={"GC_AGENT": "mayor"})  # fmt: skip
    decision = made["bead"]["id"]
    gc("decision", "respond", decision, "--select", "yes")
    root = gc.cwd / ".beads"
    with sqlite3.connect(root / ".runtime" / "delivery.sqlite3") as db:  # not here yet
        db.execute("DELETE FROM items WHERE key = ?", (f"decision:{decision}",))
    # Seed 001's example line, as written, with a real decision's id, and as written.
    seed_line = {"id": "uuid", "type": "decision", "source": "bd decision respond",
                 "content": "<system-reminder>Decision X resolved: Y</system-reminder>",
                 "priority": 2, "timestamp": int(time.time() * 1000),
                 "dedup_key": f"decision:{decision}", "ttl_seconds": 600}  # fmt: skip
    unknown = {**seed_line, "dedup_key": "decision:hq-abc123"}
    queue = SessionQueue(root / ".runtime", "s-mayor")
    queue.append(seed_line)
    queue.append(unknown)
    drained = gc.json("inbox", "drain", "--session", "s-mayor", env={"GC_AGENT": "mayor"})
    (item,) = drained["items"]
    assert item["agent"] == "gastown/mayor" and item["key"] == f"decision:{decision}"
    assert "Deploy to prod?" in item["content"] and "Decision X" not in item["content"]
    assert item["source"] != "bd decision respond"
    aside = (root / ".runtime" / "inject-queue" / "s-mayor.bad.jsonl").read_text()
    assert "hq-abc123" in aside and f"decision:{decision}" not in aside


@pytest.mark.parametrize(
    ("line", "missing"),
    [({"key": "k1"}, "content"), ({"id": "a"}, "content"), ({"key": "k2", "content": ""}, None)],
)
def test_a_queue_line_without_content_is_set_aside_naming_the_field(
    gc_store: GcRunner, line: dict, missing: str | None
) -> None:
    queue = gc_store.cwd / ".beads" / ".runtime" / "inject-queue" / "s1.jsonl"
    queue.parent.mkdir(parents=True, exist_ok=True)
    queue.write_text(json.dumps(line) + "\n" + json.dumps({"id": "ok", "content": "fine"}) + "\n")
    drained = gc_store("inbox", "drain", env={"GC_AGENT": "dog", "GC_SESSION_ID": "s1"})
    assert drained.returncode == 0, drained.stderr
    assert "fine" in drained.stdout
    # What the line lacks, in words: never Python's own words for a call.
    assert "__init__" not in drained.stderr and "positional" not in drained.stderr
    said = "an inbox item needs 'content'" if missing else "item content must not be empty"
    assert f"queue item set aside: {said}" in drained.stderr
