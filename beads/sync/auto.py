"""`sync.auto`: sync in the background, never delaying a command or a hook.

After each write (`Store.batch`), and from each hook once the last sync is older than
`sync.interval`, a detached process (`python -m beads.sync.syncer ROOT`) runs `gc sync`. At most
one runs per store: it holds `.runtime/sync/pusher.lock` (flock); a writer that finds it held
leaves `.runtime/sync/again`, and the holder syncs once more before it exits.

On the hook path: no typing, no dulwich, no YAML. A store without `sync.auto` costs one read
of its small git config.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

# The store's git config read without a parser (the hooks read it): `beads.git.config`.
from beads.git.config import has_remote as has_remote
from beads.git.config import read_values as read_local

TRUE = ("true", "yes", "on", "1")
DEFAULT_INTERVAL = 30.0


def auto_interval(root: Path) -> float | None:
    """`sync.interval` when `sync.auto` is on for this store, else None."""
    local = read_local(root / ".git")
    if local.get("sync.auto", "").lower() not in TRUE:
        return None
    try:
        return max(0.5, float(local.get("sync.interval", DEFAULT_INTERVAL)))
    except ValueError:
        return DEFAULT_INTERVAL


def sync_dir(root: Path) -> Path:
    return root / ".runtime" / "sync"


def after_write(root: Path) -> None:
    """A commit was made: push it in the background (with `sync.auto`)."""
    if auto_interval(root) is not None:
        start(root)


def fetch_if_due(root: Path) -> None:
    """From a hook: sync in the background when the last attempt is older than the interval."""
    interval = auto_interval(root)
    if interval is None:
        return
    try:
        last = (sync_dir(root) / "state.json").stat().st_mtime
    except OSError:
        last = 0.0
    if time.time() - last >= interval:
        start(root)


def start(root: Path) -> None:
    """Ask for a background sync: start the syncer unless one runs (it will sync again)."""
    import fcntl

    where = sync_dir(root)
    where.mkdir(parents=True, exist_ok=True)
    (where / "again").touch()
    fd = os.open(where / "pusher.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # a syncer runs: it sees `again` and syncs once more
    finally:
        os.close(fd)  # released: the syncer takes it itself
    import subprocess

    from beads.sync.arrivals import registered

    subprocess.Popen(
        # The announcers of this process's layers (beads/sync/arrivals.py), for the syncer to call.
        [sys.executable, "-m", "beads.sync.syncer", str(root), *registered()],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # detached: a Ctrl-C of the command never reaches it
        close_fds=True,
        env={k: v for k, v in os.environ.items() if k != "GC_FAULT_POINT"},
    )
