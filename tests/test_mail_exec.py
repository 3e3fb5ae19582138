"""The exec provider against misbehaving programs, and the exact bytes of the protocol."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from beads.errors import NotFound
from mail.execmail import ExecMail
from mail.message import AlreadyArchived, MessageNotFound, ProviderError
from tests.conftest import GcRunner, gc_program, gone

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


def test_argv_stdin_and_ensure_running_once(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    prog = script(
        tmp_path,
        f"""
echo "$# $1 ${{2:-}}" >> {log}
cat > {tmp_path}/stdin-$1
case "$1" in send|reply|get) echo '{json.dumps(MESSAGE)}';; esac
""",
    )
    provider = ExecMail(prog)
    provider.send("mayor", "dog", "Hi <there> & you", "line\n\u00e9")
    provider.mark_read("m-1")
    provider.reply("m-1", "dog", "", "ok")
    calls = log.read_text().splitlines()
    assert calls == ["1 ensure-running ", "2 send dog", "2 mark-read m-1", "2 reply m-1"]
    sent = (tmp_path / "stdin-send").read_bytes()
    assert sent == (
        b'{"from":"mayor","subject":"Hi \\u003cthere\\u003e \\u0026 you","body":"line\\n\xc3\xa9"}'
    )
    assert (tmp_path / "stdin-mark-read").read_bytes() == b""
    # No subject is passed on as none, as gc does: the program decides a reply's subject.
    assert json.loads((tmp_path / "stdin-reply").read_bytes()) == {
        "from": "dog",
        "subject": "",
        "body": "ok",
    }


def test_user_text_never_reaches_a_shell(tmp_path: Path) -> None:
    prog = script(tmp_path, f'printf "%s" "$2" > {tmp_path}/arg\n')
    ExecMail(prog).inbox("$(touch pwned); `touch pwned2`")
    assert (tmp_path / "arg").read_text() == "$(touch pwned); `touch pwned2`"
    assert not list(tmp_path.glob("pwned*")) and not Path("pwned").exists()


def test_empty_output_means_none_and_exit_2_means_unsupported(tmp_path: Path) -> None:
    empty = ExecMail(script(tmp_path, "exit 0\n", "empty"))
    assert empty.inbox("b") == [] and empty.thread("t") == []
    assert empty.count("b").total == 0
    unsupported = ExecMail(script(tmp_path, "exit 2\n", "unsupported"))
    assert unsupported.inbox("b") == []
    unsupported.archive("m-1")  # a no-op
    for call in (
        lambda: unsupported.send("a", "b", "s", "x"),
        lambda: unsupported.get("m"),
        lambda: unsupported.read("m"),
        lambda: unsupported.reply("m", "a", "", "x"),
    ):
        with pytest.raises(ProviderError, match="does not support"):
            call()
    with pytest.raises(ProviderError, match="printed no message"):
        empty.get("m")


def test_stderr_markers_map_to_errors(tmp_path: Path) -> None:
    missing = ExecMail(script(tmp_path, "echo 'gc-mail-error:not-found: no' >&2; exit 1\n", "nf"))
    with pytest.raises(MessageNotFound):
        missing.read("m-9")
    archived = ExecMail(script(tmp_path, "echo 'already archived' >&2; exit 1\n", "aa"))
    with pytest.raises(AlreadyArchived):
        archived.archive("m-1")
    broken = ExecMail(script(tmp_path, "echo 'database on fire' >&2; exit 3\n", "fire"))
    with pytest.raises(ProviderError, match=r"inbox failed \(exit 3\): database on fire"):
        broken.inbox("b")


@pytest.mark.parametrize(
    "output, match",
    [
        ("not json at all", "invalid JSON"),
        ('{"id": "x"}', "not a JSON array"),
        ('[{"from": "a"}', "invalid JSON"),
    ],
)
def test_garbage_is_a_clear_error(tmp_path: Path, output: str, match: str) -> None:
    provider = ExecMail(script(tmp_path, f"echo '{output}'\n"))
    with pytest.raises(ProviderError, match=match):
        provider.inbox("b")


@pytest.mark.parametrize(
    "output, match",
    [
        ('{"from": "a"}', "missing 'id'"),
        ('{"id": 7, "from": "a"}', "must be a string"),
    ],
)
def test_a_malformed_message_is_a_clear_error(tmp_path: Path, output: str, match: str) -> None:
    provider = ExecMail(script(tmp_path, f"echo '{output}'\n"))
    with pytest.raises(ProviderError, match=match):
        provider.get("x")


def test_a_hanging_program_and_its_children_are_killed(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    prog = script(
        tmp_path,
        f"""
[ "$1" = ensure-running ] && exit 0
sleep 300 & echo $! >> {pids}
echo $$ >> {pids}
wait
""",
    )
    started = time.monotonic()
    with pytest.raises(ProviderError, match="timed out after 1s and was killed"):
        ExecMail(prog, timeout=1).inbox("b")
    assert time.monotonic() - started < 60  # never waits for the children's 300 s
    assert gone([int(pid) for pid in pids.read_text().split()])


def test_megabytes_of_output_are_cut_off(tmp_path: Path) -> None:
    prog = script(
        tmp_path, '[ "$1" = ensure-running ] && exit 0\nyes aaaaaaaaaaaaaaaaaaaaaaaaaaa\n'
    )
    with pytest.raises(ProviderError, match="printed more than 16 MiB"):
        ExecMail(prog, timeout=20).inbox("b")


def test_a_server_left_running_by_ensure_running_does_not_block(tmp_path: Path) -> None:
    prog = script(
        tmp_path,
        """
if [ "$1" = ensure-running ]; then sleep 30 & exit 0; fi
exit 0
""",
    )
    started = time.monotonic()
    assert ExecMail(prog).inbox("b") == []
    assert time.monotonic() - started < 25  # never waits for the server's 30 s


def test_missing_and_non_executable_programs(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="not found"):
        ExecMail(str(tmp_path / "nope")).inbox("b")
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    with pytest.raises(ProviderError, match="not executable"):
        ExecMail(str(plain)).inbox("b")


def test_an_exec_timeout_config_set_accepts_is_the_one_mail_reads(
    gc_store: GcRunner, tmp_path: Path
) -> None:
    gc = gc_store
    prog = script(tmp_path, '[ "$1" = ensure-running ] && exit 0\nexec sleep 100\n')
    # A duration, as `gc config set` has always accepted it (and docs/config.md says).
    assert gc("config", "set", "mail.exec_timeout", "1s").returncode == 0
    started = time.monotonic()
    result = gc("mail", "inbox", "dog", env={"GC_MAIL": f"exec:{prog}"})
    assert result.returncode == 50 and "timed out after 1s" in result.stderr
    assert time.monotonic() - started < 25  # bounds a hang only
    # What the provider would refuse at each use is refused when it is set.
    for value in ("0", "0s", "2d", "1e9"):
        refused = gc("config", "set", "mail.exec_timeout", value)
        assert refused.returncode == 30, value
        assert refused.stderr.count("\n") == 1 and "at most 1d" in refused.stderr
    assert gc.json("config", "get", "mail.exec_timeout")["value"] == "1s"


def test_a_program_that_cannot_start_says_why(tmp_path: Path) -> None:
    # What the OS says ("No such file or directory" for a missing interpreter, "Permission
    # denied" for a directory, "Exec format error") sends a person looking at the wrong thing.
    interpreter = tmp_path / "no-such-python"
    missing_interpreter = tmp_path / "old-script"
    missing_interpreter.write_text(f"#!{interpreter} -u\nprint('[]')\n")
    no_shebang = tmp_path / "no-shebang"
    no_shebang.write_text("echo '[]'\n")
    for path in (missing_interpreter, no_shebang):
        path.chmod(0o755)
    cases = [
        (missing_interpreter, f"names an interpreter that was not found: {interpreter}"),
        (no_shebang, "cannot be run here (a script needs a #! line)"),
        (tmp_path, "is a directory, not a program"),
        (tmp_path / "nope", "was not found"),
    ]
    for program, says in cases:
        with pytest.raises(ProviderError) as raised:
            ExecMail(str(program)).inbox("b")
        assert raised.value.message.startswith(f"mail program {program} {says}")
        assert "Errno" not in raised.value.message


def test_a_program_a_signal_ends_is_said_killed_by_it(tmp_path: Path) -> None:
    prog = script(tmp_path, '[ "$1" = ensure-running ] && exit 0\nkill -SEGV $$\n')
    with pytest.raises(ProviderError) as raised:
        ExecMail(prog).inbox("b")
    assert f"{prog} inbox failed (killed by SIGSEGV)" in raised.value.message


@pytest.mark.parametrize("sender", ["a supervisor", "the program at once"])
def test_gc_ended_by_sigterm_ends_the_mail_program_it_was_running(
    gc_store: GcRunner, tmp_path: Path, sender: str
) -> None:
    # A `timeout` or a supervisor stopping gc: the program (in a group of its own) went on.
    # Sent by the program as it starts, the signal can reach gc before gc is back from
    # starting it: it must end the program all the same.
    started = tmp_path / "started"
    body = f'[ "$1" = ensure-running ] && exit 0\necho $$ > {started}.tmp\n'
    if sender == "the program at once":
        body += "kill -TERM $PPID\n"
    body += f"mv {started}.tmp {started}\nexec sleep 100\n"
    prog = script(tmp_path, body)
    command = [gc_program(), "mail", "inbox", "dog"]
    env = {**gc_store.env, "GC_MAIL": f"exec:{prog}"}
    with subprocess.Popen(command, cwd=gc_store.cwd, env=env, stderr=subprocess.PIPE) as run:
        deadline = time.monotonic() + 30  # bounds a hang only
        while not started.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if sender == "a supervisor":
            assert started.exists(), run.stderr.read() if run.stderr else ""
            run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=30) == -signal.SIGTERM
    pid = started.with_name("started.tmp") if not started.exists() else started
    assert gone([int(pid.read_text())])


def test_a_not_found_mark_names_what_the_operation_was_given(tmp_path: Path) -> None:
    said = "echo 'gc-mail-error:not-found' >&2\nexit 1\n"
    prog = script(tmp_path, f'[ "$1" = ensure-running ] && exit 0\n{said}')
    with pytest.raises(MessageNotFound, match="message m-9: bead not found"):
        ExecMail(prog).get("m-9")
    for call, op in ((lambda m: m.inbox("dog"), "inbox"), (lambda m: m.thread("t-1"), "thread")):
        with pytest.raises(NotFound) as raised:
            call(ExecMail(prog))
        assert not isinstance(raised.value, MessageNotFound)  # a mailbox, a thread: no message
        arg = "dog" if op == "inbox" else "t-1"
        assert raised.value.message == f"{prog} {op} '{arg}': not found"


def test_a_skipped_messages_id_reaches_the_terminal_escaped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hostile = "\x1b[2J\x1b]0;owned\x07\u202e"
    listing = json.dumps([{"id": hostile}, {"id": "long" * 1000}, MESSAGE])
    prog = script(tmp_path, f"[ \"$1\" = ensure-running ] && exit 0\necho '{listing}'\n")
    assert [m.id for m in ExecMail(prog).inbox("b")] == ["m-1"]
    warned = [record.getMessage() for record in caplog.records]
    assert len(warned) == 2
    assert "skipped message '\\x1b[2J\\x1b]0;owned\\x07\\u202e'," in warned[0]
    assert not any(char in warned[0] for char in "\x1b\x07\u202e")
    assert "longlong" in warned[1] and len(warned[1]) < 300


@pytest.mark.slow
def test_conformance_of_a_hanging_program_costs_one_time_out_not_one_per_case(
    gc_store: GcRunner, tmp_path: Path
) -> None:
    from mail.conformance import run

    prog = script(tmp_path, '[ "$1" = ensure-running ] && exit 0\nexec sleep 100\n')
    started = time.monotonic()
    results = run(ExecMail(prog, timeout=1))
    assert time.monotonic() - started < 15  # one time-out, not one per case
    first, *rest = results
    assert first.outcome == "failed" and "timed out after 1s" in first.detail
    assert rest and all(r.outcome == "skipped" for r in rest)
    assert rest[0].detail == f"not run: the program timed out in {first.name}"
    # The command reads the store's mail.exec_timeout, as every mail command does.
    assert gc_store("config", "set", "mail.exec_timeout", "1s").returncode == 0
    started = time.monotonic()
    checked = gc_store.json("mail", "conformance", prog)
    assert checked["conforms"] is False and checked["failed"] == 1
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("nested", ["array", "object"])
def test_a_message_nested_thousands_deep_is_skipped_and_the_rest_listed(
    gc: GcRunner, tmp_path: Path, caplog: pytest.LogCaptureFixture, nested: str
) -> None:
    deep = "[" * 5000 + "]" * 5000 if nested == "array" else '{"a":' * 5000 + "1" + "}" * 5000
    listing = f'[{json.dumps(MESSAGE)}, {{"id": "deep-1", "body": {deep}}}, {{"id": "m-2",'
    listing += ' "from": "c", "subject": "], [ \\" ,"}]'  # brackets in text are text
    (tmp_path / "listing.json").write_text(listing)
    prog = script(tmp_path, f'[ "$1" = ensure-running ] && exit 0\ncat "{tmp_path}/listing.json"\n')
    assert [m.id for m in ExecMail(prog).inbox("b")] == ["m-1", "m-2"]
    warned = [record.getMessage() for record in caplog.records]
    assert len(warned) == 1 and "skipped message deep-1, which" in warned[0]
    assert "nested too deeply" in warned[0]
    result = gc("mail", "--json", "inbox", "b", env={"GC_MAIL": f"exec:{prog}"})
    assert result.returncode == 0, result.stderr
    assert sorted(m["id"] for m in json.loads(result.stdout)["messages"]) == ["m-1", "m-2"]
    assert result.stderr.count("\n") == 1 and "skipped message deep-1" in result.stderr


@pytest.mark.parametrize(
    "listing",
    [
        "[" * 5000 + "]" * 4999,  # never closes
        "[" + "[" * 5000 + "]" * 5000 + "}",  # closes with the wrong bracket
        "[" + "[" * 5000 + "]" * 5000 + "] trailing",
        "[" + "[" * 5000 + "]" * 5000 + ", nope]",  # another element is not JSON
        "[" + "[" * 5000 + "]" * 5000 + ",]",
    ],
)
def test_a_listing_nested_deep_that_is_not_json_is_still_refused(
    tmp_path: Path, listing: str
) -> None:
    (tmp_path / "listing.json").write_text(listing)
    prog = script(tmp_path, f'[ "$1" = ensure-running ] && exit 0\ncat "{tmp_path}/listing.json"\n')
    with pytest.raises(ProviderError, match="invalid JSON") as raised:
        ExecMail(prog).inbox("b")
    assert raised.value.exit_code == 30


def test_getting_a_message_nested_thousands_deep_says_it_cannot_be_read(
    gc: GcRunner, tmp_path: Path
) -> None:
    message = '{"id": "deep-1", "from": "a", "body": ' + "[" * 5000 + "]" * 5000 + "}"
    (tmp_path / "message.json").write_text(message)
    prog = script(tmp_path, f'[ "$1" = ensure-running ] && exit 0\ncat "{tmp_path}/message.json"\n')
    result = gc("mail", "read", "deep-1", env={"GC_MAIL": f"exec:{prog}"})
    assert result.returncode == 30
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"gc: {prog} read printed JSON nested too deeply to read" in result.stderr


def test_a_program_answering_another_message_than_the_one_asked_is_refused(
    gc: GcRunner, tmp_path: Path
) -> None:
    # `read ok1` printing message `not-ok1` was shown as `ID: not-ok1`, without a word. The
    # protocol's `get` and `read` answer the message whose id gc passed (as Gas City's
    # conformance checks): another one is a misbehaving program, refused as bad output.
    message = json.dumps({**MESSAGE, "id": "not-ok1"})
    log = tmp_path / "calls"
    prog = script(
        tmp_path, f'echo "$1" >> {log}\ncase "$1" in get|read) echo \'{message}\';; esac\n'
    )
    env = {"GC_MAIL": f"exec:{prog}"}
    for args, op in ((["read", "ok1"], "read"), (["peek", "ok1"], "get"),
                     (["archive", "ok1", "ok2"], "get")):  # fmt: skip
        result = gc("mail", *args, env=env)
        assert (result.returncode, result.stdout) == (30, ""), args
        assert result.stderr == (
            f"gc: {prog} {op} ok1 printed message not-ok1, not ok1: the program must answer "
            "with the message asked for\n"
        )
    assert "archive" not in log.read_text().split()  # checked first: nothing archived
    # The message asked for, and only it, is taken: an id that starts with the one asked is
    # another message (the protocol passes ids whole, and gives back the one passed).
    for given in ("not-ok", "not-ok1x"):
        with pytest.raises(ProviderError, match="must answer with the message asked for"):
            ExecMail(prog).get(given)
    assert ExecMail(prog).read("not-ok1").id == "not-ok1"
