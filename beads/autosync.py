"""`sync.auto`: sync in the background, never delaying a command or a hook.

After each write (`Store.batch`), and from each hook once the last sync is older than
`sync.interval`, a detached process (`python -m beads.autosync ROOT`) runs `gc sync`. At most
one runs per store: it holds `.runtime/sync/pusher.lock` (flock); a writer that finds it held
leaves `.runtime/sync/again`, and the holder syncs once more before it exits.

On the hook path: no typing, no dulwich, no YAML. A store without `sync.auto` costs one read
of its small git config.
"""

from __future__ import annotations

import contextlib
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


def _sync_dir(root: Path) -> Path:
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
        last = (_sync_dir(root) / "state.json").stat().st_mtime
    except OSError:
        last = 0.0
    if time.time() - last >= interval:
        start(root)


def start(root: Path) -> None:
    """Ask for a background sync: start the syncer unless one runs (it will sync again)."""
    import fcntl

    where = _sync_dir(root)
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

    from beads.arrivals import registered

    subprocess.Popen(
        # The announcers of this process's layers (beads/arrivals.py), for the syncer to call.
        [sys.executable, "-m", "beads.autosync", str(root), *registered()],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # detached: a Ctrl-C of the command never reaches it
        close_fds=True,
        env={k: v for k, v in os.environ.items() if k != "GC_FAULT_POINT"},
    )


def run(root: Path) -> None:
    """The background syncer: sync while someone asked since the last sync, then exit."""
    import fcntl

    from beads.errors import GcError
    from beads.store import Store
    from beads.sync import sync

    where = _sync_dir(root)
    # Asked again after we let go of the lock (a writer saw it held): take it again.
    while (where / "again").exists():
        fd = os.open(where / "pusher.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return  # another syncer holds it: it sees `again`
        try:
            while (where / "again").exists():
                with contextlib.suppress(FileNotFoundError):
                    (where / "again").unlink()
                try:
                    with Store(root) as store:
                        sync(store)
                except GcError:
                    pass  # recorded for `gc sync --status`; the next write or hook retries
        finally:
            os.close(fd)


if __name__ == "__main__":
    from beads import arrivals

    for spec in sys.argv[2:]:
        arrivals.register(spec)
    run(Path(sys.argv[1]))
