"""The inbox layer knows no layer above it: a Delivery derives with the `ProducerSet` it is
given, or the program's default set (an entry point), and the Stop hook's loop counter is
gates' own table."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from beads.store import Store
from gates.hooks import run_hook
from inbox import Delivery, Item
from inbox.producers import Change, ProducerSet

INBOX = Path(__file__).resolve().parent.parent / "inbox"


def python(code: str, cwd: Path) -> str:
    """Run `code` in a fresh interpreter (the producer registry is per process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout


def without_the_producer_entry_point(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python finds every installed package but gc-beads' own
    distribution (so no `gc-beads.producers` entry point), and this project's source."""
    import sysconfig

    farm = tmp_path / "site-packages"
    farm.mkdir()
    installed = Path(sysconfig.get_paths()["purelib"])
    for entry in installed.iterdir():
        if not entry.name.lower().startswith(("gc_beads", "_editable_impl_gc_beads")):
            (farm / entry.name).symlink_to(entry)
    project = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GC_", "PYTHON"))}
    # Run with `python -S`: no site directory, so only these two paths are searched.
    return {**env, "PYTHONPATH": f"{project}{os.pathsep}{farm}"}


def test_without_an_installed_producer_set_a_delivery_does_not_follow_git_and_says_so(
    store: Store, tmp_path: Path
) -> None:
    Delivery(store.root).close()  # the database starts following at the current commit
    with store.batch() as batch:  # mail committed without its items (a send killed mid-way)
        bead = batch.create(type="message", title="hi", assignee="dog", meta={"read": False})
    code = (
        "from pathlib import Path\n"
        "from inbox import Delivery\n"
        "from inbox.follow import watermark\n"
        f"d = Delivery(Path({str(store.root)!r}))\n"
        "before = watermark(d)\n"
        "print(d.refresh(), watermark(d) == before)\n"  # nothing derived, nothing skipped
        f"Delivery(Path({str(store.root)!r})).refresh()\n"  # said once, however often asked
        "from gc_beads.producers import default_producers\n"
        f"d = Delivery(Path({str(store.root)!r}), default_producers())\n"
        "print(d.refresh(), [i.key for i in d.items('dog')])\n"
    )
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=store.root, capture_output=True,
                          text=True, env=without_the_producer_entry_point(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["0 True", f"1 ['mail:{bead.id}']"]
    said = [line for line in done.stderr.splitlines() if "no producer set installed" in line]
    assert len(said) == 1 and "gc-beads.producers:default" in said[0]


def test_a_delivery_without_producers_follows_git_with_the_default_set(store: Store) -> None:
    Delivery(store.root).close()  # the database starts following at the current commit
    code = (  # another process commits mail and derives nothing (a send killed mid-way)
        "from beads.store import Store\n"
        f"with Store.open({str(store.root)!r}, agent='mayor') as store:\n"
        "    with store.batch() as batch:\n"
        "        b = batch.create(type='message', title='hi', assignee='dog', "
        "meta={'read': False})\n"
        "print(b.id)\n"
    )
    bead_id = python(code, store.root).strip()
    with Delivery(store.root) as delivery:
        assert [i.key for i in delivery.drain("s1", "dog").items] == [f"mail:{bead_id}"]


def test_a_drain_with_nothing_new_does_not_look_the_default_set_up(store: Store) -> None:
    Delivery(store.root).close()  # the database starts following at the current commit
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from beads.store import Store\n"
        "from inbox import Delivery\n"
        f"root = Path({str(store.root)!r})\n"
        "with Delivery(root) as d:\n"
        "    d.drain('s1', 'dog')\n"
        "    print('importlib.metadata' in sys.modules)\n"
        "    with Store.open(root, agent='mayor') as store:\n"
        "        store.create('message', 'hi', assignee='dog', meta={'read': False})\n"
        "    keys = [i.key for i in d.drain('s1', 'dog').items]\n"
        "    print('importlib.metadata' in sys.modules, len(keys))\n"
    )
    assert python(code, store.root).splitlines() == ["False", "True 1"]


def items_of_tasks(changes: Sequence[Change]) -> list[Item]:
    """A producer of these tests: an item for each new task's assignee."""
    return [
        Item.new(c.new.assignee, f"task {c.new.title}", key=f"task:{c.new.id}", type="event")
        for c in changes
        if c.created and c.new is not None and c.new.type == "task" and c.new.assignee
    ]


def test_a_delivery_given_a_producer_set_derives_with_it_and_not_with_the_default(
    store: Store,
) -> None:
    tasks = ProducerSet()
    tasks.add_deriver("task", items_of_tasks)
    with Delivery(store.root, tasks) as delivery:
        delivery.refresh()  # at the branch
        with store.batch() as batch:
            task = batch.create(type="task", title="ship", assignee="dog")
            mail = batch.create(type="message", title="hi", assignee="dog", meta={"read": False})
        assert delivery.refresh() == 1
        keys = [i.key for i in delivery.drain("s1", "dog").items]
    assert keys == [f"task:{task.id}"]  # and no `mail:<id>`, the default set's item
    assert mail.id not in str(keys)


def test_two_deliveries_with_different_sets_do_not_see_each_others_producers(
    tmp_path: Path,
) -> None:
    stores = [Store.init(tmp_path / name, agent="tester")[0] for name in ("one", "two")]
    one, two = ProducerSet(), ProducerSet()
    one.add_deriver("task", items_of_tasks)
    two.add_section("event", lambda items: [f"{len(items)} event(s), shown by set two"])
    first, second = Delivery(stores[0].root, one), Delivery(stores[1].root, two)
    try:
        for store, delivery in zip(stores, (first, second), strict=True):
            delivery.refresh()
            store.create("task", "ship", assignee="dog")
            delivery.push(["dog"], "lunch at noon", key="n1")
        assert first.refresh() == 1 and second.refresh() == 0  # only set one derives tasks
        text_one = first.drain("s1", "dog").text
        text_two = second.drain("s1", "dog").text
    finally:
        first.close(), second.close()
        for store in stores:
            store.close()
    assert "task ship" in text_one and "lunch at noon" in text_one
    assert "shown by set two" not in text_one  # set two's section is not set one's
    assert "2 event(s), shown by set two" not in text_two  # nor set one's task
    assert "1 event(s), shown by set two" in text_two and "task ship" not in text_two
    assert one.derived_types() == {"task"} and two.derived_types() == frozenset()


def test_the_former_registry_still_works_and_warns(store: Store) -> None:
    code = (
        "import warnings\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        "from pathlib import Path\n"
        "from inbox import Delivery, producers\n"
        "import gates\n"
        "for call in (gates.register_producers,\n"
        "             lambda: producers.register_section('alert', lambda its: ['an alert'])):\n"
        "    try:\n"
        "        call()\n"
        "    except DeprecationWarning as exc:\n"
        "        print('warned:', str(exc).split(':')[0])\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "producers.register_section('alert', lambda its: ['an alert, in its own words'])\n"
        f"d = Delivery(Path({str(store.root)!r}))\n"
        "d.push(['dog'], 'main is red', key='b1', type='alert', source='ci')\n"
        "print(d.drain('s1', 'dog').text.splitlines()[1])\n"
    )
    assert python(code, store.root).splitlines() == [
        "warned: gates.register_producers() is deprecated",
        "warned: inbox.producers.register_section is deprecated",
        "an alert, in its own words",
    ]


def test_declared_producers_are_imported_on_first_need(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from gc_beads.producers import default_producers\n"
        "producers = default_producers()\n"
        "print(sorted(producers.derived_types()), 'mail.notify' in sys.modules)\n"
        "derive = producers.deriver('message')\n"
        "print(derive.__module__, 'gates.beadgates' in sys.modules)\n"
        "print([r.__module__ for r in producers.reconcilers()])\n"
    )
    assert python(code, tmp_path).splitlines() == [
        "['decision', 'gate', 'message'] False",
        "mail.notify False",
        "['mail.notify', 'gates.beadgates', 'gates.decisions']",  # each reconciles
    ]


def test_a_hook_with_nothing_to_derive_imports_no_producer(store: Store) -> None:
    Delivery(store.root).close()
    with store.batch() as batch:  # a commit with no item to derive: stepped over
        batch.create(type="task", title="a task")
    code = (
        "import json, sys\n"
        "from gates.hooks import run_hook\n"
        f"run_hook({{'session_id': 's', 'hook_event_name': 'UserPromptSubmit'}}, "
        f"beads_dir={str(store.root)!r}, agent='dog')\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = set(json.loads(python(code, store.root)))
    assert "inbox.producers" in loaded
    assert not {m for m in loaded if m.split(".")[0] == "mail"}
    assert not loaded & {"gates.decisions", "gates.beadgates"}


def test_the_stop_loop_counter_is_gates_own_table(store: Store) -> None:
    gates = {
        "disabled": ["commit-push", "bead-update"],
        "session": {"tests-pass": {"hook": "Stop", "mode": "strict"}},  # never marked: blocks
    }
    with store.batch() as batch:
        batch.set_config({**store.config, "gates": gates})

    def stop(active: bool) -> dict | None:
        payload = {"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": active}
        return run_hook(payload, beads_dir=str(store.root), agent="dog")

    assert stop(False)["decision"] == "block"
    assert stop(True)["decision"] == "block"
    assert stop(True)["decision"] == "block"
    reply = stop(True)  # three blocked stops in a row: the detector lets the agent stop
    assert "decision" not in reply and "after 3 blocked stops" in reply["systemMessage"]
    assert stop(True)["decision"] == "block"  # and counts afresh
    with sqlite3.connect(store.root / ".runtime" / "sessions.sqlite3") as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(sessions)")]
        counted = db.execute("SELECT session, blocks FROM stop_blocks").fetchall()
    assert "stop_blocks" not in columns and counted == [("s1", 1)]


def test_sessions_of_an_older_file_with_the_counter_column_still_read(tmp_path: Path) -> None:
    Store.init(tmp_path, agent="tester")[0].close()
    runtime = tmp_path / ".beads" / ".runtime"
    runtime.mkdir(exist_ok=True)
    with sqlite3.connect(runtime / "sessions.sqlite3") as db:  # as gc made it until now
        db.executescript(
            "CREATE TABLE sessions(session TEXT PRIMARY KEY, agent TEXT NOT NULL, "
            "state TEXT NOT NULL, cwd TEXT, started_at REAL NOT NULL, last_hook TEXT, "
            "last_hook_at REAL NOT NULL, ended_at REAL, nudged_at REAL, nudge_outcome TEXT, "
            "nudge_detail TEXT, stop_blocks INTEGER NOT NULL DEFAULT 0);"
            "CREATE TABLE nudges(agent TEXT PRIMARY KEY, last_at REAL NOT NULL);"
        )
    with Delivery(tmp_path / ".beads") as delivery:
        delivery.register("s1", "dog", cwd="/work")
        found = [(s.session, s.agent, s.cwd) for s in delivery.sessions()]
    assert found == [("s1", "dog", "/work")]


def test_a_producer_shows_its_items_its_own_way(store: Store) -> None:
    # Mail's wording lives in mail (mail/section.py), not in the inbox layer; any producer
    # may register a section for its item type, and the drain shows it after the generic list.
    assert not any("unread message" in p.read_text() for p in INBOX.glob("*.py"))
    code = (
        "from pathlib import Path\n"
        "from inbox import Delivery\n"
        "from inbox.producers import ProducerSet\n"
        "board = ProducerSet()\n"
        "board.add_section('alert', lambda its: [f'{len(its)} alert(s): see the board'])\n"
        f"d = Delivery(Path({str(store.root)!r}), board)\n"
        "d.push(['dog'], 'main is red', key='b1', type='alert', source='ci')\n"
        "d.push(['dog'], 'lunch at noon', key='n1', type='event', source='eve')\n"
        "print(d.drain('s1', 'dog').text)\n"
    )
    text = python(code, store.root)
    assert "gc inbox: 1 new item(s)." in text and "lunch at noon" in text
    assert text.index("lunch at noon") < text.index("1 alert(s): see the board")
    assert "main is red" not in text  # the section said it its own way


def test_delivery_follow_still_refreshes_and_warns_it_is_now_refresh(store: Store) -> None:
    import pytest

    with Delivery(store.root, producers=ProducerSet()) as delivery:
        delivery.refresh()  # at the branch
        store.create("task", "new work", assignee="dog")
        with pytest.warns(DeprecationWarning, match="use Delivery.refresh"):
            assert delivery.follow() == 0  # an empty set: the commit seen, nothing derived
        assert delivery.refresh() == 0
