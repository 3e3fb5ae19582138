"""Fault-injection points of the write path, for the crash tests.

`GC_FAULT_POINT=<name>` makes the process kill itself with SIGKILL when it reaches that
point, exactly as a crash or `kill -9` would. Unset, a point costs one comparison.
"""

from __future__ import annotations

import os

# The steps of one commit, in order (`Batch.commit`).
POINTS = ("before-objects", "after-objects", "after-ref", "mid-view", "after-view", "after-index")
# Inside the ref update: the lock file made, then the new id written into it (not yet renamed).
REF_POINTS = ("ref-locked", "ref-written")
# Writing a batch's pack (halfway through its objects; all written, its `.idx` not yet), and
# packing loose objects (the pack in place, the loose copies not yet deleted).
PACK_POINTS = ("mid-pack", "before-idx", "loose-packed")
# dulwich's repack (`beads/git/maintenance.py`): halfway through the objects; all written,
# the `.idx` not yet; the new pack in place, nothing removed; the first old pack removed.
REPACK_POINTS = ("repack-mid", "repack-before-idx", "repack-written", "repack-mid-remove")
# `Store.init`: the repository half built under its temporary name; renamed into place but
# not yet excluded from the surrounding project's git.
INIT_POINTS = ("mid-init", "init-renamed")
# Refreshing after commits made elsewhere: the index brought forward, the view not yet; the
# view halfway (`Store.refresh`); notifications derived, not yet recorded (`inbox/follow.py`).
REFRESH_POINTS = ("refreshed-index", "mid-view-refresh", "refresh-derived")
# A fetch storing what it received and the gate accepted as loose objects: half of them
# written; a fetch past its quarantine's memory: the first objects written to its directory
# (`beads/git/quarantine.py`).
FETCH_POINTS = ("fetch-half-stored", "fetch-spilled")
# `gc doctor --rebuild-index` (`Index.replace_with`): the new index filled beside the old;
# part of it copied into the old one's file. Where the old file cannot take the copy (its
# first page damaged, another page size) it is renamed into place instead: the old one's
# `-wal` and `-shm` removed, the new one not yet renamed ("rebuild-swapping").
REBUILD_POINTS = ("rebuild-filled", "rebuild-copying")
# Writing the store's git config (`beads.git.config`): the lock file written, not yet renamed.
CONFIG_POINTS = ("config-written",)
_ARMED = os.environ.get("GC_FAULT_POINT")


def fault(point: str) -> None:
    """Die here if this point is armed."""
    if _ARMED == point:
        import signal  # only when armed: hooks import this module, and signal loads enum

        os.kill(os.getpid(), signal.SIGKILL)
