"""The `pre-receive` hook: the gate for incoming trees (`beads.sync.treegate`) for a plain
`git push` into the store's own repository.

`gc init`, `gc clone` and `gc doctor` write `.beads/.git/hooks/pre-receive`, a two-line
script that runs this module with this machine's Python (hooks are machine-local, and git
never copies them). A hook that is not gc's is never overwritten: `gc doctor` reports it.

Run by git (`python -m beads.receivehook`), it reads git's `old new ref` lines, lists the
commits each push brings (`git rev-list NEW --not --all`: what no ref reaches yet) and reads
their objects through `git cat-file`, so it sees the objects git keeps in quarantine until
the hook accepts them. A refusal prints one line per refused ref and exits 1: git then
refuses the whole push and nothing of it enters the store. The commits it accepts that name
this machine as their committer are recorded first (`beads.sync.claimed`): made elsewhere,
whatever they say.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HOOK = "pre-receive"
# The mark of gc's hook, as every hook written so far carries it (so it names the old path).
MARK = "# gc-beads: the gate for incoming trees (beads/treegate.py)"
_ZERO = b"0" * 40
_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}


def hook_text() -> str:
    """The hook script: this machine's Python, with this package on its path."""
    import shlex  # only when the hook is written: a store opens without it

    home = str(Path(__file__).resolve().parent.parent)
    return (
        f"#!/bin/sh\n{MARK}: written by gc init and gc doctor; machine-local.\n"
        f"PYTHONPATH={shlex.quote(home)}${{PYTHONPATH:+:$PYTHONPATH}} "
        f"exec {shlex.quote(sys.executable)} -m beads.receivehook\n"
    )


def install(git_dir: Path) -> str | None:
    """Write (or bring up to date) gc's hook in `git_dir`. Returns None when gc's hook is in
    place; "installed" when it was written now; "foreign" when another hook is there (left
    as it is)."""
    from beads.git.hooks import read_hook, write_hook

    wanted = hook_text()
    current, is_link, executable = read_hook(git_dir, HOOK)
    if is_link or (current is not None and MARK not in current):
        return "foreign"
    if current is not None and _runs(current) and executable:
        return None  # gc's, naming a Python and a package that are still there
    write_hook(git_dir, HOOK, wanted)
    return "installed"


def _runs(text: str) -> bool:
    """Whether gc's hook `text` names a Python that is there and a folder holding this
    package (another Python of the same install, as a console script names it, will do)."""
    import shlex

    try:
        words = shlex.split(text.strip().splitlines()[-1])
        home = words[0].partition("=")[2].split("${", 1)[0]
        python = words[words.index("exec") + 1]
    except (ValueError, IndexError):
        return False
    return os.access(python, os.X_OK) and (Path(home) / "beads" / "receivehook.py").is_file()


def main() -> int:
    """Check each pushed ref's new commits; 1 (git refuses the push) when any is refused."""
    from beads.errors import GcError
    from beads.git.program import CatFile, new_commits
    from beads.sync.claimed import notice
    from beads.sync.treegate import RefusedHistory, check_commits

    root = Path(os.environ.get("GIT_DIR", ".")).resolve().parent  # the store's `.beads/`
    reader = CatFile()
    refused = 0
    try:
        for line in sys.stdin.buffer:
            fields = line.split()
            if len(fields) != 3 or fields[1] == _ZERO:
                continue  # a deletion brings nothing
            _old, new, ref = fields
            listed = new_commits(new)
            try:
                check_commits(reader, listed, source=f"the push to {ref.decode()}")
            except RefusedHistory as exc:
                print(f"gc-beads: {exc.message}", file=sys.stderr)
                refused += 1
                continue
            # Before git moves the ref: which of them name this machine as committer. One
            # that cannot be recorded must not come in: the push is refused.
            try:
                notice(root, reader, listed)
            except (OSError, GcError) as exc:
                print(f"gc-beads: refused the push to {ref.decode()}: {exc}", file=sys.stderr)
                refused += 1
    finally:
        reader.close()
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
