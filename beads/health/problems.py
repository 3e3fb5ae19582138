"""What `gc doctor` finds: each problem, and the report of a run."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from beads.store import Store


@dataclass(frozen=True)
class Problem:
    """One thing wrong: `kind` (repository, unparsable, index, view_modified, view_missing,
    view_stray, symlink, stale_lock, stale_file, branch, git_head, packed_refs,
    corrupt_object, hook, history: an entry the gate for incoming trees refuses; delivery:
    the delivery database; origins: what stands where the origins for reading commands are
    kept; check: a layer's check that failed), the file, and what to do;
    `fixed` when this run repaired it."""

    kind: str
    path: str
    message: str
    fixed: bool = False

    def __post_init__(self) -> None:
        # Every message is one line (docs/contract.md), whatever it quotes: an exception's
        # text, what a program said. Its lines are joined; the path is kept exact.
        lines = [line.strip() for line in self.message.splitlines()]
        joined = "; ".join(line for line in lines if line)
        if joined != self.message:
            object.__setattr__(self, "message", joined)

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "path": self.path, "message": self.message, "fixed": self.fixed}


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    beads: int = 0
    # What a person should know that is no fault of the store (settings awaiting `gc trust`).
    notices: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing is left wrong (problems this run repaired do not count)."""
        return all(problem.fixed for problem in self.problems)


def remove_file(path: Path) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def shown_path(store: Store, path: Path) -> str:
    return path.relative_to(store.root).as_posix()
