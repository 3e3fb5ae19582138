"""The inbox layer knows no layer above it (tests/test_layers.py): producers register with
`inbox.producers`, the program (`gc_beads.producers`) declares them, and the Stop hook's loop
counter is gates' own table."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from beads.store import Store
from gates.hooks import run_hook
from inbox import Delivery

INBOX = Path(__file__).resolve().parent.parent / "inbox"


def python(code: str, cwd: Path) -> str:
    """Run `code` in a fresh interpreter (the producer registry is per process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout


def test_a_delivery_follows_git_only_once_the_producers_are_declared(store: Store) -> None:
    Delivery(store.root).close()  # the database starts following at the current commit
    with store.batch() as batch:  # mail committed without its items (a send killed mid-way)
        bead = batch.create(type="message", title="hi", assignee="dog", meta={"read": False})
    code = (
        "from pathlib import Path\n"
        "from inbox import Delivery\n"
        "from inbox.follow import watermark\n"
        f"d = Delivery(Path({str(store.root)!r}))\n"
        "before = watermark(d)\n"
        "print(d.follow(), watermark(d) == before)\n"  # nothing derived, nothing skipped
        "from gc_beads.producers import default_producers\n"
        "default_producers()\n"
        "print(d.follow(), [i.key for i in d.items('dog')])\n"
    )
    lines = python(code, store.root).splitlines()
    assert lines == ["0 True", f"1 ['mail:{bead.id}']"]


def test_declared_producers_are_imported_on_first_need(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from inbox import producers\n"
        "from gc_beads.producers import default_producers\n"
        "default_producers()\n"
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
        "from inbox import Delivery, producers\n"
        "producers.register_section('alert', lambda its: [f'{len(its)} alert(s): see the board'])\n"
        f"d = Delivery(Path({str(store.root)!r}))\n"
        "d.push(['dog'], 'main is red', key='b1', type='alert', source='ci')\n"
        "d.push(['dog'], 'lunch at noon', key='n1', type='event', source='eve')\n"
        "print(d.drain('s1', 'dog').text)\n"
    )
    text = python(code, store.root)
    assert "gc inbox: 1 new item(s)." in text and "lunch at noon" in text
    assert text.index("lunch at noon") < text.index("1 alert(s): see the board")
    assert "main is red" not in text  # the section said it its own way


def test_the_former_register_producers_still_declares_them_and_warns(tmp_path: Path) -> None:
    code = (
        "import warnings\n"
        "warnings.simplefilter('error')\n"
        "from inbox import producers\n"
        "import gates\n"
        "try:\n"
        "    gates.register_producers()\n"
        "except DeprecationWarning as warned:\n"
        "    print('warned:', warned)\n"
        "warnings.simplefilter('ignore')\n"
        "gates.register_producers()\n"
        "print(producers.declared(), sorted(producers.derived_types()))\n"
    )
    lines = python(code, tmp_path).splitlines()
    assert lines[0].startswith("warned: gates.register_producers() is deprecated")
    assert lines[1] == "True ['decision', 'gate', 'message']"
