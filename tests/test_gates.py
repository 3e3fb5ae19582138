"""Gates and decisions: each await type, exactly-once notification, respond order, Stop chain."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from beads.errors import InvalidInput, NotFound
from beads.records.times import now_stamp, stamp_at
from beads.store import Store
from gates import beadgates, decisions, session_gates
from inbox import Delivery
from mail.beadmail import BeadMail
from tests.conftest import GcRunner, alive, copy_store, gc_program, git


def items(store: Store, agent: str) -> list:
    with Delivery(store.root) as delivery:
        return delivery.items(agent, ("pending", "delivered"))


def fake_gh(tmp_path: Path, runs: object = None, pr: object = None, fail: bool = False) -> str:
    """A `gh` program that prints canned JSON (or fails), as the real one would."""
    script = tmp_path / "gh"
    body = "import sys, json\n"
    if fail:
        body += "sys.stderr.write('\\n\\ngh: not logged in\\n\\n'); sys.exit(4)\n"
    else:
        body += (
            f"runs = {json.dumps(runs)!r}\npr = {json.dumps(pr)!r}\n"
            "print(runs if sys.argv[1] == 'run' else pr)\n"
        )
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def later(monkeypatch: pytest.MonkeyPatch, module: object, seconds: float = 1.0) -> None:
    """`module`'s clock `seconds` ahead: its timers and timeouts are due without a sleep."""
    monkeypatch.setattr(module, "now_stamp", lambda: stamp_at(time.time() + seconds))


def test_timer_gate_resolves_and_tells_each_waiter_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = now_stamp()
    gate = beadgates.create_gate(store, "timer:0.2s", waiters=["dog", "cat"])
    assert beadgates.evaluate(store, gate, now=before).action == "wait"  # not yet due
    later(monkeypatch, beadgates)  # now it is
    [outcome] = beadgates.check_gates(store)
    assert outcome.action == "resolve"
    closed = store.get(gate.id)
    assert closed.status == "closed" and closed.meta["state"] == "resolved"
    assert beadgates.check_gates(store) == []
    for waiter in ("dog", "cat"):
        assert [i.key for i in items(store, waiter)] == [f"gate:{gate.id}"]


def test_bead_gate_resolves_when_the_bead_closes(store: Store) -> None:
    task = store.create("task", "Fix the build")
    gate = beadgates.create_gate(store, f"bead:{task.id}", waiters=["dog"])
    assert beadgates.check_gates(store) == []
    store.close_bead(task.id, "fixed")
    assert [o.action for o in beadgates.check_gates(store)] == ["resolve"]
    assert store.get(gate.id).status == "closed"


def test_mail_gate_resolves_when_the_mail_is_answered(store: Store) -> None:
    mail = BeadMail(store)
    question = mail.send("mayor", "dog", "Q", "Ready?")
    gate = beadgates.create_gate(store, f"mail:{question.id}", waiters=["mayor"])
    assert beadgates.check_gates(store) == []
    mail.reply(question.id, "dog", "", "Yes")
    [outcome] = beadgates.check_gates(store)
    assert outcome.action == "resolve" and question.id in outcome.reason
    assert store.get(gate.id).status == "closed"


def test_timeout_escalates_at_priority_zero(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = beadgates.create_gate(store, "human", waiters=["dog"], timeout="1h")
    assert beadgates.check_gates(store) == []  # not yet
    later(monkeypatch, beadgates, 2 * 3600)
    [outcome] = beadgates.check_gates(store)
    assert outcome.action == "escalate"
    assert store.get(gate.id).meta["state"] == "escalated"
    [item] = items(store, "dog")
    assert item.key == f"gate:{gate.id}:escalated" and item.priority == 0
    assert beadgates.check_gates(store) == []  # escalated once


def test_gh_run_gate_resolves_on_success_and_escalates_on_failure(store: Store, tmp_path) -> None:
    ok = beadgates.create_gate(store, "gh:run:ci.yml", waiters=["dog"])
    later = "2999-01-01T00:00:00Z"
    pending = fake_gh(tmp_path, runs=[{"databaseId": 1, "status": "in_progress",
                                       "conclusion": "", "createdAt": later}])  # fmt: skip
    assert beadgates.check_gates(store, gh=pending) == []
    success = fake_gh(tmp_path, runs=[{"databaseId": 2, "status": "completed",
                                       "conclusion": "success", "createdAt": later}])  # fmt: skip
    assert [o.action for o in beadgates.check_gates(store, gh=success)] == ["resolve"]
    assert store.get(ok.id).status == "closed"

    bad = beadgates.create_gate(store, "gh:run:ci.yml", waiters=["dog"])
    failure = fake_gh(tmp_path, runs=[{"databaseId": 3, "status": "completed",
                                       "conclusion": "failure", "createdAt": later}])  # fmt: skip
    assert [o.action for o in beadgates.check_gates(store, gh=failure)] == ["escalate"]
    assert store.get(bad.id).meta["state"] == "escalated"


def test_gh_run_ignores_runs_older_than_the_gate(store: Store, tmp_path) -> None:
    beadgates.create_gate(store, "gh:run:ci.yml", waiters=["dog"])
    run = {"databaseId": 1, "status": "completed", "conclusion": "success",
           "createdAt": "2001-01-01T00:00:00Z"}  # fmt: skip
    old = fake_gh(tmp_path, runs=[run])
    assert beadgates.check_gates(store, gh=old) == []


def test_gh_pr_gate_merged_and_closed(store: Store, tmp_path) -> None:
    merged = beadgates.create_gate(store, "gh:pr:12", waiters=["dog"])
    gh = fake_gh(tmp_path, pr={"state": "MERGED", "mergedAt": "2026-01-01T00:00:00Z"})
    assert [o.action for o in beadgates.check_gates(store, gh=gh)] == ["resolve"]
    assert store.get(merged.id).status == "closed"
    closed = beadgates.create_gate(store, "gh:pr:13", waiters=["dog"])
    gh = fake_gh(tmp_path, pr={"state": "CLOSED", "mergedAt": None})
    assert [o.action for o in beadgates.check_gates(store, gh=gh)] == ["escalate"]
    assert store.get(closed.id).meta["state"] == "escalated"


def test_missing_or_failing_gh_leaves_the_gate_open_with_the_error(store: Store, tmp_path) -> None:
    gate = beadgates.create_gate(store, "gh:pr:7", waiters=["dog"])
    beadgates.check_gates(store, gh=str(tmp_path / "no-such-gh"))
    assert "not found" in store.get(gate.id).meta["error"]
    beadgates.check_gates(store, gh=fake_gh(tmp_path, fail=True))
    found = store.get(gate.id)
    assert found.status == "open"
    assert found.meta["error"] == "gh pr view exited 4: gh: not logged in"  # one line of it


def test_guarded_gate_needs_force_to_close(tmp_path: Path, gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    made = gc.json("gate", "create", "--await", "human")["bead"]
    refused = gc("gate", "close", made["id"])
    assert refused.returncode == 30 and "guarded" in refused.stderr
    assert gc("gate", "close", made["id"], "--force").returncode == 0


def test_gate_close_refuses_a_bead_that_is_not_a_gate(gc_store: GcRunner) -> None:
    gc = gc_store
    task = gc.json("bead", "create", "--type", "task", "--title", "keep me open")["bead"]["id"]
    refused = gc("gate", "close", task, "--force")
    assert refused.returncode == 30
    assert refused.stderr == f"gc: {task} is a task, not a gate\n"
    assert gc.json("bead", "show", task)["bead"]["status"] == "open"


CHECKER = """
import sys
from beads.store import Store
from gates.beadgates import check_gates
with Store.open(sys.argv[1]) as store:
    check_gates(store)
"""


def test_two_checks_at_once_tell_each_waiter_exactly_once(store: Store) -> None:
    made = [beadgates.create_gate(store, "timer:0.1s", waiters=["dog", "cat"]) for _ in range(20)]
    time.sleep(0.2)
    checkers = [
        subprocess.Popen(
            [sys.executable, "-c", CHECKER, str(store.root)], stderr=subprocess.PIPE, text=True
        )  # fmt: skip
        for _ in range(2)
    ]
    for checker in checkers:
        _out, err = checker.communicate(timeout=120)
        assert checker.returncode == 0, err
    for waiter in ("dog", "cat"):
        keys = [i.key for i in items(store, waiter)]
        assert sorted(keys) == sorted(f"gate:{g.id}" for g in made)
    assert all(store.get(g.id).status == "closed" for g in made)


def test_gate_checks_racing_over_timed_out_decisions_all_succeed_and_answer_once(
    gc_store: GcRunner,
) -> None:
    gc = gc_store
    made = [
        gc.json("decision", "create", "--prompt", f"Ship {n}?", "--option", "ship",
                "--option", "hold", "--default", "hold", "--timeout", "0.1s")["bead"]["id"]
        for n in range(4)
    ]  # fmt: skip
    time.sleep(0.2)
    checks = [
        subprocess.Popen([gc_program(), "gate", "check"], cwd=gc.cwd, env=gc.env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]  # fmt: skip
    for check in checks:
        _out, err = check.communicate(timeout=120)
        assert check.returncode == 0 and err == "", err
    for decision in made:
        assert gc.json("decision", "show", decision)["bead"]["meta"]["answer"] == "hold"
    keys = [i["key"] for i in gc.json("inbox", "list", "--agent", "human")["items"]]
    assert sorted(keys) == sorted(f"decision:{d}" for d in made)


def test_decision_respond_resolves_gate_before_item_before_nudge(
    tmp_path: Path, gc_store: GcRunner
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    log = tmp_path / "order.log"
    probe = (
        "import json, subprocess, sys; "
        "d = json.loads(subprocess.run(['gc', 'gate', 'show', sys.argv[1], '--json'], "
        "capture_output=True, text=True).stdout)['bead']; "
        "items = json.loads(subprocess.run(['gc', 'inbox', 'list', '--agent', 'mayor', "
        "'--json'], capture_output=True, text=True).stdout)['items']; "
        f"open({str(log)!r}, 'w').write(d['status'] + ' ' + str(len(items)))"
    )
    made = gc.json("decision", "create", "--prompt", "Ship?", "--option", "ship",
                   "--option", "hold", env={"GC_AGENT": "mayor"})  # fmt: skip
    gate_id = made["gate"]["id"]
    env_path = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    gc("config", "set", "agents.mayor.nudge", json.dumps([sys.executable, "-c", probe, gate_id]))
    hook_payload = {"session_id": "m1", "hook_event_name": "SessionStart", "cwd": str(tmp_path)}
    gc("hook", "run", input=json.dumps(hook_payload), env={"GC_AGENT": "mayor"})
    stop = {**hook_payload, "hook_event_name": "Stop", "stop_hook_active": False}
    gc("hook", "run", input=json.dumps(stop), env={"GC_AGENT": "mayor", **env_path})
    answered = gc.json("decision", "respond", made["bead"]["id"], "--select", "ship",
                       "--text", "go", env={"GC_AGENT": "human", **env_path})  # fmt: skip
    assert answered["bead"]["meta"]["answer"] == "ship"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not log.exists():
        time.sleep(0.1)
    assert log.read_text() == "closed 1"  # at nudge time: gate resolved, answer in the inbox


def test_answer_survives_a_requester_restart(tmp_path: Path, gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    made = gc.json("decision", "create", "--prompt", "Ship?", "--option", "ship",
                   "--option", "hold", env={"GC_AGENT": "mayor"})  # fmt: skip
    start = {"session_id": "old", "hook_event_name": "SessionStart", "cwd": str(tmp_path)}
    gc("hook", "run", input=json.dumps(start), env={"GC_AGENT": "mayor"})
    end = {**start, "hook_event_name": "SessionEnd"}
    gc("hook", "run", input=json.dumps(end), env={"GC_AGENT": "mayor"})
    gc("decision", "respond", made["bead"]["id"], "--select", "hold", env={"GC_AGENT": "human"})
    new = {**start, "session_id": "new"}
    result = gc("hook", "run", input=json.dumps(new), env={"GC_AGENT": "mayor"})
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "answered: hold" in context and "Ship?" in context


def test_wait_returns_on_answer(tmp_path: Path, gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    waiter = subprocess.Popen(
        [sys.executable, "-m", "gc_beads", "decision", "create", "--prompt", "Go?",
         "--option", "yes", "--option", "no", "--wait", "--timeout", "60", "--json"],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True, env={**gc.env, "GC_AGENT": "mayor"},
    )  # fmt: skip
    deadline = time.monotonic() + 30
    open_ones: list = []
    while time.monotonic() < deadline and not open_ones:
        open_ones = gc.json("decision", "list")["beads"]
        time.sleep(0.1)
    gc("decision", "respond", open_ones[0]["id"], "--select", "yes", env={"GC_AGENT": "human"})
    out, _ = waiter.communicate(timeout=30)
    assert waiter.returncode == 0 and json.loads(out)["bead"]["meta"]["answer"] == "yes"


def test_wait_says_when_the_answer_came_from_another_machine(
    tmp_path: Path, gc_store: GcRunner
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    waiter = subprocess.Popen(
        [sys.executable, "-m", "gc_beads", "decision", "create", "--prompt", "Deploy?",
         "--option", "yes", "--option", "no", "--wait", "--timeout", "60"],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True, env={**gc.env, "GC_AGENT": "mayor"},
    )  # fmt: skip
    deadline = time.monotonic() + 30
    open_ones: list = []
    while time.monotonic() < deadline and not open_ones:
        open_ones = gc.json("decision", "list")["beads"]
        time.sleep(0.1)
    # Another machine (a copy of the store with a machine id of its own) answers, and its
    # commit is pushed into this store.
    there = GcRunner(tmp_path / "there")
    copy_store(tmp_path / ".beads", there.cwd / ".beads")
    git("config", "--unset", "machine.id", cwd=there.cwd / ".beads" / ".git")
    answered = there("decision", "respond", open_ones[0]["id"], "--select", "yes",
                     env={"GC_AGENT": "human"})  # fmt: skip
    assert answered.returncode == 0, answered.stderr
    git("push", "-q", str(tmp_path / ".beads" / ".git"), "main", cwd=there.cwd / ".beads")
    out, _ = waiter.communicate(timeout=30)
    assert waiter.returncode == 0
    assert out.startswith("(from human on ") and "answered: yes" in out


@pytest.mark.gc_process
def test_wait_times_out_with_exit_10_or_takes_the_default(
    tmp_path: Path, gc_store: GcRunner
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    args = ["decision", "create", "--prompt", "Go?", "--option", "yes", "--option", "no",
            "--wait", "--timeout", "0.1s"]  # fmt: skip
    assert gc(*args).returncode == 10
    answered = gc.json(*args, "--default", "no")["bead"]
    assert answered["meta"]["answer"] == "no" and answered["meta"]["by_default"] is True


def test_gate_check_answers_timed_out_decisions_with_the_default(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    decision, gate = decisions.create_decision(store, "Ship?", ["ship", "hold"], default="hold",
                                               timeout="1h")  # fmt: skip
    assert decisions.answer_timed_out(store) == []  # not yet
    later(monkeypatch, decisions, 2 * 3600)
    assert decisions.answer_timed_out(store) == [decision.id]
    assert store.get(decision.id).meta["answer"] == "hold"
    assert store.get(gate.id).status == "closed"
    assert [i.key for i in items(store, store.agent)] == [f"decision:{decision.id}"]


# -- the Stop chain -----------------------------------------------------------------------


def stop(gc: GcRunner, session: str = "s1", active: bool = False) -> dict | None:
    payload = {"session_id": session, "hook_event_name": "Stop", "cwd": str(gc.cwd),
               "stop_hook_active": active}  # fmt: skip
    result = gc("hook", "run", input=json.dumps(payload), env={"GC_AGENT": "dog"})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_strict_gate_blocks_until_marked(tmp_path: Path, gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc("config", "set", "gates.disabled", '["commit-push", "bead-update"]')
    assert gc("gate", "register", "tests-pass", "--mode", "strict",
              "--description", "run the tests").returncode == 0  # fmt: skip
    reply = stop(gc)
    assert reply["decision"] == "block" and "tests-pass" in reply["reason"]
    assert gc("gate", "mark", "tests-pass", "--session", "s1").returncode == 0
    assert stop(gc, active=True) is None
    assert gc("gate", "clear", "--session", "s1").returncode == 0
    assert stop(gc)["decision"] == "block"
    status = gc.json("gate", "status", "--session", "s1")["gates"]
    assert [(g["id"], g["satisfied"]) for g in status] == [("tests-pass", False)]
    assert gc("gate", "unregister", "tests-pass").returncode == 0
    assert stop(gc) is None


def test_gate_status_exits_0_with_a_strict_gate_unsatisfied_and_says_so(
    gc_store: GcRunner,
) -> None:
    gc = gc_store
    gc("config", "set", "gates.disabled", '["commit-push", "bead-update"]')
    assert gc("gate", "register", "tests-pass", "--mode", "strict").returncode == 0
    unsatisfied = gc("gate", "status", "--session", "s1", "--json")
    assert unsatisfied.returncode == 0  # a report: the Stop hook is what blocks
    assert json.loads(unsatisfied.stdout)["gates"][0]["satisfied"] is False
    assert gc("gate", "status", "--session", "s1").returncode == 0
    assert gc("gate", "mark", "tests-pass", "--session", "s1").returncode == 0
    assert gc("gate", "status", "--session", "s1").returncode == 0
    helped = " ".join(gc("gate", "status", "--help").stdout.split())
    assert "exit 0 whether the gates are satisfied or not" in helped
    page = Path(__file__).resolve().parent.parent / "docs" / "gates-and-decisions.md"
    page_text = " ".join(page.read_text().split())
    assert "`gc gate status` is a report, not a yes/no command: it exits 0" in page_text


def test_a_gh_that_cannot_start_says_why(tmp_path: Path) -> None:
    from gates.beadgates import _run_gh

    with pytest.raises(InvalidInput, match=f"the gh CLI {tmp_path} is a directory, not a program"):
        _run_gh(str(tmp_path), ["run", "view"])


def test_check_command_satisfies_a_gate(tmp_path: Path, gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc("config", "set", "gates.disabled", '["commit-push", "bead-update"]')
    flag = tmp_path / "ok"
    gc("gate", "register", "flag", "--mode", "strict", "--check", f"test -e '{flag}'")
    assert stop(gc)["decision"] == "block"
    flag.touch()
    assert stop(gc) is None


def test_soft_gate_warns_without_blocking(tmp_path: Path, gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc("config", "set", "gates.disabled", '["commit-push", "bead-update"]')
    gc("gate", "register", "docs", "--mode", "soft", "--check", "false")
    reply = stop(gc)
    assert "decision" not in reply and "docs" in reply["systemMessage"]


def test_loop_detector_lets_the_agent_stop_after_three_blocks(
    tmp_path: Path, gc_store: GcRunner
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc("config", "set", "gates.disabled", '["commit-push", "bead-update"]')
    gc("gate", "register", "never", "--mode", "strict", "--check", "false")
    assert stop(gc, active=False)["decision"] == "block"
    assert stop(gc, active=True)["decision"] == "block"
    assert stop(gc, active=True)["decision"] == "block"
    reply = stop(gc, active=True)
    assert "decision" not in reply and "3 blocked stops" in reply["systemMessage"]
    assert stop(gc, active=False)["decision"] == "block"  # a new stop starts counting again


def test_broken_gate_check_never_traps_the_agent(tmp_path: Path, gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc("config", "set", "gates.disabled", '["commit-push", "bead-update"]')
    gc("gate", "register", "broken", "--mode", "strict", "--check", "/no/such/program --x")
    reply = stop(gc)  # a warning, never a block
    assert reply is not None and "decision" not in reply
    assert "counts as satisfied because its check is broken" in reply["systemMessage"]


def running_with(argument: str) -> list[int]:
    """The live processes one of whose arguments is `argument`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        if argument.encode() in words and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@contextlib.contextmanager
def leftover_marker() -> Iterator[str]:
    """A `sleep` argument no other process has (`300.N`); what still runs with it is killed
    when the test ends, whatever it found."""
    marker = f"300.{os.getpid()}{time.monotonic_ns() % 10**6}"
    try:
        yield marker
    finally:
        for pid in running_with(marker):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def gone_within(marker: str, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while running_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.gc_process
@pytest.mark.parametrize("leaves", ["setsid sleep {} &", "setsid sh -c 'sleep {}' &"])
def test_what_a_stop_check_leaves_running_in_a_session_of_its_own_is_ended(
    gc_store: GcRunner, leaves: str
) -> None:
    gc = gc_store
    gc("config", "set", "gates.disabled", '["commit-push", "bead-update"]')
    with leftover_marker() as marker:
        check = shlex.join(["sh", "-c", leaves.format(marker)])
        assert gc("gate", "register", "spawns", "--mode", "soft", "--check", check).returncode == 0
        assert stop(gc) is None  # the check passed
        assert gone_within(marker)  # its `setsid` child escaped its process group, and lived on


def test_what_a_check_that_ran_out_of_time_left_running_is_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_gates, "CHECK_TIMEOUT", 0.5)
    with leftover_marker() as marker:
        check = shlex.join(["sh", "-c", f"setsid sleep {marker} & exec sleep 100"])
        gate = session_gates.SessionGate("slow", "Stop", "soft", "", check)
        status = session_gates.run_check(gate, tmp_path)
        assert status.satisfied and status.how.startswith("broken check: ran past")
        assert gone_within(marker)


def test_stop_decision_handler_says_what_to_run(tmp_path: Path, gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc("config", "set", "gates.disabled", '["commit-push", "bead-update"]')
    gc("config", "set", "gates.require_decision", "true")
    reply = stop(gc)
    assert reply["decision"] == "block" and "gc decision create --session s1" in reply["reason"]
    gc("decision", "create", "--session", "s1", "--prompt", "Done?", "--option", "y",
       "--option", "n")  # fmt: skip
    assert stop(gc) is None


def test_waiting_on_a_bead_gate_warns_but_never_blocks(tmp_path: Path, gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc("config", "set", "gates.disabled", '["commit-push", "bead-update"]')
    made = gc.json("gate", "create", "--await", "human", "--waiter", "dog")["bead"]
    reply = stop(gc)
    assert "decision" not in reply and made["id"] in reply["systemMessage"]


def test_hooks_resolve_due_timer_gates(tmp_path: Path, gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    made = gc.json("gate", "create", "--await", "timer:0.2s", "--waiter", "dog")["bead"]
    time.sleep(0.3)
    payload = {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "cwd": str(tmp_path)}
    result = gc("hook", "run", input=json.dumps(payload), env={"GC_AGENT": "dog"})
    assert f"Gate {made['id']} resolved" in result.stdout
    assert gc.json("gate", "show", made["id"])["bead"]["status"] == "closed"


@pytest.mark.parametrize("spec", ["timer:soon", "gh:pr:abc", "nope", "bead:", "mail:gc-nothere"])
def test_bad_await_specs_are_refused(tmp_path: Path, gc_store: GcRunner, spec: str) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    result = gc("gate", "create", "--await", spec)
    assert result.returncode in (30, 40) and "Traceback" not in result.stderr
    assert gc.json("gate", "list")["beads"] == []


def test_watch_checks_in_a_loop(tmp_path: Path, gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    made = gc.json("gate", "create", "--await", "timer:0.3s", "--waiter", "dog")["bead"]
    result = gc("gate", "watch", "--interval", "0.2", "--rounds", "4")
    assert result.returncode == 0 and f"{made['id']}: timer 0.3s elapsed" in result.stdout
    assert gc.json("gate", "show", made["id"])["bead"]["status"] == "closed"


def test_sigterm_while_gate_watch_runs_gh_ends_gh_then_the_watch_in_one_line(
    tmp_path: Path, gc_store: GcRunner
) -> None:
    gc = gc_store
    made = gc.json("gate", "create", "--await", "gh:pr:7", "--waiter", "dog")["bead"]
    tools = tmp_path / "tools"
    tools.mkdir()
    started = tmp_path / "gh.pid"
    gh = tools / "gh"  # a gh that hangs, saying its pid first
    gh.write_text(f"#!/bin/sh\necho $$ > {started}.tmp && mv {started}.tmp {started}\nsleep 600\n")
    gh.chmod(0o755)
    env = {**gc.env, "PATH": f"{tools}{os.pathsep}{gc.env['PATH']}"}
    watch = subprocess.Popen(
        [gc_program(), "gate", "watch", "--interval", "600"], cwd=gc.cwd, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60  # bounds a hang only
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        watch.send_signal(signal.SIGTERM)
        _out, err = watch.communicate(timeout=60)
    finally:
        watch.kill()
        watch.wait()
    assert (watch.returncode, err) == (143, "gc: terminated\n")
    pid = int(started.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gh's group was ended first
    assert gc.json("gate", "show", made["id"])["bead"]["status"] == "open"  # nothing half done


def test_an_escalated_gate_still_resolves_later(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = store.create("task", "Slow work")
    gate = beadgates.create_gate(store, f"bead:{task.id}", waiters=["dog"], timeout="0.1s")
    later(monkeypatch, beadgates)
    assert [o.action for o in beadgates.check_gates(store)] == ["escalate"]
    store.close_bead(task.id, "done at last")
    assert [o.action for o in beadgates.check_gates(store)] == ["resolve"]
    keys = sorted(i.key for i in items(store, "dog"))
    assert keys == [f"gate:{gate.id}", f"gate:{gate.id}:escalated"]


def test_responding_again_with_the_same_answer_tells_the_requester_again(store: Store) -> None:
    decision, _gate = decisions.create_decision(store, "Ship?", ["ship", "hold"])
    decisions.respond(store, decision.id, "ship")
    with Delivery(store.root) as delivery:
        delivery.db.execute("DELETE FROM items")  # as if the push had been lost in a crash
    decisions.respond(store, decision.id, "ship")
    assert [i.key for i in items(store, store.agent)] == [f"decision:{decision.id}"]
    with pytest.raises(InvalidInput, match="already answered"):
        decisions.respond(store, decision.id, "hold")


def test_gate_status_and_the_stop_hook_agree_on_bead_update(
    tmp_path: Path, gc_store: GcRunner
) -> None:
    # One evaluation per built-in gate: `gc gate status` saw no stale beads (the Stop chain
    # alone computed them) and said ok while the Stop hook said "not updated".
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc("config", "set", "gates.disabled", '["commit-push"]')
    task = gc.json("bead", "create", "--type", "task", "--title", "Fix the build",
                   "--assignee", "dog")["bead"]  # fmt: skip
    start = {"session_id": "s1", "hook_event_name": "SessionStart", "cwd": str(tmp_path)}
    assert gc("hook", "run", input=json.dumps(start), env={"GC_AGENT": "dog"}).returncode == 0

    def status() -> dict:
        gates = gc.json("gate", "status", "--session", "s1")["gates"]
        return {g["id"]: (g["satisfied"], g["how"]) for g in gates}

    assert status()["bead-update"] == (False, f"not updated this session: {task['id']}")
    assert stop(gc)["systemMessage"] == (
        "gc: soft gate bead-update is not satisfied: these open beads of yours were not "
        f"updated this session: {task['id']}"
    )
    gc("bead", "update", task["id"], "--title", "Fix the build now")
    assert status()["bead-update"] == (True, "check")
    assert stop(gc) is None


def test_create_decision_marks_the_asking_sessions_gate(store: Store) -> None:
    decisions.create_decision(store, "Ship?", ["ship", "hold"], session="s1")
    assert (store.root / ".runtime" / "gates" / "s1" / "decision").exists()
    before = store.count(type="decision")
    with pytest.raises(InvalidInput):
        decisions.create_decision(store, "Ship?", ["ship", "hold"], session="../x")
    assert store.count(type="decision") == before  # refused before the commit


def test_hooks_answer_timed_out_decisions_with_the_default(
    tmp_path: Path, gc_store: GcRunner
) -> None:
    # `gc gate check` is not the only one to answer: any hook does, as for due timers.
    gc = gc_store  # a store as `gc init` makes it (a copy)
    with Store.open(tmp_path, agent="dog") as store:
        decision, gate = decisions.create_decision(store, "Ship?", ["ship", "hold"],
                                                   default="hold", timeout="1h")  # fmt: skip
        with store.batch() as batch:  # the timeout passed (no sleeping)
            batch.update(gate.id, meta={"timeout_at": "2000-01-01T00:00:00.000000Z"})
    payload = {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "cwd": str(tmp_path)}
    result = gc("hook", "run", input=json.dumps(payload), env={"GC_AGENT": "dog"})
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f"Decision {decision.id} answered by default (the decision timed out): hold" in context
    assert gc.json("decision", "show", decision.id)["bead"]["meta"]["by_default"] is True


def test_register_and_unregister_through_the_config_api(store: Store) -> None:
    spec = session_gates.register(store, "tests-pass", mode="strict", description="run them")
    assert store.config["gates"]["session"]["tests-pass"] == spec == {
        "hook": "Stop", "mode": "strict", "description": "run them"}  # fmt: skip
    with pytest.raises(InvalidInput, match="mode must be strict or soft"):
        session_gates.register(store, "docs", mode="sometimes")
    session_gates.unregister(store, "tests-pass")
    assert store.config["gates"]["session"] == {}
    with pytest.raises(NotFound, match="no registered gate tests-pass"):
        session_gates.unregister(store, "tests-pass")
    with pytest.raises(InvalidInput):  # the config API checks what a setting holds
        store.set_setting("gates.session.docs", "not a mapping")


# -- the commit-push gate and gc's own hook entries ----------------------------------------


def project_with_hooks(tmp_path: Path, gc: GcRunner, committed: dict | None) -> Path:
    """A git project with a store, `committed` as its committed `.claude/settings.json`
    (None: no such file), then `gc hook install` run in it."""
    git("init", "-q", "-b", "main", str(tmp_path), cwd=tmp_path)
    gc("init")  # in the project: it keeps the store out of the project's git
    settings = tmp_path / ".claude" / "settings.json"
    if committed is not None:
        settings.parent.mkdir()
        settings.write_text(json.dumps(committed, indent=2))
        git("add", ".claude/settings.json", cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "the project", cwd=tmp_path)
    assert gc("hook", "install").returncode == 0
    return settings


def commit_push_warning(gc: GcRunner) -> str:
    reply = stop(gc) or {}
    return "\n".join(w for w in reply.get("systemMessage", "").splitlines() if "commit-push" in w)


def edit(settings: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(settings.read_text())
    change(data)
    settings.write_text(json.dumps(data, indent=2))


@pytest.mark.parametrize("committed", [None, {"permissions": {"allow": ["Bash(ls)"]}}])
def test_the_commit_push_gate_ignores_only_the_hook_entries_gc_installed(
    tmp_path: Path, gc: GcRunner, committed: dict | None
) -> None:
    settings = project_with_hooks(tmp_path, gc, committed)
    assert git("status", "--porcelain", cwd=tmp_path).strip()  # git sees the change
    assert commit_push_warning(gc) == ""
    local = tmp_path / ".claude" / "settings.local.json"
    assert gc("hook", "install", "--settings", str(local)).returncode == 0
    assert commit_push_warning(gc) == ""

    edit(settings, lambda data: data.setdefault("env", {}).update({"DEBUG": "1"}))
    assert commit_push_warning(gc) == (
        "gc: soft gate commit-push is not satisfied: the work tree has 1 uncommitted change"
    )


def test_a_changed_or_added_hook_beside_gcs_still_counts_as_uncommitted_work(
    tmp_path: Path, gc: GcRunner
) -> None:
    settings = project_with_hooks(tmp_path, gc, {"hooks": {}})
    assert commit_push_warning(gc) == ""
    mine = {"type": "command", "command": "./lint.sh"}
    edit(settings, lambda data: data["hooks"]["Stop"][0]["hooks"].append(mine))
    assert "1 uncommitted change" in commit_push_warning(gc)
    edit(settings, lambda data: data["hooks"]["Stop"][0]["hooks"].remove(mine))
    assert commit_push_warning(gc) == ""
    entry = {"type": "command", "command": "gc hook run", "timeout": 5, "async": True}
    edit(settings, lambda data: data["hooks"]["Stop"][0]["hooks"].__setitem__(0, entry))
    assert "1 uncommitted change" in commit_push_warning(gc)  # no longer only gc's entry


def test_other_uncommitted_files_count_beside_gcs_settings(tmp_path: Path, gc: GcRunner) -> None:
    project_with_hooks(tmp_path, gc, None)
    (tmp_path / "notes.txt").write_text("draft\n")
    (tmp_path / ".claude" / "agents.md").write_text("mine\n")
    assert commit_push_warning(gc) == (
        "gc: soft gate commit-push is not satisfied: the work tree has 2 uncommitted changes"
    )
    payload = {"session_id": "s1", "hook_event_name": "PreCompact", "cwd": str(tmp_path)}
    result = gc("hook", "run", input=json.dumps(payload), env={"GC_AGENT": "dog"})
    assert json.loads(result.stdout)["systemMessage"] == (
        "gc: soft gate dirty-work is not satisfied: the work tree has 2 uncommitted changes"
    )


def break_store(beads: Path, how: str) -> None:
    """Damage the store `beads` as `how` says: gone, its branch naming no commit, or
    replaced by another tool's directory."""
    if how == "missing":
        shutil.rmtree(beads)
    elif how == "damaged":
        (beads / ".git" / "refs" / "heads" / "main").write_text("nonsense\n")
        (beads / ".runtime" / "index.sqlite3").unlink()  # read from git: the damage shows
    else:
        shutil.rmtree(beads)
        beads.mkdir()
        (beads / "issues.jsonl").write_text("theirs")


@pytest.mark.parametrize("how", ["missing", "damaged", "another tool's"])
def test_one_broken_named_store_holds_back_only_its_own_gates(
    gc_store: GcRunner, gc_init_template: Path, how: str
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gates = {}
    for name in ("web", "api"):  # two other stores of this machine; web will break
        copy_store(gc_init_template, gc.cwd / name / ".beads")
        gc("config", "set", "--local", f"stores.{name}", str(gc.cwd / name))
        task = gc.json("bead", "create", "--type", "task", "--title", "deploy", cwd=gc.cwd / name)
        gc("bead", "close", task["bead"]["id"], cwd=gc.cwd / name)
        spec = f"bead:{name}:{task['bead']['id']}"
        gates[name] = gc.json("gate", "create", "--await", spec)["bead"]["id"]
    gates["timer"] = gc.json("gate", "create", "--await", "timer:0s")["bead"]["id"]
    break_store(gc.cwd / "web" / ".beads", how)
    result = gc("gate", "check")
    assert result.returncode == 0, result.stderr
    [warning] = result.stderr.splitlines()
    assert warning.startswith("gc: warning: store web cannot be read (its gates wait): ")
    assert {g: gc.json("gate", "show", i)["bead"]["status"] for g, i in gates.items()} == {
        "web": "open",
        "api": "closed",
        "timer": "closed",
    }
    web = gc.json("gate", "show", gates["web"])["bead"]["meta"]
    assert web["error"] == warning.removeprefix("gc: warning: ")
    again = gc.json("gate", "check")  # the store still broken: said again, in the JSON too
    assert again["ok"] is True and again["warnings"] == [web["error"]]


def test_the_stop_hook_neither_fails_nor_blocks_over_a_broken_named_store(
    gc_store: GcRunner, gc_init_template: Path
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc("config", "set", "gates.disabled", '["commit-push", "bead-update"]')
    copy_store(gc_init_template, gc.cwd / "web" / ".beads")
    gc("config", "set", "--local", "stores.web", str(gc.cwd / "web"))
    task = gc.json("bead", "create", "--type", "task", "--title", "deploy", cwd=gc.cwd / "web")
    waiting = gc.json("gate", "create", "--await", f"bead:web:{task['bead']['id']}")["bead"]
    timer = gc.json("gate", "create", "--await", "timer:0s")["bead"]
    break_store(gc.cwd / "web" / ".beads", "damaged")
    reply = stop(gc, session="s1")
    assert reply is None or "decision" not in reply, reply
    assert gc.json("gate", "show", timer["id"])["bead"]["status"] == "closed"
    assert gc.json("gate", "show", waiting["id"])["bead"]["status"] == "open"
