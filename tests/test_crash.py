"""Kill the writer (SIGKILL) at each point of the write path; the next open must be consistent."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from beads.doctor import doctor
from beads.faults import POINTS
from beads.store import Store
from tests.conftest import git

WRITER = """
import sys
from beads.store import Store
store = Store.open(sys.argv[1], agent="crasher")
with store.batch() as batch:
    batch.create("task", "in flight", assignee="dog")
    batch.update(sys.argv[2], title="changed in flight")
print("acknowledged", flush=True)
"""


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_any_point_leaves_git_view_and_index_consistent(
    tmp_path: Path, point: str
) -> None:
    store, _ = Store.init(tmp_path, agent="tester")
    kept = store.create("task", "acknowledged before the crash")
    store.close()
    before = git("rev-parse", "HEAD", cwd=tmp_path / ".beads").strip()

    result = subprocess.run(
        [sys.executable, "-c", WRITER, str(tmp_path / ".beads"), kept.id],
        env={"GC_FAULT_POINT": point, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert "acknowledged" not in result.stdout

    after = git("rev-parse", "HEAD", cwd=tmp_path / ".beads").strip()
    committed = after != before
    assert committed == (point not in ("before-objects", "after-objects"))

    reopened = Store.open(tmp_path)  # the next open brings view and index to HEAD
    titles = sorted(b.title for b in reopened.list())
    if committed:
        assert titles == ["changed in flight", "in flight"]
    else:
        assert titles == ["acknowledged before the crash"]
    report = doctor(reopened)
    assert report.ok, report.problems
    assert reopened.index.head() == reopened.view.applied() == reopened.git.head()
    git("fsck", "--strict", "--no-dangling", cwd=tmp_path / ".beads")
    # The store keeps working after the crash.
    reopened.create("task", "after the crash")
    assert doctor(reopened).ok
    reopened.close()


def test_the_lock_of_a_killed_writer_does_not_block_the_next(tmp_path: Path) -> None:
    store, _ = Store.init(tmp_path)
    store.close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom beads.store import Store\ns = Store.open(sys.argv[1])\n"
            "with s.locked():\n    print('locked', flush=True)\n    time.sleep(60)\n",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    holder.kill()
    holder.wait()
    with Store.open(tmp_path) as reopened:
        assert reopened.create("task", "T").title == "T"
