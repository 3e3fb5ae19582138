"""The background syncer of `sync.auto` (`python -m beads.sync.syncer ROOT [ANNOUNCER...]`), which
`beads.sync.auto.start` starts: sync while someone asked since the last sync, then exit."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from beads.sync.auto import sync_dir


def run(root: Path) -> None:
    """The background syncer: sync while someone asked since the last sync, then exit."""
    import fcntl

    from beads.errors import GcError
    from beads.store import Store
    from beads.sync.syncing import sync

    where = sync_dir(root)
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
    from beads.sync import arrivals

    for spec in sys.argv[2:]:
        arrivals.register(spec)
    run(Path(sys.argv[1]))
