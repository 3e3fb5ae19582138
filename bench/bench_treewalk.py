#!/usr/bin/env python
"""What comparing each commit of a history with its parent costs (`GitRepo.changes`, the
one tree walk behind the history page, the index's catch-up, a sync's merge and the origins).

Run from the project root:

    python bench/bench_treewalk.py [COMMITS]

Builds a store of COMMITS mail commits (default 2000), then times, in the same run, the files
each commit changed as `git diff-tree -r --stdin` lists them (git's own walk, in C: the
baseline) against `GitRepo.changes` over the same commits (a fresh repository each round, so
its cache of trees starts cold), each the median of 5 rounds. Figure: the ratio.
Always exits 0 (it is a report).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ROUNDS = 5


def build(where: Path, commits: int) -> Path:
    """A store at `where` with `commits` messages sent, one commit each; its git directory."""
    from beads.store import Store
    from mail import api
    from mail.beadmail import BeadMail

    store, _ = Store.init(where, agent="human")
    mail = BeadMail(store)
    for n in range(commits):
        api.send(mail, sender="human", to=[f"agent{n % 50}"], subject=f"s{n}", body="b")
    store.close()
    return where / ".beads" / ".git"


def main() -> None:
    from beads.git import GitRepo

    commits = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with tempfile.TemporaryDirectory() as tmp:
        git_dir = build(Path(tmp), commits)
        listed = subprocess.run(
            ["git", "--git-dir", str(git_dir), "rev-list", "--parents", "main"],
            capture_output=True, text=True, check=True,
        ).stdout.splitlines()  # fmt: skip
        pairs = [(line.split()[0], (line.split()[1:] or [None])[0]) for line in listed]
        stdin = "".join(f"{sha}\n" for sha, _parent in pairs)
        ours, theirs = [], []
        found = 0
        for _round in range(ROUNDS):
            start = time.perf_counter()
            subprocess.run(
                ["git", "--git-dir", str(git_dir), "diff-tree", "-r", "--root", "--stdin"],
                input=stdin, capture_output=True, text=True, check=True,
            )  # fmt: skip
            theirs.append(time.perf_counter() - start)
            repo = GitRepo(git_dir)
            start = time.perf_counter()
            found = sum(
                len(repo.changes(parent.encode() if parent else None, sha.encode()))
                for sha, parent in pairs
            )
            ours.append(time.perf_counter() - start)
            repo.close()
        mine, git = statistics.median(ours), statistics.median(theirs)
        print(f"{len(pairs)} commits, {found} file changes")
        print(f"git diff-tree -r --stdin: {git * 1000:.0f} ms")
        print(f"GitRepo.changes, each commit with its parent: {mine * 1000:.0f} ms")
        print(f"ratio: {mine / git:.2f}x git's own walk (medians of {ROUNDS})")


if __name__ == "__main__":
    main()
