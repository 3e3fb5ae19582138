"""A hook steps over commits that derive nothing without git (inbox.follow, the index's links).

Agents run `gc bead ...` between prompts all the time: each such commit leaves the delivery
watermark behind, and the next hook must move it on without loading dulwich or the YAML
parser. Commits that change a bead of a type with a deriver (a message, a decision, a gate), a
missing or damaged record of the commits, still take the slow path through git.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from beads.index.index import Index
from beads.index.reader import branch_head
from beads.records.codec import dump_bead, load_bead
from beads.records.ids import bead_path
from beads.store import Store
from inbox import Delivery
from inbox.follow import watermark
from tests.conftest import GcRunner, copy_store, git

# Runs the hook in this interpreter, then says which heavy modules it loaded.
HOOK = (
    "import sys; sys.argv = ['gc', 'hook', 'run']\n"
    "from gc_beads.entry import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "print('dulwich' in sys.modules, 'ruamel' in sys.modules)"
)


def first_hook(gc: GcRunner) -> None:
    """Dog's first hook in the store: the session's database follows the branch from here.
    It runs in this process; what it loads in a process of its own is checked by
    `test_the_first_hook_of_a_new_store_follows_the_branch_without_git`."""
    payload = json.dumps({"session_id": "s1", "hook_event_name": "UserPromptSubmit",
                          "cwd": str(gc.cwd)})  # fmt: skip
    first = gc("hook", "run", input=payload, env={"GC_AGENT": "dog"})
    assert (first.returncode, first.stdout) == (0, ""), first.stderr


@pytest.fixture
def project(gc_store: GcRunner) -> Path:
    """A store as `gc init` makes it (a copy) after dog's first hook."""
    first_hook(gc_store)
    return gc_store.cwd


def send_killed(gc: GcRunner) -> None:
    """Mayor's `gc mail send` to dog, killed once the message is in the index: a process of
    its own (the fault point is read at its start, and the kill ends it)."""
    killed = gc("mail", "send", "dog", "-s", "Deploy", "-m", "ship it",
                env={"GC_AGENT": "mayor", "GC_FAULT_POINT": "after-index"})  # fmt: skip
    assert killed.returncode < 0


@pytest.fixture(scope="module")
def killed_sender_template(
    tmp_path_factory: pytest.TempPathFactory, gc_init_template: Path
) -> Path:
    """`project`'s store after `send_killed`, made once a module (per xdist worker): its
    `.beads`."""
    root = tmp_path_factory.mktemp("killed-sender")
    copy_store(gc_init_template, root / ".beads")
    gc = GcRunner(root)
    first_hook(gc)
    send_killed(gc)
    return root / ".beads"


@pytest.fixture
def killed_sender(gc: GcRunner, killed_sender_template: Path) -> Path:
    """A copy of `killed_sender_template`'s store in the `gc` runner's directory."""
    copy_store(killed_sender_template, gc.cwd / ".beads")
    return gc.cwd


def hook(gc: GcRunner, event: str = "UserPromptSubmit") -> tuple[str, bool]:
    """`gc hook run` for dog: the context it gives, and whether it loaded git or YAML."""
    payload = json.dumps({"session_id": "s1", "hook_event_name": event, "cwd": str(gc.cwd)})
    env = {**gc.env, "GC_AGENT": "dog"}
    out = subprocess.run([sys.executable, "-c", HOOK], input=payload, cwd=gc.cwd, text=True,
                         capture_output=True, env=env, check=True)  # fmt: skip
    *reply, loaded = out.stdout.strip().splitlines()
    context = ""
    if reply:
        answer = json.loads("\n".join(reply))
        context = answer.get("hookSpecificOutput", {}).get("additionalContext", "")
    return context, loaded != "False False"


def create(gc: GcRunner, title: str) -> str:
    """`gc bead create` of a task; its id."""
    result = gc("bead", "create", "--type", "task", "--title", title)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def followed(project: Path) -> bool:
    """True when the delivery watermark stands at the branch."""
    root = project / ".beads"
    with Delivery(root) as delivery:
        return watermark(delivery) == branch_head(root)


def test_the_first_hook_of_a_new_store_follows_the_branch_without_git(gc_store: GcRunner) -> None:
    assert hook(gc_store) == ("", False)
    assert followed(gc_store.cwd)


def test_after_bead_and_config_commands_a_hook_moves_the_watermark_without_git(
    project: Path, gc: GcRunner
) -> None:
    bead = create(gc, "Fix the build")
    assert not followed(project)
    assert hook(gc) == ("", False)
    assert followed(project)
    for command in (
        ("bead", "update", bead, "--title", "Fix the build now"),
        ("bead", "close", bead),
        ("config", "set", "delivery.max_items", "5"),
    ):
        assert gc(*command).returncode == 0
    assert hook(gc) == ("", False)
    assert followed(project)


def test_a_batch_and_commits_of_another_process_are_stepped_over(
    project: Path, gc: GcRunner
) -> None:
    with Store.open(project, agent="mayor") as store:
        with store.batch("plan") as batch:
            for n in range(5):
                batch.create("task", f"step {n}")
        for n in range(3):
            store.create("task", f"later {n}")
    assert hook(gc) == ("", False)
    assert followed(project)


def test_a_push_the_index_caught_up_in_one_step_is_stepped_over(
    project: Path, gc: GcRunner, tmp_path: Path
) -> None:
    task = create(gc, "Edited in a clone")
    assert hook(gc) == ("", False)
    clone = tmp_path / "clone"
    git("clone", "-q", str(project / ".beads" / ".git"), str(clone), cwd=tmp_path)
    path = clone / bead_path("task", task)
    for title in ("once", "twice"):  # two commits, which the index takes as one diff
        path.write_bytes(dump_bead(load_bead(path.read_bytes()).with_changes(title=title)))
        git("commit", "-qam", title, cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)
    assert gc("bead", "list").returncode == 0  # the index catches up: one link for both
    assert hook(gc) == ("", False)
    assert followed(project)


def test_mail_of_a_killed_sender_before_a_bead_create_is_still_announced(
    killed_sender: Path, gc: GcRunner
) -> None:
    project = killed_sender
    create(gc, "meanwhile")
    context, _ = hook(gc)
    assert "ship it" in context
    assert followed(project)


@pytest.mark.parametrize("damage", ["links lost", "file damaged", "file gone"])
def test_a_lost_or_damaged_record_of_commits_falls_back_to_git(
    killed_sender: Path, gc: GcRunner, damage: str
) -> None:
    project = killed_sender
    create(gc, "meanwhile")
    path = project / ".beads" / ".runtime" / "index.sqlite3"
    if damage == "links lost":
        index = Index(path)
        index.db.execute("DELETE FROM links")
        index.close()
    elif damage == "file damaged":
        path.write_bytes(b"not a database at all" * 300)
    else:
        path.unlink()
    context, _ = hook(gc)
    assert "ship it" in context
    assert followed(project)
    create(gc, "after the rebuild")
    assert hook(gc) == ("", False)  # the rebuilt index links the next commits again


def push_mail_by_plain_git(
    project: Path, gc_init_template: Path, tmp_path: Path, committer: dict[str, str] | None = None
) -> str:
    """A message bead written by another store's gc, committed (as `committer`, else git's
    default) and pushed into the store at `project` by plain git; returns its id."""
    elsewhere = GcRunner(tmp_path / "elsewhere")
    copy_store(gc_init_template, elsewhere.cwd / ".beads")
    sent = elsewhere("mail", "send", "dog", "-s", "Approved", "-m", "ship it", "--json",
                     env={"GC_AGENT": "human"})  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    message = json.loads(sent.stdout)["message"]["id"]
    path = bead_path("message", message)
    clone = tmp_path / "clone"
    git("clone", "-q", str(project / ".beads" / ".git"), str(clone), cwd=tmp_path)
    (clone / path).parent.mkdir(parents=True, exist_ok=True)
    (clone / path).write_bytes((elsewhere.cwd / ".beads" / path).read_bytes())
    git("add", path, cwd=clone)
    if committer is None:
        git("commit", "-qm", "mail", cwd=clone)
    else:
        subprocess.run(["git", "commit", "-qm", "mail"], cwd=clone, check=True,
                       env={**os.environ, **committer})  # fmt: skip
    git("push", "-q", "origin", "HEAD:main", cwd=clone)
    return message


def test_mail_pushed_by_plain_git_says_it_was_not_made_here(
    project: Path, gc: GcRunner, gc_init_template: Path, tmp_path: Path
) -> None:
    # A message bead written elsewhere (another store's gc) and pushed into this store by
    # plain git: its commit names no gc machine, so nothing says it was made here.
    message = push_mail_by_plain_git(project, gc_init_template, tmp_path)
    context, _ = hook(gc)
    assert f"(from t, committed by t outside gc) {message} from human" in context


@pytest.mark.parametrize("what", ["directory", "link to /dev/zero", "fifo"])
def test_a_record_of_claimed_commits_that_cannot_be_read_hides_no_other_note(
    project: Path, gc: GcRunner, gc_init_template: Path, tmp_path: Path, what: str
) -> None:
    # The record of commits that came from elsewhere naming this machine (`gc-claimed`),
    # replaced by something that is no file: every note went (a directory), a reading
    # command failed "out of memory" (a link to /dev/zero) or would hang (a FIFO).
    message = push_mail_by_plain_git(project, gc_init_template, tmp_path)
    note = "(from t, committed by t outside gc)"
    record = project / ".beads" / ".git" / "gc-claimed"
    if what == "directory":
        record.mkdir()
    elif what == "fifo":
        os.mkfifo(record)
    else:
        record.symlink_to("/dev/zero")
    context, _ = hook(gc)
    assert f"{note} {message} from human" in context
    listed = gc("mail", "inbox", "dog", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["messages"][0]["origin"] == note


def test_mail_pushed_by_plain_git_under_this_machines_committer_line_says_so(
    project: Path, gc: GcRunner, gc_init_template: Path, tmp_path: Path
) -> None:
    # As above, but its commit names this machine's committer line, copied from a commit
    # made here: the pre-receive hook records it as it arrives, and nothing says "made here".
    create(gc, "made here")
    line = git("log", "-1", "--format=%cn%x00%ce", cwd=project / ".beads" / ".git").strip()
    name, email = line.split("\0")
    assert email.endswith("@gc-beads")
    as_here = {"GIT_AUTHOR_NAME": "human", "GIT_AUTHOR_EMAIL": "human@example.com",
               "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}  # fmt: skip
    message = push_mail_by_plain_git(project, gc_init_template, tmp_path, as_here)
    context, _ = hook(gc)
    note = "(from human, committed elsewhere under this machine's name)"
    assert f"{note} {message} from human" in context, context


# -- the index's links ----------------------------------------------------------------------


def test_links_chain_commits_back_to_a_watermark(tmp_path: Path) -> None:
    index = Index(tmp_path / "index.sqlite3")
    a, b, c, d = (x.encode() * 40 for x in "abcd")
    index.apply(head=a, reset=True)
    index.apply(head=b, link=(a, ["task"]))
    index.apply(head=c, link=(b, []))  # a config set
    index.apply(head=d, link=(c, ["message", "task"]))
    assert index.types_changed(a, c) == {"task"}
    assert index.types_changed(a, d) == {"message", "task"}
    assert index.types_changed(c, c) == set()
    assert index.types_changed(d, a) is None  # not a chain the links hold
    index.apply(head=a, link=(d, ["task"]))  # the branch set back: a loop of links
    assert index.types_changed(b"e" * 40, a) is None
    index.apply(head=a, reset=True)  # a rebuild forgets them
    assert index.types_changed(a, b) is None
    index.close()


def test_links_keep_only_the_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import beads.index.index

    monkeypatch.setattr(beads.index.index, "LINKS_KEPT", 3)
    index = Index(tmp_path / "index.sqlite3")
    commits = [f"{n:040x}".encode() for n in range(6)]
    for parent, commit in zip(commits, commits[1:], strict=False):
        index.apply(head=commit, link=(parent, ["task"]))
    assert index.db.execute("SELECT count(*) FROM links").fetchone()[0] == 3
    assert index.types_changed(commits[2], commits[5]) == {"task"}
    assert index.types_changed(commits[1], commits[5]) is None
    index.close()
