"""Containment: what gc runs dies with a call that runs out of time, and what gc
writes stays inside `.beads/` (no symlink is followed) and private to its owner."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from beads.process import run_bounded
from beads.store import Store
from mail.execmail import ExecMail
from mail.message import ProviderError
from tests.conftest import GcRunner, gone

MESSAGE = {
    "id": "m-1",
    "from": "a",
    "to": "b",
    "subject": "s",
    "body": "x",
    "created_at": "2026-01-01T00:00:00Z",
    "read": False,
}


def script(tmp_path: Path, body: str, name: str = "prog") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


# -- exec provider: process groups, one budget, bad numbers ----------------------------------


def test_a_server_left_holding_the_pipes_outlives_the_call_which_does_not_wait_for_it(
    tmp_path: Path,
) -> None:
    # As under gc, `ensure-running` may start its server with a plain `&`: the server keeps
    # our pipes open, and the call still ends when the program does (were it waiting for the
    # pipes to close, it would run out of its 20 s before the server's 100 s).
    pids = tmp_path / "pids"
    prog = script(tmp_path, f"sleep 100 & echo $! >> {pids}\necho '[]'\n")
    try:
        assert ExecMail(prog, timeout=20).inbox("b") == []
        children = [int(pid) for pid in pids.read_text().split()]
        assert len(children) == 2  # ensure-running's and the operation's
        for pid in children:
            os.kill(pid, 0)  # alive: raises if it is gone
    finally:
        for pid in [int(pid) for pid in pids.read_text().split()] if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


def test_a_call_that_runs_out_of_time_takes_its_children_with_it(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    prog = script(tmp_path, f"sleep 100 >/dev/null 2>&1 & echo $! >> {pids}\nexec sleep 100\n")
    with pytest.raises(ProviderError, match="timed out"):
        ExecMail(prog, timeout=1).archive("m-1")
    assert gone([int(pid) for pid in pids.read_text().split()])


def test_a_hanging_program_costs_one_budget_per_command(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    # ensure-running hangs, and so would inbox: the budget spent, inbox never starts.
    prog = script(tmp_path, f'echo "$1" >> {calls}\nexec sleep 100\n')
    started = time.monotonic()
    with pytest.raises(ProviderError, match="ensure-running timed out after 1s"):
        ExecMail(prog, timeout=1).inbox("b")
    assert calls.read_text().split() == ["ensure-running"]
    assert time.monotonic() - started < 60  # bounds a hang only


def test_copies_of_a_send_share_one_budget(tmp_path: Path) -> None:
    sends = tmp_path / "sends"
    prog = script(
        tmp_path,
        f"[ \"$1\" = send ] && echo x >> {sends} && sleep 0.6\necho '{json.dumps(MESSAGE)}'\n",
    )  # each copy takes 0.6 s: the second cannot finish within 1 s, the third never starts
    started = time.monotonic()
    with pytest.raises(ProviderError, match="timed out"):
        ExecMail(prog, timeout=1).send("a", "b", "s", "x", cc=["c", "d"])
    assert len(sends.read_text().split()) < 3
    assert time.monotonic() - started < 60  # bounds a hang only


@pytest.mark.gc_process
def test_exec_timeout_from_config_applies_with_gc_mail(gc_store: GcRunner, tmp_path: Path) -> None:
    # The store (a copy of one `gc init` made) and its setting in process; the runs that time
    # out in a process of their own.
    gc = gc_store
    assert gc("config", "set", "mail.exec_timeout", "1", process=False).returncode == 0
    prog = script(tmp_path, '[ "$1" = ensure-running ] && exit 0\nexec sleep 100\n')
    started = time.monotonic()
    result = gc("mail", "inbox", "dog", env={"GC_MAIL": f"exec:{prog}"})
    assert result.returncode == 50 and "timed out after 1s" in result.stderr
    assert time.monotonic() - started < 10
    refused = gc("config", "set", "mail.exec_timeout", '"soon"', process=False)
    assert refused.returncode == 30 and "mail.exec_timeout" in refused.stderr
    # A value written by an older gc (config set now refuses it) is refused again at use.
    with Store.open(tmp_path) as store, store.batch() as batch:
        config = dict(store.config)
        config["mail"] = {**config["mail"], "exec_timeout": "soon"}
        batch.set_config(config)
    bad = gc("mail", "inbox", "dog", env={"GC_MAIL": f"exec:{prog}"})
    assert bad.returncode == 30 and "mail.exec_timeout must be a duration" in bad.stderr


@pytest.mark.parametrize(
    "field, value",
    [("priority", "1e400"), ("priority", "-1e400"), ("priority", "1" * 30), ("read", "1e400")],
)
def test_numbers_out_of_range_are_invalid_input(
    gc: GcRunner, tmp_path: Path, field: str, value: str
) -> None:
    message = json.dumps({**MESSAGE, field: 0}).replace(f'"{field}": 0', f'"{field}": {value}')
    prog = script(tmp_path, f"echo '{message}'\n")
    result = gc("mail", "read", "m-1", env={"GC_MAIL": f"exec:{prog}"})
    assert result.returncode == 30, result.stderr
    assert "out of range" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
    count = script(tmp_path, f'echo \'{{"total": {value}, "unread": 0}}\'\n', "count")
    counted = gc("mail", "count", "dog", env={"GC_MAIL": f"exec:{count}"})
    assert counted.returncode == 30 and "internal error" not in counted.stderr


def test_one_bad_message_is_skipped_and_the_others_listed(gc: GcRunner, tmp_path: Path) -> None:
    good = {**MESSAGE, "id": "m-2", "to": "dog", "body": "the good one"}
    bad = json.dumps({**MESSAGE, "to": "dog"}).replace('"read": false', '"priority": 1e400')
    listing = f"[{bad}, {json.dumps(good)}]"
    prog = script(tmp_path, f"echo '{listing}'\n")
    result = gc("mail", "check", "dog", "--inject", env={"GC_MAIL": f"exec:{prog}"})
    assert result.returncode == 0 and "the good one" in result.stdout
    assert "skipped message m-1" in result.stderr and "out of range" in result.stderr


@pytest.mark.parametrize(
    "bad",
    [
        json.dumps({**MESSAGE, "to": "dog"}).replace('"read": false', '"priority": 1e400'),
        json.dumps({**MESSAGE, "to": "dog", "from": ""}),  # a message, but no item
        json.dumps({**MESSAGE, "to": "dog", "body": "\ud800"}),  # no UTF-8 for it
    ],
)
def test_the_hook_announces_the_good_messages_of_a_listing(
    gc_store: GcRunner, tmp_path: Path, bad: str
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    good = {**MESSAGE, "id": "m-2", "to": "dog", "body": "announce me"}
    prog = script(tmp_path, f"[ \"$1\" = check ] && echo '[{bad}, {json.dumps(good)}]'\n")
    event = {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup"}
    event["cwd"] = str(tmp_path)
    result = gc(
        "hook", "run", input=json.dumps(event), env={"GC_MAIL": f"exec:{prog}", "GC_AGENT": "dog"}
    )
    assert result.returncode == 0
    reply = json.loads(result.stdout)
    assert "announce me" in reply["hookSpecificOutput"]["additionalContext"]


# -- checks, nudges and gh through beads.process ---------------------------------------------


def test_run_bounded_kills_what_a_finished_program_left_behind(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    started = time.monotonic()
    code, out, _err = run_bounded(["sh", "-c", f"sleep 100 & echo $! > {pid_file}; echo done"], 10)
    assert (code, out) == (0, b"done\n")
    assert time.monotonic() - started < 50  # never waits for the child's 100 s
    assert gone([int(pid_file.read_text())])


def test_run_bounded_feeds_stdin_and_times_out(tmp_path: Path) -> None:
    assert run_bounded(["cat"], 5, stdin=b"x" * 200_000)[1] == b"x" * 200_000
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded(["sleep", "100"], 0.5)
    assert time.monotonic() - started < 50  # cut short, long before the program's 100 s


# -- symbolic links: never written through ---------------------------------------------------


def tree_of(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def test_a_type_directory_replaced_by_a_link_is_never_written_through(
    gc_store: GcRunner, tmp_path: Path
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    first = gc.json("bead", "create", "--type", "task", "--title", "first")["bead"]["id"]
    outside = tmp_path / "outside"
    (tmp_path / ".beads" / "tasks").rename(outside)
    (tmp_path / ".beads" / "tasks").symlink_to(outside)
    before = tree_of(outside)
    second = gc.json("bead", "create", "--type", "task", "--title", "second")["bead"]["id"]
    assert tree_of(outside) == before
    tasks = tmp_path / ".beads" / "tasks"
    assert tasks.is_dir() and not tasks.is_symlink()
    # the link was replaced by a real directory, and the next open put back what it hid
    doctor = gc.json("doctor")
    assert doctor["healthy"], doctor
    names = {p.name for p in tasks.rglob("*.yaml")}
    assert names == {f"{first}.yaml", f"{second}.yaml"}


def test_a_directory_replaced_by_a_link_under_an_open_store_is_never_written_through(
    store: Store, tmp_path: Path
) -> None:
    # The store stays open between the writes, as in a long-lived program (`gc mcp`).
    first = store.create("task", "first")
    tasks = store.root / "tasks"
    outside = tmp_path / "outside"
    tasks.rename(outside)
    tasks.symlink_to(outside)
    before = tree_of(outside)
    second = store.create("task", "second")
    assert tree_of(outside) == before
    assert tasks.is_dir() and not tasks.is_symlink()
    # the link was replaced by a real directory, and the next open put back what it hid
    store.close()
    with Store.open(store.root) as reopened:
        assert {p.name for p in tasks.rglob("*.yaml")} == {f"{first.id}.yaml", f"{second.id}.yaml"}
        assert reopened.get(second.id).title == "second"


def test_doctor_reports_links_and_restore_view_replaces_them(
    gc_store: GcRunner, tmp_path: Path
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc.json("mail", "send", "dog", "-m", "hi")
    messages = tmp_path / ".beads" / "messages"
    outside = tmp_path / "outside"
    messages.rename(outside)
    messages.symlink_to(outside)
    queue_link = tmp_path / ".beads" / ".runtime" / "elsewhere"
    queue_link.symlink_to(tmp_path)
    report = gc.json("doctor")
    assert not report["healthy"]
    kinds = {(p["kind"], p["path"]) for p in report["problems"]}
    assert ("symlink", "messages") in kinds and ("symlink", ".runtime/elsewhere") in kinds
    before = tree_of(outside)
    fixed = gc.json("doctor", "--restore-view")
    assert any("removed the symbolic link messages" in line for line in fixed["fixed"])
    assert messages.is_dir() and not messages.is_symlink()
    assert {p.name for p in messages.rglob("*.yaml")} == {p.name for p in outside.rglob("*.yaml")}
    assert tree_of(outside) == before
    queue_link.unlink()
    assert gc.json("doctor")["healthy"]


def test_links_planted_at_temp_names_are_never_written_through(store, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    tmp = store.runtime / "tmp"
    tmp.mkdir(exist_ok=True)
    for name in ("x.yaml", "view-applied"):  # the names the old code used for temp files
        (tmp / f"{name}.{os.getpid()}.tmp").symlink_to(victim)
    store.view.write("tasks/aa/bb/x.yaml", b"data")
    store.create("task", "T")
    assert victim.read_bytes() == b"precious"
    assert (store.root / "tasks/aa/bb/x.yaml").read_bytes() == b"data"


def test_runtime_files_are_never_written_through_links(store, tmp_path: Path) -> None:
    from beads.errors import StorageError
    from gates import session_gates
    from gates.hooks import log_failure
    from inbox.delivery import Delivery
    from inbox.queue import SessionQueue

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    runtime = store.runtime
    (runtime / "inject-queue").mkdir()
    (runtime / "inject-queue" / "s1.jsonl").symlink_to(victim)
    queue = SessionQueue(runtime, "s1")
    with pytest.raises(StorageError, match="symbolic link"):
        queue.append({"content": "x"})
    with pytest.raises(StorageError, match="symbolic link"):
        queue.take(lambda records: [])
    (runtime / "hooks.log").symlink_to(victim)
    log_failure(str(store.root), {}, RuntimeError("boom"))
    (runtime / "gates").mkdir()
    (runtime / "gates" / "s2").symlink_to(tmp_path)
    with pytest.raises(StorageError, match="symbolic link"):
        session_gates.mark(store.root, "s2", "tests")
    assert not (tmp_path / "tests").exists()
    (runtime / "delivery.sqlite3").symlink_to(victim)
    with pytest.raises(StorageError, match="symbolic link"):
        Delivery(store.root)
    assert victim.read_bytes() == b"precious"


def test_a_lock_file_link_is_refused_not_truncated(gc_store: GcRunner, tmp_path: Path) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    lock = tmp_path / ".beads" / ".runtime" / "locks" / "write.lock"
    lock.unlink()
    lock.symlink_to(victim)
    result = gc("bead", "create", "--type", "task", "--title", "T")
    assert result.returncode == 50 and "is a symbolic link: gc-beads never" in result.stderr
    assert "internal error" not in result.stderr and len(result.stderr.splitlines()) == 1
    assert victim.read_bytes() == b"precious"


# -- modes: private by default, group on request ---------------------------------------------


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes_under(root: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def use_the_store(gc: GcRunner, tmp_path: Path) -> None:
    assert gc("mail", "send", "dog", "-m", "private words").returncode == 0
    assert gc("inbox", "push", "--to", "dog", "an item").returncode == 0
    event = {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup"}
    assert gc("hook", "run", input=json.dumps(event), env={"GC_AGENT": "dog"}).returncode == 0
    assert gc("gate", "mark", "tests", "--session", "s1").returncode == 0


@pytest.mark.gc_process
def test_a_store_is_private_under_a_022_umask(gc: GcRunner, tmp_path: Path, umask_022) -> None:
    assert gc("init").returncode == 0
    use_the_store(gc, tmp_path)
    found = modes_under(tmp_path / ".beads")
    assert found["."] == 0o700
    assert any(path.startswith("messages/") for path in found)
    assert ".runtime/delivery.sqlite3" in found and ".git/HEAD" in found
    shared = {path: oct(mode) for path, mode in found.items() if mode & 0o077}
    assert not shared  # git's objects and refs included


def test_the_library_keeps_its_own_files_private(tmp_path: Path, umask_022) -> None:
    from beads.store import Store
    from inbox.delivery import Delivery

    with Store.init(tmp_path)[0] as store:
        store.create("message", "hi", "secret")
    with Delivery(tmp_path / ".beads") as delivery:
        delivery.push(["dog"], "an item", key="k1")
    found = modes_under(tmp_path / ".beads")
    assert found["."] == 0o700
    ours = {p: oct(m) for p, m in found.items() if not p.startswith(".git") and m & 0o077}
    assert not ours


def test_a_loose_object_the_library_writes_is_readable_by_its_owner_alone(
    tmp_path: Path, umask_022
) -> None:
    from beads.store import Store

    with Store.init(tmp_path)[0] as store:
        for number in range(3):
            store.create("message", f"hi {number}", "secret")
    objects = tmp_path / ".beads" / ".git" / "objects"
    loose = {
        str(path.relative_to(objects)): stat.S_IMODE(path.stat().st_mode)
        for path in objects.glob("[0-9a-f][0-9a-f]/*")
    }
    assert len(loose) >= 3 * 6  # each write's blob, trees and commit
    assert {name: oct(mode) for name, mode in loose.items() if mode != 0o400} == {}


@pytest.mark.gc_process
def test_a_group_store_shares_with_the_group_only(gc: GcRunner, tmp_path: Path, umask_022) -> None:
    assert gc("init").returncode == 0
    assert gc("config", "set", "store.shared", "group").returncode == 0
    use_the_store(gc, tmp_path)
    found = modes_under(tmp_path / ".beads")
    assert found["."] == 0o2770
    assert not {p: oct(m) for p, m in found.items() if m & 0o007}
    unreadable = {p: oct(m) for p, m in found.items() if not m & 0o040}
    assert not unreadable
    assert found[".runtime/delivery.sqlite3"] & 0o060 == 0o060
    assert gc("config", "set", "store.shared", "private").returncode == 0
    assert gc("mail", "inbox", "dog").returncode == 0  # applied as the store opens
    assert not {p: oct(m) for p, m in modes_under(tmp_path / ".beads").items() if m & 0o077}
    bad = gc("config", "set", "store.shared", "world")
    assert bad.returncode == 30 and "store.shared must be private" in bad.stderr


@pytest.mark.gc_process
def test_a_store_made_before_modes_becomes_private(gc_store: GcRunner, tmp_path: Path) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    # Used in this process: the modes its files get are replaced below in any case.
    use_the_store(GcRunner(tmp_path), tmp_path)
    root = tmp_path / ".beads"
    for path in [root, *root.rglob("*")]:  # what the code before this change left
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    assert gc("mail", "inbox", "dog").returncode == 0  # the installed program, as marked
    assert not {p: oct(m) for p, m in modes_under(root).items() if m & 0o077}


def test_session_gate_checks_of_one_stop_share_one_budget(
    store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gates import session_gates
    from gates.hooks import HookContext
    from gates.stop import stop_gates
    from inbox.delivery import Delivery

    monkeypatch.setattr(session_gates, "CHECK_TIMEOUT", 0.6)
    started_checks = tmp_path / "started"
    hanging = {"hook": "Stop", "mode": "soft",
               "check": f"sh -c 'echo x >> {started_checks}; exec sleep 100'"}  # fmt: skip
    store.set_setting("gates.session", {name: hanging for name in ("a", "b", "c", "d")})
    with Delivery(store.root) as delivery:
        ctx = HookContext("Stop", "s1", "dog", {"cwd": str(tmp_path)}, delivery, store.root)
        started = time.monotonic()
        verdict = stop_gates(ctx)
    assert time.monotonic() - started < 60  # bounds a hang only
    # One budget: the first check spent it, the other three never started.
    assert started_checks.read_text().split() == ["x"]
    assert verdict is not None and sum("its check is broken" in w for w in verdict.warnings) == 1
    assert sum("its check did not run" in w for w in verdict.warnings) == 3


def test_checks_the_spent_budget_left_no_time_for_say_they_did_not_run(
    store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gates import session_gates
    from gates.hooks import HookContext
    from gates.stop import stop_gates
    from inbox.delivery import Delivery

    monkeypatch.setattr(session_gates, "CHECK_TIMEOUT", 0.6)
    store.set_setting("gates.disabled", ["commit-push", "bead-update"])
    store.set_setting(
        "gates.session",
        {
            "a-hangs": {"hook": "Stop", "mode": "strict", "check": "sleep 100"},
            "b-fails": {"hook": "Stop", "mode": "strict", "check": "false"},
        },
    )
    with Delivery(store.root) as delivery:
        ctx = HookContext("Stop", "s1", "dog", {"cwd": str(tmp_path)}, delivery, store.root)
        verdict = stop_gates(ctx)
        statuses = session_gates.gate_statuses(store.config, delivery, "s1", cwd=tmp_path)
    # Both are let by with a warning, as a check that hangs is; the second never ran, and
    # its words said it had run past the budget.
    assert verdict is not None and verdict.block is None
    assert verdict.warnings == [
        "gc: gate a-hangs counts as satisfied because its check is broken: ran past 0.6s",
        "gc: gate b-fails counts as satisfied: its check did not run because the hook's 0.6 s "
        "budget was spent by earlier checks",
    ]
    shown = {s.gate.id: (s.satisfied, s.how) for s in statuses}  # `gc gate status`'s words
    assert shown["b-fails"] == (
        True,
        "not run: the hook's 0.6 s budget was spent by earlier checks",
    )


def test_gh_runs_of_one_gate_check_share_one_budget(
    store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gates import beadgates

    monkeypatch.setattr(beadgates, "GH_TIMEOUT", 0.6)
    runs = tmp_path / "runs"
    gh = script(tmp_path, f"echo x >> {runs}\nexec sleep 100\n", "gh")
    gates = [beadgates.create_gate(store, f"gh:pr:{n}").id for n in ("1", "2", "3", "4")]
    started = time.monotonic()
    beadgates.check_gates(store, gh=gh)
    assert time.monotonic() - started < 60  # bounds a hang only
    assert runs.read_text().split() == ["x"]  # one budget: the first spent it
    # The first ran past it; the others never ran, and their errors said they had run past.
    errors = sorted(store.get(g).meta.get("error", "") for g in gates)
    assert errors == [
        "gh pr view did not run: the gate check's 0.6 s budget was spent by earlier gates",
    ] * 3 + ["gh pr view ran past 0.6s"]
    assert all(store.get(g).status == "open" for g in gates)  # they still wait


def test_a_nudge_command_leaves_nothing_running(tmp_path: Path) -> None:
    from inbox.nudge import run_job

    pid_file = tmp_path / "pid"
    argv = ["sh", "-c", f"sleep 100 & echo $! > {pid_file}"]
    assert run_job({"argv": argv, "timeout": 5})[0] == "ok"
    assert gone([int(pid_file.read_text())])


@pytest.mark.parametrize("where", [".beads", "link"])
def test_init_through_a_link_to_nowhere_is_invalid_input(
    gc: GcRunner, tmp_path: Path, where: str
) -> None:
    (tmp_path / where).symlink_to(tmp_path / "nowhere")
    result = gc("init", *([] if where == ".beads" else [where]))
    assert result.returncode == 30 and "symbolic link to nowhere" in result.stderr
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.gc_process
def test_programs_gc_runs_keep_the_users_umask(
    gc_store: GcRunner, tmp_path: Path, umask_022
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    seen = tmp_path / "umask"
    prog = script(tmp_path, f"umask > {seen}\n")
    assert gc("mail", "inbox", "dog", env={"GC_MAIL": f"exec:{prog}"}).returncode == 0
    assert seen.read_text().strip() == "0022"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs to give a directory to another user")
def test_a_store_of_another_user_is_never_found_by_walking_up(
    gc_store: GcRunner, tmp_path: Path
) -> None:
    prog = script(tmp_path, f"touch {tmp_path}/ran\n", "evil")
    gc = gc_store  # a store as `gc init` makes it (a copy)
    assert gc("config", "set", "mail.provider", f"exec:{prog}").returncode == 0
    store = tmp_path / ".beads"
    os.chown(store, 54321, 54321)
    work = tmp_path / "work"
    work.mkdir()
    result = gc("mail", "inbox", "dog", cwd=work)
    assert result.returncode == 30 and "belongs to another user" in result.stderr
    assert not (tmp_path / "ran").exists()
    named = gc("mail", "inbox", "dog", cwd=work, env={"GC_BEADS_DIR": str(store)})
    assert named.returncode == 0 and (tmp_path / "ran").exists()
    os.chown(store, 54321, os.getegid())  # a group store of one of our groups
    store.chmod(0o2770)
    assert gc("mail", "inbox", "dog", cwd=work).returncode == 0


@pytest.mark.parametrize("with_git", [True, False], ids=["git-repack", "dulwich-repack"])
def test_packs_and_their_repack_are_readable_by_the_owner_alone_under_a_022_umask(
    tmp_path: Path, umask_022, monkeypatch: pytest.MonkeyPatch, with_git: bool
) -> None:
    from dulwich.objects import Blob

    from beads.git import maintenance, repacker
    from beads.store import Store

    if not with_git:
        monkeypatch.setattr(maintenance.shutil, "which", lambda name: None)
    monkeypatch.setattr(maintenance, "spawn", lambda git_dir: None)  # the repack runs here
    with Store.init(tmp_path)[0] as store:
        for number in range(3):
            store.create("message", f"hi {number}", "secret")
        git_dir = store.git.git_dir
        # A batch's pack (dulwich's writer), twice: the second breaks the progression.
        for batch in range(2):
            blobs = [Blob.from_string(f"{batch} {n}".encode()) for n in range(70 + batch)]
            store.git.store_objects(blobs)
        repacker.background(git_dir)  # git's repack, or dulwich's where git is absent
        assert len(maintenance.packs_of(git_dir)) == 1
    objects = git_dir / "objects"
    packs = sorted(objects.glob("pack/pack-*"))
    assert {path.suffix for path in packs} >= {".pack", ".idx"}
    found = {
        str(path.relative_to(objects)): oct(stat.S_IMODE(path.stat().st_mode))
        for path in objects.rglob("*")
        if path.is_file()
    }
    assert {name: mode for name, mode in found.items() if int(mode, 8) & 0o077} == {}
