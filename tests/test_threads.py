"""Work threads (seed 002): the `inbox` program, leases, transitions, waiting."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from beads.errors import StorageError
from beads.index.reader import branch_head
from beads.store import Store
from mail.beadmail import BeadMail
from mail.threads import InvalidTransition, LeaseConflict, Threads
from tests.conftest import GcRunner, copy_store, forked_together

INBOX = str(Path(sys.executable).parent / "inbox")  # the installed program


def inbox(
    cwd: Path, *args: str, check: int | None = 0, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the `inbox` program in `cwd` (in this process; with `process` the installed
    program), its exit code checked against `check` unless that is None."""
    result = GcRunner(cwd, program="inbox")(*args, process=process)
    if check is not None:
        assert result.returncode == check, (args, result.stdout, result.stderr)
    return result


def inbox_json(cwd: Path, *args: str, check: int | None = 0, process: bool = False) -> dict:
    """The `inbox` program's `--json` answer, run in `cwd` (see `inbox`)."""
    return json.loads(inbox(cwd, *args, "--json", check=check, process=process).stdout)


def in_process(*args: str) -> tuple[int, str, str]:
    """Run the `inbox` program here (its arguments name the store): exit code, stdout,
    stderr."""
    result = inbox(Path.cwd(), *args, check=None)
    return result.returncode, result.stdout, result.stderr


@pytest.fixture
def threads(tmp_path: Path, store_template: Path) -> Threads:
    copy_store(store_template, tmp_path / ".beads")  # a copy of an init
    store = Store.open(tmp_path, agent="leader")
    api = Threads(store)
    yield api
    api.close()
    store.close()


THREAD_KEYS = {
    "thread_id",
    "run_id",
    "task_id",
    "subject",
    "created_by",
    "assigned_to",
    "status",
    "priority",
    "priority_level",
    "created_at",
    "updated_at",
    "lease",
}
MESSAGE_KEYS = {
    "message_id",
    "thread_id",
    "event_id",
    "from_agent",
    "to_agent",
    "kind",
    "summary",
    "body",
    "payload_json",
    "artifacts",
    "created_at",
}


def test_inbox_without_its_db_says_what_to_do_in_inbox_terms(tmp_path: Path) -> None:
    assert inbox_json(tmp_path, "init", "--db", "coord")["created"] is True
    lost = inbox(tmp_path, "fetch", check=40)
    assert lost.stderr == (
        "inbox: no inbox database here or above; run 'inbox init' to make one, "
        "or pass --db DIR (or set $GC_BEADS_DIR) to use an existing one\n"
    )
    missing = tmp_path / "no db"
    named = inbox(tmp_path, "fetch", "--db", str(missing), "--json", check=40)
    assert json.loads(named.stdout)["error"] == {
        "code": "not_found",
        "message": f"no inbox database at {missing}; to make one there, run: "
        f"inbox init --db '{missing}'",
    }
    assert inbox(tmp_path, "fetch", "--db", "coord", check=10)  # the one made: nothing yet
    said = GcRunner(tmp_path)("thread", "fetch")  # gc says it in its own terms
    assert said.returncode == 40 and "run 'gc init' to create one" in said.stderr


def test_seed_worker_protocol_through_the_inbox_program(tmp_path: Path) -> None:
    db = ".agents/coord.db"
    assert inbox_json(tmp_path, "init", "--db", db)["created"] is True
    sent = inbox_json(
        tmp_path,
        "send", "--db", db, "--from", "leader", "--to", "backend-worker", "--subject",
        "Post CRUD", "--run", "R1", "--task", "T4", "--priority", "high", "--body", "Routes.",
    )  # fmt: skip
    thr = sent["thread"]["thread_id"]
    assert THREAD_KEYS <= set(sent["thread"]) and MESSAGE_KEYS <= set(sent["message"])
    assert (sent["thread"]["priority"], sent["thread"]["priority_level"]) == ("high", 1)

    # The seed's own commands, thread ids substituted (--db added: the store is not here).
    def seed(command: str, check: int = 0, process: bool = False) -> dict:
        args = command.replace("thr_123", thr).split("'")
        words = [w for i, part in enumerate(args) for w in ([part] if i % 2 else part.split())]
        return inbox_json(tmp_path, *words[1:], "--db", db, check=check, process=process)

    fetched = seed("inbox fetch --agent backend-worker --status pending --json")
    assert [t["thread_id"] for t in fetched["threads"]] == [thr]
    claimed = seed("inbox claim --agent backend-worker --thread thr_123 --lease-seconds 900 --json")
    assert claimed["thread"]["status"] == "claimed"
    assert claimed["thread"]["assigned_to"] == "backend-worker"
    assert claimed["lease"]["agent"] == "backend-worker"
    seed(
        "inbox update --agent backend-worker --thread thr_123 --status in_progress "
        "--summary 'Implementing post CRUD routes' --json"
    )
    blocked = seed(
        "inbox update --agent backend-worker --thread thr_123 --status blocked --summary "
        "'Need auth decision' --payload-json "
        """'{"question":"Should admin auth use email/password in MVP?"}' --json"""
    )
    assert blocked["thread"]["status"] == "blocked"
    question = blocked["message"]
    assert question["kind"] == "question" and question["to_agent"] == "leader"
    assert question["payload_json"] == {"question": "Should admin auth use email/password in MVP?"}

    waiter = subprocess.Popen(
        [INBOX, "wait-reply", "--thread", thr, "--after-event", str(question["event_id"]),
         "--timeout-seconds", "30", "--json", "--db", db],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    answer = seed(  # the leader's answer from a process, landing while the waiter starts
        "inbox reply --from leader --to backend-worker --thread thr_123 --kind answer --summary "
        "'Use email/password for MVP' --body "
        "'Use a simple credential flow for the first iteration.' --json",
        process=True,
    )["message"]
    out, _ = waiter.communicate(timeout=30)
    woke = json.loads(out)
    assert waiter.returncode == 0
    assert (woke["command"], woke["woke"]) == ("wait-reply", True)
    assert woke["message"]["message_id"] == answer["message_id"]
    assert woke["message"]["summary"] == "Use email/password for MVP"
    assert woke["next_event_id"] == answer["event_id"]

    (tmp_path / "result.md").write_text("Routes and tests.\n")
    done = seed(
        "inbox done --agent backend-worker --thread thr_123 --summary 'Post CRUD implemented' "
        "--body-file result.md --artifact result.md --json"
    )
    assert done["thread"]["status"] == "done" and done["thread"]["lease"] is None
    artifact = done["message"]["artifacts"][0]
    assert artifact["size"] == 18 and len(artifact["sha256"]) == 64

    shown = seed("inbox show --thread thr_123 --json")
    kinds = [m["kind"] for m in shown["messages"]]
    assert kinds == [
        "task", "event", "progress", "event", "question", "event", "answer", "result", "event",
    ]  # fmt: skip
    ids = [m["event_id"] for m in shown["messages"]]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    # Messages with a recipient are that agent's mail too.
    with Store.open(tmp_path / db) as store:
        assert {m.subject for m in BeadMail(store).inbox("leader")} == {
            "Need auth decision",
            "Post CRUD implemented",
        }


CLAIM = "from gc_beads.entry import inbox_script\ninbox_script()\n"
RACER = textwrap.dedent(
    """
    import json, random, sys
    from beads.store import Store
    from mail.threads import LeaseConflict, Threads
    agent, ids = sys.argv[1], sys.argv[2:]
    random.shuffle(ids)
    with Store.open(".") as store:
        api = Threads(store)
        outcome = {}
        for thread in ids:
            try:
                api.claim(agent, thread, lease_seconds=600)
                outcome[thread] = "won"
            except LeaseConflict as exc:
                outcome[thread] = exc.code
    print(json.dumps(outcome))
    """
)


@pytest.mark.slow
def test_eight_processes_race_to_claim_twenty_threads(tmp_path: Path, threads: Threads) -> None:
    ids = [threads.send("leader", subject=f"task {n}")[0].thread_id for n in range(21)]
    last = ids.pop()
    # Eight racers through the API, and eight `inbox claim` (the program's entry point, as
    # its console script runs it) on one more thread, all at once: one wins, seven exit 20.
    racers = [(tmp_path, RACER, ["-c", f"w{n}", *ids]) for n in range(8)]
    claims = [(tmp_path, CLAIM, [INBOX, "claim", "--agent", f"c{n}", "--thread", last, "--json"])
              for n in range(8)]  # fmt: skip
    ended = forked_together(
        [*racers, *claims], ("gc_beads.cli", "mail.threads.cli", "mail.threads")
    )
    assert all(code == 0 for code, _out, _err in ended[:8]), ended[:8]
    results = [json.loads(out) for _code, out, _err in ended[:8]]
    codes = [(code, json.loads(out)) for code, out, _err in ended[8:]]
    for thread in ids:
        outcomes = sorted(r[thread] for r in results)
        assert outcomes == ["lease_conflict"] * 7 + ["won"], thread
    assert sorted(code for code, _ in codes) == [0] + [20] * 7
    assert {reply["error"]["code"] for code, reply in codes if code} == {"lease_conflict"}
    winner = next(reply["thread"]["assigned_to"] for code, reply in codes if code == 0)
    assert all(reply["error"]["holder"] == winner for code, reply in codes if code)
    # Exactly one claim event per thread in its history.
    for thread in [*ids, last]:
        events = [m for m in threads.show(thread)[1] if m.kind == "event"]
        assert len(events) == 1


def test_an_expired_lease_may_be_taken_over_and_the_old_holder_is_refused(
    tmp_path: Path, threads: Threads
) -> None:
    thr = threads.send("leader", subject="Short lease")[0].thread_id
    inbox_json(tmp_path, "claim", "--agent", "w1", "--thread", thr, "--lease-seconds", "1")
    with pytest.raises(LeaseConflict):
        threads.claim("w2", thr)
    time.sleep(1.1)
    fetched = threads.fetch("w2")
    assert [t.thread_id for t in fetched] == [thr]
    assert fetched[0].claimable(time.strftime("%Y-%m-%dT%H:%M:%S.999999Z", time.gmtime()))
    threads.claim("w2", thr, lease_seconds=60)
    refused = inbox_json(
        tmp_path, "update", "--agent", "w1", "--thread", thr, "--summary", "still here", check=20
    )
    assert refused["error"]["code"] == "lease_conflict"
    assert refused["error"]["holder"] == "w2"
    assert "w2" in refused["error"]["message"]
    with pytest.raises(LeaseConflict):
        threads.done("w1", thr)
    threads.renew("w2", thr, lease_seconds=120)
    threads.done("w2", thr, summary="ok")


def test_wait_reply_wakes_on_a_reply_of_its_kinds_only(tmp_path: Path, threads: Threads) -> None:
    thr = threads.send("leader", to="w1", subject="Question time")[0].thread_id
    threads.claim("w1", thr)
    threads.update("w1", thr, status="in_progress")
    asked = threads.update("w1", thr, status="blocked", summary="Which database?")[1]
    waiter = subprocess.Popen(
        [INBOX, "wait-reply", "--thread", thr, "--after-message", asked.message_id,
         "--kinds", "answer", "--timeout-seconds", "20", "--json"],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    threads.reply("leader", thr, kind="question", summary="Which ones did you try?")
    time.sleep(0.4)
    assert waiter.poll() is None  # a reply of another kind does not wake it
    answer = threads.reply("leader", thr, kind="answer", summary="Postgres")
    woke = json.loads(waiter.communicate(timeout=20)[0])
    assert woke["woke"] is True and woke["message"]["message_id"] == answer.message_id
    assert woke["message"]["kind"] == "answer"

    reply = inbox_json(tmp_path, "wait-reply", "--thread", thr, "--timeout-seconds", "0.2",
                       check=10)  # fmt: skip
    assert (reply["ok"], reply["woke"], reply["message"]) == (True, False, None)
    # A `gc mail reply` to the question is an answer in the thread, and wakes a waiter.
    mailed = BeadMail(threads.store).reply(asked.message_id, "leader", "", "Postgres 16")
    woke_by_mail = threads.wait_reply(thr, after_event=answer.event_id, timeout=1)
    assert woke_by_mail.message is not None
    assert (woke_by_mail.message.message_id, woke_by_mail.message.kind) == (mailed.id, "answer")
    # The API blocks the same way, in this process.
    assert threads.wait_reply(thr, after_message=mailed.id, timeout=0.1).woke is False
    assert threads.wait_reply(thr, after_message=asked.message_id, timeout=1).message == answer


def test_rebuild_keeps_every_event_id_and_hands_out_higher_ones(
    tmp_path: Path, threads: Threads
) -> None:
    thr = threads.send("leader", to="w1", subject="Survive a rebuild")[0].thread_id
    threads.claim("w1", thr)
    threads.update("w1", thr, status="in_progress", summary="working")
    threads.reply("leader", thr, summary="keep going")
    before = inbox_json(tmp_path, "show", "--thread", thr)["messages"]
    result = GcRunner(tmp_path)("doctor", "--rebuild-index")
    assert result.returncode == 0, result.stderr
    after = inbox_json(tmp_path, "show", "--thread", thr)["messages"]
    assert [(m["message_id"], m["event_id"]) for m in after] == [
        (m["message_id"], m["event_id"]) for m in before
    ]
    newer = inbox_json(tmp_path, "reply", "--from", "leader", "--thread", thr, "--summary", "hi")
    assert newer["message"]["event_id"] > max(m["event_id"] for m in after)


GC = str(Path(sys.executable).parent / "gc")


def gc_json(gc: GcRunner, *args: str, check: int = 0, process: bool = False) -> dict:
    """`gc ARGS --json` (in this process, or with `process` the installed program, as the
    `gc` fixture runs either): its JSON answer, its exit code checked."""
    result = gc(*args, "--json", process=process)
    assert result.returncode == check, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)


def _index_files(runtime: Path) -> list[Path]:
    return [runtime / f"index.sqlite3{suffix}" for suffix in ("", "-wal", "-shm")]


def _delete_index(runtime: Path, backup: Path) -> None:
    for path in _index_files(runtime):
        path.unlink(missing_ok=True)


def _rebuild_index(runtime: Path, backup: Path) -> None:
    gc_json(GcRunner(runtime.parent.parent), "doctor", "--rebuild-index")


def _restore_index(runtime: Path, backup: Path) -> None:
    _delete_index(runtime, backup)
    for path in backup.iterdir():
        shutil.copyfile(path, runtime / path.name)


@pytest.mark.parametrize(
    "disturb",
    [_delete_index, _rebuild_index, _restore_index],
    ids=["deleted", "rebuilt", "restored-from-an-older-copy"],
)
def test_a_waiters_event_cursor_wakes_once_for_the_new_answer_whatever_befalls_the_index(
    tmp_path: Path, gc_store: GcRunner, disturb: object
) -> None:
    runtime = tmp_path / ".beads" / ".runtime"
    thr = gc_json(gc_store, "thread", "send", "--from", "leader", "--to", "w1", "--subject",
                  "Pick a database")["thread"]["thread_id"]  # fmt: skip
    old = gc_json(gc_store, "thread", "reply", "--from", "leader", "--thread", thr,
                  "--summary", "Use sqlite for now")["message"]  # fmt: skip
    backup = tmp_path / "backup"  # an older copy of the index, as a backup would hold it
    backup.mkdir()
    for path in _index_files(runtime):
        if path.exists():
            shutil.copyfile(path, backup / path.name)
    gc_json(gc_store, "doctor", "--rebuild-index")  # a routine repair, before the cursor
    question = gc_json(gc_store, "thread", "reply", "--from", "w1", "--thread", thr, "--kind",
                       "question", "--summary", "Which database?")["message"]  # fmt: skip
    cursor = question["event_id"]
    assert old["event_id"] < cursor

    disturb(runtime, backup)  # type: ignore[operator]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    waiter = subprocess.Popen(
        [GC, "thread", "wait-reply", "--thread", thr, "--after-event", str(cursor),
         "--timeout-seconds", "60", "--json"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        # The answer from a process of its own, landing while the waiter starts and looks.
        new = gc_json(gc_store, "thread", "reply", "--from", "leader", "--thread", thr,
                      "--summary", "Postgres 16", process=True)["message"]  # fmt: skip
        out, err = waiter.communicate(timeout=90)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate()
    assert waiter.returncode == 0, (out, err)
    woke = json.loads(out)
    assert woke["woke"] is True
    assert (woke["message"]["message_id"], woke["message"]["summary"]) == (
        new["message_id"],
        "Postgres 16",
    )
    assert woke["next_event_id"] == new["event_id"] > cursor
    # Once: from the cursor it returned, nothing more (the old answer does not come again).
    again = gc_json(gc_store, "thread", "wait-reply", "--thread", thr, "--after-event",
                    str(woke["next_event_id"]), "--timeout-seconds", "0.5", check=10)  # fmt: skip
    assert again["woke"] is False
    shown = gc_json(gc_store, "thread", "show", "--thread", thr)["messages"]
    ids = {m["message_id"]: m["event_id"] for m in shown}
    assert (ids[old["message_id"]], ids[question["message_id"]]) == (old["event_id"], cursor)
    assert len(set(ids.values())) == len(ids)


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One store (shared: the tests below must leave it as it is) with a thread in each of
    pending, claimed, blocked and done."""
    root = tmp_path_factory.mktemp("states")
    with Store.init(root, agent="leader")[0] as store:
        api = Threads(store)
        made = {s: api.send("leader", to="w1", subject=s)[0].thread_id for s in "PCBD"}
        for name in "CBD":
            api.claim("w1", made[name])
        api.update("w1", made["B"], status="in_progress")
        api.update("w1", made["B"], status="blocked", summary="Which one?")
        api.done("w1", made["D"], summary="Finished")
        api.close()
    return root, made


TRANSITIONS = [
    "done --agent w1 --thread P",
    "fail --agent w1 --thread P",
    "update --agent w1 --thread P --summary x",
    "update --agent w1 --thread P --status in_progress",
    "release --agent w1 --thread P",
    "renew --agent w1 --thread P",
    "update --agent w1 --thread C --status blocked",
    "claim --agent w2 --thread D",
    "cancel --agent leader --thread D",
    "done --agent w1 --thread D",
    "fail --agent w1 --thread D",
    "release --agent w1 --thread D",
    "update --agent w1 --thread D --status in_progress",
]
BAD_VALUES = [
    "update --agent w1 --thread B --status done",
    "update --agent w1 --thread B --status bogus",
    "send --from leader --subject s --priority urgent",
    "send --from leader --subject s --priority 5",
    "send --from leader --subject s --kind gossip",
    "send --from leader --subject s --payload-json [1]",
    "send --from leader --subject s --payload-json {bad",
    'send --from leader --subject s --payload-json {"a/b":1}',
    "send --from leader",
    "send --from leader --subject s --artifact-kind log",
    "send --from leader --subject s --artifact a --artifact-metadata-json []",
    "send --from leader --subject s --artifact a --artifact b --artifact-kind x,y "
    "--artifact-kind z --artifact-kind w",
    "send --from leader --thread P --subject again",
    "reply --from leader --thread B --kind shout",
    "fetch --agent w1 --status pending,nope",
    "list --status finished",
    "claim --agent w2 --thread P --lease-seconds 0",
    "claim --agent w2 --thread P --lease-seconds -5",
    "claim --agent w2 --thread P --lease-seconds soon",
    "wait-reply --thread B --kinds answer,gossip",
    "wait-reply --thread B --timeout-seconds -1",
    "wait-reply --thread B --after-event -1",
    "wait-reply --thread B --after-event 99999999999999999999999",
    "send --from leader --subject deep --payload-json " + "[" * 5000,
    "watch --agent leader --after-event 99999999999999999999999",
    "wait-reply --thread B --after-event 1 --after-message x",
    "wait-reply --thread B --after-message B --timeout-seconds 0",
    "wait-reply --thread B --after-message P --timeout-seconds 0",
    "watch --status nope",
    "fetch --agent w1 --limit 0",
]


@pytest.mark.parametrize("command", TRANSITIONS + BAD_VALUES)
def test_invalid_transitions_and_bad_values_change_nothing(
    command: str, states: tuple[Path, dict[str, str]]
) -> None:
    root, made = states
    words = [made.get(w, w) for w in command.split()]
    head = branch_head(root / ".beads")
    code, out, err = in_process(*words, "--beads-dir", str(root), "--json")
    assert code == 30, (command, out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("inbox: "), err
    expected = "invalid_transition" if command in TRANSITIONS else "invalid_input"
    assert json.loads(out)["error"]["code"] == expected, out
    assert branch_head(root / ".beads") == head


def test_api_errors_are_the_cli_ones(threads: Threads) -> None:
    thr = threads.send("leader", subject="api")[0].thread_id
    with pytest.raises(InvalidTransition) as refused:
        threads.done("w1", thr)
    assert (refused.value.exit_code, refused.value.code) == (30, "invalid_transition")
    threads.claim("w1", thr)
    with pytest.raises(LeaseConflict) as held:
        threads.claim("w2", thr)
    assert (held.value.exit_code, held.value.details["holder"]) == (20, "w1")


def test_watch_wakes_on_activity_and_on_an_expired_lease(threads: Threads) -> None:
    thr = threads.send("leader", to="w1", subject="watched")[0].thread_id
    cursor = threads.last_event()
    threads.claim("w1", thr, lease_seconds=1)
    woke = threads.watch(agent="leader", after_event=cursor, timeout=1)
    assert woke.woke and woke.messages[0].kind == "event"
    assert [t.thread_id for t in woke.threads] == [thr]
    quiet = threads.watch(agent="nobody", statuses=["pending"], timeout=0.1)
    assert quiet.woke is False
    expired = threads.watch(agent="leader", timeout=5)  # the lease runs out within a second
    assert expired.woke and [t.thread_id for t in expired.threads] == [thr]
    assert expired.threads[0].lease is not None


def test_skill_install_writes_skills_and_hook_install_mentions_it(tmp_path: Path) -> None:
    target = tmp_path / "skills"
    code, out, _err = in_gc("skill", "install", "--dir", str(target), "--json")
    assert code == 0
    written = json.loads(out)["skills"]
    assert written == {"gc-mail": "written", "work-threads": "written"}
    text = (target / "work-threads" / "SKILL.md").read_text()
    assert text.startswith("---\nname: work-threads\n") and "wait-reply" in text
    _code, out, _err = in_gc("hook", "install", "--settings", str(tmp_path / "settings.json"))
    assert "gc skill install" in out


def test_an_id_of_another_type_is_the_one_wrong_type_error(gc_store: GcRunner) -> None:
    gc = gc_store  # in a store as `gc init` makes it
    task = gc.json("bead", "create", "--type", "task", "--title", "Fix it")["bead"]["id"]
    result = gc("thread", "claim", "--agent", "w", "--thread", task)
    assert result.returncode == 30
    assert result.stderr.strip() == f"gc: {task} is a task, not a thread"


def test_an_index_of_the_older_schema_hands_its_event_ids_to_the_event_log(
    tmp_path: Path, gc_store: GcRunner
) -> None:
    thr = gc_json(gc_store, "thread", "send", "--from", "leader", "--to", "w1", "--subject",
                  "Upgrade")["thread"]["thread_id"]  # fmt: skip
    gc_json(gc_store, "thread", "reply", "--from", "leader", "--thread", thr, "--summary", "a")
    runtime = tmp_path / ".beads" / ".runtime"
    # As gc before the event log left it: schema 8, the ids in the index's own table.
    db = sqlite3.connect(runtime / "index.sqlite3", isolation_level=None)
    try:
        db.execute("CREATE TABLE events(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE)")
        rows = db.execute("SELECT id FROM beads ORDER BY created_at, id").fetchall()
        db.executemany("INSERT INTO events VALUES (?, ?)",
                       [(100 + 10 * n, bead) for n, (bead,) in enumerate(rows)])  # fmt: skip
        db.execute("UPDATE meta SET value = '8' WHERE key = 'schema'")
    finally:
        db.close()
    for path in runtime.glob("events.sqlite3*"):
        path.unlink()
    shown = gc_json(gc_store, "thread", "show", "--thread", thr)["messages"]
    assert [m["event_id"] for m in shown] == [110, 120]  # kept, not renumbered
    newer = gc_json(gc_store, "thread", "reply", "--from", "leader", "--thread", thr,
                    "--summary", "b")["message"]  # fmt: skip
    assert newer["event_id"] == 121


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_claim_the_remote_cannot_confirm_exits_50_unconfirmed_and_is_released(
    tmp_path: Path, gc_store: GcRunner
) -> None:
    gc = gc_store  # in a store as `gc init` makes it
    url = f"git://127.0.0.1:{closed_port()}/shared.git"
    assert gc("remote", "add", "origin", url).returncode == 0
    thr = gc.json("thread", "send", "--from", "leader", "--subject", "Far away")["thread"]
    thr = thr["thread_id"]
    failed = gc("thread", "claim", "--agent", "w1", "--thread", thr, "--json")
    assert failed.returncode == 50, failed.stderr
    error = json.loads(failed.stdout)["error"]
    assert (error["code"], error["confirmed"]) == ("storage_error", False)
    assert len(failed.stderr.strip().splitlines()) == 1 and "released" in failed.stderr
    # The claim is withdrawn by a commit of its own: the thread is claimable again here.
    shown = gc.json("thread", "show", "--thread", thr)
    assert shown["thread"]["lease"] is None and shown["thread"]["status"] == "pending"
    assert shown["thread"]["claimable"] is True
    events = [m["payload_json"] for m in shown["messages"] if m["kind"] == "event"]
    assert [(e["event"], e["to"]) for e in events] == [
        ("claimed", "claimed"),
        ("released", "pending"),
    ]
    assert events[1]["reason"] == "unconfirmed"
    log = subprocess.run(
        ["git", "log", "--format=%s", "-2", "main"],
        cwd=tmp_path / ".beads" / ".git",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert log[0].startswith(f"thread release {thr}") and log[1].startswith(f"thread claim {thr}")
    # The Python API says the same.
    with Store.open(tmp_path, agent="leader") as store:
        api = Threads(store)
        with pytest.raises(StorageError) as raised:
            api.claim("w2", thr)
        assert raised.value.details["confirmed"] is False
        assert api.get(thr).lease is None
        api.close()


def wait_until_claimable(api: Threads, thread: str, deadline: float = 30.0) -> None:
    """Wait (polling, generous deadline) until the thread's lease has run out."""
    ends = time.monotonic() + deadline
    while not api.get(thread).claimable(time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())):
        assert time.monotonic() < ends, "the lease never ran out"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_stale_process_of_the_same_agent_cannot_write_after_a_newer_claim(
    tmp_path: Path, threads: Threads
) -> None:
    thr = threads.send("leader", subject="Re-claimed")[0].thread_id
    stale = Threads(threads.store)  # one worker process of agent w
    old = stale.claim("w", thr, lease_seconds=1)
    wait_until_claimable(threads, thr)
    # A newer process of the same agent name takes the thread over, through the CLI.
    newer = inbox_json(tmp_path, "claim", "--agent", "w", "--thread", thr)["lease"]
    assert newer["agent"] == "w" and newer["token"] != old.token
    head = branch_head(tmp_path / ".beads")
    with pytest.raises(LeaseConflict) as refused:
        stale.done("w", thr, summary="stale result")
    assert refused.value.details["holder"] == "w"
    for call in (
        lambda: stale.update("w", thr, summary="still mine?"),
        lambda: stale.renew("w", thr),
        lambda: stale.release("w", thr),
        lambda: stale.fail("w", thr),
        lambda: stale.reply("w", thr, summary="hello"),
        lambda: stale.cancel("w", thr),
    ):
        with pytest.raises(LeaseConflict):
            call()
    # The stale token given on the command line is refused too, and nothing was written.
    given = inbox_json(
        tmp_path, "done", "--agent", "w", "--thread", thr, "--lease-token", old.token, check=20
    )
    assert given["error"]["code"] == "lease_conflict" and given["error"]["holder"] == "w"
    assert branch_head(tmp_path / ".beads") == head
    # The newer process finishes with the token its claim kept (no option needed).
    done = inbox_json(tmp_path, "done", "--agent", "w", "--thread", thr, "--summary", "ok")
    assert done["thread"]["status"] == "done"
    stale.close()


@pytest.mark.parametrize(
    "verb",
    [
        "renew",
        "update",
        "done --summary ok",
        "fail --summary broke",
        "release",
        "reply --from w",
        "cancel",
    ],
)
def test_every_holder_write_checks_a_given_lease_token(
    verb: str, tmp_path: Path, threads: Threads
) -> None:
    thr = threads.send("leader", to="w", subject=f"token for {verb}")[0].thread_id
    where = ("--beads-dir", str(tmp_path), "--json")
    code, out, _err = in_process("claim", "--agent", "w", "--thread", thr, *where)
    token = json.loads(out)["lease"]["token"]
    head = branch_head(tmp_path / ".beads")
    words = [*verb.split(), "--thread", thr, *where]
    if not verb.startswith("reply"):
        words += ["--agent", "w"]
    code, out, err = in_process(*words, "--lease-token", "0" * 16)
    assert code == 20, (out, err)
    assert json.loads(out)["error"]["code"] == "lease_conflict"
    assert len(err.strip().splitlines()) == 1
    assert branch_head(tmp_path / ".beads") == head
    code, out, err = in_process(*words, "--lease-token", token)
    assert code == 0, (out, err)
    assert branch_head(tmp_path / ".beads") != head


def test_anyone_may_still_reply_and_cancel_without_a_token(
    tmp_path: Path, threads: Threads
) -> None:
    thr = threads.send("leader", to="w", subject="Overridden")[0].thread_id
    inbox_json(tmp_path, "claim", "--agent", "w", "--thread", thr)
    sent = inbox_json(tmp_path, "reply", "--from", "leader", "--thread", thr, "--summary", "hi")
    assert sent["message"]["to_agent"] == "w"
    assert inbox_json(tmp_path, "reply", "--from", "w", "--thread", thr)["message"]["kind"]
    cancelled = inbox_json(tmp_path, "cancel", "--agent", "leader", "--thread", thr)
    assert cancelled["thread"]["status"] == "cancelled"
    with pytest.raises(LeaseConflict):  # a token given for a thread nobody holds
        threads.reply("w", thr, summary="late", lease_token="0" * 16)


def test_a_holder_waiting_for_a_reply_stops_when_its_lease_is_gone(
    tmp_path: Path, threads: Threads
) -> None:
    thr = threads.send("leader", to="w", subject="Waiting worker")[0].thread_id
    token = inbox_json(tmp_path, "claim", "--agent", "w", "--thread", thr)["lease"]["token"]
    inbox_json(tmp_path, "update", "--agent", "w", "--thread", thr, "--status", "in_progress")
    wait = [INBOX, "wait-reply", "--thread", thr, "--timeout-seconds", "60", "--json"]
    # While the lease holds, an answer wakes the holder as before.
    cursor = str(threads.last_event())
    waiter = subprocess.Popen(
        [*wait, "--lease-token", token, "--after-event", cursor],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    answer = threads.reply("leader", thr, summary="go on")
    woke = json.loads(waiter.communicate(timeout=60)[0])
    assert waiter.returncode == 0 and woke["message"]["message_id"] == answer.message_id
    # The leader cancels the thread: the holder's wait ends in lease_conflict, not a timeout.
    waiter = subprocess.Popen(
        [*wait, "--lease-token", token], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    threads.reply("leader", thr, kind="question", summary="not what it waits for")
    threads.cancel("leader", thr, reason="no longer needed")
    ended = json.loads(waiter.communicate(timeout=60)[0])
    assert waiter.returncode == 20, ended
    assert (ended["error"]["code"], ended["error"]["status"]) == ("lease_conflict", "cancelled")
    # A token that is not the thread's lease is refused at once, as in the API.
    refused = inbox_json(tmp_path, *wait[1:-1], "--lease-token", "0" * 16, check=20)
    assert refused["error"]["code"] == "lease_conflict"
    with pytest.raises(LeaseConflict):
        threads.wait_reply(thr, lease_token=token, timeout=60)


@pytest.mark.slow
def test_a_holder_on_another_machine_cannot_renew_or_finish_after_a_takeover(
    tmp_path: Path, gc_init_template: Path
) -> None:
    # Two machines, one agent name: a's lease ran out and b took the thread over (confirmed
    # by the remote). a has not synced: its renewal is a claim again and loses; its other
    # writes are refused by the token its claim kept.
    remote = tmp_path / "shared.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a, b = GcRunner(tmp_path / "a"), GcRunner(tmp_path / "b")
    b.cwd.mkdir()
    copy_store(gc_init_template, a.cwd / ".beads")  # a store as `gc init` makes it
    assert a("remote", "add", "origin", str(remote)).returncode == 0
    thr = a.json("thread", "send", "--from", "leader", "--subject", "Shared")["thread"]
    thr = thr["thread_id"]
    assert a("sync").returncode == 0 and b("clone", str(remote)).returncode == 0
    claim = ("thread", "claim", "--agent", "w", "--thread", thr)
    old = a.json(*claim, "--lease-seconds", "1")["lease"]
    assert b("sync").returncode == 0
    with Store.open(b.cwd, agent="leader") as store:
        api = Threads(store)
        wait_until_claimable(api, thr)
        api.close()
    new = b.json(*claim)["lease"]
    assert new["token"] != old["token"]
    renewed = a("thread", "renew", "--agent", "w", "--thread", thr, "--json")
    assert renewed.returncode == 20, renewed.stderr
    assert json.loads(renewed.stdout)["error"]["code"] == "lease_conflict"
    assert a.json("thread", "show", "--thread", thr)["thread"]["lease"] == new
    finished = a("thread", "done", "--agent", "w", "--thread", thr, "--json")
    assert finished.returncode == 20, finished.stderr
    assert json.loads(finished.stdout)["error"]["holder"] == "w"
    closed = b.json("thread", "done", "--agent", "w", "--thread", thr, "--summary", "Done")
    assert closed["thread"]["status"] == "done"
    assert b("sync").returncode == 0 and a("sync").returncode == 0
    assert a.json("thread", "show", "--thread", thr)["thread"]["status"] == "done"


def in_gc(*args: str) -> tuple[int, str, str]:
    """Run the `gc` program here (its arguments name the store): exit code, stdout, stderr."""
    result = GcRunner(Path.cwd())(*args)
    return result.returncode, result.stdout, result.stderr


def test_fetch_with_no_matching_work_exits_10_with_found_false(
    tmp_path: Path, threads: Threads
) -> None:
    where = ("--beads-dir", str(tmp_path))
    threads.send("leader", to="w1", subject="For w1 only")
    for run, prefix, name in ((in_process, (), "fetch"), (in_gc, ("thread",), "thread.fetch")):
        code, out, err = run(*prefix, "fetch", "--agent", "w2", *where, "--json")
        assert (code, err) == (10, ""), (run, out, err)
        assert json.loads(out) == {"ok": True, "command": name, "threads": [], "found": False}
        code, out, err = run(*prefix, "fetch", "--agent", "w2", *where)
        assert (code, out.strip(), err) == (10, "No threads", "")
        code, out, _ = run(*prefix, "fetch", "--agent", "w1", *where, "--json")
        found = json.loads(out)
        assert code == 0 and found["found"] is True and len(found["threads"]) == 1
    # The installed program, as the seed runs it.
    empty = inbox(
        tmp_path, "fetch", "--agent", "w3", "--status", "blocked", "--json", check=10, process=True
    )
    assert json.loads(empty.stdout)["found"] is False


def test_lists_take_the_seeds_bar_spelling_as_well_as_commas(
    tmp_path: Path, threads: Threads
) -> None:
    thr = threads.send("leader", to="w", subject="Bars")[0].thread_id
    threads.claim("w", thr)
    threads.update("w", thr, status="in_progress")
    asked = threads.update("w", thr, status="blocked", summary="Which port?")[1]
    where = ("--beads-dir", str(tmp_path), "--json")
    fetched = in_process("fetch", "--agent", "w", "--status", "pending|blocked", *where)
    assert fetched[0] == 0 and [t["thread_id"] for t in json.loads(fetched[1])["threads"]] == [thr]
    waiter = subprocess.Popen(
        [INBOX, "wait-reply", "--thread", thr, "--after-message", asked.message_id,
         "--kinds", "answer|control|result", "--timeout-seconds", "60", "--json"],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    steer = threads.reply("leader", thr, kind="control", summary="Stop and use 8080")
    woke = json.loads(waiter.communicate(timeout=60)[0])
    assert waiter.returncode == 0 and woke["message"]["message_id"] == steer.message_id
    mixed = in_process(
        "wait-reply", "--thread", thr, "--after-message", asked.message_id,
        "--kinds", "answer, control|result", "--timeout-seconds", "1", *where,
    )  # fmt: skip
    assert mixed[0] == 0 and json.loads(mixed[1])["message"]["kind"] == "control"
    for bad in ("answer|gossip", "answer||control", "|"):
        code, out, err = in_process("wait-reply", "--thread", thr, "--kinds", bad, *where)
        assert code == 30 and json.loads(out)["error"]["code"] == "invalid_input", (bad, err)


def test_only_the_lease_holder_reports_progress_and_result_and_nobody_posts_events(
    tmp_path: Path, threads: Threads
) -> None:
    thr = threads.send("leader", to="w", subject="Roles")[0].thread_id
    token = threads.claim("w", thr).token
    where = ("--beads-dir", str(tmp_path), "--json")
    head = branch_head(tmp_path / ".beads")
    refused = [  # (command, exit code)
        (["reply", "--from", "leader", "--kind", "progress"], 20),
        (["reply", "--from", "leader", "--kind", "result"], 20),
        (["reply", "--from", "w2", "--kind", "result"], 20),
        (["send", "--from", "w2", "--kind", "progress"], 20),
        (["reply", "--from", "w", "--kind", "result", "--lease-token", "0" * 16], 20),
        (["reply", "--from", "w", "--kind", "event"], 30),
        (["reply", "--from", "leader", "--kind", "event"], 30),
        (["send", "--from", "leader", "--kind", "event"], 30),
        (["reply", "--from", "w2", "--kind", "task"], 30),
        (["reply", "--from", "w", "--kind", "task"], 30),
    ]
    for words, expected in refused:
        for prefix, run in (((), in_process), (("thread",), in_gc)):
            code, out, err = run(*prefix, *words, "--thread", thr, "--summary", "x", *where)
            assert code == expected, (words, out, err)
            assert len(err.strip().splitlines()) == 1, err
    for start in ("progress", "result", "event"):  # nobody holds a new thread's lease
        code, out, err = in_process(
            "send", "--from", "leader", "--subject", "New", "--kind", start, *where
        )
        assert code == 30 and json.loads(out)["error"]["code"] == "invalid_input", err
    assert branch_head(tmp_path / ".beads") == head  # nothing was written

    # Allowed: anyone answers, asks or steers; the creator adds to the task; the holder
    # reports (with its token, or the claim this process made).
    for sender, kind in [
        ("w2", "answer"), ("w2", "question"), ("leader", "control"), ("w", "question"),
        ("leader", "task"),
    ]:  # fmt: skip
        assert threads.reply(sender, thr, kind=kind, summary=f"{sender} {kind}").kind == kind
    assert threads.reply("w", thr, kind="progress", summary="half way").kind == "progress"
    sent = threads.send("w", thread=thr, kind="progress", summary="most", lease_token=token)
    assert sent[1].kind == "progress"
    partial = inbox_json(tmp_path, "reply", "--from", "w", "--thread", thr, "--kind", "result",
                         "--summary", "a first result", "--lease-token", token)  # fmt: skip
    assert partial["message"]["kind"] == "result" and partial["message"]["to_agent"] == "leader"
    with pytest.raises(LeaseConflict) as taken:
        threads.reply("w2", thr, kind="progress", summary="mine now")
    assert taken.value.details["holder"] == "w"
    opened = threads.send("leader", subject="Asked first", kind="question")[1]
    assert opened.kind == "question"
    from beads.errors import InvalidInput

    with pytest.raises(InvalidInput):
        threads.reply("leader", thr, kind="event", summary="forged")


@pytest.mark.slow
def test_a_result_from_anyone_but_the_holder_does_not_wake_wait_reply(
    tmp_path: Path, threads: Threads
) -> None:
    thr = threads.send("leader", to="w2", subject="Who finished?")[0].thread_id
    threads.claim("w1", thr, lease_seconds=1)
    wait_until_claimable(threads, thr)
    threads.claim("w2", thr)  # w1's lease ran out and w2 took the thread over
    cursor = threads.last_event()
    waiter = subprocess.Popen(
        [INBOX, "wait-reply", "--thread", thr, "--after-event", str(cursor),
         "--timeout-seconds", "60", "--json"],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip

    def forge(sender: str) -> str:
        """A result written around the API (an older program, a hand-made bead)."""
        made = threads.store.create(
            "message", "it is done", "", sender=sender, thread=thr, meta={"kind": "result"}
        )
        return made.id

    forged = [forge("intruder"), forge("w1")]  # a stranger, and the former holder
    assert threads.wait_reply(thr, after_event=cursor, timeout=0.5).woke is False
    time.sleep(0.3)
    assert waiter.poll() is None  # still waiting for the holder's result
    _finished, result = threads.done("w2", thr, summary="Done by w2")
    woke = json.loads(waiter.communicate(timeout=60)[0])
    assert waiter.returncode == 0
    assert woke["message"]["message_id"] == result.message_id not in forged
    assert woke["message"]["from_agent"] == "w2"
    # A leader's cancel ends the holder's lease: a result after it is no one's.
    other = threads.send("leader", to="w3", subject="Cancelled")[0].thread_id
    threads.claim("w3", other)
    threads.cancel("leader", other, reason="not needed")
    after = threads.last_event()
    threads.store.create("message", "late", "", sender="w3", thread=other, meta={"kind": "result"})
    assert threads.wait_reply(other, after_event=after, timeout=0.5).woke is False


def test_a_blocked_update_must_say_what_is_missing_and_a_finish_its_result(
    tmp_path: Path, threads: Threads
) -> None:
    from beads.errors import InvalidInput

    thr = threads.send("leader", to="w", subject="Say it")[0].thread_id
    threads.claim("w", thr)
    threads.update("w", thr, status="in_progress")
    where = ("--agent", "w", "--thread", thr, "--beads-dir", str(tmp_path), "--json")
    head = branch_head(tmp_path / ".beads")
    for words in (
        ["update", "--status", "blocked"],
        ["update", "--status", "blocked", "--summary", "  "],
        ["update", "--status", "blocked", "--payload-json", '{"question": ""}'],
        ["done"],
        ["done", "--body", ""],
        ["fail", "--summary", " "],
    ):
        for prefix, run in (((), in_process), (("thread",), in_gc)):
            code, out, err = run(*prefix, *words, *where)
            assert code == 30, (words, out, err)
            assert json.loads(out)["error"]["code"] == "invalid_input"
            assert len(err.strip().splitlines()) == 1, err
    with pytest.raises(InvalidInput):
        threads.update("w", thr, status="blocked")
    with pytest.raises(InvalidInput):
        threads.done("w", thr)
    with pytest.raises(InvalidInput):
        threads.fail("w", thr, body="\n")
    assert branch_head(tmp_path / ".beads") == head
    asked = inbox_json(tmp_path, "update", "--status", "blocked", "--payload-json",
                       '{"question": "Which region?"}', *where[:-1])  # fmt: skip
    assert asked["thread"]["status"] == "blocked"
    assert asked["message"]["payload_json"] == {"question": "Which region?"}
    threads.update("w", thr, status="in_progress", summary="eu-west")
    blocked = threads.update("w", thr, status="blocked", body="Need the API key for eu-west")
    assert blocked[0].status == "blocked"
    finished = inbox_json(tmp_path, "done", "--body", "Deployed to eu-west.", *where[:-1])
    assert finished["thread"]["status"] == "done"
    assert finished["message"]["body"] == "Deployed to eu-west."
