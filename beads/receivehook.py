"""The `pre-receive` hook: the gate for incoming trees (`beads.treegate`) for a plain
`git push` into the store's own repository.

`gc init`, `gc clone` and `gc doctor` write `.beads/.git/hooks/pre-receive`, a two-line
script that runs this module with this machine's Python (hooks are machine-local, and git
never copies them). A hook that is not gc's is never overwritten: `gc doctor` reports it.

Run by git (`python -m beads.receivehook`), it reads git's `old new ref` lines, lists the
commits each push brings (`git rev-list NEW --not --all`: what no ref reaches yet) and reads
their objects through `git cat-file`, so it sees the objects git keeps in quarantine until
the hook accepts them. A refusal prints one line per refused ref and exits 1: git then
refuses the whole push and nothing of it enters the store.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HOOK = "pre-receive"
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
    path = git_dir / "hooks" / HOOK
    wanted = hook_text()
    try:
        current = path.read_text(errors="replace") if path.is_file() else None
    except OSError:
        current = None
    if path.is_symlink() or (current is not None and MARK not in current):
        return "foreign"
    if current is not None and _runs(current) and os.access(path, os.X_OK):
        return None  # gc's, naming a Python and a package that are still there
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{HOOK}.{os.getpid()}.tmp")
    temp.write_text(wanted)
    # Executable by whoever may write the store: its owner, and its group in a group store.
    temp.chmod(0o770 if git_dir.stat().st_mode & 0o070 == 0o070 else 0o700)
    os.replace(temp, path)
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
    return os.access(python, os.X_OK) and (Path(home) / "beads" / "treegate.py").is_file()


class _CatFile:
    """Objects read through `git cat-file --batch` (git's own view, quarantine included)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            ["git", "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def get_raw(self, name: bytes) -> tuple[int, bytes]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(name + b"\n")
        self.process.stdin.flush()
        header = self.process.stdout.readline().split()
        if len(header) != 3 or header[1] not in _TYPES:
            raise KeyError(name)
        data = self.process.stdout.read(int(header[2]) + 1)[:-1]
        return _TYPES[header[1]], data

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()


def main() -> int:
    """Check each pushed ref's new commits; 1 (git refuses the push) when any is refused."""
    from beads.treegate import RefusedHistory, check_commits

    reader = _CatFile()
    refused = 0
    try:
        for line in sys.stdin.buffer:
            fields = line.split()
            if len(fields) != 3 or fields[1] == _ZERO:
                continue  # a deletion brings nothing
            _old, new, ref = fields
            listed = subprocess.run(
                ["git", "rev-list", new.decode(), "--not", "--all"],
                capture_output=True,
                check=True,
            ).stdout.split()
            try:
                check_commits(reader, listed, source=f"the push to {ref.decode()}")
            except RefusedHistory as exc:
                print(f"gc-beads: {exc.message}", file=sys.stderr)
                refused += 1
    finally:
        reader.close()
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
