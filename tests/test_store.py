"""The store through its Python API, checked against the real git CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from beads import Conflict, InvalidInput, NotFound, Store
from beads.records.codec import dump_bead, load_bead
from beads.records.ids import ID_RE, bead_path
from tests.conftest import GcRunner, git


def test_create_writes_a_commit_a_view_file_and_an_index_row(store: Store) -> None:
    bead = store.create(
        "task",
        "Write the docs",
        "line one\nline two\n",
        assignee="dog",
        labels=["docs"],
        priority=1,
        meta={"estimate": 3},
    )
    assert ID_RE.fullmatch(bead.id) and bead.id.startswith("gc-")
    assert bead.sender == "tester" and bead.status == "open"
    view_file = store.root / bead_path("task", bead.id)
    assert load_bead(view_file.read_bytes()) == bead
    assert (
        git("show", f"HEAD:{bead_path('task', bead.id)}", cwd=store.root) == view_file.read_text()
    )
    assert store.get(bead.id) == bead
    assert store.list(assignee="dog") == [bead]


def test_every_write_is_one_commit_by_the_acting_agent(store: Store) -> None:
    bead = store.create("task", "One")
    store.update(bead.id, title="Two")
    store.close_bead(bead.id, "done")
    store.reopen(bead.id)
    log = git("log", "--format=%an <%ae>|%s", cwd=store.root).splitlines()
    assert log == [
        f"tester <tester@gc-beads>|bead reopen {bead.id}",
        f"tester <tester@gc-beads>|bead close {bead.id}: done",
        f"tester <tester@gc-beads>|bead update {bead.id}: title",
        f'tester <tester@gc-beads>|bead create {bead.id}: task "One"',
        "tester <tester@gc-beads>|init: gc-beads store",
    ]
    git("fsck", "--strict", cwd=store.root)
    assert git("config", "core.bare", cwd=store.root).strip() == "true"


def test_update_labels_meta_and_fields(store: Store) -> None:
    bead = store.create("task", "T", labels=["a", "b"], meta={"keep": 1, "drop": 2})
    changed = store.update(
        bead.id,
        add_labels=["c"],
        remove_labels=["a"],
        meta={"new": "x"},
        unset_meta=["drop"],
        assignee="cat",
        priority=0,
    )
    assert changed.labels == ["b", "c"]
    assert changed.meta == {"keep": 1, "new": "x"}
    assert (changed.assignee, changed.priority) == ("cat", 0)
    assert store.list(label="c") == [changed]
    assert store.list(label="a") == []
    head = store.git.head()
    assert store.update(bead.id, priority=0) == changed  # no change, no commit
    assert store.git.head() == head


def test_close_and_reopen(store: Store) -> None:
    bead = store.create("task", "T")
    closed = store.close_bead(bead.id, "finished")
    assert (closed.status, closed.close_reason) == ("closed", "finished") and closed.closed_at
    with pytest.raises(InvalidInput, match="already closed"):
        store.close_bead(bead.id)
    assert store.list(status="open") == [] and store.list(status="closed") == [closed]
    opened = store.reopen(bead.id)
    assert (opened.status, opened.closed_at, opened.close_reason) == ("open", None, None)


def test_a_guarded_bead_closes_only_with_force(store: Store) -> None:
    gate = store.create("gate", "Wait", meta={"guarded": True})
    head = store.git.head()
    with pytest.raises(InvalidInput, match="guarded"):
        store.close_bead(gate.id)
    assert store.git.head() == head
    assert store.close_bead(gate.id, force=True).status == "closed"


def test_batch_is_one_commit_and_nothing_on_error(store: Store) -> None:
    before = len(store.log())
    with store.batch() as batch:
        first = batch.create("task", "A")
        batch.create("task", "B", parent=first.id)
        batch.update(first.id, title="A2")
    assert len(store.log()) == before + 1
    assert store.log()[0].message.startswith("batch: 3 changes")
    assert store.get(first.id).title == "A2"
    head = store.git.head()
    with pytest.raises(InvalidInput):
        with store.batch() as batch:
            batch.create("task", "C")
            batch.create("task", "D", priority=9)
    assert store.git.head() == head
    assert len(store.list()) == 2


def test_prefixes_resolve_and_ambiguity_lists_candidates(store: Store) -> None:
    with store.batch() as batch:
        beads = [batch.create("task", f"t{i}") for i in range(40)]
    target = beads[0]
    assert store.get(target.id[:-1]).id == target.id
    assert store.get(target.id.split("-")[1]).id == target.id  # without the store prefix
    with pytest.raises(InvalidInput, match="ambiguous") as raised:
        store.get("gc-")
    assert len(raised.value.details["candidates"]) == 10
    with pytest.raises(NotFound):
        store.get("gc-zzzzzzzz")
    for bad in ("../etc/passwd", "gc-x/../y", "", "a b"):
        with pytest.raises(InvalidInput):
            store.get(bad)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"type": "Bad Type"}, "invalid type"),
        ({"assignee": "no spaces"}, "invalid assignee"),
        ({"assignee": "all"}, "reserved"),
        ({"priority": 5}, "priority"),
        ({"title": "two\nlines"}, "single line"),
        ({"title": "   "}, "empty"),
        ({"body": "nul\x00byte"}, "NUL"),
        ({"body": "\udcff"}, "UTF-8"),
        ({"labels": ["has space"]}, "invalid label"),
        ({"meta": {"bad key": 1}}, "meta key"),
        ({"meta": {"x": float("nan")}}, "finite"),
    ],
)
def test_invalid_beads_are_refused_and_nothing_changes(
    store: Store, fields: dict, message: str
) -> None:
    head = store.git.head()
    args = {"type": "task", "title": "ok", **fields}
    with pytest.raises(InvalidInput, match=message):
        store.create(args.pop("type"), args.pop("title"), **args)
    assert store.git.head() == head
    assert store.list(status=None) == []


def test_body_limit_comes_from_config(tmp_path: Path) -> None:
    from beads.settings.config import default_config

    config = default_config()
    config["store"]["max_body_bytes"] = 100
    store, _ = Store.init(tmp_path, config=config)
    store.create("task", "small", "x" * 100)
    with pytest.raises(InvalidInput, match="limit is 100"):
        store.create("task", "big", "x" * 101)
    store.close()


def test_list_filters_order_and_limit(store: Store) -> None:
    with store.batch() as batch:
        a = batch.create("task", "a", assignee="dog", priority=3)
        b = batch.create("message", "b", assignee="dog", priority=0)
        c = batch.create("task", "c", assignee="cat", labels=["x"], parent=a.id)
    assert [x.id for x in store.list(assignee="dog")] == sorted(
        [a.id, b.id], key=lambda i: (store.get(i).created_at, i)
    )
    assert [x.id for x in store.list(assignee="dog", order="priority")] == [b.id, a.id]
    assert [x.id for x in store.list(type="task", label="x")] == [c.id]
    assert [x.id for x in store.list(parent=a.id)] == [c.id]
    assert len(store.list(limit=2)) == 2
    assert store.list(sender="nobody") == []
    assert [x.id for x in store.list(since=c.created_at)] == [c.id]
    assert store.list(until=a.created_at) == []


def test_log_of_one_bead(store: Store) -> None:
    bead = store.create("task", "T")
    store.create("task", "other")
    store.update(bead.id, title="T2")
    assert [e.message for e in store.log(bead.id)] == [
        f"bead update {bead.id}: title",
        f'bead create {bead.id}: task "T"',
    ]
    assert len(store.log(limit=2)) == 2


def test_index_and_view_catch_up_with_a_push_from_a_git_clone(store: Store, tmp_path: Path) -> None:
    bead = store.create("task", "Before", assignee="dog")
    gone = store.create("task", "Will be deleted")
    clone = tmp_path / "clone"
    git("clone", "-q", str(store.root / ".git"), str(clone), cwd=tmp_path)
    path = bead_path("task", bead.id)
    changed = load_bead((clone / path).read_bytes()).with_changes(title="Edited in a clone")
    (clone / path).write_bytes(dump_bead(changed))
    git("rm", "-q", bead_path("task", gone.id), cwd=clone)
    git("commit", "-qam", "edit in a clone", cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)

    assert store.get(bead.id).title == "Edited in a clone"  # this open Store catches up
    reopened = Store.open(store.root)
    assert [b.title for b in reopened.list()] == ["Edited in a clone"]
    assert load_bead((store.root / path).read_bytes()).title == "Edited in a clone"
    assert not (store.root / bead_path("task", gone.id)).exists()
    reopened.close()


def test_a_pushed_bead_that_does_not_parse_is_reported_and_the_rest_stay_readable(
    store: Store, tmp_path: Path
) -> None:
    from beads import doctor

    good = store.create("task", "Good")
    clone = tmp_path / "clone"
    git("clone", "-q", str(store.root / ".git"), str(clone), cwd=tmp_path)
    bad_path = bead_path("task", "gc-brokenxx")
    (clone / bad_path).parent.mkdir(parents=True, exist_ok=True)
    (clone / bad_path).write_text("id: gc-brokenxx\ntitle: [unclosed\n")
    git("add", bad_path, cwd=clone)
    git("commit", "-qm", "a broken bead", cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)

    assert [b.id for b in store.list()] == [good.id]
    report = doctor(store)
    assert [(p.kind, p.path) for p in report.problems] == [("unparsable", bad_path)]


def test_a_pushed_config_that_does_not_parse_is_no_longer_reported_once_set_again(
    store: Store, tmp_path: Path
) -> None:
    from beads import doctor

    clone = tmp_path / "clone"
    git("clone", "-q", str(store.root / ".git"), str(clone), cwd=tmp_path)
    (clone / "config.yaml").write_text("{{{ : [\n")
    git("commit", "-qam", "a broken config", cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)
    assert [(p.kind, p.path) for p in doctor(store).problems] == [("unparsable", "config.yaml")]

    store.set_setting("store.view", "full")  # writes a whole, valid config.yaml
    assert "view: full" in git("show", "main:config.yaml", cwd=store.root / ".git")
    assert doctor(store).problems == []


def test_doctor_says_how_to_write_a_config_that_does_not_parse_again(
    gc_store: GcRunner, tmp_path: Path
) -> None:
    gc_store.json("config", "set", "mail.strict_recipients", "true")
    clone = tmp_path / "clone"
    git("clone", "-q", str(gc_store.cwd / ".beads" / ".git"), str(clone), cwd=tmp_path)
    (clone / "config.yaml").write_text("{{{ : [\n")
    git("commit", "-qam", "a broken config", cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)
    said = gc_store("doctor")
    assert said.returncode == 50
    assert "gc config set KEY VALUE writes it again" in said.stdout, said.stdout
    # Doing what it says: the file is whole again, with the settings that were in force.
    assert gc_store("config", "set", "store.view", "full").returncode == 0
    assert gc_store("doctor").returncode == 0
    assert gc_store.json("config", "get", "mail.strict_recipients")["value"] is True


def test_the_index_rebuilds_from_git_alone(store: Store) -> None:
    from beads import doctor

    made = [store.create("task", f"t{i}", assignee="dog") for i in range(5)]
    store.close()
    (store.root / ".runtime" / "index.sqlite3").unlink()
    for extra in ("index.sqlite3-wal", "index.sqlite3-shm"):
        (store.root / ".runtime" / extra).unlink(missing_ok=True)
    again = Store.open(store.root)
    assert {b.id for b in again.list(assignee="dog")} == {b.id for b in made}
    report = doctor(again, rebuild_index=True, compact=True)
    assert report.ok and report.beads == 5
    assert git("count-objects", "-v", cwd=store.root).splitlines()[0] == "count: 0"
    again.close()


def test_a_store_of_a_newer_format_is_refused(store: Store, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git("clone", "-q", str(store.root / ".git"), str(clone), cwd=tmp_path)
    config = (clone / "config.yaml").read_text().replace("format: 1", "format: 2")
    (clone / "config.yaml").write_text(config)
    git("commit", "-qam", "from the future", cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)
    store.close()
    with pytest.raises(InvalidInput, match="newer than this gc-beads"):
        Store.open(store.root)


def test_an_invalid_config_naming_newer_is_reported_not_taken_for_a_newer_format(
    store: Store, tmp_path: Path
) -> None:
    # Only a newer format refuses the store, by its error type: not any message that
    # happens to hold the word (here the bad prefix it quotes).
    clone = tmp_path / "clone"
    git("clone", "-q", str(store.root / ".git"), str(clone), cwd=tmp_path)
    config = (clone / "config.yaml").read_text().replace("prefix: gc", "prefix: newer-x")
    (clone / "config.yaml").write_text(config)
    git("commit", "-qam", "a bad prefix", cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)
    store.close()
    with Store.open(store.root) as again:
        assert again.prefix == "gc"  # the last valid settings stay
        assert "store.prefix must be a lowercase letter" in again.index.invalid()["config.yaml"]


def test_a_write_conflicts_when_the_branch_moves_underneath(store: Store) -> None:
    store.create("task", "T")
    with pytest.raises(Conflict):
        with store.batch() as batch:
            batch.create("task", "U")
            outside = store.git.build_commit(store.git.head(), {"x.txt": b"x"}, "outside", "other")
            store.git.store_objects(outside[1])
            store.git.swap_head(store.git.head(), outside[0].id, "commit: outside", "other")
    assert [b.title for b in store.list()] == ["T"]


def test_meta_filters_count_and_known_agents(store: Store) -> None:
    with store.batch() as batch:
        unread = batch.create("message", "a", assignee="dog", meta={"read": False, "k": "x"})
        batch.create("message", "b", assignee="dog", meta={"read": True}, cc=["cat"])
        batch.create("message", "c", assignee="dog")
    assert store.list(assignee="dog", meta={"read": False}) == [unread]
    assert store.count(assignee="dog", meta={"read": True}) == 1
    assert store.count(assignee="dog", meta={"k": None}) == 2
    assert store.count(type="message") == 3
    assert store.known_agents() == ["cat", "dog", "tester"]
    with pytest.raises(InvalidInput):
        store.list(meta={"bad key": 1})


def test_a_damaged_index_is_rebuilt_from_git(store: Store) -> None:
    made = store.create("task", "survives")
    root = store.root
    store.close()
    index = root / ".runtime" / "index.sqlite3"
    for extra in ("-wal", "-shm"):
        Path(f"{index}{extra}").unlink(missing_ok=True)
    index.write_bytes(b"not a database at all" * 200)
    with Store.open(root) as reopened:
        assert [b.id for b in reopened.list(type="task")] == [made.id]


def test_close_with_meta_is_update_then_close_in_one_change(store: Store) -> None:
    gate = store.create("gate", "Wait", meta={"guarded": True, "state": "open"})
    with store.batch() as batch:
        closed = batch.close_bead(gate.id, "done", force=True, meta={"state": "resolved"})
        assert batch.lines == [f"bead close {gate.id}: done"]
    assert store.get(gate.id) == closed
    assert closed.meta == {"guarded": True, "state": "resolved"}
    assert closed.status == "closed" and closed.updated_at == closed.closed_at
    task = store.create("task", "T")
    with pytest.raises(InvalidInput, match="meta key"):
        with store.batch() as batch:
            batch.close_bead(task.id, meta={"bad key": 1})
    assert store.get(task.id).status == "open"


def test_get_many_and_prefetch_read_whole_ids_in_one_query(store: Store) -> None:
    a, b = store.create("task", "A"), store.create("task", "B")
    assert store.get_many([a.id, b.id, "gc-nothere", a.id]) == {a.id: a, b.id: b}
    assert store.get_many([]) == {}
    with store.batch() as batch:
        batch.prefetch([a.id, b.id, "gc-nothere"])
        assert batch.get(a.id) == a
        updated = batch.update(a.id, title="A2")
        assert batch.get(a.id) == updated  # the batch's own change wins over the read-ahead
        assert batch.get(b.id[:-1]) == b  # prefixes still resolve through the index
        with pytest.raises(NotFound):
            batch.get("gc-nothere")
    assert store.get(a.id).title == "A2"


def test_a_view_write_remakes_directories_that_went_away(store: Store) -> None:
    import shutil

    bead = store.create("task", "T")
    shard = (store.root / bead_path("task", bead.id)).parent
    shutil.rmtree(store.root / "tasks")
    shutil.rmtree(store.runtime / "tmp")
    store.update(bead.id, title="T2")
    assert load_bead((shard / f"{bead.id}.yaml").read_bytes()).title == "T2"
    assert not list((store.runtime / "tmp").iterdir())


def test_neither_reading_nor_writing_imports_filelock(store: Store) -> None:
    """Importing filelock costs a command tens of ms: the store's write lock is its own."""
    store.create(title="one", type="task")
    code = (
        "import sys\nfrom beads.store import Store\n"
        f"s = Store.open({str(store.root)!r})\n"
        "s.list(); s.get(s.list()[0].id)\n"
        "read = 'filelock' in sys.modules\n"
        "s.create(title='two', type='task')\n"
        "print(read, 'filelock' in sys.modules, len(s.list()))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "2"]


def test_a_filelock_holder_of_the_write_lock_keeps_writers_out_until_it_lets_go(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store's lock is filelock's (a flock on the same file): a holder of either kind, such
    # as an older gc, excludes the other. A writer waits, then reports a conflict.
    import filelock

    import beads.store

    monkeypatch.setattr(beads.store, "LOCK_TIMEOUT", 0.3)
    held = filelock.FileLock(str(store.runtime / "locks" / "write.lock"))
    with held:
        with pytest.raises(Conflict, match="locked by another writer"):
            store.create(title="blocked", type="task")
    assert store.list() == []
    store.create(title="after", type="task")
    with store.locked(), store.locked():  # re-entrant, and a filelock waits for it in turn
        with pytest.raises(filelock.Timeout):
            held.acquire(timeout=0.1)
    with held:  # released by the last of the nested holds
        pass
    assert [b.title for b in store.list()] == ["after"]


def test_a_thread_waits_while_another_thread_holds_the_stores_write_lock(store: Store) -> None:
    # One Store shared by threads (a server's): its write lock excludes them as it excludes
    # processes; only the holding thread re-enters.
    import threading

    entered, let_go, order = threading.Event(), threading.Event(), []

    def first() -> None:
        with store.locked(), store.locked():
            order.append("first in")
            entered.set()
            let_go.wait(30)
            order.append("first out")

    def second() -> None:
        with store.locked():
            order.append("second in")

    holder = threading.Thread(target=first)
    holder.start()
    assert entered.wait(30)
    waiter = threading.Thread(target=second)
    waiter.start()
    waiter.join(0.5)  # room to enter wrongly before the holder lets go
    let_go.set()
    holder.join(30)
    waiter.join(30)
    assert order == ["first in", "first out", "second in"]


def test_the_package_names_its_public_surface_even_after_its_modules_load() -> None:
    """`from beads import doctor` is the function whatever was imported before (a module of
    the same name once shadowed it)."""
    import beads
    import beads.health.checkup  # noqa: F401  (what `gc doctor` and the tests load)

    for name in beads.__all__:
        assert callable(getattr(beads, name)), name
    from beads import doctor

    assert doctor.__module__ == "beads.health.checkup"


def test_a_store_opened_without_the_program_keeps_sections_it_does_not_know(
    tmp_path: Path,
) -> None:
    # A Python user of `beads` alone: no layer above has registered its settings.
    code = f"""
import sys
from pathlib import Path
from beads.store import Store
root = Path({str(tmp_path)!r})
store = Store.init(root, agent="tester", config={{
    "format": 1, "store": {{"prefix": "gc"}},
    "mail": {{"provider": "exec:/bin/x", "custom": [1]}}, "robots": "any text"}})[0]
bead = store.create(type="task", title="works")
print(store.get(bead.id).title, store.config["mail"], store.config["robots"])
print(sorted(m for m in sys.modules if m.split(".")[0] in ("mail", "inbox", "gates")))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "works {'provider': 'exec:/bin/x', 'custom': [1]} any text"
    assert lines[1] == "[]"


def test_a_registered_section_is_a_new_stores_default_and_its_settings_are_checked() -> None:
    from beads.settings import config
    from beads.settings.registry import DEFAULTS, FREE_FORM, SETTINGS, count, register_section

    saved = dict(DEFAULTS), dict(SETTINGS), list(FREE_FORM)
    try:
        register_section("robots", {"arms": 2}, {"robots.arms": count, "robots.tools.*": count})
        assert config.default_config()["robots"] == {"arms": 2}
        assert config.with_setting(config.default_config(), "robots.arms", 4)["robots"] == {
            "arms": 4
        }
        with pytest.raises(InvalidInput, match="robots.arms is 0: must be an integer"):
            config.with_setting(config.default_config(), "robots.arms", 0)
        with pytest.raises(InvalidInput, match="unknown setting robots.legs"):
            config.with_setting(config.default_config(), "robots.legs", 1)
        bad = {**config.default_config(), "robots": {"arms": "many", "tools": {"saw": 0}}}
        assert [key for key, _ in config.config_problems(bad)] == [
            "robots.arms",
            "robots.tools.saw",
        ]
        with pytest.raises(ValueError, match="not in section"):
            register_section("robots", {}, {"gates.arms": count})
    finally:
        DEFAULTS.clear()
        DEFAULTS.update(saved[0])
        SETTINGS.clear()
        SETTINGS.update(saved[1])
        FREE_FORM[:] = saved[2]


# A program of the library's own, not `gc`: it imports only what it uses, in its own order.
LIBRARY_USER = """
import importlib, sys
from beads.store import Store
for name in sys.argv[2:]:
    importlib.import_module(name)
store = Store.init(sys.argv[1], agent="tester")[0]
if "gates.session_gates" in sys.argv:
    from gates import session_gates
    session_gates.register(store, "tests-pass", mode="strict")
if "mail" in sys.argv:
    store.set_setting("mail.strict_recipients", True)
print(store.root.joinpath("config.yaml").read_text())
"""


@pytest.mark.parametrize(
    "imports", [["gates.session_gates", "mail"], ["mail", "gates.session_gates"], ["inbox"]]
)
def test_a_library_user_sets_the_settings_of_the_layers_it_imports(
    tmp_path: Path, imports: list[str]
) -> None:
    # Each layer's settings are known once the module using them is imported (no need for
    # the program's gc_beads.settings), and a new config.yaml lists its sections in one order
    # whatever was imported first.
    done = subprocess.run([sys.executable, "-c", LIBRARY_USER, str(tmp_path), *imports],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    sections = [line.split(":")[0] for line in done.stdout.splitlines() if line[:1].isalpha()]
    order = ["format", "store", "agents", "rigs", "mail", "delivery", "hooks", "gates"]
    assert sections == [name for name in order if name in sections]
    assert {"delivery", "hooks"} <= set(sections)
    if "mail" in imports:
        assert "strict_recipients: true" in done.stdout and "tests-pass" in done.stdout


def test_store_sync_still_refreshes_the_index_and_warns_it_is_now_refresh(store: Store) -> None:
    bead = store.create("task", "Made before the index was lost")
    store.index.drop_file()
    with store.locked(), pytest.warns(DeprecationWarning, match="use Store.refresh"):
        store.sync()
    assert store.index.get(bead.id) == bead


def test_a_file_named_in_no_utf8_committed_by_plain_git_leaves_reading_commands_working(
    gc_store: GcRunner,
) -> None:
    # Every command refreshed the index through a diff that decoded each name as UTF-8:
    # one file committed by plain git under a name that is not (the gate refuses such a
    # name from a remote, not from git run in the store) made each fail, "internal error".
    sent = gc_store.json("mail", "send", "mayor", "-s", "Hi", "-m", "x", env={"GC_AGENT": "human"})
    message = sent["message"]["id"]
    git_dir = gc_store.cwd / ".beads" / ".git"

    def run(*args: str, given: bytes = b"") -> bytes:
        done = subprocess.run(
            ["git", "-C", str(git_dir), *args], input=given, capture_output=True, check=True
        )
        return done.stdout.strip()

    blob = run("hash-object", "-w", "--stdin", given=b"odd\n")
    listing = run("cat-file", "-p", "main^{tree}") + b"\n100644 blob " + blob + b"\t\xff.yaml\n"
    tree = run("mktree", given=listing).decode()
    made = run("-c", "user.name=t", "-c", "user.email=t@t", "commit-tree", tree, "-p", "main",
               "-m", "by hand").decode()  # fmt: skip
    run("update-ref", "refs/heads/main", made)
    mayor = {"GC_AGENT": "mayor"}
    listed = gc_store("mail", "inbox", "--all", env=mayor)
    assert listed.returncode == 0, listed.stderr
    assert message in listed.stdout
    read = gc_store("mail", "read", message, env=mayor)
    assert read.returncode == 0 and read.stdout.startswith(f"ID:       {message}\n"), read
