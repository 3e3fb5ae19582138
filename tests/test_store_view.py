"""`store.view`: full, recent or off; which bead files the view holds after writes, after the
doctor's pruning and after switching; commands never need the view."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from beads import doctor
from beads.errors import InvalidInput
from beads.records.ids import bead_path, new_id
from beads.records.record import Bead
from beads.records.times import stamp_at
from beads.store import Store
from tests.conftest import GcRunner

DAY = 86400


def view_beads(store: Store) -> set[str]:
    """Ids of the beads whose files the view holds."""
    return {Path(p).stem for p in store.view.files() if p != "config.yaml"}


def old_closed(store: Store, days_ago: float, title: str = "old") -> Bead:
    """A closed bead last changed `days_ago` days ago (as a sync from a remote brings one)."""
    stamp = stamp_at(time.time() - days_ago * DAY)
    bead = Bead(id=new_id(store.prefix), type="task", title=title, sender="mayor",
                status="closed", created_at=stamp, updated_at=stamp, closed_at=stamp,
                close_reason="done")  # fmt: skip
    with store.batch() as batch:
        batch.insert(bead)
    return bead


def healthy(store: Store) -> list[str]:
    report = doctor(store)
    assert report.problems == [], report.problems
    return report.fixed


def mixed(store: Store) -> dict[str, str]:
    """An open bead, one closed now, one closed 30 days ago; their ids by name."""
    beads = {"open": store.create("task", "open one").id}
    closed = store.create("task", "closed now")
    store.close_bead(closed.id, "done")
    beads["closed_now"] = closed.id
    beads["closed_old"] = old_closed(store, 30).id
    return beads


def test_full_is_the_default_and_holds_every_bead(store: Store) -> None:
    beads = mixed(store)
    assert store.config["store"].get("view") is None and store.view.mode == "full"
    assert view_beads(store) == set(beads.values())
    assert (store.root / "config.yaml").is_file()
    healthy(store)


def test_off_holds_no_bead_file_but_config(store: Store) -> None:
    beads = mixed(store)
    store.set_setting("store.view", "off")
    store.create("task", "after the switch")  # the next write rebuilds the view
    assert view_beads(store) == set()
    assert (store.root / "config.yaml").is_file()
    assert not any((store.root / d).exists() for d in ("tasks", "messages"))
    assert store.get(beads["open"]).title == "open one"  # reads never need the view
    healthy(store)


def test_commands_never_read_the_view(tmp_path: Path) -> None:
    gc = GcRunner(tmp_path)
    assert gc("init").returncode == 0
    made = gc.json("bead", "create", "--type", "task", "--title", "kept in git")["bead"]
    assert gc("config", "set", "store.view", "off").returncode == 0
    assert gc("doctor").returncode == 0
    root = tmp_path / ".beads"
    assert not (root / bead_path("task", made["id"])).exists()
    shown = gc.json("bead", "show", made["id"][:8])
    assert shown["bead"]["title"] == "kept in git"
    assert [b["id"] for b in gc.json("bead", "list")["beads"]] == [made["id"]]
    assert gc("log", made["id"]).returncode == 0


def test_recent_holds_open_and_recently_changed_beads(store: Store) -> None:
    beads = mixed(store)
    store.set_setting("store.view", "recent")
    healthy(store)  # the doctor rebuilds the view under the new setting
    assert view_beads(store) == {beads["open"], beads["closed_now"]}
    newer = old_closed(store, 3, "closed three days ago")  # within the 14 days
    older = old_closed(store, 20, "closed twenty days ago")
    assert view_beads(store) == {beads["open"], beads["closed_now"], newer.id}
    assert store.get(older.id).title == "closed twenty days ago"
    healthy(store)


def test_beads_that_age_out_are_pruned_by_the_doctor(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.set_setting("store.view", "recent")
    store.set_setting("store.view_days", 7)
    beads = mixed(store)
    five = old_closed(store, 5)
    assert view_beads(store) == {beads["open"], beads["closed_now"], five.id}
    later = time.time() + 4 * DAY  # four days on: the bead closed five days ago is nine days old
    monkeypatch.setattr("beads.view.view.time.time", lambda: later)
    store.close()
    with Store.open(store.root) as reopened:
        fixed = healthy(reopened)
        assert fixed == ["removed 1 bead files older than 7 days from the view"]
        assert view_beads(reopened) == {beads["open"], beads["closed_now"]}
        assert reopened.view.prune(reopened.index) == 0  # nothing more: cheap to call again
        assert healthy(reopened) == []


def test_prune_costs_what_aged_out_not_the_store(store: Store) -> None:
    store.set_setting("store.view", "recent")
    healthy(store)
    asked = []
    real = store.index.aged_out

    def watched(since: str | None, cutoff: str) -> list[str]:
        asked.append((since, cutoff))
        return real(since, cutoff)

    store.index.aged_out = watched  # type: ignore[method-assign]
    with store.locked():
        store.view.prune(store.index)
    assert asked and asked[0][0] is not None  # from the last prune's cutoff, not from the start
    assert store.view.prune(store.index) == 0


def test_switching_back_to_full_brings_every_file_back(store: Store) -> None:
    beads = mixed(store)
    store.set_setting("store.view", "off")
    healthy(store)
    assert view_beads(store) == set()
    store.set_setting("store.view", "recent")
    healthy(store)
    assert view_beads(store) == {beads["open"], beads["closed_now"]}
    store.set_setting("store.view", "full")
    healthy(store)
    assert view_beads(store) == set(beads.values())


def test_a_changed_window_takes_effect_on_the_next_write(store: Store) -> None:
    store.set_setting("store.view", "recent")
    twenty = old_closed(store, 20)
    assert twenty.id not in view_beads(store)
    store.set_setting("store.view_days", 30)
    store.create("task", "a write")
    assert twenty.id in view_beads(store)


def test_doctor_reports_files_the_setting_leaves_out(store: Store) -> None:
    beads = mixed(store)
    store.set_setting("store.view", "off")
    healthy(store)
    path = bead_path("task", beads["open"])
    # The view never writes it; a person copying it back is told.
    (store.root / path).parent.mkdir(parents=True)
    (store.root / path).write_bytes(store.git.read_path(store.git.head(), path) or b"")
    report = doctor(store)
    assert [(p.kind, p.path) for p in report.problems] == [("view_stray", path)]
    assert "left out by store.view=off" in report.problems[0].message
    doctor(store, restore_view=True)
    assert not (store.root / path).exists()


def test_a_view_of_an_older_gc_counts_as_full(store: Store) -> None:
    beads = mixed(store)
    head = store.git.head()
    assert head is not None
    (store.runtime / "view-applied").write_bytes(head + b"\n")  # the commit alone
    assert store.view.applied() == head
    assert view_beads(store) == set(beads.values())


@pytest.mark.parametrize(
    ("key", "value"),
    [("store.view", "partial"), ("store.view", True), ("store.view_days", 0),
     ("store.view_days", "14"), ("store.view_days", 10**6)],
)  # fmt: skip
def test_the_settings_are_checked(store: Store, key: str, value: object) -> None:
    before = store.git.head()
    with pytest.raises(InvalidInput, match=key):
        store.set_setting(key, value)
    assert store.git.head() == before


def test_gc_config_set_refuses_a_bad_view(tmp_path: Path) -> None:
    gc = GcRunner(tmp_path)
    assert gc("init").returncode == 0
    result = gc("config", "set", "store.view", "sometimes")
    assert result.returncode == 30
    assert "store.view must be one of full, recent, off" in result.stderr
    assert gc("config", "set", "store.view", "recent").returncode == 0
    assert gc("config", "set", "store.view_days", "30").returncode == 0


def test_commits_made_elsewhere_follow_the_setting(store: Store) -> None:
    # A push into the store (a commit the view never saw) is caught up from the tree diff
    # under the setting: an old closed bead stays out of a recent view, an open one comes in.
    from beads.records.codec import dump_bead

    store.set_setting("store.view", "recent")
    stamp = stamp_at(time.time() - 40 * DAY)
    old = Bead(id=new_id(store.prefix), type="task", title="old", sender="mayor",
               status="closed", created_at=stamp, updated_at=stamp, closed_at=stamp)  # fmt: skip
    fresh = Bead(id=new_id(store.prefix), type="task", title="open", sender="mayor",
                 created_at=stamp, updated_at=stamp)  # fmt: skip
    files = {bead_path(b.type, b.id): dump_bead(b) for b in (old, fresh)}
    base = store.git.head()
    commit, objects = store.git.build_commit(base, files, "pushed", "mayor")
    store.git.store_objects(objects)
    store.git.swap_head(base, commit.id, "pushed", "mayor")
    store.close()
    with Store.open(store.root) as reopened:
        assert view_beads(reopened) == {fresh.id}
        assert reopened.get(old.id).title == "old"
        assert healthy(reopened) == []


def test_a_garbled_prune_mark_prunes_everything_that_aged_out(store: Store) -> None:
    store.set_setting("store.view", "recent")
    old = old_closed(store, 1)
    healthy(store)
    assert old.id in view_beads(store)
    (store.runtime / "view-pruned").write_bytes(b"\xff9999-garbage\n")
    with store.locked():
        store.view.cutoff = stamp_at(time.time())  # as if a day on: the bead has aged out
        assert store.view.prune(store.index) == 1
    assert old.id not in view_beads(store)


def test_the_view_marker_is_replaced_whole_never_written_through_a_hard_link(
    store: Store, tmp_path: Path
) -> None:
    """Every write replaces `view-applied` with a new file (a reader sees the old marker or
    the new one); a name planted beside it (a hard link) keeps its bytes."""
    marker = store.runtime / "view-applied"
    store.create("task", "first")
    victim = tmp_path / "victim"
    victim.hardlink_to(marker)
    kept = victim.read_bytes()
    store.create("task", "second")
    assert victim.read_bytes() == kept
    assert store.view.applied() == store.git.head()


def test_a_fifo_planted_at_the_marker_is_replaced_not_waited_on(store: Store) -> None:
    marker = store.runtime / "view-applied"
    marker.unlink()
    os.mkfifo(marker)
    store.create("task", "first")  # would block forever opening the FIFO for writing
    assert marker.is_file() and store.view.applied() == store.git.head()


def test_a_marker_left_half_rewritten_by_a_killed_writer_still_reads(store: Store) -> None:
    """Killed between writing a shorter marker over a longer one and cutting it: the old
    tail after the two lines is ignored, so the view is not rebuilt for it."""
    store.create("task", "first")
    head = store.git.head()
    assert head is not None
    (store.runtime / "view-applied").write_bytes(head + b"\nfull\nrecent 14\n")
    assert store.view.applied() == head


@pytest.mark.gc_process
def test_a_directory_another_process_removed_is_made_again_by_the_next_write(
    store: Store, gc: GcRunner
) -> None:
    # A library caller keeps its store open across writes, as a long-lived program does.
    aged = old_closed(store, 5)  # the only task: its file alone is under tasks/
    assert view_beads(store) == {aged.id}
    # Other gc processes narrow the view, and the doctor brings it to the new setting: the
    # bead is left out and the directories its file emptied are removed, tasks/ among them.
    assert gc("config", "set", "store.view_days", "3").returncode == 0
    assert gc("config", "set", "store.view", "recent").returncode == 0
    assert gc("doctor").returncode == 0
    assert not (store.root / "tasks").exists()
    # The caller's next writes make them again, as a new process would.
    later = {store.create("task", f"new {n}").id for n in range(2)}
    assert view_beads(store) == later
    healthy(store)


def test_a_directory_removed_during_a_long_write_is_made_again(store: Store) -> None:
    with store.locked():  # one write holding the lock: what it checked is trusted to its end
        store.create("task", "first")
        shutil.rmtree(store.root / "tasks")  # a person's rm meanwhile
        second = store.create("task", "second")
    assert (store.root / bead_path("task", second.id)).is_file()
