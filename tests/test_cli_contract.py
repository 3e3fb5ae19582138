"""The command-line contract: `--json` everywhere and agreeing with the exit code,
clear exits for impossible paths, escapes on text output, one JSON shape per command."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from tests.conftest import GcRunner, gc_program

ROOT = Path(__file__).resolve().parent.parent


def test_doctor_json_ok_agrees_with_the_exit_code(gc_store: GcRunner, tmp_path: Path) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    healthy = gc("doctor", "--json")
    assert healthy.returncode == 0 and json.loads(healthy.stdout)["ok"] is True
    messages = tmp_path / ".beads" / "messages"
    gc.json("mail", "send", "dog", "-m", "hi")
    messages.rename(tmp_path / "outside")
    messages.symlink_to(tmp_path / "outside")
    damaged = gc("doctor", "--json")
    reply = json.loads(damaged.stdout)
    assert damaged.returncode == 50
    assert reply["ok"] is False and reply["healthy"] is False
    assert reply["error"]["code"] == "storage_error" and "not fixed" in reply["error"]["message"]
    assert damaged.stderr.strip().startswith("gc: ") and len(damaged.stderr.splitlines()) == 1


def _leaves(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _leaves(sub, f"{path} {name}")


def test_every_command_and_group_takes_the_global_options() -> None:
    from gc_beads.cli import cli

    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        for path, command in _leaves(cli.get_command(ctx, name), name):
            options = {opt for param in command.params for opt in param.opts}
            assert {"--json", "--agent", "--beads-dir"} <= options, path


def test_json_at_the_group_position(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    for args in (("bead", "--json", "list"), ("config", "--json", "get", "store")):
        result = gc(*args)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["ok"] is True


def test_gate_watch_json_prints_one_object_per_round(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    result = gc("gate", "watch", "--interval", "0.1", "--rounds", "2", "--json")
    rounds = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["round"] for r in rounds] == [1, 2] and rounds[0]["command"] == "gate.watch"


@pytest.mark.parametrize("where", ["/dev/null", "/proc/gc-beads-test", "a-file/sub"])
def test_init_in_an_impossible_place_is_one_line_and_exit_30(
    gc: GcRunner, tmp_path: Path, where: str
) -> None:
    (tmp_path / "a-file").write_text("x")
    if where.startswith("/proc") and not Path("/proc/self").exists():
        pytest.skip("no /proc here")
    result = gc("init", where)
    assert result.returncode == 30, result.stderr
    assert result.stderr.startswith("gc: cannot ") and len(result.stderr.splitlines()) == 1
    reply = gc.json("init", where)
    assert reply["ok"] is False and reply["error"]["code"] == "invalid_input"


def test_a_path_naming_an_unknown_users_home_is_taken_as_written(gc: GcRunner) -> None:
    # As the shell does: `~name` of no such user stays as it is, a relative path.
    made = gc("init", "~no-such-user-0/city")
    assert made.returncode == 0, made.stderr
    assert (gc.cwd / "~no-such-user-0" / "city" / ".beads").is_dir()
    cloned = gc("clone", str(gc.cwd / "~no-such-user-0" / "city" / ".beads"), "~0")
    assert cloned.returncode == 0, cloned.stderr
    assert (gc.cwd / "~0" / ".beads").is_dir()


def test_no_store_is_made_inside_a_repositorys_own_git_directory(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    objects = gc.cwd / ".beads" / ".git" / "objects"
    before = sorted(p.name for p in objects.iterdir())
    for argv in (("init", str(objects)), ("clone", str(gc.cwd / ".beads"), str(objects / "x"))):
        result = gc(*argv)
        assert result.returncode == 30, result.stderr
        assert result.stderr == (
            f"gc: cannot make a store inside {gc.cwd / '.beads' / '.git'}: that is a git "
            "repository's own directory\n"
        )
    assert sorted(p.name for p in objects.iterdir()) == before


def test_init_climbing_above_the_root_makes_the_store_it_names(
    gc: GcRunner, tmp_path: Path
) -> None:
    # `/..` is `/`, as the shell and the kernel read it.
    made = gc("init", f"/..{tmp_path}/city")
    assert made.returncode == 0 and made.stderr == "", made.stderr
    assert gc("bead", "list", cwd=tmp_path / "city").stdout == "No beads\n"


def test_a_store_under_a_path_not_of_text_is_refused_before_anything_is_made(
    gc: GcRunner, tmp_path: Path
) -> None:
    odd = Path(os.fsdecode(os.fsencode(tmp_path) + b"/\xff"))
    odd.mkdir()
    for argv, cwd in ((("init",), odd), (("init", str(odd)), tmp_path)):
        result = gc(*argv, cwd=cwd)
        assert result.returncode == 30, result.stderr
        assert "is not valid UTF-8" in result.stderr and len(result.stderr.splitlines()) == 1
    assert list(odd.iterdir()) == []
    assert gc("init", cwd=tmp_path).returncode == 0  # a store whose own path is text
    assert gc("bead", "list", cwd=odd).stdout == "No beads\n"  # is used from below it


@pytest.mark.parametrize("argv", [("bead", "list"), ("mail", "inbox", "dog"), ("doctor",)])
def test_a_command_in_a_removed_directory_says_so_in_one_line(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    # The directory is removed under the shell that then runs gc in it.
    script = 'cd "$1" && rmdir "$1" && shift && exec "$@"'
    result = subprocess.run(
        ["sh", "-c", script, "sh", str(gone), gc_program(), *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 40, result.stderr
    assert result.stderr == (
        "gc: the current directory no longer exists: cd to a store, or name one with --beads-dir\n"
    )
    store = tmp_path / "store"
    store.mkdir()
    assert subprocess.run([gc_program(), "init"], cwd=store, capture_output=True).returncode == 0
    gone.mkdir()
    named = subprocess.run(  # a store named works from there, as everywhere
        ["sh", "-c", script, "sh", str(gone), gc_program(), "--beads-dir", str(store), *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert named.returncode in (0, 10) and named.stderr == "", named.stderr  # 10: no mail


def test_hook_install_keeps_the_mode_and_finds_the_project_root(
    gc_store: GcRunner, tmp_path: Path
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"permissions": {}}')
    settings.chmod(0o644)
    sub = tmp_path / "src" / "deep"
    sub.mkdir(parents=True)
    result = gc("hook", "install", cwd=sub, env={"CLAUDE_PROJECT_DIR": ""})
    assert result.returncode == 0, result.stderr
    assert not (sub / ".claude").exists()
    assert "SessionStart" in json.loads(settings.read_text())["hooks"]
    assert settings.stat().st_mode & 0o777 == 0o644


def test_archived_mail_is_not_pending_and_wakes_nobody(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    sent = gc.json("mail", "send", "dog", "-s", "hi", "-m", "x")
    message_id = sent["messages"][0]["id"] if "messages" in sent else sent["message"]["id"]
    assert [i["key"] for i in gc.json("inbox", "list", "--agent", "dog")["items"]] == [
        f"mail:{message_id}"
    ]
    assert gc("mail", "archive", message_id, "--agent", "dog").returncode == 0
    assert gc.json("inbox", "list", "--agent", "dog")["items"] == []
    assert gc("inbox", "wait", "--agent", "dog", "--timeout", "0.2").returncode == 10
    states = [i["state"] for i in gc.json("inbox", "list", "--agent", "dog", "--all")["items"]]
    assert states == ["moot"]


def test_an_unknown_setting_is_refused_naming_the_page_that_lists_the_settings(
    gc_store: GcRunner,
) -> None:
    result = gc_store("config", "set", "mail.strict_recipent", "true")
    assert result.returncode == 30, result.stderr
    assert "the settings are listed in docs/config.md" in result.stderr
    assert "`mail.strict_recipients`" in (ROOT / "docs" / "config.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("key", "value", "wording"),
    [
        ("mail.strict_recipent", "true", "unknown setting mail.strict_recipent"),
        ("agents.dog", '{"nudge": ["x"], "colour": 1}', "unknown setting agents.dog.colour"),
        ("mail.strict_recipients", "yes", "must be true or false"),
        ("delivery.max_items", "many", "must be an integer"),
        ("mail.provider", "file", "must be beadmail or exec:/path/to/program"),
        ("mail.provider", "exec:", "must be beadmail or exec:/path/to/program"),
        ("gates.session.docs", '{"hook": "Stop", "mode": "hard"}', "mode must be strict or soft"),
        ("gates.session.docs", '{"hook": "stop"}', "hook must be one of Stop, UserPromptSubmit"),
        ("gates.session.docs", '{"check": ["true"]}', "check must be a command line"),
        ("gates.session.docs", '{"check": "echo \'open"}', "cannot split the check command"),
        ("gates.session.docs", '{"description": {"a": 1}}', "description must be text"),
        ("agents.dog.rig", "my rig", "must be a rig name"),
        ("rigs.a b", '["dog"]', "names 'a b', which is not a rig name"),
        ("agents.a b.rig", "kennel", "names 'a b', which is not an agent name"),
        ("gates.session.Bad Id", '{"mode": "soft"}', "names 'Bad Id', which is not a gate id"),
    ],
)
def test_config_set_refuses_unknown_keys_and_values_the_readers_would_refuse(
    gc_store: GcRunner, key: str, value: str, wording: str
) -> None:
    # Accepted, the values left every mail command refusing the provider (or the agent's or
    # the rig's name), or a gate silently soft or never run.
    gc = gc_store  # a store as `gc init` makes it (a copy)
    before = gc("config", "get").stdout
    result = gc("config", "set", key, value)
    assert result.returncode == 30, result.stderr
    assert result.stderr.startswith("gc: ") and wording in result.stderr
    assert f" {key.split('.')[0]}" in result.stderr  # the setting (or its section) is named
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert gc("config", "get").stdout == before
    assert gc("mail", "inbox", "dog").returncode == 0


@pytest.mark.parametrize(
    ("key", "value", "refusal"),
    [
        ("sync.auto", "maybe", "sync.auto must be true or false, not 'maybe'"),
        ("sync.interval", "0.1s", "sync.interval must be a duration of at least 0.5s"),
        ("sync.timeout", "soon", "sync.timeout must be a duration from 0.1s to 1d"),
        ("sync.max_fetch_bytes", "5", "sync.max_fetch_bytes must be a size of at least 1KiB"),
        ("sync.remote", "a/b", "sync.remote must be a remote's name"),
        ("stores.web", "web", "stores.web must be the absolute path of a store, not 'web'"),
        ("delivery.nats.agents", "a b", "delivery.nats.agents must be agent names"),
        ("gates.destructive.unjudged", "x", "gates.destructive.unjudged must be ask or deny"),
        ("delivery.nats.token", "two\nlines", "delivery.nats.token must be one line of text"),
    ],
)
def test_a_local_setting_is_refused_naming_it_and_what_it_must_be(
    gc_store: GcRunner, key: str, value: str, refusal: str
) -> None:
    before = gc_store("config", "get", "--local").stdout
    result = gc_store("config", "set", "--local", key, value)
    assert result.returncode == 30, result.stderr
    assert result.stderr.startswith(f"gc: {refusal}"), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert gc_store("config", "get", "--local").stdout == before
    if key == "delivery.nats.token":  # a token refused is never shown
        assert "lines" not in result.stderr


def test_config_set_takes_every_mail_provider_form(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    for value in ("exec:/usr/local/bin/mymail", "beadmail"):
        assert gc("config", "set", "mail.provider", value).returncode == 0, value
        assert gc.json("config", "get", "mail.provider")["value"] == value


def test_config_set_takes_the_documented_settings(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    for key, value in [
        ("mail.strict_recipients", "true"),
        ("agents.dog.rig", "kennel"),
        ("gates.session.docs", '{"hook": "Stop", "mode": "soft", "check": "true"}'),
        ("gates.disabled", '["commit-push"]'),
    ]:
        assert gc("config", "set", key, value).returncode == 0, key
    assert gc.json("config", "get", "mail.strict_recipients")["value"] is True


EVIL = "hi \x1b[2J\x1b]0;pwned\x07 \u202eboom \u200fmark \u061c"
# Every bidirectional control: each reorders the text around it on a terminal.
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_stored_control_characters_never_reach_the_terminal(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    made = gc.json("bead", "create", "--type", "task", "--title", EVIL, "--body", EVIL)
    sent = gc.json("mail", "send", "dog", "-s", "subject", "-m", EVIL)
    message_id = (sent.get("messages") or [sent.get("message")])[0]["id"]
    outputs = [
        gc("bead", "list").stdout,
        gc("bead", "show", made["bead"]["id"]).stdout,
        gc("mail", "peek", message_id).stdout,
        gc("mail", "inbox", "--agent", "dog").stdout,
        gc("inbox", "list", "--agent", "dog").stdout,
    ]
    for text in outputs:
        assert "\x1b" not in text and "\x07" not in text, text
        assert not any(char in text for char in BIDI), text
    assert "\\x1b[2J" in gc("bead", "list").stdout
    assert gc("bead", "create", "--type", "task", "--title", BIDI).returncode == 0
    assert "\\u200e" in gc("bead", "list").stdout and BIDI[0] not in gc("bead", "list").stdout
    # A line separator would pass for a second line of the reply that was never written.
    forged = "ok\u2028approved: everything\u2029done"
    assert gc("bead", "create", "--type", "task", "--title", forged).returncode == 0
    listed = gc("bead", "list").stdout
    assert "ok\\u2028approved: everything\\u2029done" in listed
    assert "\u2028" not in listed and "\u2029" not in listed
    assert gc.json("bead", "show", made["bead"]["id"])["bead"]["title"] == EVIL


def test_ascii_text_is_made_terminal_safe_as_the_full_class_makes_it() -> None:
    # ASCII text is checked by a small twin of the class (the full one compiles slowly).
    from beads.cli.common import _CONTROLS, terminal_safe

    every_ascii = "".join(map(chr, range(0x80)))
    assert _CONTROLS.ascii.findall(every_ascii) == _CONTROLS.full.findall(every_ascii)
    shown = terminal_safe("a\tb\nc\x1b[2J\x7f")
    assert shown == "a\tb\nc\\x1b[2J\\x7f"


RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def test_json_times_are_rfc3339_everywhere(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc.json("mail", "send", "dog", "-m", "hi")
    hook = json.dumps({"hook_event_name": "SessionStart", "session_id": "s1", "source": "startup"})
    assert gc("hook", "run", input=hook, env={"GC_AGENT": "cat"}).returncode == 0
    times = [c["time"] for c in gc.json("log")["commits"]]
    times += [c["time"] for c in gc.json("mail", "log")["commits"]]
    items = gc.json("inbox", "list", "--agent", "dog", "--all")["items"]
    times += [i["created_at"] for i in items]
    sessions = gc.json("session", "list")["sessions"]
    times += [s[name] for s in sessions for name in ("started_at", "last_hook_at")]
    assert items and sessions and all(RFC3339.fullmatch(t) for t in times), times


def test_a_no_is_an_answer_with_ok_true_and_exit_10(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    waited = gc("inbox", "wait", "--agent", "dog", "--timeout", "0.1", "--json")
    assert waited.returncode == 10 and waited.stderr == ""
    assert json.loads(waited.stdout) | {"command": ""} == {
        "ok": True, "command": "", "agent": "dog", "woke": False, "items": []
    }  # fmt: skip
    checked = gc("mail", "check", "dog", "--json")
    reply = json.loads(checked.stdout)
    assert checked.returncode == 10 and reply["ok"] is True and reply["found"] is False
    asked = gc(
        "decision", "create", "--prompt", "ok?", "--option", "y", "--option", "n",
        "--timeout", "0.1", "--wait", "--json",
    )  # fmt: skip
    reply = json.loads(asked.stdout)
    assert asked.returncode == 10 and reply["ok"] is True and reply["found"] is False
    assert reply["gate"]["type"] == "gate"
    gc.json("mail", "send", "dog", "-m", "hi")
    found = gc.json("mail", "check", "dog")
    assert found["found"] is True and found["unread"] == 1
    assert gc.json("inbox", "wait", "--agent", "dog", "--timeout", "1")["woke"] is True


def test_one_shape_per_command(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    one = gc.json("mail", "send", "dog", "-m", "hi")
    two = gc.json("mail", "send", "--to", "dog", "--to", "cat", "-m", "hi")
    assert len(one["messages"]) == 1 and one["message"] == one["messages"][0]
    assert [m["to"] for m in two["messages"]] == ["dog", "cat"]
    marked = gc.json("gate", "mark", "docs", "--session", "s1")
    registered = gc.json("gate", "register", "docs", "--mode", "soft")
    assert marked["gate"] == {"id": "docs"} and registered["gate"]["id"] == "docs"
    replied = gc("mail", "reply", one["message"]["id"][:7], "-m", "back", env={"GC_AGENT": "dog"})
    assert one["message"]["id"] in replied.stdout


def test_shell_completion_of_commands_options_and_ids(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    made = gc.json("bead", "create", "--type", "task", "--title", "x")["bead"]["id"]

    def complete(words: str) -> list[str]:
        env = {
            "_GC_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split(" ")) - 1),
        }
        result = gc(env=env)
        assert result.returncode == 0, result.stderr
        return [line.split(",", 1)[1] for line in result.stdout.splitlines()]

    assert complete("gc ma") == ["mail"]
    assert complete("gc bead list --st") == ["--status"]
    assert complete(f"gc bead show {made[:5]}") == [made]
    assert complete(f"gc mail archive x {made[:5]}") == [made]
    for shell in ("bash", "zsh", "fish"):
        script = gc(env={"_GC_COMPLETE": f"{shell}_source"})
        assert script.returncode == 0 and "_GC_COMPLETE" in script.stdout


def test_tables_keep_one_line_a_row_and_fit_the_width() -> None:
    from beads.cli.common import table

    rows = [("ID", "FROM", "SUBJECT"), ("gc-abcdefgh", "mayor", "x" * 600), ("gc-2", "dog", "a\nb")]
    fitted = table(rows, 60).splitlines()
    assert len(fitted) == 3 and all(len(line) <= 60 for line in fitted)
    assert fitted[1].startswith("gc-abcdefgh  mayor  x") and fitted[1].endswith("…")
    assert fitted[2].endswith("a\\nb")
    assert max(map(len, table(rows, 0).splitlines())) > 600  # no width: nothing cut


def test_piped_list_is_never_cut(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc.json("mail", "send", "dog", "-s", "s" * 300 + "\nsecond line", "-m", "x")
    listed = gc("mail", "inbox", "dog", env={"COLUMNS": "40"}).stdout.splitlines()
    assert len(listed) == 2 and "s" * 300 + "\\nsecond line" in listed[1]


def test_every_list_takes_limit(gc_store: GcRunner) -> None:
    from gc_beads.cli import cli

    ctx = click.Context(cli)
    lists = [
        command
        for name in cli.list_commands(ctx)
        for path, command in _leaves(cli.get_command(ctx, name), name)
        if path.split()[-1] in ("list", "inbox", "log") and not isinstance(command, click.Group)
    ]
    assert len(lists) >= 8
    for command in lists:
        assert "--limit" in {opt for param in command.params for opt in param.opts}, command
    gc = gc_store  # a store as `gc init` makes it (a copy)
    for n in range(3):
        gc.json("mail", "send", "dog", "-m", f"m{n}")
    assert len(gc.json("mail", "inbox", "dog", "--limit", "2")["messages"]) == 2
    assert len(gc.json("inbox", "list", "--agent", "dog", "--limit", "1")["items"]) == 1


def _on_terminal(
    args: list[str], cwd: Path, env: dict[str, str], rows: int = 10, cols: int = 80
) -> str:
    """Run the real `gc` with a terminal (a pty of `rows` x `cols`) as stdin, stdout and
    stderr; returns what it showed."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import termios

    from tests.conftest import gc_program

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GC_", "COLUMNS", "LINES"))}
    process = subprocess.Popen(
        [gc_program(), *args], cwd=cwd, env={**clean, **env},
        stdin=follower, stdout=follower, stderr=follower,
    )  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def test_a_terminal_gets_a_pager_for_long_lists_and_rows_that_fit(
    gc_store: GcRunner, tmp_path: Path
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    gc.json("mail", "send", "dog", "-s", "s" * 300, "-m", "x")
    for n in range(6):
        gc.json("mail", "send", "dog", "-m", f"m{n}")
    paged = tmp_path / "paged.txt"
    pager = {"GC_PAGER": f"sh -c 'cat > {paged}'"}
    rows = 6  # a terminal of 6 rows: the 8-line list is paged, 4 lines are not
    _on_terminal(["mail", "inbox", "dog"], tmp_path, pager, rows=rows)
    assert len(paged.read_text().splitlines()) == 8
    assert all(len(line) <= 80 for line in paged.read_text().splitlines())
    paged.unlink()
    straight = _on_terminal(["mail", "inbox", "dog", "--no-pager"], tmp_path, pager, rows=rows)
    assert not paged.exists() and len(straight.splitlines()) == 8
    short = _on_terminal(["mail", "inbox", "dog", "--limit", "3"], tmp_path, pager, rows=rows)
    assert not paged.exists() and len(short.splitlines()) == 4


def test_doctor_shows_progress_on_a_terminal_only(gc_store: GcRunner, tmp_path: Path) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    shown = _on_terminal(["doctor", "--rebuild-index", "--gc"], tmp_path, {})
    assert "gc doctor: rebuilding the index" in shown and "100%" in shown
    assert shown.rstrip().endswith("store is healthy")
    piped = gc("doctor", "--rebuild-index", "--gc")
    assert piped.stderr == "" and "%" not in piped.stdout
    quiet = _on_terminal(["doctor", "--gc", "--json"], tmp_path, {})
    assert "%" not in quiet and json.loads(quiet)["ok"] is True


def test_consistent_flags_and_hidden_old_names(gc_store: GcRunner) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy)
    first = gc.json("inbox", "push", "hi", "--to", "dog", "--dedup", "k1")["items"][0]
    again = gc.json("inbox", "push", "hi", "--to", "dog", "--dedup-key", "k1")["items"][0]
    assert first["created"] and not again["created"] and again["id"] == first["id"]
    assert "--dedup-key" not in gc("inbox", "push", "--help").stdout
    assert gc("inbox", "push", "x", "--dedup", "a", "--dedup-key", "b").returncode == 30
    made = gc.json("bead", "create", "--type", "task", "--title", "t")["bead"]["id"]
    gc.json("bead", "close", made)
    assert [b["id"] for b in gc.json("bead", "list", "--all")["beads"]] == [made]
    assert gc.json("bead", "list", "--status", "all") == gc.json("bead", "list", "--all")
    assert gc.json("bead", "list")["beads"] == []
    assert gc("bead", "list", "--all", "--status", "open").returncode == 30
    drained = gc.json("inbox", "drain", "--agent", "dog", env={"GC_SESSION_ID": "s1"})
    assert drained["session"] == "s1" and len(drained["items"]) == 1
    assert gc("inbox", "drain").returncode == 30


def test_an_abort_is_interrupted_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gc_beads import cli as main

    def abort(ctx: click.Context) -> None:
        raise click.exceptions.Abort()

    monkeypatch.setattr(main.cli, "invoke", abort)
    with pytest.raises(SystemExit) as ended:
        main.main(["--json", "bead", "list"])
    assert ended.value.code == 130
    out = capsys.readouterr()
    assert json.loads(out.out) == {
        "ok": False, "error": {"code": "interrupted", "message": "interrupted"}
    }  # fmt: skip
    assert out.err == "gc: interrupted\n"
