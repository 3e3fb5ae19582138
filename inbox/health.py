"""What `gc doctor` checks of delivery: the delivery database, `.runtime/delivery.sqlite3`.

A damaged one fails every delivery command; doctor reports it as a problem (never fixed:
the file is the source of truth of what was pushed, and moving it aside is the user's call),
saying what to do as those commands do (`inbox.delivery.damaged_advice`). The sessions
database is not checked: a damaged one is started afresh wherever it is met.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from beads.files import not_a_regular_file
from beads.health.problems import Problem
from beads.index.dbfile import DAMAGED, error_code
from inbox.delivery import damaged_advice

NAME = "delivery.sqlite3"


def check(root: Path) -> list[Problem]:
    """The problem of the delivery database of the store `root` (`.beads/`), if any: damaged
    (sqlite cannot open or read it, or its `quick_check` finds a fault), or not a file."""
    path = root / ".runtime" / NAME
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return []  # none yet: made at first use
    if stat.S_ISLNK(mode):
        return []  # reported as a link under `.runtime/` (beads.health.checkup)
    if not stat.S_ISREG(mode):
        return [Problem("delivery", f".runtime/{NAME}", not_a_regular_file(str(path)).message)]
    fault = _damage(path)
    if fault is None:
        return []
    said = f"damaged ({fault}); {damaged_advice(path)}"
    return [Problem("delivery", f".runtime/{NAME}", said)]


def _damage(path: Path) -> str | None:
    """What sqlite finds wrong with the database at `path`, in one line, or None. Only read:
    the file is never changed (an empty file is an empty database, as gc takes it)."""
    try:
        db = sqlite3.connect(path, timeout=30, isolation_level=None)
    except sqlite3.Error as exc:
        return str(exc) if error_code(exc) in DAMAGED else None
    try:
        found = [row[0] for row in db.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.Error as exc:
        # Damage is what this reports; any other fault (busy, read-only) the commands say.
        return str(exc) if error_code(exc) in DAMAGED else None
    finally:
        db.close()
    if found == ["ok"]:
        return None
    first = " ".join(str(found[0]).split())
    return first if len(found) == 1 else f"{first}, and {len(found) - 1} more faults"
