"""Guarded settings: what `config.yaml` brings from another machine that runs a program or
weakens a protection takes effect here only once a person approves it with `gc trust`.

Two machines are two stores syncing through a real bare repository; hooks, mail and nudges
run through the real `gc`; `gc trust` is answered at a real pseudo-terminal (`pty`), and the
runs "without a terminal" start a session of their own (no controlling terminal at all).
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from beads.records.record import DEFAULT_MAX_BODY_BYTES
from beads.settings import approvals
from beads.settings.trust import MIN_BODY_BYTES, combine
from inbox.delivery import Delivery
from tests.conftest import GcRunner, gc_program
from tests.test_sync import copy_template, pair_template  # noqa: F401 - fixture

MAILSCRIPT = Path(__file__).parent / "mailscripts" / "jsonmail"
RM_ROOT = "rm -rf /"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def pair(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[GcRunner, GcRunner]:
    """Machine a (made with `gc init`, pushed) and machine b (cloned), one bare remote."""
    copy_template(request.getfixturevalue("pair_template"), tmp_path)
    return GcRunner(tmp_path / "a"), GcRunner(tmp_path / "b")


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stderr
    return result


def from_b(a: GcRunner, b: GcRunner, *command: str) -> None:
    """Run `command` on b (a person there), push it, and sync it into a."""
    ok(b(*command))
    ok(b("sync"))
    ok(a("sync"))


def in_terminal(
    side: GcRunner, *args: str, answer: str | None = None, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run `gc args` with a pseudo-terminal as its controlling terminal (and its stdio);
    type `answer` when it asks. Returns the exit code and everything it wrote."""
    full_env = {**side.env, **(env or {})}
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec gc or die
        try:
            os.chdir(side.cwd)
            os.execve(gc_program(), [gc_program(), *args], full_env)
        finally:
            os._exit(127)
    output, answered = b"", False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal (it ended)
                break
            if not chunk:
                break
            output += chunk
            if answer is not None and not answered and b"Type yes" in output:
                os.write(fd, answer.encode() + b"\n")
                answered = True
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"gc {' '.join(args)} did not finish: {output!r}")
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), output.decode(errors="replace")


def without_terminal(
    side: GcRunner, *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run `gc args` in a session of its own: no controlling terminal to open."""
    return subprocess.run(
        [gc_program(), *args], cwd=side.cwd, env={**side.env, **(env or {})}, input=stdin,
        capture_output=True, text=True, timeout=120, start_new_session=True,
    )  # fmt: skip


def pre_tool(side: GcRunner, command: str, env: dict[str, str] | None = None) -> dict:
    """`gc hook run` on a Bash PreToolUse event; its reply ({} for none)."""
    payload = {"session_id": "s1", "transcript_path": "/tmp/s.jsonl", "cwd": str(side.cwd),
               "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": command}}  # fmt: skip
    result = ok(side("hook", "run", input=json.dumps(payload), env=env))
    return json.loads(result.stdout) if result.stdout.strip() else {}


def denied(reply: dict) -> bool:
    return (reply.get("hookSpecificOutput") or {}).get("permissionDecision") == "deny"


def session_start(side: GcRunner) -> dict:
    payload = {"session_id": "s2", "transcript_path": "/tmp/s.jsonl", "cwd": str(side.cwd),
               "hook_event_name": "SessionStart", "source": "startup"}  # fmt: skip
    result = ok(side("hook", "run", input=json.dumps(payload), env={"GC_AGENT": "dog"}))
    return json.loads(result.stdout) if result.stdout.strip() else {}


def test_a_gate_check_registered_on_another_machine_runs_here_only_after_gc_trust(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner]
) -> None:
    a, b = pair
    marker = tmp_path / "check-ran"
    check = f"sh -c 'touch {marker}; exit 1'"
    from_b(a, b, "gate", "register", "probe", "--hook", "PreToolUse", "--mode", "strict",
           "--check", check)  # fmt: skip
    assert not denied(pre_tool(a, "ls")) and not marker.exists()  # held on a
    assert denied(pre_tool(b, "ls")) and marker.exists()  # in force on b, where it was made
    marker.unlink()
    shown = a.json("trust", "--show")
    assert [c["key"] for c in shown["changes"] if c["held"]] == ["gates.session.probe"]

    code, output = in_terminal(a, "trust", answer="yes")
    assert code == 0, output
    assert "gates.session.probe" in output and "approved 1 change(s)" in output
    assert denied(pre_tool(a, "ls")) and marker.exists()
    log = a.json("trust", "--log")["log"]
    assert [entry["how"] for entry in log] == ["first run", "gc trust"]
    assert log[1]["changes"][0]["key"] == "gates.session.probe"


def test_an_approved_gate_check_that_is_no_command_line_counts_as_broken(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner]
) -> None:
    # What `gc config set` refuses can still come in a commit (an older gc, plain git); once
    # a person approves it, it must neither trap the agent nor end in "internal error".
    a, _b = pair
    store = a.cwd / ".beads"
    config = store / "config.yaml"
    gate = '  session:\n    docs:\n      mode: strict\n      check: ["true"]\n'
    config.write_text(config.read_text().replace("gates: {}\n", "gates:\n" + gate, 1))
    tree = ["--git-dir", str(store / ".git"), "--work-tree", str(store)]
    git(*tree, "add", "config.yaml")
    git(*tree, "-c", "user.name=p", "-c", "user.email=p@example.org", "commit", "-qm", "by hand")
    code, output = in_terminal(a, "trust", answer="yes")
    assert code == 0 and "gates.session.docs" in output, output
    payload = {"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": False,
               "cwd": str(a.cwd)}  # fmt: skip
    reply = json.loads(ok(a("hook", "run", input=json.dumps(payload))).stdout)
    assert "decision" not in reply, reply
    assert "docs counts as satisfied because its check is broken" in reply["systemMessage"]
    assert "docs" in ok(a("gate", "status", "--session", "s1")).stdout


def test_gates_disabled_from_the_remote_leaves_the_destructive_gate_on_until_approved(
    pair: tuple[GcRunner, GcRunner],
) -> None:
    a, b = pair
    assert denied(pre_tool(a, RM_ROOT))
    from_b(a, b, "config", "set", "gates.disabled", '["destructive-op"]')
    assert not denied(pre_tool(b, RM_ROOT))
    assert denied(pre_tool(a, RM_ROOT))  # the remote cannot switch a's gate off
    assert a.json("config", "get", "gates.disabled")["value"] == []  # what is in force here
    refused, output = in_terminal(a, "trust", answer="no")
    assert refused == 30 and "not approved" in output
    assert denied(pre_tool(a, RM_ROOT))
    code, output = in_terminal(a, "trust", answer="yes")
    assert code == 0, output
    assert not denied(pre_tool(a, RM_ROOT))


def test_a_nudge_command_from_the_remote_is_not_run_until_approved(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner]
) -> None:
    a, b = pair
    log = tmp_path / "nudged.log"
    from_b(a, b, "config", "set", "agents.dog.nudge", json.dumps(["sh", "-c", f"echo x >> {log}"]))
    with Delivery(a.cwd / ".beads") as delivery:
        delivery.register("s1", "dog")
        delivery.hook_seen("s1", "dog", "Stop", state="idle")
    sent = ok(a("mail", "send", "dog", "one", "--notify"))
    assert "no nudge command" in sent.stderr and not log.exists()
    code, output = in_terminal(a, "trust", answer="yes")
    assert code == 0, output
    ok(a("mail", "send", "dog", "two", "--notify"))
    deadline = time.monotonic() + 60  # the nudge runs beside the send; bounds a hang only
    # `>>` makes the file before echo writes to it: wait for the line, not the file.
    while not (log.exists() and log.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.read_text() == "x\n"


def test_an_exec_mail_provider_from_the_remote_stops_mail_until_approved(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner]
) -> None:
    a, b = pair
    store = tmp_path / "jsonmail.json"
    env = {"JSONMAIL_FILE": str(store)}
    from_b(a, b, "config", "set", "mail.provider", f"exec:{MAILSCRIPT}")
    for command in (("mail", "inbox"), ("mail", "send", "dog", "hello")):
        refused = a(*command, env=env)
        assert refused.returncode == 30 and "gc trust" in refused.stderr, refused.stderr
        assert len(refused.stderr.splitlines()) == 1
    assert not Path(f"{store}.lock").exists()  # the program never ran here
    assert a.json("bead", "list", "--type", "message")["beads"] == []  # nor did beadmail send
    code, output = in_terminal(a, "trust", answer="yes")
    assert code == 0, output
    ok(a("mail", "send", "dog", "hello", env=env))
    assert "hello" in store.read_text()


def test_a_clone_approves_none_of_the_remotes_guarded_settings(
    pair: tuple[GcRunner, GcRunner], tmp_path: Path
) -> None:
    """A first run of a store already here keeps what was in force; a clone brings a
    stranger's settings, so nothing guarded of them is in force until a person approves."""
    a, _ = pair
    ok(a("config", "set", "gates.disabled", '["destructive-op"]'))
    ok(a("config", "set", "mail.provider", f"exec:{MAILSCRIPT}"))
    ok(a("sync"))
    (tmp_path / "c").mkdir()
    c = GcRunner(tmp_path / "c")
    ok(c("clone", str(tmp_path / "remote.git")))
    ok(c("bead", "list"))  # the store's first run here: it approves nothing of the remote's
    assert denied(pre_tool(c, RM_ROOT))
    refused = c("mail", "inbox")
    assert refused.returncode == 30 and "gc trust" in refused.stderr
    shown = c.json("trust", "--show")
    assert {ch["key"] for ch in shown["changes"]} >= {"gates.disabled", "mail.provider"}
    code, output = in_terminal(c, "trust", answer="yes")
    assert code == 0, output
    assert not denied(pre_tool(c, RM_ROOT))


def test_changes_that_only_strengthen_take_effect_at_once(pair: tuple[GcRunner, GcRunner]) -> None:
    a, b = pair
    ok(a("config", "set", "gates.disabled", '["destructive-op"]'))  # a person here: approved
    assert not denied(pre_tool(a, RM_ROOT))
    ok(a("sync"))
    ok(b("sync"))
    # b switches the gate back on and adds a pattern: both only strengthen a's protection.
    ok(b("config", "set", "gates.disabled", "[]"))
    from_b(a, b, "config", "set", "gates.destructive.patterns", '["make clean*"]')
    assert denied(pre_tool(a, RM_ROOT))
    assert denied(pre_tool(a, "make clean-all"))
    shown = a.json("trust", "--show")
    assert shown["held"] == 0 and {c["key"] for c in shown["changes"]} == {
        "gates.disabled", "gates.destructive.patterns"
    }  # fmt: skip
    assert session_start(a).get("systemMessage") is None  # nothing waits: nothing to tell
    # Recording them needs no question (each only strengthens); from then on, removing the
    # pattern again weakens: held, the pattern stays in force.
    assert a.json("trust")["approved"] is True
    assert a.json("trust", "--log")["log"][-1]["how"] == "gc trust (strengthening only)"
    from_b(a, b, "config", "set", "gates.destructive.patterns", "[]")
    assert denied(pre_tool(a, "make clean-all"))
    assert a.json("trust", "--show")["held"] == 1


def test_rules_decide_each_guarded_key_by_what_weakens() -> None:
    approved = {
        "gates.disabled": ["commit-push"],
        "gates.destructive.protected_branches": ["release"],
        "gates.session.lint": {"hook": "Stop", "mode": "soft", "check": "make lint"},
        "store.max_body_bytes": 2_000_000,
    }
    committed = {
        "format": 1,
        "store": {"max_body_bytes": 1_000_000, "shared": "group"},
        "mail": {"provider": "beadmail"},
        "gates": {
            "disabled": ["destructive-op"],
            "destructive": {"protected_branches": ["main"]},
            "require_decision": True,
            "session": {
                "lint": {"hook": "Stop", "mode": "strict", "check": "make lint"},
                "marker": {"hook": "Stop", "mode": "strict"},
                "probe": {"hook": "Stop", "mode": "soft", "check": "curl evil"},
            },
        },
    }
    settings, held = combine(committed, approved)
    gates = settings["gates"]
    assert gates["disabled"] == []  # commit-push removed: at once; destructive-op added: held
    assert gates["destructive"]["protected_branches"] == ["main", "release"]
    assert gates["require_decision"] is True
    assert gates["session"]["lint"]["mode"] == "strict"  # made strict: at once
    assert "marker" in gates["session"] and "probe" not in gates["session"]
    assert settings["store"]["max_body_bytes"] == 1_000_000  # lowered: at once
    assert settings["store"].get("shared", "private") == "private"  # group access waits
    assert set(held) == {
        "gates.disabled", "gates.destructive.protected_branches", "gates.session.probe",
        "store.shared",
    }  # fmt: skip
    assert committed["gates"]["disabled"] == ["destructive-op"]  # the input is not changed
    # A raised bound, approved at its default: the default is written out, for every reader.
    raised, held = combine({"format": 1, "store": {"max_body_bytes": 10**9}}, {})
    assert raised["store"]["max_body_bytes"] == DEFAULT_MAX_BODY_BYTES
    assert held == {"store.max_body_bytes": 10**9}


def test_trust_yes_is_refused_in_an_agent_session_and_without_a_terminal(
    pair: tuple[GcRunner, GcRunner],
) -> None:
    a, b = pair
    from_b(a, b, "config", "set", "gates.disabled", '["destructive-op"]')
    for env in ({"CLAUDECODE": "1"}, {"CLAUDE_CODE_ENTRYPOINT": "cli"}, {"GC_SESSION_ID": "s9"}):
        code, output = in_terminal(a, "trust", "--yes", env=env)
        assert code == 30 and "agent session" in output, output
    no_tty = without_terminal(a, "trust", "--yes")
    assert no_tty.returncode == 30 and "needs a terminal" in no_tty.stderr
    # The question is asked at the terminal, never read from stdin.
    piped = without_terminal(a, "trust", stdin="yes\n")
    assert piped.returncode == 30 and "no terminal" in piped.stderr.lower(), piped.stderr
    assert denied(pre_tool(a, RM_ROOT))
    code, output = in_terminal(a, "trust", "--yes")
    assert code == 0, output
    assert not denied(pre_tool(a, RM_ROOT))
    assert a.json("trust", "--log")["log"][-1]["how"] == "gc trust --yes"


def test_an_agents_config_set_of_a_guarded_key_is_held_until_a_person_approves(
    gc_store: GcRunner,
) -> None:
    gc = gc_store
    agent = {"CLAUDECODE": "1"}
    staged = gc.json("config", "set", "gates.disabled", '["destructive-op"]', env=agent)
    assert staged["held"] == ["gates.disabled"]
    assert denied(pre_tool(gc, RM_ROOT))
    raw = (gc.cwd / ".beads" / "config.yaml").read_text()
    assert "destructive-op" in raw  # committed: it syncs like any change, held like one
    # A registered gate with a check, from an agent: held too. Without a check: at once.
    probe = gc.json("gate", "register", "probe", "--mode", "strict", "--check", "false", env=agent)
    assert probe["held"] is True
    assert "held" not in gc.json("gate", "register", "marker", "--mode", "strict", env=agent)
    assert set(gc.json("trust", "--show", env=agent)["changes"][i]["key"] for i in range(3)) == {
        "gates.disabled", "gates.session.probe", "gates.session.marker"
    }  # fmt: skip
    statuses = {g["id"] for g in gc.json("gate", "status", "--session", "s1")["gates"]}
    assert "marker" in statuses and "probe" not in statuses
    # An agent cannot opt the machine into following the team either.
    refused = gc("config", "set", "--local", "trust.follow_team", "true", env=agent)
    assert refused.returncode == 30 and "agent session" in refused.stderr
    code, output = in_terminal(gc, "trust", answer="yes")
    assert code == 0, output
    assert not denied(pre_tool(gc, RM_ROOT))


def test_the_first_run_records_the_settings_then_in_force_outside_the_store(
    gc_store: GcRunner,
) -> None:
    gc = gc_store
    log = gc.json("trust", "--log")
    assert [entry["how"] for entry in log["log"]] == ["first run"]
    path = Path(approvals.approval_path(gc.cwd / ".beads"))
    assert path.is_relative_to(Path(os.environ["XDG_DATA_HOME"]) / "gc-beads" / "trust")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["store"] == str((gc.cwd / ".beads").resolve())
    assert "trust" not in (gc.cwd / ".beads" / ".git" / "config").read_text()
    assert gc.json("trust")["changes"] == []  # nothing changed since
    # $GC_TRUST_DIR moves the folder (a fresh one: the first run is recorded there again).
    other = gc.cwd / "elsewhere"
    moved = gc.json("trust", "--log", env={"GC_TRUST_DIR": str(other)})
    assert [entry["how"] for entry in moved["log"]] == ["first run"]
    assert len(list(other.glob("*.json"))) == 1


def test_follow_team_takes_every_change_and_says_so_in_the_log(
    pair: tuple[GcRunner, GcRunner],
) -> None:
    a, b = pair
    ok(a("config", "set", "--local", "trust.follow_team", "true"))
    assert a.json("config", "get", "--local")["value"]["trust"] == {"follow_team": True}
    assert "follow-team = true" in (a.cwd / ".beads" / ".git" / "config").read_text()
    git("-C", str(a.cwd / ".beads"), "config", "--list")  # real git still reads the file
    from_b(a, b, "config", "set", "gates.disabled", '["destructive-op"]')
    assert not denied(pre_tool(a, RM_ROOT))
    assert a.json("trust", "--log")["log"][-1]["how"] == "follow_team"
    ok(a("config", "set", "--local", "trust.follow_team", "false"))
    from_b(a, b, "config", "set", "gates.disabled", '["destructive-op", "sandbox-boundary"]')
    assert a.json("trust", "--show")["held"] == 1


def test_the_notice_goes_to_the_person_at_session_start_and_in_doctor_never_to_the_model(
    pair: tuple[GcRunner, GcRunner],
) -> None:
    a, b = pair
    from_b(a, b, "config", "set", "gates.disabled", '["destructive-op"]')
    ok(b("mail", "send", "dog", "hello dog", "--agent", "mayor"))
    ok(b("sync"))
    ok(a("sync"))
    reply = session_start(a)
    assert "gc trust" in reply["systemMessage"] and "gates.disabled" in reply["systemMessage"]
    context = reply["hookSpecificOutput"]["additionalContext"]
    assert "hello dog" in context and "trust" not in context
    assert "systemMessage" not in pre_tool(a, "ls")
    doctor = a.json("doctor")
    assert doctor["healthy"] and "gates.disabled" in doctor["notices"][0]
    assert "notice:" in a("doctor").stdout


def test_the_pretooluse_approval_check_imports_nothing_heavy(gc_store: GcRunner) -> None:
    gc = gc_store
    payload = json.dumps(
        {
            "session_id": "s1",
            "transcript_path": "/tmp/s.jsonl",
            "cwd": str(gc.cwd),
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": "/etc/hosts"},
        }
    )
    probe = (
        "import sys, runpy; sys.argv = ['gc', 'hook', 'run'];"
        "from gc_beads import entry\n"
        "try: entry.main()\nexcept SystemExit: pass\n"
        "heavy = [m for m in ('dulwich', 'ruamel.yaml', 'click', 'hashlib', 'tempfile')"
        " if m in sys.modules]\n"
        "print(heavy, file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=gc.cwd, input=payload,
                            capture_output=True, text=True, env=gc.env, timeout=60)  # fmt: skip
    assert result.stderr.strip().splitlines()[-1] == "[]", result.stderr


def push_config(tmp_path: Path, change: Callable[[dict], None]) -> None:
    """What an attacker with push access does: edit `config.yaml` with plain git on a clone
    of the bare remote and push it (no gc, no checks but the remote's)."""
    from ruamel.yaml import YAML

    work = tmp_path / f"attacker-{len(list(tmp_path.glob('attacker-*')))}"
    git("clone", "-q", "-b", "main", str(tmp_path / "remote.git"), str(work))
    yaml = YAML(typ="safe")
    data = yaml.load((work / "config.yaml").read_text())
    change(data)
    with (work / "config.yaml").open("w") as out:
        yaml.dump(data, out)
    who = ["-c", "user.name=eve", "-c", "user.email=eve@example.com"]
    git("-C", str(work), *who, "commit", "-qam", "config")
    git("-C", str(work), "push", "-q", "origin", "HEAD:main")


def test_a_dot_in_a_gate_id_or_an_agent_name_does_not_escape_approval(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner]
) -> None:
    a, _ = pair
    marker = tmp_path / "check-ran"
    gate = {"hook": "PreToolUse", "mode": "strict", "check": f"sh -c 'touch {marker}; exit 1'"}
    nudge = ["sh", "-c", f"touch {tmp_path / 'nudged'}"]

    def dotted(config: dict) -> None:
        config.setdefault("gates", {})["session"] = {"lint.ci": gate}
        config["gates"]["destructive"] = {"unknown_switch": "off"}
        config["rigs"] = {"ops.team": ["mayor"]}
        config["agents"] = {"ops.team/mayor": {"nudge": nudge, "rig": "ops.team"}}

    push_config(tmp_path, dotted)
    ok(a("sync"))
    assert not denied(pre_tool(a, "ls")) and not marker.exists()  # the check waits
    held = {c["key"] for c in a.json("trust", "--show")["changes"] if c["held"]}
    assert held == {
        'gates.session."lint.ci"', 'agents."ops.team/mayor".nudge',
        "gates.destructive.unknown_switch",
    }  # fmt: skip
    agents = a.json("config", "get", "agents")["value"]
    assert agents["ops.team/mayor"] == {"rig": "ops.team"}  # no nudge in force here
    code, output = in_terminal(a, "trust", answer="yes")
    assert code == 0, output
    assert denied(pre_tool(a, "ls")) and marker.exists()


@pytest.mark.parametrize("damage", ["too large", "not json", "another store's", "a folder"])
def test_an_approval_file_that_cannot_be_read_approves_nothing_and_is_named(
    pair: tuple[GcRunner, GcRunner], damage: str
) -> None:
    a, b = pair
    ok(a("bead", "list"))  # the first run here: recorded
    path = Path(approvals.approval_path(a.cwd / ".beads"))
    from_b(a, b, "config", "set", "gates.disabled", '["destructive-op"]')
    if damage == "too large":
        whole = json.loads(path.read_text())
        whole["pad"] = "x" * approvals.MAX_FILE
        path.write_text(json.dumps(whole))
    elif damage == "not json":
        path.write_text("{")
    elif damage == "another store's":
        path.write_text(json.dumps({"store": "/elsewhere", "approved": {}, "log": []}))
    else:
        path.unlink()
        path.mkdir()
    before = path.stat().st_size if path.is_file() else None
    assert denied(pre_tool(a, RM_ROOT))  # never a first run: the defaults are in force
    assert denied(pre_tool(a, RM_ROOT))
    assert (path.stat().st_size if path.is_file() else None) == before  # nothing recorded
    doctor = a.json("doctor")
    assert any(str(path) in line and "cannot be used" in line for line in doctor["notices"])
    shown = a.json("trust", "--show")
    assert str(path) in shown["damaged"] and shown["held"] == 1
    if damage == "a folder":
        return  # a person removes the folder; gc trust cannot write over it
    code, output = in_terminal(a, "trust", answer="yes")
    assert code == 0, output
    assert not denied(pre_tool(a, RM_ROOT))
    assert a.json("trust", "--log")["log"][-1]["how"] == "gc trust"


def test_a_first_run_does_not_approve_a_value_over_the_size_cap(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner]
) -> None:
    a, _ = pair
    # Names of 79 characters, one for each 64 bytes of the cap: their JSON is larger than it
    # (in fewer, longer names than short ones would take, each a YAML node to read).
    filler = "x" * 66
    padding = (f"padding-{n:05d}{filler}" for n in range(approvals.MAX_VALUE // 64))
    names = ["destructive-op", *padding]
    push_config(tmp_path, lambda config: config.setdefault("gates", {}).update(disabled=names))
    ok(a("sync"))
    fresh = {"GC_TRUST_DIR": str(tmp_path / "fresh-trust")}  # a first run of a store here
    assert denied(pre_tool(a, RM_ROOT, env=fresh))  # recorded without it: it waits
    log = a.json("trust", "--log", env=fresh)["log"]
    assert [entry["how"] for entry in log] == ["first run"]
    assert a.json("trust", "--show", env=fresh)["held"] == 1
    [recorded] = (tmp_path / "fresh-trust").glob("*.json")
    assert "gates.disabled" not in json.loads(recorded.read_text())["approved"]


def test_gc_trust_in_an_agent_session_records_nothing_even_what_only_strengthens(
    pair: tuple[GcRunner, GcRunner],
) -> None:
    a, b = pair
    from_b(a, b, "config", "set", "gates.destructive.patterns", '["make clean*"]')
    before = a.json("trust", "--log")["log"]
    refused = a("trust", env={"CLAUDECODE": "1"})
    assert refused.returncode == 30 and "agent session" in refused.stderr
    assert a.json("trust", "--log")["log"] == before
    assert a.json("trust", "--show")["changes"][0]["key"] == "gates.destructive.patterns"


def test_an_empty_protected_branch_list_from_the_remote_waits_for_approval(
    pair: tuple[GcRunner, GcRunner],
) -> None:
    a, b = pair
    from_b(a, b, "config", "set", "gates.destructive.protected_branches", "[]")
    in_force = a.json("config", "get", "gates.destructive.protected_branches")["value"]
    assert in_force == ["main", "master"]
    held = [c for c in a.json("trust", "--show")["changes"] if c["held"]]
    assert [c["key"] for c in held] == ["gates.destructive.protected_branches"]


def test_a_gate_setting_of_the_wrong_type_is_ignored_and_reported(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner]
) -> None:
    a, _ = pair
    push_config(tmp_path, lambda config: config.setdefault("gates", {}).update(session=[1]))
    ok(a("sync"))
    ok(a("gate", "status", "--session", "s1"))
    assert denied(pre_tool(a, RM_ROOT))
    push_config(tmp_path, lambda config: config["gates"].update(destructive=[1]))
    ok(a("sync"))
    assert denied(pre_tool(a, RM_ROOT))  # deny, never downgraded to ask
    doctor = a.json("doctor")
    found = " ".join(p["message"] for p in doctor["problems"]) if doctor["problems"] else ""
    assert "gates.session" in found and "gates.destructive" in found


def test_a_persons_edit_of_a_held_gate_approves_that_field_only(
    tmp_path: Path, pair: tuple[GcRunner, GcRunner]
) -> None:
    a, b = pair
    marker = tmp_path / "check-ran"
    from_b(a, b, "gate", "register", "probe", "--hook", "PreToolUse", "--mode", "strict",
           "--check", f"sh -c 'touch {marker}; exit 1'")  # fmt: skip
    ok(a("config", "set", "gates.session.probe.description", "looked at it"))
    assert not denied(pre_tool(a, "ls")) and not marker.exists()
    held = [c["key"] for c in a.json("trust", "--show")["changes"] if c["held"]]
    assert held == ["gates.session.probe"]
    code, output = in_terminal(a, "trust", answer="yes")
    assert code == 0, output
    assert denied(pre_tool(a, "ls")) and marker.exists()


def test_a_body_limit_lowered_below_the_floor_from_the_remote_waits(
    pair: tuple[GcRunner, GcRunner],
) -> None:
    a, b = pair
    from_b(a, b, "config", "set", "store.max_body_bytes", "1")
    ok(a("bead", "create", "--type", "task", "--title", "kept", "--body", "an ordinary body"))
    held = [c["key"] for c in a.json("trust", "--show")["changes"] if c["held"]]
    assert held == ["store.max_body_bytes"]
    from_b(a, b, "config", "set", "store.max_body_bytes", str(MIN_BODY_BYTES))
    assert a.json("config", "get", "store.max_body_bytes")["value"] == MIN_BODY_BYTES
