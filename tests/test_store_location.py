"""Finding the store: explicit, environment, walking up, linked worktrees; refusing others'."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from beads import InvalidInput, NotFound, Store
from beads.location import find_store
from tests.conftest import GcRunner, gc_program, git


def test_found_by_walking_up_from_a_subdirectory(tmp_path: Path) -> None:
    store, created = Store.init(tmp_path)
    store.close()
    assert created
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_store(cwd=deep) == tmp_path / ".beads"


def test_explicit_and_environment_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here, other = tmp_path / "here", tmp_path / "other"
    for path in (here, other):
        path.mkdir()
        Store.init(path)[0].close()
    monkeypatch.setenv("GC_BEADS_DIR", str(other / ".beads"))
    assert find_store(cwd=here) == other / ".beads"
    assert find_store(here, cwd=other) == here / ".beads"  # a project dir works too


def test_no_store_says_to_run_init(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="gc init"):
        find_store(cwd=tmp_path)


def test_linked_worktrees_share_the_main_worktrees_store(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    git("init", "-q", "-b", "main", cwd=project)
    (project / "f.txt").write_text("x")
    git("add", "f.txt", cwd=project)
    git("commit", "-qm", "first", cwd=project)
    store, _ = Store.init(project)
    made = store.create("task", "Shared")
    store.close()
    git("worktree", "add", "-q", str(tmp_path / "linked"), "-b", "feature", cwd=project)
    found = find_store(cwd=tmp_path / "linked")
    assert found == project / ".beads"
    with Store.open(found) as opened:
        assert opened.get(made.id).title == "Shared"


def test_init_keeps_the_store_out_of_the_projects_git(tmp_path: Path) -> None:
    git("init", "-q", cwd=tmp_path)
    store, _ = Store.init(tmp_path)
    store.create("task", "T")
    store.close()
    assert "/.beads/" in (tmp_path / ".git" / "info" / "exclude").read_text()
    assert git("status", "--porcelain", cwd=tmp_path) == ""
    Store.init(tmp_path)[0].close()  # again: no second line
    assert (tmp_path / ".git" / "info" / "exclude").read_text().count("/.beads/") == 1


@pytest.mark.parametrize("marker", ["issues.jsonl", "beads.db", "dolt", "notes.txt"])
def test_a_beads_dir_of_another_tool_is_refused_never_adopted(tmp_path: Path, marker: str) -> None:
    foreign = tmp_path / ".beads"
    foreign.mkdir()
    (foreign / marker).write_text("theirs")
    with pytest.raises(InvalidInput, match="another tool"):
        Store.init(tmp_path)
    with pytest.raises(InvalidInput, match="another tool"):
        find_store(cwd=tmp_path)
    assert sorted(p.name for p in foreign.iterdir()) == [marker]
    assert (foreign / marker).read_text() == "theirs"


def test_init_twice_opens_the_same_store(tmp_path: Path) -> None:
    first, created = Store.init(tmp_path, prefix="ab")
    bead = first.create("task", "T")
    first.close()
    second, created_again = Store.init(tmp_path, prefix="zz")
    assert (created, created_again) == (True, False)
    assert second.prefix == "ab" and second.get(bead.id).title == "T"
    second.close()


@pytest.mark.parametrize("where", ["loop", "/proc/self/gc-beads-test"])
def test_clone_refuses_a_place_init_refuses_alike_and_makes_nothing(
    gc_store: GcRunner, where: str
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy), the clone's source
    if where.startswith("/proc") and not Path("/proc/self").exists():
        pytest.skip("no /proc here")
    os.symlink("loop", gc.cwd / "loop")  # a link to itself: every lookup through it loops
    before = sorted(p.name for p in gc.cwd.iterdir())
    made = gc("init", where)
    cloned = gc("clone", str(gc.cwd / ".beads"), where)
    assert (made.returncode, cloned.returncode) == (30, 30), cloned.stderr
    assert cloned.stderr == made.stderr
    assert cloned.stderr.startswith(f"gc: cannot create a store in '{where}': ")
    assert len(cloned.stderr.splitlines()) == 1
    assert sorted(p.name for p in gc.cwd.iterdir()) == before


@pytest.mark.parametrize("kind", ["a regular file", "a FIFO"])
def test_a_beads_that_is_not_a_directory_is_said_to_be_what_it_is(
    tmp_path: Path, kind: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    beads = project / ".beads"
    if kind == "a FIFO":
        os.mkfifo(beads)  # opened, it would wait for ever for a writer
    else:
        beads.write_text("x")
    line = f"gc: {beads} is not a store: it is {kind}\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    runs = [
        (project, ("bead", "list")),
        (project, ("init",)),
        (tmp_path, ("bead", "list", "--beads-dir", str(project))),
        (tmp_path, ("init", str(project))),
    ]
    if kind == "a FIFO":  # a regular file named by --beads-dir is click's to refuse
        runs.append((tmp_path, ("bead", "list", "--beads-dir", str(beads))))
    for cwd, args in runs:
        result = subprocess.run(
            [gc_program(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=30
        )
        assert (result.returncode, result.stderr) == (30, line), args
    named = subprocess.run(
        [gc_program(), "bead", "list"],
        cwd=tmp_path,
        env={**env, "GC_BEADS_DIR": str(beads)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (named.returncode, named.stderr) == (30, line)
    assert sorted(p.name for p in project.iterdir()) == [".beads"]


def test_a_blank_gc_beads_dir_is_unset_as_gcs_other_variables_are(
    gc_store: GcRunner,
) -> None:
    gc = gc_store  # a store as `gc init` makes it (a copy), found from the working directory
    made = gc.json("bead", "create", "--type", "task", "--title", "here")
    for blank in (" ", "\t", " \n "):
        listed = gc.json("bead", "list", env={"GC_BEADS_DIR": blank})
        assert [b["id"] for b in listed["beads"]] == [made["bead"]["id"]]
    # A value around spaces is the path within them, as $GC_CITY's is.
    elsewhere = gc("bead", "list", cwd=gc.cwd.parent, env={"GC_BEADS_DIR": f" {gc.cwd} "})
    assert elsewhere.returncode == 0, elsewhere.stderr


def test_init_makes_the_store_where_the_other_commands_will_look_for_it(tmp_path: Path) -> None:
    # `gc init --beads-dir X` and `$GC_BEADS_DIR` made the store in the working directory,
    # where the next command given the same X did not look; `inbox init` ignored the variable.
    gc = GcRunner(tmp_path)
    for n, (program, args, env) in enumerate(
        [
            ("gc", ["--beads-dir", str(tmp_path / "by-option")], {}),
            ("gc", ["--beads-dir", str(tmp_path / "by-store-dir" / ".beads")], {}),
            ("gc", [], {"GC_BEADS_DIR": str(tmp_path / "by-variable")}),
            ("inbox", [], {"GC_BEADS_DIR": str(tmp_path / "inbox-by-variable")}),
            ("inbox", ["--db", str(tmp_path / "inbox-by-db")], {}),
        ]
    ):
        (tmp_path / f"work{n}").mkdir()
        runner = GcRunner(tmp_path / f"work{n}", program=program)
        made = runner("init", *args, env=env)
        assert made.returncode == 0, made.stderr
        assert not (tmp_path / f"work{n}" / ".beads").exists(), (program, args, env)
        listed = gc("bead", "list", *[a.replace("--db", "--beads-dir") for a in args], env=env)
        assert listed.returncode == 0, (program, args, env, listed.stderr)
    for place in ["by-option", "by-store-dir", "by-variable", "inbox-by-variable", "inbox-by-db"]:
        assert Store.open(tmp_path / place).root == tmp_path / place / ".beads"
    # A PATH given wins over both, as before.
    assert (
        gc("init", str(tmp_path / "by-path"), env={"GC_BEADS_DIR": "/nonexistent"}).returncode == 0
    )
    assert (tmp_path / "by-path" / ".beads").is_dir()
