"""The index is derived data: writes start from git, a damaged index is rebuilt, a full disk or a
read-only store is one clear error, and a write whose commit is in is never reported failed."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from beads import doctor
from beads.errors import InvalidInput, NotFound
from beads.index.index import Index, IndexDamaged
from beads.index.query import Query
from beads.index.reader import IndexReader
from beads.records.codec import dump_bead
from beads.records.ids import bead_path, new_id
from beads.records.record import Bead
from beads.store import Store
from beads.view.view import View
from tests.conftest import GcRunner, copy_store, gc_program, git


def index_file(root: Path) -> Path:
    return root / ".runtime" / "index.sqlite3"


def alter_row(root: Path, bead_id: str, **fields: object) -> None:
    """Change a row as an outside writer could: its JSON and its columns, not its blob id."""
    with sqlite3.connect(index_file(root)) as db:
        (data,) = db.execute("SELECT data FROM beads WHERE id = ?", (bead_id,)).fetchone()
        record = {**json.loads(data), **fields}
        db.execute("UPDATE beads SET data = ? WHERE id = ?", (json.dumps(record), bead_id))
        for column in ("assignee", "status"):
            if column in fields:
                db.execute(f"UPDATE beads SET {column} = ? WHERE id = ?", (fields[column], bead_id))
    db.close()


def head_file(root: Path, bead: Bead) -> str:
    return git("show", f"HEAD:{bead_path(bead.type, bead.id)}", cwd=root)


def cli_bead(cwd: Path, title: str) -> dict[str, object]:
    """A new store in `cwd` holding one task made with `gc bead create`."""
    gc = GcRunner(cwd)
    assert gc("init").returncode == 0
    return gc.json("bead", "create", "--type", "task", "--title", title)["bead"]


def commits(root: Path) -> int:
    return int(git("rev-list", "--count", "HEAD", cwd=root))


# -- writes start from git ----------------------------------------------------------------


def test_an_update_commits_what_git_holds_not_an_altered_index_row(tmp_path: Path) -> None:
    gc = GcRunner(tmp_path)
    made = cli_bead(tmp_path, "Real title")
    root = tmp_path / ".beads"
    alter_row(root, made["id"], title="FORGED", assignee="mallory")

    result = gc("bead", "update", made["id"], "--priority", "1")

    assert result.returncode == 0, result.stderr
    committed = git("show", "HEAD", cwd=root)
    assert "FORGED" not in committed and "mallory" not in committed
    text = head_file(root, Bead.from_dict(made))
    assert "title: Real title" in text and "assignee: null" in text and "priority: 1" in text
    shown = gc.json("bead", "show", made["id"])["bead"]  # the row was repaired from git
    assert (shown["title"], shown["assignee"], shown["priority"]) == ("Real title", None, 1)


def test_prefetch_reads_altered_rows_from_git_and_repairs_them(store: Store) -> None:
    kept = store.create("gate", "kept", meta={"state": "waiting"})
    other = store.create("gate", "other")
    store.close()
    alter_row(store.root, kept.id, status="closed", meta={"state": "resolved"})
    with Store.open(store.root) as reopened:
        assert reopened.get(kept.id).status == "closed"  # reads are served by the index
        with reopened.batch() as batch:
            batch.prefetch([kept.id, other.id])
            assert batch.get(kept.id) == kept
            assert batch.get(other.id) == other
            batch.close_bead(kept.id, "done")
        closed = reopened.get(kept.id)
        assert closed.meta == {"state": "waiting"} and closed.close_reason == "done"
        assert doctor(reopened).ok


def test_a_row_the_index_lost_is_updated_from_git_and_restored(store: Store) -> None:
    made = store.create("task", "still in git", labels=["x"])
    with sqlite3.connect(index_file(store.root)) as db:
        db.execute("DELETE FROM beads WHERE id = ?", (made.id,))
    db.close()
    with pytest.raises(NotFound):
        store.get(made.id)
    updated = store.update(made.id, priority=0)
    assert (updated.title, updated.labels, updated.priority) == ("still in git", ["x"], 0)
    assert store.get(made.id) == updated


def test_a_row_git_never_held_is_never_written(tmp_path: Path) -> None:
    gc = GcRunner(tmp_path)
    made = cli_bead(tmp_path, "real")
    root = tmp_path / ".beads"
    invented = made["id"][:-4] + "zzzz"
    with sqlite3.connect(index_file(root)) as db:
        db.execute(
            "INSERT INTO beads SELECT ?, path || 'x', blob, type, status, assignee, sender, "
            "thread, parent, priority, created_at, updated_at, "
            "json_set(data, '$.id', ?) FROM beads WHERE id = ?",
            (invented, invented, made["id"]),
        )
    db.close()
    before = commits(root)

    result = gc("bead", "update", invented, "--priority", "1")

    assert result.returncode == 40, result.stderr
    assert commits(root) == before
    assert gc("bead", "show", invented).returncode == 40  # the invented row is gone


def test_insert_refuses_an_id_git_holds_even_when_the_index_lost_it(store: Store) -> None:
    made = store.create("task", "original")
    with sqlite3.connect(index_file(store.root)) as db:
        db.execute("DELETE FROM beads WHERE id = ?", (made.id,))
    db.close()
    with pytest.raises(InvalidInput, match="already exists"):
        with store.batch() as batch:
            batch.insert(made.with_changes(type="message", title="imported over it"))
    assert "original" in head_file(store.root, made)


def test_doctor_compares_rows_with_git_not_only_blob_ids(store: Store) -> None:
    made = store.create("task", "true")
    store.close()
    alter_row(store.root, made.id, title="false")
    with Store.open(store.root) as reopened:
        report = doctor(reopened)
        assert [p.kind for p in report.problems] == ["index"]
        assert report.problems[0].path == bead_path("task", made.id)
        assert doctor(reopened, rebuild_index=True).ok
        assert reopened.get(made.id).title == "true"


def test_a_bead_file_written_by_another_tool_is_used_as_git_holds_it(store: Store) -> None:
    made = store.create("task", "hand written")
    path = bead_path("task", made.id)
    other_layout = b"# written by hand\n" + dump_bead(made).replace(b"title: ", b"title:   ")
    head = store.git.head()
    commit, objects = store.git.build_commit(head, {path: other_layout}, "edit", "someone")
    store.git.store_objects(objects)
    store.git.swap_head(head, commit.id, "edit", "someone")

    assert store.get(made.id) == made  # same bead, another layout
    assert doctor(store).ok  # not reported as an index that differs from git
    updated = store.update(made.id, priority=4)
    assert updated == made.with_changes(priority=4, updated_at=updated.updated_at)
    assert doctor(store).ok


# -- a damaged index ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def many_beads_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store of 100 tasks, made once for the module: its `.beads` and the tasks' ids. Their
    rows fill some twenty pages of the index's beads table, one of which the tests damage."""
    root = tmp_path_factory.mktemp("many-beads")
    store, _ = Store.init(root, agent="tester")
    with store.batch() as batch:
        ids = [
            batch.create("task", f"bead {n}", "body " * 40, assignee="dog").id for n in range(100)
        ]
    store.close()  # the last connection checkpoints the WAL into the file
    return root / ".beads", ids


@pytest.fixture
def many_beads(tmp_path: Path, many_beads_template: tuple[Path, list[str]]) -> list[str]:
    """A copy of the store of 100 tasks in `tmp_path`; the tasks' ids."""
    template, ids = many_beads_template
    copy_store(template, tmp_path / ".beads")
    return ids


def damage_inner_page(root: Path) -> None:
    """Overwrite the header of a page of the beads table in the middle of the file."""
    path = index_file(root)
    assert not Path(f"{path}-wal").exists()
    with sqlite3.connect(path) as db:
        pages = [p for (p,) in db.execute("SELECT pageno FROM dbstat WHERE name = 'beads'")]
    db.close()
    page = pages[len(pages) // 2]
    assert page > 1
    with open(path, "r+b") as handle:
        handle.seek((page - 1) * 4096)
        handle.write(b"\xff" * 64)
    with sqlite3.connect(path) as db, pytest.raises(sqlite3.DatabaseError, match="malformed"):
        db.execute("SELECT count(*) FROM beads WHERE length(data) > 0").fetchone()
    db.close()


def test_a_damaged_page_found_by_a_list_is_rebuilt_from_git(
    tmp_path: Path, many_beads: list[str]
) -> None:
    ids = many_beads
    damage_inner_page(tmp_path / ".beads")
    result = GcRunner(tmp_path).json("bead", "list", "--limit", "1000")
    assert result["ok"], result
    assert sorted(b["id"] for b in result["beads"]) == sorted(ids)


@pytest.mark.parametrize("options", [(), ("--rebuild-index",)])
def test_doctor_recovers_a_damaged_page(
    tmp_path: Path, many_beads: list[str], options: tuple[str, ...]
) -> None:
    damage_inner_page(tmp_path / ".beads")
    result = GcRunner(tmp_path)("doctor", *options)
    assert result.returncode == 0, result.stderr
    assert "malformed" not in result.stdout + result.stderr


def test_rebuild_index_starts_from_a_new_file(store: Store) -> None:
    store.create("task", "one")
    store.index.db.execute("CREATE TABLE left_behind(x)")  # stands for anything in the old file
    doctor(store, rebuild_index=True)
    tables = store.index.db.execute("SELECT name FROM sqlite_master WHERE name = 'left_behind'")
    assert tables.fetchall() == []
    assert [b.title for b in store.list()] == ["one"]


def test_the_hook_reader_recovers_a_damaged_page(tmp_path: Path, many_beads: list[str]) -> None:
    ids = many_beads
    damage_inner_page(tmp_path / ".beads")
    with IndexReader(tmp_path / ".beads") as reader:
        rows = reader.index.query(Query(assignee="dog", limit=None))
        assert sorted(b.id for b in rows) == sorted(ids)


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE beads SET data = '{\"nonsense\": 1}'",
        "UPDATE beads SET data = '[1]'",
        "UPDATE meta SET value = '{' WHERE key = 'config'",
    ],
)
def test_a_row_that_does_not_decode_is_rebuilt(store: Store, damage: str) -> None:
    made = store.create("task", "fine")
    store.close()
    with sqlite3.connect(index_file(store.root)) as db:
        db.execute(damage)
    db.close()
    with Store.open(store.root) as reopened:
        assert reopened.list() == [made]
        assert reopened.prefix == "gc"


def test_a_damaged_index_without_a_store_says_so(tmp_path: Path, many_beads: list[str]) -> None:
    damage_inner_page(tmp_path / ".beads")
    index = Index(index_file(tmp_path / ".beads"))
    with pytest.raises(IndexDamaged, match="damaged.*gc doctor --rebuild-index"):
        index.query(Query())
    index.close()


# -- a full disk ----------------------------------------------------------------------------


def test_a_full_index_reports_its_own_error_not_cannot_rollback(store: Store) -> None:
    db = store.index.db
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
    model = store.create("task", "x " * 200)
    beads = [(model.with_changes(id=new_id("gc")), f"p{n}", "b") for n in range(200)]
    with pytest.raises(sqlite3.OperationalError, match="full"):
        store.index.apply(head=store.index.head() or b"", upserts=beads)
    assert not db.in_transaction


def test_derived_data_failing_after_the_commit_does_not_fail_the_write(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = store.index.db
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")

    def full(path: str, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.view, "write", full)
    made = store.create("task", "committed", "body " * 2000)
    assert "committed" in head_file(store.root, made)
    assert store.index.head() != store.git.head()  # the index could not take it: behind
    store.close()
    with Store.open(store.root) as reopened:  # the next open catches the derived data up
        assert reopened.get(made.id) == made
        assert doctor(reopened).ok


def test_reads_work_while_only_the_view_cannot_catch_up(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: object, path: str, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(View, "write", full)
    made = store.create("task", "committed")  # its view file could not be written
    store.close()
    with Store.open(store.root) as reopened:  # the view stays behind; the index is current
        assert reopened.list() == [made]
        with pytest.raises(OSError):  # a write still needs the view at HEAD first
            reopened.create("task", "refused")
    monkeypatch.undo()
    with Store.open(store.root) as reopened:
        assert doctor(reopened).ok


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


def test_a_full_disk_is_one_line_and_a_committed_send_is_never_a_failure(
    small_disk: Path,
) -> None:
    gc = GcRunner(small_disk)
    assert gc("init").returncode == 0
    root = small_disk / ".beads"
    free = os.statvfs(small_disk)
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * max(0, free.f_bavail * free.f_frsize - 160_000))
    sent = failed = 0
    for n in range(10):
        before = commits(root)
        body = "hello" if n % 2 else "x" * 3000  # fails writing objects, or the index
        result = gc("mail", "send", "dog", "-s", f"message {n}", "-m", body)
        committed = commits(root) - before
        assert committed == (1 if result.returncode == 0 else 0), result.stderr
        if result.returncode == 0:
            sent += 1
        else:
            failed += 1
            assert result.returncode == 50
            assert result.stderr.startswith("gc: no space left on device")
            assert result.stderr.count("\n") == 1, result.stderr  # no "Exception ignored"
    assert sent and failed
    filler.unlink()
    inbox = gc.json("mail", "inbox", "dog")
    assert len(inbox["messages"]) == sent  # nothing lost, nothing twice
    assert gc("doctor").returncode == 0


def test_a_disk_full_to_the_last_block_is_said_to_be_full(small_disk: Path) -> None:
    gc = GcRunner(small_disk)
    assert gc("init").returncode == 0
    assert gc("bead", "list").returncode == 0  # the index made
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as fill, contextlib.suppress(OSError):
        while True:  # to the last block
            fill.write(b"\0" * 4096)
    for index in ("there", "to be made again"):
        if index != "there":
            (small_disk / ".beads" / ".runtime" / "index.sqlite3").unlink()
        for command in (["mail", "send", "dog", "-s", "s", "-m", "x"], ["bead", "list"]):
            result = gc(*command)
            assert result.returncode == 50, (index, result.stderr)
            assert result.stderr.startswith("gc: no space left on device"), (index, result.stderr)
            assert result.stderr.count("\n") == 1, result.stderr
    filler.unlink()
    assert gc("mail", "send", "dog", "-s", "s", "-m", "x").returncode == 0


def test_with_stdout_full_too_the_message_says_whether_the_write_was_made(
    small_disk: Path,
) -> None:
    # stdout on /dev/full while the store's disk fills up: a write that failed on the store's
    # disk says "no space left on device" (nothing made); one committed says its output was
    # lost and the change kept. Never the one for the other.
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    gc = GcRunner(small_disk)
    assert gc("init").returncode == 0
    assert gc("config", "set", "agents.dog", "{}").returncode == 0  # a known recipient
    root = small_disk / ".beads"
    free = os.statvfs(small_disk)
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * max(0, free.f_bavail * free.f_frsize - 160_000))
    said = set()
    for n in range(10):
        before = commits(root)
        with open("/dev/full", "w") as full:
            result = subprocess.run(
                [gc_program(), "mail", "send", "dog", "-s", f"m{n}", "-m", "x" * 3000],
                cwd=small_disk,
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                env=gc.env,
                timeout=60,
            )
        assert result.returncode == 50 and result.stderr.count("\n") == 1, result.stderr
        if commits(root) == before:
            assert result.stderr.startswith("gc: no space left on device"), result.stderr
            said.add("failed")
        else:
            assert "its output could not be written" in result.stderr, result.stderr
            said.add("made")
    assert said == {"failed", "made"}


# -- a read-only store ----------------------------------------------------------------------


def read_only_checks(
    cwd: Path, made: str, runner: tuple[str, ...] | None = None, options: tuple[str, ...] = ()
) -> None:
    """Reads work; writes exit 50 with one `store is read-only` line. `runner` (a command
    that runs another one, such as `setpriv`) runs `gc` in a process of its own under it;
    without one, `gc` runs as the `gc` fixture runs it."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        if runner is None:
            return GcRunner(cwd)(*options, *args)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
        command = [*runner, gc_program(), *options, *args]
        return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)

    listed = run("bead", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [b["id"] for b in json.loads(listed.stdout)["beads"]] == [made]
    assert run("bead", "show", made).returncode == 0
    for args in (("bead", "create", "--type", "task", "--title", "no"), ("bead", "close", made)):
        result = run(*args, "--json")
        assert result.returncode == 50, result.stderr
        assert json.loads(result.stdout)["error"]["code"] == "storage_error"
        assert result.stderr.startswith("gc: store is read-only"), result.stderr
        assert result.stderr.count("\n") == 1


def check_on_a_read_only_mount(tmp_path: Path, *, opened_to_others: bool = False) -> None:
    """`read_only_checks` on a read-only bind mount of a store with one bead; with
    `opened_to_others`, its owner gave everyone read access first (`chmod -R go+rX`)."""
    source, mount = tmp_path / "src", tmp_path / "ro"
    source.mkdir()
    mount.mkdir()
    made = cli_bead(source, "t")["id"]
    if opened_to_others:
        subprocess.run(["chmod", "-R", "go+rX", str(source / ".beads")], check=True)
    bound = subprocess.run(["mount", "--bind", str(source), str(mount)], capture_output=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here (needs root): {bound.stderr.decode()}")
    try:
        remount = ["mount", "-o", "remount,ro,bind", str(mount)]
        assert subprocess.run(remount, capture_output=True).returncode == 0
        read_only_checks(mount, made)
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_read_only_mount_reads_and_refuses_writes_clearly(tmp_path: Path) -> None:
    check_on_a_read_only_mount(tmp_path)


def test_a_read_only_mount_of_a_store_opened_to_others_still_reads(tmp_path: Path) -> None:
    # Its owner let others read it (`chmod -R go+rX`): the modes differ from what
    # `store.shared` asks, which gc brings back when it can; on a read-only mount it cannot,
    # and reads must still work.
    check_on_a_read_only_mount(tmp_path, opened_to_others=True)


def test_another_users_store_reads_and_refuses_writes_clearly() -> None:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run gc as an unprivileged user")
    home = Path(tempfile.mkdtemp(prefix="gc-other-user-"))  # 0700: let `nobody` in, not write
    try:
        home.chmod(0o755)
        made = cli_bead(home, "t")
        nobody = (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")
        # A store is private to its owner: another user is told so, in one line.
        private = subprocess.run(
            [*nobody, gc_program(), "bead", "list"], cwd=home, capture_output=True, text=True
        )
        assert private.returncode == 30, private.stderr
        assert "cannot be read by this user" in private.stderr
        assert private.stderr.count("\n") == 1
        # Opened to others by its owner, and named (a store found by walking up must be
        # the user's own): reads work, writes are refused clearly.
        subprocess.run(["chmod", "-R", "a+rX", str(home / ".beads")], check=True)
        read_only_checks(home, made["id"], nobody, ("--beads-dir", str(home / ".beads")))
    finally:
        shutil.rmtree(home)


# Rounds of each process (second store opened, a write, a read): a dropped lock fails the
# index's opening within the first few rounds beside the writer's.
ROUNDS = 30


def test_a_second_store_of_the_same_directory_keeps_the_first_ones_locks(tmp_path: Path) -> None:
    # Closing any descriptor of a file drops every POSIX lock the process holds on it: opening
    # a second Store once opened and closed the index file, silently releasing the first
    # Store's sqlite locks, and with a writer elsewhere the index then failed to open
    # ("disk I/O error").
    Store.init(tmp_path, agent="a")[0].close()
    first = Store.open(tmp_path, agent="a")
    first.list(type="task")
    # The writer says when it is about to open the store: this process's rounds start then,
    # beside the writer's opening and writes, not before the writer is there.
    code = (
        "import sys\nfrom beads.store import Store\nprint('opening', flush=True)\n"
        "s = Store.open(sys.argv[1], agent='w')\n"
        f"for i in range({ROUNDS}):\n    s.create('task', f'w{{i}}')\n"
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "opening\n"
        for n in range(ROUNDS):
            with Store.open(tmp_path, agent="b") as second:
                second.list(type="task")
            first.create("task", f"a{n}")
            first.list(type="task")
    finally:
        assert writer.wait(timeout=120) == 0
        first.close()
    with Store.open(tmp_path, agent="c") as store:
        assert store.count(type="task") == 2 * ROUNDS


def test_the_event_log_is_written_without_syncing_like_the_index(store: Store) -> None:
    store.create(type="task", title="numbered")
    db = store.index.event_log()
    assert db.execute("SELECT count(*) FROM ev.events").fetchone()[0] >= 1
    assert db.execute("PRAGMA main.synchronous").fetchone()[0] == 0
    assert db.execute("PRAGMA ev.synchronous").fetchone()[0] == 0  # OFF, as docs/events.md says
