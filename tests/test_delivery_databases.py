"""The delivery databases are never deleted or reset for an error that is
not damage (busy, read-only, full, a newer gc's); their errors read as the store's own; doctor
removes the temporary files of killed writers."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from beads import doctor
from beads.errors import Conflict, StorageError
from beads.store import Store
from inbox import Delivery
from tests.conftest import GcRunner


@pytest.fixture
def project(gc_store: GcRunner) -> Path:
    return gc_store.cwd


def sessions_file(project: Path) -> Path:
    return project / ".beads" / ".runtime" / "sessions.sqlite3"


def session_rows(project: Path) -> list[tuple[str, str]]:
    """The sessions the file holds, read as another tool would (never through gc)."""
    db = sqlite3.connect(sessions_file(project))
    try:
        return db.execute("SELECT session, agent FROM sessions").fetchall()
    finally:
        db.close()


def hook(gc: GcRunner, event: str, session: str = "s1", agent: str = "dog") -> str:
    payload = {"session_id": session, "hook_event_name": event, "cwd": str(gc.cwd)}
    result = gc("hook", "run", input=json.dumps(payload), env={"GC_AGENT": agent})
    assert result.returncode == 0, result.stderr
    return result.stdout


# -- the sessions database is dropped only when it is damaged ---------------------------------


def test_a_sessions_database_of_a_newer_gc_is_refused_never_deleted(project: Path) -> None:
    with Delivery(project / ".beads") as delivery:
        delivery.register("s1", "dog")
    db = sqlite3.connect(sessions_file(project))
    db.execute("PRAGMA user_version = 9")
    db.close()
    with Delivery(project / ".beads") as delivery:
        with pytest.raises(StorageError, match="newer than this gc knows"):
            delivery.sessions()
    assert session_rows(project) == [("s1", "dog")]


def test_a_busy_sessions_database_is_never_deleted(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Delivery(project / ".beads") as delivery:
        delivery.register("s1", "dog")
    holder = sqlite3.connect(sessions_file(project), isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")  # another process in the middle of a long write
    connect = sqlite3.connect

    def impatient(*args: object, **kwargs: object) -> sqlite3.Connection:
        return connect(*args, **{**kwargs, "timeout": 0.1})  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite3, "connect", impatient)
    try:
        with Delivery(project / ".beads") as delivery:
            with pytest.raises(Conflict, match="sessions.sqlite3 is busy"):
                delivery.sessions()
    finally:
        holder.close()
    assert session_rows(project) == [("s1", "dog")]


def test_a_damaged_sessions_database_is_started_afresh(project: Path) -> None:
    sessions_file(project).write_bytes(b"not a database at all" * 100)
    with Delivery(project / ".beads") as delivery:
        assert delivery.sessions() == []
        delivery.register("s1", "dog")
    assert session_rows(project) == [("s1", "dog")]


def damage_pages(path: Path) -> bytes:
    """Garble every page of a database but the first (it still opens, and every table is
    damaged); returns the bytes."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    data = bytes(path.read_bytes())
    data = data[:4096] + b"\xff" * (len(data) - 4096)
    path.write_bytes(data)
    return data


def many_sessions(project: Path) -> None:
    with Delivery(project / ".beads") as delivery:
        for n in range(100):
            delivery.register(f"old{n}", "dog", cwd="/" + "d" * 300)


def test_a_sessions_database_damaged_inside_is_started_afresh(project: Path, gc: GcRunner) -> None:
    log = project / ".beads" / ".runtime" / "hooks.log"
    many_sessions(project)
    damage_pages(sessions_file(project))
    hook(gc, "SessionStart", "s1")  # meets the damage writing: drops the file, writes anew
    with Delivery(project / ".beads") as delivery:
        assert delivery.session("s1"), log.read_text() if log.exists() else "no hooks.log"
    many_sessions(project)
    damage_pages(sessions_file(project))
    with Delivery(project / ".beads") as delivery:  # meets the damage reading
        assert delivery.sessions() == []
    assert gc.json("session", "list")["sessions"] == []


def test_a_damaged_delivery_database_is_one_line_saying_what_to_do_and_kept(
    project: Path, gc: GcRunner
) -> None:
    path = project / ".beads" / ".runtime" / "delivery.sqlite3"
    path.write_bytes(b"not a database at all" * 100)
    for args in (("inbox", "list"), ("inbox", "push", "--to", "dog", "hi")):
        result = gc(*args)
        assert result.returncode == 50, result.stderr
        assert result.stderr == (
            f"gc: delivery.sqlite3 is damaged: file is not a database; move {path} aside and "
            "a new one is made: the pushed items and durable entries it holds are lost, "
            "unread mail and recent decisions and gates come back at each agent's next "
            "session start (or gc inbox drain --reconcile)\n"
        )
    assert path.read_bytes() == b"not a database at all" * 100  # the source of truth is kept


@pytest.mark.parametrize("name", ["delivery.sqlite3", "sessions.sqlite3", "index.sqlite3"])
def test_a_directory_in_place_of_a_database_is_named_in_one_line(
    project: Path, gc: GcRunner, name: str
) -> None:
    path = project / ".beads" / ".runtime" / name
    path.unlink(missing_ok=True)
    path.mkdir()
    (path / "kept").write_text("x")
    result = gc("inbox", "drain", "--session", "s1", env={"GC_AGENT": "dog"})
    assert result.returncode == 50, result.stderr
    assert result.stderr == f"gc: {path} is not a regular file: move it away\n"
    assert (path / "kept").read_text() == "x"  # nothing of it removed


def test_a_damaged_page_found_by_a_read_names_the_delivery_database(
    project: Path, gc: GcRunner
) -> None:
    path = project / ".beads" / ".runtime" / "delivery.sqlite3"
    with Delivery(project / ".beads") as delivery:
        for n in range(300):
            delivery.push(["dog"], f"item {n} " + "y" * 300, key=f"k{n}", nudge=False)
    data = damage_pages(path)
    result = gc("inbox", "list", "--agent", "dog")
    assert result.returncode == 50, result.stderr
    assert result.stderr.startswith("gc: delivery.sqlite3 is damaged:"), result.stderr
    assert f"; move {path} aside and a new one is made" in result.stderr
    assert result.stderr.count("\n") == 1
    assert path.read_bytes() == data  # the source of truth is kept


# -- a failed write reports its own error ---------------------------------------------------


def full(db: sqlite3.Connection) -> None:
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")


def test_a_full_delivery_database_says_no_space_left(project: Path) -> None:
    with Delivery(project / ".beads") as delivery:
        full(delivery.db)
        with pytest.raises(StorageError, match=r"^no space left on device \(delivery.sqlite3"):
            delivery.push(["dog"], "x" * 60_000, key="big")
        assert not delivery.db.in_transaction
        assert delivery.items("dog") == []


def test_a_full_sessions_database_says_no_space_left(project: Path) -> None:
    with Delivery(project / ".beads") as delivery:
        delivery.register("s0", "dog")
        full(delivery.sessions_db)
        with pytest.raises(StorageError, match=r"^no space left on device \(sessions.sqlite3"):
            for n in range(2000):
                delivery.register(f"s{n}", "dog", cwd="/" + "d" * 2000)
    assert ("s0", "dog") in session_rows(project)


class FailingRollback:
    """A connection whose ROLLBACK fails (an I/O error while undoing a write)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __getattr__(self, name: str) -> object:
        return getattr(self.db, name)

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql == "ROLLBACK":
            self.db.execute(sql)
            raise sqlite3.OperationalError("disk I/O error")
        return self.db.execute(sql, *args)


def test_a_failing_rollback_never_hides_the_error_of_the_write(project: Path) -> None:
    with Delivery(project / ".beads") as delivery:
        delivery.db = FailingRollback(delivery.db)  # type: ignore[assignment]
        with pytest.raises(ValueError, match="the real fault"):
            with delivery.write() as db:
                db.execute("DELETE FROM items")
                raise ValueError("the real fault")
        delivery.db = delivery.db.db  # type: ignore[attr-defined]


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_an_error_on_a_database_removed_under_it_says_it_was_replaced(
    project: Path, how: str
) -> None:
    # sqlite says only "disk I/O error" of a file removed (with its -wal and -shm) under an
    # open connection; `gc inbox wait` then failed with that line (exit 50) instead of
    # opening the new file and waking for the item pushed there.
    from inbox.database import DatabaseReplaced

    path = project / ".beads" / ".runtime" / "delivery.sqlite3"
    with Delivery(project / ".beads") as delivery:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        if how == "replaced":
            with Delivery(project / ".beads"):
                pass
        with pytest.raises(DatabaseReplaced, match="^delivery.sqlite3 was removed or replaced"):
            delivery.db.execute("SELECT no_such_column FROM items")


# -- a full disk, through the command ------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {made.stderr.decode()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_push_on_a_full_disk_is_one_line(small_disk: Path) -> None:
    gc = GcRunner(small_disk)
    assert gc("init").returncode == 0
    assert gc("inbox", "push", "--to", "dog", "first").returncode == 0
    filler = small_disk / "filler"
    try:
        filler.write_bytes(b"\0" * (2 << 20))
    except OSError:
        pass  # the disk is full now
    result = gc("inbox", "push", "--to", "dog", "x" * 60_000)
    assert result.returncode == 50, result.stderr
    assert result.stderr.startswith("gc: no space left on device"), result.stderr
    assert result.stderr.count("\n") == 1
    filler.unlink()
    listed = gc.json("inbox", "list", "--agent", "dog")
    assert [i["content"] for i in listed["items"]] == ["first"]


# -- a read-only store ----------------------------------------------------------------------


def runtime_digest(root: Path) -> dict[str, str]:
    runtime = root / ".beads" / ".runtime"
    return {
        str(p.relative_to(runtime)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(runtime.rglob("*"))
        if p.is_file()
    }


def test_a_read_only_mount_lists_sessions_and_items_and_deletes_nothing(tmp_path: Path) -> None:
    source, mount = tmp_path / "src", tmp_path / "ro"
    source.mkdir()
    mount.mkdir()
    gc = GcRunner(source)
    assert gc("init").returncode == 0
    hook(gc, "SessionStart")
    assert gc("inbox", "push", "--to", "dog", "build finished").returncode == 0
    before = runtime_digest(source)
    bound = subprocess.run(["mount", "--bind", str(source), str(mount)], capture_output=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here (needs root): {bound.stderr.decode()}")
    try:
        remount = ["mount", "-o", "remount,ro,bind", str(mount)]
        assert subprocess.run(remount, capture_output=True).returncode == 0
        ro = GcRunner(mount)
        sessions = ro.json("session", "list")
        assert [s["session"] for s in sessions["sessions"]] == ["s1"]
        listed = ro.json("inbox", "list", "--agent", "dog")
        assert [i["content"] for i in listed["items"]] == ["build finished"]
        for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
            hook(ro, event)  # fails open
        pushed = ro("inbox", "push", "--to", "dog", "refused", "--json")
        assert pushed.returncode == 50, pushed.stderr
        assert json.loads(pushed.stdout)["error"]["code"] == "storage_error"
        assert pushed.stderr.startswith("gc: store is read-only"), pushed.stderr
        assert pushed.stderr.count("\n") == 1
    finally:
        subprocess.run(["umount", str(mount)], check=True)
    assert runtime_digest(source) == before


# -- doctor removes temporary files of killed writers ---------------------------------------


def test_doctor_removes_old_temporary_files_of_killed_writers(store: Store) -> None:
    tmp = store.root / ".runtime" / "tmp"
    tmp.mkdir(exist_ok=True)
    old = tmp / "gc-abcd.yaml.0a1b2c3d4e5f.tmp"
    old.write_bytes(b"half a bead")
    hours_ago = time.time() - 7200
    os.utime(old, (hours_ago, hours_ago))
    young = tmp / "gc-efgh.yaml.5f4e3d2c1b0a.tmp"  # a writer may be between write and rename
    young.write_bytes(b"being written")
    report = doctor(store)
    assert not old.exists() and young.exists()
    found = [p for p in report.problems if p.path == ".runtime/tmp/" + old.name]
    assert [(p.kind, p.fixed) for p in found] == [("stale_file", True)]
    assert report.ok


# -- gc hook install on a full disk ---------------------------------------------------------


def test_hook_install_on_a_full_disk_leaves_the_settings_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from gates.install import install

    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"permissions": {"allow": ["Bash"]}}\n')

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StorageError, match=r"^no space left on device: cannot write .*settings"):
        install(settings)
    assert settings.read_text() == '{"permissions": {"allow": ["Bash"]}}\n'
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


# -- damaged and racing delivery databases ----------------------------------------------------


def test_a_queue_line_nested_too_deep_is_set_aside_and_the_rest_delivered(
    project: Path, gc: GcRunner
) -> None:
    def push(key: str) -> None:
        result = gc("inbox", "push", "--session", "s1", "--dedup-key", key, f"item {key}")
        assert result.returncode == 0, result.stderr

    push("good1")
    queue = project / ".beads" / ".runtime" / "inject-queue" / "s1.jsonl"
    with open(queue, "ab") as handle:
        handle.write(b"[" * 100_000 + b"\n")  # json.loads raises RecursionError on it
    push("good2")
    drained = gc("--agent", "dog", "inbox", "drain", "--session", "s1")
    assert drained.returncode == 0, drained.stderr
    assert "item good1" in drained.stdout and "item good2" in drained.stdout
    assert "set aside" in drained.stderr


def test_a_queue_append_cut_short_leaves_the_queue_as_it_was(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inbox import queue as queue_module
    from inbox.queue import SessionQueue

    runtime = project / ".beads" / ".runtime"
    queue = SessionQueue(runtime, "s1")
    queue.append({"key": "first", "content": "one"})
    real_write = os.write

    def nearly_full(fd: int, data: bytes) -> int:  # the disk takes 10 bytes, then no more
        monkeypatch.setattr(queue_module.os, "write", full_disk)
        return real_write(fd, bytes(data[:10]))

    def full_disk(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(queue_module.os, "write", nearly_full)
    with pytest.raises(OSError):
        queue.append({"key": "second", "content": "two"})
    monkeypatch.setattr(queue_module.os, "write", real_write)
    queue.append({"key": "third", "content": "three"})
    records, problems = queue.take(lambda records: [])
    assert [r["key"] for r in records] == ["first", "third"]
    assert problems == []


def test_doctor_never_writes_through_links_it_finds_under_runtime(
    project: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"not gc's\n")
    root = project / ".beads"
    (root / ".runtime" / "packed-refs.damaged").symlink_to(victim)
    with open(root / ".git" / "packed-refs", "ab") as handle:
        handle.write(b"garbage line\n")
    with Store.open(root) as store:
        doctor(store)
    assert victim.read_bytes() == b"not gc's\n"


def test_config_set_starts_from_git_not_from_the_index_copy(project: Path, gc: GcRunner) -> None:
    assert gc("config", "set", "agents.dog.rig", "kennel").returncode == 0
    index = sqlite3.connect(project / ".beads" / ".runtime" / "index.sqlite3")
    row = index.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()[0]
    tampered = json.loads(row)
    tampered["agents"] = {}
    tampered["store"]["prefix"] = "zz"
    index.execute("UPDATE meta SET value = ? WHERE key = 'config'", (json.dumps(tampered),))
    index.commit()
    index.close()
    assert gc("config", "set", "delivery.max_items", "30").returncode == 0
    shown = subprocess.run(
        ["git", "-C", str(project / ".beads"), "show", "HEAD:config.yaml"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "kennel" in shown and "prefix: gc" in shown and "max_items: 30" in shown


def test_exec_output_nested_too_deep_is_invalid_input(project: Path, gc: GcRunner) -> None:
    program = project / "deep-mail"
    program.write_text('#!/bin/sh\n[ "$1" = ensure-running ] && exit 0\n'
                       "python3 -c 'print(\"[\" * 100000)'\n")  # fmt: skip
    program.chmod(0o755)
    result = gc("mail", "count", "dog", env={"GC_MAIL": f"exec:{program}"})
    assert result.returncode == 30, result.stderr
    assert "count printed JSON nested too deeply to read" in result.stderr
    assert "internal error" not in result.stderr


def store_raw_item(
    project: Path,
    agent: str,
    content: str,
    created_at: object,
    expires_at: object,
    state: str = "pending",
) -> None:
    """Write an item row straight into the delivery database, as an older gc (or another
    tool) may have written it, none of gc's checks on the way."""
    database = project / ".beads" / ".runtime" / "delivery.sqlite3"
    with sqlite3.connect(database) as db:
        db.execute(
            "INSERT INTO items(agent, key, type, source, content, priority, created_at, "
            "expires_at, state) VALUES (?, 'odd', 'event', 'x', ?, 2, ?, ?, ?)",
            (agent, content, created_at, expires_at, state),
        )
    db.close()


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("created_at", -1e20),  # before 1970
        ("created_at", "soon"),  # not a number at all
        ("expires_at", 1e308),  # a TTL of 1e308 seconds
        ("expires_at", float("inf")),
    ],
)
def test_a_stored_row_with_a_time_no_stamp_shows_is_set_aside_and_the_rest_delivered(
    project: Path, gc: GcRunner, column: str, value: object
) -> None:
    dog = {"GC_AGENT": "dog"}
    assert gc("inbox", "push", "--to", "dog", "before it").returncode == 0
    row = {"created_at": 1_700_000_000.0, "expires_at": None, column: value}
    store_raw_item(project, "dog", "the odd one", row["created_at"], row["expires_at"])
    assert gc("inbox", "push", "--to", "dog", "after it").returncode == 0
    listed = gc("--json", "inbox", "list", env=dog)
    assert listed.returncode == 0, listed.stderr
    contents = [i["content"] for i in json.loads(listed.stdout)["items"]]
    assert sorted(contents) == ["after it", "before it"]
    assert listed.stderr == (
        f"gc: warning: item 2 of dog set aside in delivery.bad.jsonl: {column} must be a "
        "time in Unix seconds between 1970 and 9999\n"
    )
    kept = (project / ".beads" / ".runtime" / "delivery.bad.jsonl").read_text().splitlines()
    assert [json.loads(line)["row"]["content"] for line in kept] == ["the odd one"]
    drained = gc("inbox", "drain", "--session", "s1", env=dog)
    assert drained.returncode == 0, drained.stderr
    assert "before it" in drained.stdout and "after it" in drained.stdout
    assert drained.stderr == ""  # set aside once


def test_inbox_wait_is_not_woken_by_a_row_with_a_time_no_stamp_shows(
    project: Path, gc: GcRunner
) -> None:
    assert gc("inbox", "push", "--to", "cat", "not dog's").returncode == 0
    store_raw_item(project, "dog", "forever", 1.0e9, 1e308)
    waited = gc("inbox", "wait", "--timeout", "0.3", env={"GC_AGENT": "dog"})
    assert waited.returncode == 10, waited.stdout + waited.stderr  # timed out: nothing came
    assert waited.stderr.startswith("gc: warning: item 2 of dog set aside in delivery.bad.jsonl")


def test_a_standing_broadcast_with_a_time_no_stamp_shows_is_set_aside_at_a_drain(
    project: Path, gc: GcRunner
) -> None:
    dog = {"GC_AGENT": "dog"}
    assert gc("inbox", "push", "--to", "dog", "fine").returncode == 0
    store_raw_item(project, "@all", "forever", 1.0e9, 1e308, state="standing")
    drained = gc("inbox", "drain", "--session", "s1", env=dog)
    assert drained.returncode == 0, drained.stderr
    assert "fine" in drained.stdout and "forever" not in drained.stdout
    assert "item 2 of @all set aside in delivery.bad.jsonl: expires_at" in drained.stderr
    listed = gc("--json", "inbox", "list", "--all", env=dog)
    assert [i["content"] for i in json.loads(listed.stdout)["items"]] == ["fine"]
