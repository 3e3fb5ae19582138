"""Input gc must refuse cleanly (exit 30, one line, store unchanged), never by a
crash, an exhausted memory or a traceback: YAML alias bombs and deep nesting, nudge templates
with format specs, undecodable bytes and numbers past every limit, Ctrl-C at start-up, a
closed stdout, and the other unbounded inputs (labels, meta, config values, durations)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from beads.errors import InvalidInput
from beads.records.ids import bead_path
from beads.store import Store
from tests.conftest import GcRunner, gc_program, git

ALIAS_BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
    "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
    "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
    "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n"
)  # 9**9 = 387 million strings from ~400 bytes


@pytest.fixture
def project(gc_store: GcRunner) -> GcRunner:
    return gc_store


def head(gc: GcRunner) -> str:
    return git("--git-dir", str(gc.cwd / ".beads" / ".git"), "rev-parse", "HEAD", cwd=gc.cwd)


def editor(tmp_path: Path, text: str) -> dict[str, str]:
    """An $EDITOR that replaces the file with `text` (a bead's own fields, then `extra`)."""
    script = tmp_path / "editor.py"
    script.write_text(
        "import sys\n"
        f"extra = {text!r}\n"
        "path = sys.argv[1]\n"
        "kept = open(path).read().replace('meta: {}\\n', '')\n"
        "open(path, 'w').write(kept + extra)\n"
    )
    return {"EDITOR": f"{sys.executable} {script}"}


def refused(result: subprocess.CompletedProcess[str], code: int = 30) -> str:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


# -- 6. YAML alias bombs and deep nesting ------------------------------------------------------


def test_an_alias_bomb_in_bead_edit_is_refused(project: GcRunner, tmp_path: Path) -> None:
    made = project.json("bead", "create", "--type", "task", "--title", "t")["bead"]
    before = head(project)
    started = time.monotonic()
    bomb = "meta:\n" + "".join("  " + line + "\n" for line in ALIAS_BOMB.splitlines())
    result = project("bead", "edit", made["id"], env=editor(tmp_path, bomb))
    assert "anchor or alias" in refused(result)
    assert time.monotonic() - started < 10
    assert head(project) == before


def test_deep_nesting_in_bead_edit_is_refused_not_a_crash(
    project: GcRunner, tmp_path: Path
) -> None:
    # libyaml's composer recurses in C: 100,000 `[` killed the process with SIGSEGV.
    made = project.json("bead", "create", "--type", "task", "--title", "t")["bead"]
    before = head(project)
    deep = "meta:\n  x: " + "[" * 100_000 + "]" * 100_000 + "\n"
    assert "nests deeper" in refused(
        project("bead", "edit", made["id"], env=editor(tmp_path, deep))
    )
    assert head(project) == before


def test_a_bead_sharing_a_list_between_fields_stays_readable(store: Store) -> None:
    # Written as `&id001`/`*id001` once, it would have been refused by the store's own reader.
    shared = ["a", "b"]
    made = store.create("task", "t", meta={"x": shared, "y": shared, "z": {"w": shared}})
    store.close()
    reopened = Store.open(store.root)
    assert reopened.index.invalid() == {}
    assert reopened.get(made.id).meta == {"x": shared, "y": shared, "z": {"w": shared}}
    reopened.close()


def test_a_huge_edited_file_is_refused_unread(project: GcRunner, tmp_path: Path) -> None:
    made = project.json("bead", "create", "--type", "task", "--title", "t")["bead"]
    before = head(project)
    huge = "meta:\n  x: '" + "x" * (6 << 20) + "'\n"
    assert "larger than" in refused(project("bead", "edit", made["id"], env=editor(tmp_path, huge)))
    assert head(project) == before


def test_an_alias_bomb_pushed_with_git_is_reported_not_indexed(
    project: GcRunner, tmp_path: Path
) -> None:
    made = project.json("bead", "create", "--type", "task", "--title", "good")["bead"]
    clone = tmp_path / "clone"
    git("clone", "-q", str(project.cwd / ".beads" / ".git"), str(clone), cwd=tmp_path)
    path = bead_path("task", "gc-bombbomb")
    bomb = clone / path
    bomb.parent.mkdir(parents=True, exist_ok=True)
    fields = (
        "id: gc-bombbomb\ntype: task\ntitle: boom\nfrom: human\n"
        "created_at: '2026-01-01T00:00:00.000000Z'\nupdated_at: '2026-01-01T00:00:00.000000Z'\n"
    )
    bomb.write_text(fields + "meta:\n" + "".join(f"  {x}\n" for x in ALIAS_BOMB.splitlines()))
    (clone / "config.yaml").write_text("format: 1\nstore: &s {prefix: gc}\nmail: *s\n")
    git("add", "-A", cwd=clone)
    git("commit", "-qm", "a bomb", cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)

    started = time.monotonic()
    listed = project.json("bead", "list")
    assert [b["id"] for b in listed["beads"]] == [made["id"]]
    assert time.monotonic() - started < 10
    index = project.cwd / ".beads" / ".runtime" / "index.sqlite3"
    assert index.stat().st_size < 5_000_000
    report = project.json("doctor")
    found = {(p["kind"], p["path"]): p["message"] for p in report["problems"]}
    assert "anchor or alias" in found[("unparsable", path)]
    assert "anchor or alias" in found[("unparsable", "config.yaml")]
    assert project("bead", "create", "--type", "task", "--title", "after").returncode == 0


# -- 10. Nudge templates --------------------------------------------------------------------


def test_config_set_refuses_a_nudge_template_with_a_format_spec(project: GcRunner) -> None:
    before = head(project)
    for template in ('["x", "{text:>3000000000}"]', '["{text!r}"]', '["{text.upper}"]',
                     '["{0}"]', '["{other}"]', '["{unclosed"]', '"echo"', "[]"):  # fmt: skip
        refused(project("config", "set", "agents.dog.nudge", template))
    assert head(project) == before
    assert (
        project("config", "set", "agents.dog.nudge", '["echo", "{{x}}", "{text}"]').returncode == 0
    )


def test_an_old_template_with_a_format_spec_fails_the_nudge_not_the_push(store: Store) -> None:
    from inbox.delivery import Delivery

    # An older gc accepted this template; the store holding it must still work.
    with store.batch() as batch:
        config = {**store.config, "agents": {"dog": {"nudge": ["echo", "{text:>100000000}"]}}}
        batch.set_config(config)
    delivery = Delivery(store.root)
    delivery.register("s1", "dog")
    delivery.hook_seen("s1", "dog", "Stop", state="idle")
    ((_item, created),) = Delivery(store.root).push(["dog"], "hello", key="k")
    assert created
    detail = delivery.session("s1").nudge_detail or ""
    assert "bad nudge template" in detail and "{text:>100000000}" in detail


def test_doctor_reports_config_values_that_are_no_longer_valid(
    project: GcRunner, tmp_path: Path
) -> None:
    store = Store.open(project.cwd)
    with store.batch() as batch:
        batch.set_config(
            {
                **store.config,
                "agents": {"dog": {"nudge": ["echo", "{text:>9}"]}},
                "delivery": {"nudge_timeout": "soon"},
            }
        )
    store.close()
    assert project("bead", "list").returncode == 0  # the store opens
    result = project("doctor", "--json")
    assert result.returncode == 50
    problems = [p for p in json.loads(result.stdout)["problems"] if p["kind"] == "config"]
    messages = " | ".join(p["message"] for p in problems)
    assert "agents.dog.nudge" in messages and "delivery.nudge_timeout" in messages


def test_argv_templates() -> None:
    from beads.settings.config import check_argv_template

    assert check_argv_template(["tmux", "send-keys", "-t", "{session}", "{text}", "{{x}}"])
    for bad in (["{text:>9}"], ["{text!s}"], ["{text[0]}"], ["{session.x}"], ["{}"], ["{nope}"]):
        with pytest.raises(InvalidInput):
            check_argv_template(bad)


# -- 12. Undecodable bytes and overflowing numbers ------------------------------------------


def test_the_library_refuses_lone_surrogates(store: Store) -> None:
    import mail.settings  # noqa: F401 - a program setting mail's settings imports mail
    from inbox.items import Item

    with pytest.raises(InvalidInput, match="UTF-8"):
        Item.new("dog", "hi", key="k\udcff")
    with pytest.raises(InvalidInput, match="UTF-8"):
        Item.new("dog", "hi", key="k", source="s\udcff")
    with pytest.raises(InvalidInput, match="UTF-8"):
        store.set_setting("a\udcff", 1)
    with pytest.raises(InvalidInput, match="UTF-8"):
        store.set_setting("mail.provider", "exec:v\udcff")  # a valid form, not text


def test_durations_and_times_past_every_limit_are_invalid_input() -> None:
    from beads.records.times import parse_duration, parse_time

    for text in ("99999999999999d", "9" * 5000, "9" * 400 + "s", "36501d"):
        with pytest.raises(InvalidInput):
            parse_duration(text)
        with pytest.raises(InvalidInput):
            parse_time(text)
    with pytest.raises(InvalidInput):
        parse_time("0001-01-01T00:00:00+01:00")  # before year 1 in UTC
    assert parse_duration("36500d") == 36500 * 86400


def test_a_huge_limit_is_invalid_input(store: Store) -> None:
    with pytest.raises(InvalidInput):
        store.list(limit=10**30)


@pytest.mark.parametrize(
    "args",
    [
        ("bead", "list", "--since", "99999999999999d"),
        ("bead", "list", "--limit", "9" * 30),
        ("inbox", "wait", "--timeout", "99999999999999d"),
        ("inbox", "push", "hi", "--ttl", "99999999999999d"),
        ("gate", "create", "--await", "timer:99999999999999d"),
        ("gate", "create", "--await", "human", "--timeout", "9" * 5000),
        ("gate", "watch", "--interval", "nan"),
        ("gate", "watch", "--interval", "1e400"),
        ("config", "set", "store", "1"),
        ("config", "set", "store.prefix.x", "1"),
        ("config", "set", "x", "[" * 50_000 + "]" * 50_000),
        ("config", "set", "x", "NaN"),
        ("config", "set", "delivery.max_items", '"many"'),
        ("config", "set", "mail.strict_recipients", "3"),
        ("config", "set", "rigs.r", '["not a name!"]'),
        ("config", "set", "delivery.keep_delivered", "99999999999999d"),
        ("--beads-dir", "a" * 100_000, "bead", "list"),
        ("init", "a" * 100_000),
    ],
)
def test_numbers_and_sizes_past_every_limit_exit_30(
    project: GcRunner, args: tuple[str, ...]
) -> None:
    before = head(project)
    refused(project(*args))
    assert head(project) == before


def test_a_5000_digit_integer_in_bead_edit_is_refused(project: GcRunner, tmp_path: Path) -> None:
    made = project.json("bead", "create", "--type", "task", "--title", "t")["bead"]
    before = head(project)
    for number in ("9" * 5000, str(2**64)):
        refused(
            project("bead", "edit", made["id"], env=editor(tmp_path, f"meta:\n  n: {number}\n"))
        )
    assert head(project) == before


# -- other unbounded inputs ------------------------------------------------------------------


def test_labels_cc_and_meta_are_bounded(store: Store) -> None:
    with pytest.raises(InvalidInput, match="at most 100"):
        store.create("task", "t", labels=[f"l{i}" for i in range(101)])
    with pytest.raises(InvalidInput, match="values"):
        store.create("task", "t", meta={"big": list(range(10_001))})
    with pytest.raises(InvalidInput, match="text"):
        store.create("task", "t", meta={f"k{i}": "x" * 200_000 for i in range(6)})
    with pytest.raises(InvalidInput, match="64 bits"):
        store.create("task", "t", meta={"n": 2**63})
    assert store.list() == []
    made = store.create("task", "t", labels=[f"l{i}" for i in range(100)], meta={"n": 2**63 - 1})
    assert store.get(made.id).meta == {"n": 2**63 - 1}


def test_huge_numbers_as_meta_values_stay_text(project: GcRunner) -> None:
    digits = "9" * 5000
    made = project.json("bead", "create", "--type", "task", "--title", "t", "--meta", f"n={digits}")
    assert made["bead"]["meta"] == {"n": digits}
    assert project.json("bead", "show", made["bead"]["id"])["bead"]["meta"] == {"n": digits}


def test_a_deeply_nested_json_text_is_pushed_as_text(project: GcRunner) -> None:
    text = '{"a":' * 5000 + "1" + "}" * 5000
    pushed = project.json("inbox", "push", text, "--to", "dog")
    assert pushed["items"][0]["content"] == text
    assert project("inbox", "drain", "--session", "s1", "--agent", "dog").returncode == 0


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["thread", "send", "--from", "leader", "--subject", "s", "--payload-json",
             '{"a": 1, "a": 2}'],
            "gc: --payload-json has the key 'a' twice\n",
        ),
        (
            ["thread", "send", "--from", "leader", "--subject", "s", "--artifact", "x",
             "--artifact-metadata-json", '{"m": {"k": 1, "k": 1}}'],
            "gc: --artifact-metadata-json has the key 'k' twice\n",
        ),
        (
            ["config", "set", "agents.dog.nudge", '{"x": 1, "x": 2}'],
            "gc: the value of agents.dog.nudge has the key 'x' twice\n",
        ),
    ],
)  # fmt: skip
def test_json_given_with_a_key_twice_is_refused_naming_the_key(
    project: GcRunner, args: list[str], said: str
) -> None:
    before = head(project)
    assert refused(project(*args)) == said
    assert head(project) == before  # nothing committed


def test_priority_past_its_range_is_usage_error(project: GcRunner) -> None:
    refused(project("inbox", "push", "hi", "--priority", "9" * 30))
    refused(project("bead", "create", "--type", "t", "--title", "t", "--priority", "-" + "9" * 30))


def test_an_error_quoting_control_characters_stays_one_line(project: GcRunner) -> None:
    stderr = refused(project("bead", "update", "gc-zzzz", "--body-file", "a\nb\x1ec"), 30)
    assert "a\\nb\\x1ec" in stderr


# -- ids and names with whitespace ------------------------------------------------------------

# What a line read from a file or pasted adds to an id, and what is never part of one.
NOT_IN_AN_ID = ["{}\n", "{}\r\n", " {}", "{}\t", "{}\x0b", "{}\x1b"]


@pytest.mark.parametrize("shape", NOT_IN_AN_ID, ids=repr)
@pytest.mark.parametrize(
    "command",
    [
        ["bead", "show", "{id}"],
        ["bead", "show", "{short}"],
        ["bead", "close", "{id}"],
        ["bead", "update", "{id}", "--title", "changed"],
        ["bead", "list", "--thread", "{id}"],
        ["doctor", "--reset-to", "{head}"],
    ],
    ids=" ".join,
)
def test_an_id_with_a_newline_or_a_space_is_no_id_and_is_refused_in_one_line(
    project: GcRunner, command: list[str], shape: str
) -> None:
    made = project.json("bead", "create", "--type", "task", "--title", "t")["bead"]["id"]
    before = head(project)
    values = {"id": made, "short": made.split("-")[1][:4], "head": before}
    args = [shape.format(arg.format(**values)) if "{" in arg else arg for arg in command]
    stderr = refused(project(*args))
    assert stderr.startswith(("gc: invalid id ", "gc: invalid commit ")), stderr
    assert head(project) == before
    assert project.json("bead", "show", made)["bead"]["status"] == "open"


def test_an_id_in_another_script_that_lowers_to_ascii_is_no_id() -> None:
    from beads.records.ids import check_id_prefix

    assert check_id_prefix("GC-7K2Q") == "gc-7k2q"  # ASCII capitals are the same id
    with pytest.raises(InvalidInput):
        check_id_prefix("gc-7\u212a2q")  # the Kelvin sign, which str.lower makes a 'k'


def _validators() -> list[tuple[str, Any, str]]:
    """Every check of a name, id, key or label a user gives, with a value it takes."""
    from flask import Flask

    from beads.records import ids, record
    from beads.settings import localconfig, registry
    from gates.session_gates import check_gate_id
    from inbox.queue import check_session
    from web import app

    def page(text: str) -> None:
        with Flask(__name__).test_request_context("/", query_string={"page": text}):
            app._page()

    def local_key(name: str) -> None:
        if localconfig._local_key(f"stores.{name}") is None:
            raise InvalidInput(f"no setting stores.{name}")

    return [
        ("id prefix", ids.check_prefix, "gc"),
        ("id", ids.check_id, "gc-7k2qabcd"),
        ("id or prefix typed", ids.check_id_prefix, "gc-7k2q"),
        ("agent", record.check_agent, "rig/dog"),
        ("type", record.check_type, "task"),
        ("label", record.check_label, "area:web"),
        ("meta key", record.check_meta_key, "owner.team"),
        ("session", check_session, "s-1:2"),
        ("gate id", check_gate_id, "tests-pass"),
        ("rig", registry.rig_name, "rig"),
        ("agents' names", lambda n: registry.keys_named(record.NAME, "a name")({n: {}}), "dog"),
        ("stream", registry.stream_name, "GC_INBOX"),
        ("machine", localconfig._machine, "laptop-2"),
        ("remote", localconfig.check_remote_name, "origin"),
        ("store name", local_key, "work"),
        ("web page", page, "2"),
    ]


@pytest.mark.parametrize(
    ("what", "check", "value"), _validators(), ids=[v[0] for v in _validators()]
)
def test_every_name_and_id_check_refuses_its_value_with_a_newline_after_it(
    what: str, check: Any, value: str
) -> None:
    check(value)  # taken as it is
    with pytest.raises(InvalidInput):
        check(value + "\n")


# -- 13. Ctrl-C and a closed stdout ---------------------------------------------------------


def test_an_interrupt_while_importing_exits_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gc_beads import entry

    class Interrupting:
        def find_spec(self, name: str, *args: object) -> None:
            if name == "gc_beads.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "gc_beads.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    monkeypatch.setattr(sys, "argv", ["gc", "bead", "list"])
    with pytest.raises(SystemExit) as stopped:
        entry.main()
    assert stopped.value.code == 130
    assert capsys.readouterr().err == "gc: interrupted\n"


def test_ctrl_c_early_never_shows_a_traceback_of_gc(project: GcRunner) -> None:
    """SIGINT at moments spread over a whole run, timed first (so they cover it on a machine
    of any speed or load). Once gc's `main()` runs: exit 130 and one line.

    Before it, Python itself is starting (the interpreter, `site`, then the console script
    pip generated: its `import re` and its import of `gc_beads.entry`), out of gc's reach; a
    traceback from there is tolerated, one through gc's entry point is the defect.
    """

    def run(delay: float | None) -> tuple[int, str]:
        process = subprocess.Popen(
            [gc_program(), "bead", "list"],
            cwd=project.cwd,
            env=project.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        if delay is not None:
            time.sleep(delay)
            process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=120)  # bounds a hang only
        return process.returncode, err.decode("utf-8", "replace")

    started = time.monotonic()
    code, text = run(None)
    whole = time.monotonic() - started
    assert code == 0, text
    reached = 0
    for step in range(16):  # 0 to 107% of the timed run: one may land after its end
        code, text = run(whole * step / 14)
        # A traceback through the entry point's call (the script's last line) is the defect.
        assert not ("Traceback" in text and "sys.exit(script())" in text), text
        if code == 130:
            assert text == "gc: interrupted\n", text
            reached += 1
        else:
            assert code in (0, -signal.SIGINT, 1), text
    assert reached or os.cpu_count() == 1  # some signal landed in gc's own code


def catching_sigterm(pid: int, deadline: float) -> None:
    """Until process `pid` has its SIGTERM handler (a wait's, `beads.waiting.terminable`: a
    signal from then on ends the wait whatever the process is doing), as the kernel shows it
    (`SigCgt`, the signals a handler catches); where the kernel does not say, some time. The
    deadline bounds a hang only."""
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        time.sleep(2)
        return
    wanted = 1 << (signal.SIGTERM - 1)
    while time.monotonic() < deadline:
        fields = dict(line.split(":", 1) for line in status.read_text().splitlines())
        if int(fields["SigCgt"], 16) & wanted:
            return
        time.sleep(0.01)


WAITS = [
    ["gc", "inbox", "wait", "--agent", "dog", "--timeout", "600"],
    ["gc", "--json", "inbox", "wait", "--agent", "dog", "--timeout", "600"],
    ["gc", "thread", "wait-reply", "--thread", "THREAD", "--timeout-seconds", "600"],
    ["inbox", "wait-reply", "--thread", "THREAD", "--timeout-seconds", "600"],
    ["gc", "thread", "watch", "--agent", "dog", "--timeout-seconds", "600"],
    ["gc", "gate", "watch", "--interval", "600"],
    ["gc", "sync", "--watch", "--interval", "600"],
    ["gc", "decision", "create", "--prompt", "p", "--option", "y", "--option", "n", "--wait"],
]


@pytest.mark.parametrize("command", WAITS, ids=lambda c: " ".join(c[:4]))
def test_sigterm_ends_a_wait_in_one_line_with_exit_143(
    project: GcRunner, command: list[str]
) -> None:
    thread = project.json("thread", "send", "--from", "leader", "--subject", "s")["thread"]
    program, *args = [thread["thread_id"] if a == "THREAD" else a for a in command]
    before = head(project)
    waiter = subprocess.Popen(
        [gc_program(program), *args], cwd=project.cwd, env=project.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        catching_sigterm(waiter.pid, time.monotonic() + 60)
        waiter.send_signal(signal.SIGTERM)
        out, err = waiter.communicate(timeout=60)  # bounds a hang only
    finally:
        waiter.kill()
        waiter.wait()
    assert (waiter.returncode, err) == (143, f"{program}: terminated\n")
    if "--json" in args:
        assert json.loads(out) == {
            "ok": False,
            "error": {"code": "terminated", "message": "terminated"},
        }
    if "decision" not in args:
        assert head(project) == before  # a wait writes nothing of its own


def test_a_closed_stdout_ends_quietly(project: GcRunner) -> None:
    for _ in range(3):
        project("bead", "create", "--type", "task", "--title", "t")
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run(
            [gc_program(), "bead", "list"], cwd=project.cwd, env=project.env, stdout=write,
            stderr=subprocess.PIPE, timeout=60,
        )  # fmt: skip
    finally:
        os.close(write)
    assert result.returncode == 0
    assert result.stderr == b""
    closed = subprocess.run(f"{gc_program()} bead list >&-", shell=True, cwd=project.cwd,
                            env=project.env, capture_output=True, timeout=60)  # fmt: skip
    assert (closed.returncode, closed.stderr) == (0, b"")


def test_ctrl_c_wrapped_by_python_in_another_error_is_still_an_interruption(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Python 3.11 turns a KeyboardInterrupt raised in `__set_name__` during an import into
    # "RuntimeError: Error calling __set_name__" (seen in CI: ipaddress, on an early Ctrl-C).
    from gc_beads import cli as cli_main

    def interrupted_import(*args: object, **kwargs: object) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__") from exc

    monkeypatch.setattr(cli_main.cli, "invoke", interrupted_import)
    with pytest.raises(SystemExit) as exited:
        cli_main.main(["--json", "bead", "list"])
    assert exited.value.code == 130
    out, err = capsys.readouterr()
    assert err == "gc: interrupted\n"
    assert json.loads(out)["error"]["code"] == "interrupted"


@pytest.mark.parametrize("command", [["clone", "x"], ["init"], ["--beads-dir"]])
def test_a_path_name_too_long_is_invalid_input(project: GcRunner, command: list[str]) -> None:
    # The fuzz test found `gc clone x <3,000 [>` reported as a storage error (exit 50).
    before = head(project)
    long_name = "[" * 3000
    args = (
        [*command, long_name]
        if command != ["--beads-dir"]
        else [*command, long_name, "bead", "list"]
    )
    assert "too long" in refused(project(*args))
    assert head(project) == before


# -- the environment a command is started in ---------------------------------------------------


def _run_in_shell(project: GcRunner, setup: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """`gc argv` started by a shell after `setup` (a redirection, a ulimit)."""
    return subprocess.run(
        [
            "sh",
            "-c",
            f'{setup}; exec "$@"' if setup.startswith("ulimit") else f'exec "$@" {setup}',
            "sh",
            gc_program(),
            *argv,
        ],
        cwd=project.cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("mail", "send", "dog", "-s", "s", "--stdin"),
        ("bead", "create", "--type", "task", "--title", "t", "--body-file", "-"),
    ],
)
def test_a_body_read_from_a_closed_stdin_is_refused_in_one_line(
    project: GcRunner, argv: tuple[str, ...]
) -> None:
    before = head(project)
    result = _run_in_shell(project, "<&-", *argv)
    assert refused(result) == "gc: cannot read the body from stdin: it is closed\n"
    assert head(project) == before


def test_an_editor_with_an_unbalanced_quote_is_refused_in_one_line(project: GcRunner) -> None:
    made = project.json("bead", "create", "--type", "task", "--title", "t")["bead"]
    result = project("bead", "edit", made["id"], env={"VISUAL": '"x'})
    assert refused(result) == "gc: cannot run the editor '\"x': No closing quotation\n"


def test_running_out_of_descriptors_is_not_reported_as_a_race_or_damage(
    project: GcRunner,
) -> None:
    # The branch ref is read while few descriptors are left: that is this process's trouble.
    result = _run_in_shell(
        project, "ulimit -n 8", "bead", "create", "--type", "task", "--title", "t"
    )
    stderr = refused(result, code=50)
    assert "retry" not in stderr and "gc doctor" not in stderr, stderr
    assert project("doctor").stdout.strip() == "store is healthy"


def test_a_refusal_keeps_its_exit_code_when_stdout_cannot_be_written(project: GcRunner) -> None:
    # A reader gone away (a closed pipe) or a full device loses the JSON text, never the code
    # that tells a caller the command was refused.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        gone = subprocess.run(
            [gc_program(), "--json", "bead", "show", "gc-nope"],
            cwd=project.cwd,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert gone.returncode == 40 and gone.stderr == "gc: no bead gc-nope\n", gone.stderr
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    for argv, code in ((("bead", "show", "gc-nope"), 40), (("bead", "list"), 50)):
        full = _run_in_shell(project, ">/dev/full", "--json", *argv)
        refused(full, code=code)


OUTPUT_LOST = (
    "gc: any change the command made is kept, but its output could not be written: "
    "No space left on device\n"
)


@pytest.mark.parametrize(
    "argv",
    [
        ("bead", "create", "--type", "task", "--title", "made"),
        ("--json", "bead", "create", "--type", "task", "--title", "made"),
        ("mail", "send", "dog", "-s", "made", "-m", "hi"),
    ],
)
def test_a_write_whose_output_cannot_be_written_says_the_change_was_made(
    project: GcRunner, argv: tuple[str, ...]
) -> None:
    # stdout on a full device: the commit is in, only the reply is lost, and the error says
    # so (not "no space left on device", which reads as a failed write), exit 50.
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    assert project("config", "set", "agents.dog", "{}").returncode == 0  # a known recipient
    before = head(project)
    result = _run_in_shell(project, ">/dev/full", *argv)
    assert refused(result, code=50) == OUTPUT_LOST
    assert head(project) != before
    assert "made" in project("bead", "list", "--all").stdout


def test_a_read_whose_output_cannot_be_written_says_so_with_exit_50(project: GcRunner) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    for argv in (("bead", "list"), ("--help",)):
        assert refused(_run_in_shell(project, ">/dev/full", *argv), code=50) == OUTPUT_LOST
    # A refusal keeps its own code and line; the JSON object it could not write is not news.
    assert refused(
        _run_in_shell(project, ">/dev/full", "--json", "bead", "show", "gc-nope"), code=40
    ) == ("gc: no bead gc-nope\n")


LEGACY = {"PYTHONIOENCODING": "latin-1"}
WIDE = "漢字 😀"


def test_text_a_legacy_terminal_cannot_encode_is_written_escaped(project: GcRunner) -> None:
    # A stored character outside the terminal's encoding never crashes the output: it is
    # written as an escape (stdout and stderr alike), and JSON stays JSON, exact.
    made = project.json("bead", "create", "--type", "task", "--title", WIDE)["bead"]
    project.json("mail", "send", "dog", "-s", WIDE, "-m", WIDE)
    gate = {"hook": "Stop", "mode": "soft", "description": WIDE}
    assert project("config", "set", "gates.session.wide", json.dumps(gate)).returncode == 0
    escaped = "\\u6f22\\u5b57"  # (bead show writes YAML escapes of its own)
    for argv in (
        ("bead", "list"),
        ("bead", "show", made["id"]),
        ("mail", "inbox", "dog"),
        ("log",),
    ):
        result = project.subprocess(*argv, env=LEGACY)
        assert result.returncode == 0 and result.stderr == "", (argv, result.stderr)
        assert escaped in result.stdout, (argv, result.stdout)
    listed = project.subprocess("--json", "bead", "list", env=LEGACY)
    assert json.loads(listed.stdout)["beads"][0]["title"] == WIDE
    shown = project.subprocess("config", "get", "gates.session.wide", env=LEGACY)  # as JSON
    assert json.loads(shown.stdout) == gate, shown.stdout
    wrong = project.subprocess("bead", "show", f"gc-{WIDE}", env=LEGACY)
    assert "\\u6f22" in refused(wrong)


def test_running_out_of_memory_is_one_line_with_exit_50(project: GcRunner) -> None:
    # A body limit of 4 GB makes reading stdin ask for 4 GB at once: past `ulimit -v`.
    assert project("config", "set", "store.max_body_bytes", str(4 << 30)).returncode == 0
    before = head(project)
    argv = ("bead", "create", "--type", "task", "--title", "t", "--stdin")
    for setup in ("ulimit -v 300000", "ulimit -v 300000; exec 2>/dev/full"):
        result = subprocess.run(
            ["sh", "-c", f'{setup}; exec "$@" </dev/null', "sh", gc_program(), *argv],
            cwd=project.cwd,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 50, result.stderr  # stderr unwritable: the same code
        if "/dev/full" not in setup:
            assert result.stderr.startswith("gc: out of memory"), result.stderr
            assert len(result.stderr.splitlines()) == 1
    assert head(project) == before


@pytest.mark.parametrize("locale", [{"LC_ALL": "C", "PYTHONUTF8": "0"}, {"LC_ALL": "C.UTF-8"}])
def test_utf8_arguments_are_text_in_any_locale(project: GcRunner, locale: dict[str, str]) -> None:
    # In the C locale without UTF-8 mode, Python decodes the command line as ASCII: the
    # bytes of `é` are still UTF-8, and taken as text. Bytes that are not UTF-8 still fail.
    made = project.subprocess(
        "--json", "bead", "create", "--type", "task", "--title", "café", env=locale
    )
    assert made.returncode == 0, made.stderr
    assert project.json("bead", "show", json.loads(made.stdout)["bead"]["id"])["bead"]["title"] == (
        "café"
    )
    (project.cwd / "body é.txt").write_text("from a file\n")
    from_file = project.subprocess(
        "bead", "create", "--type", "task", "--title", "t", "--body-file", "body é.txt", env=locale
    )
    assert from_file.returncode == 0, from_file.stderr
    before = head(project)
    result = subprocess.run(
        [gc_program(), "bead", "create", "--type", "task", "--title", b"caf\xff"],
        cwd=project.cwd,
        capture_output=True,
        env={**project.env, **locale},
        timeout=60,
    )
    assert result.returncode == 30 and b"is not valid UTF-8" in result.stderr, result.stderr
    assert head(project) == before
    # A store's path is kept as text: past ASCII, one this locale cannot name is refused so.
    made = project.subprocess("init", "store é", env=locale)
    if locale["LC_ALL"] == "C":
        assert refused(made).startswith("gc: the path ") and "use a UTF-8 locale" in made.stderr
        assert not (project.cwd / "store é").exists()
    else:
        assert made.returncode == 0, made.stderr


@pytest.mark.parametrize("variable", ["VISUAL", "EDITOR"])
def test_an_editor_that_is_missing_or_a_directory_is_named_so(
    project: GcRunner, tmp_path: Path, variable: str
) -> None:
    made = project.json("bead", "create", "--type", "task", "--title", "t")["bead"]
    before = head(project)
    missing = tmp_path / "no-such-editor"
    others = {"EDITOR": "vi"} if variable == "VISUAL" else {}  # $VISUAL is the one run
    result = project("bead", "edit", made["id"], env={**others, variable: str(missing)})
    assert refused(result) == f"gc: the editor {missing} was not found\n"
    result = project("bead", "edit", made["id"], env={variable: str(tmp_path)})
    assert refused(result) == f"gc: the editor {tmp_path} is a directory, not a program\n"
    assert head(project) == before
