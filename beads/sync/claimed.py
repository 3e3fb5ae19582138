"""The commits that came from elsewhere naming this machine as their committer.

Every commit names its machine as committer, `<name> <<machine id>@gc-beads>`
(`beads.git.repo`), and the origin notes (`inbox.origin`) take a commit naming this
machine's id for one made here. But that line is written by whoever made the commit: another
machine (anyone who can push to a remote) can copy this machine's committer line, public in
every commit it pushed, into a commit of its own. So what was made here is decided from this
machine's own knowledge, not from the commit: every commit new to the store passes the gate
for incoming trees as it arrives (`gc sync`'s fetch, a plain `git push` into the store through
`beads.receivehook`), and those of them whose committer names this machine's id are recorded
here then, before their objects enter the store: no such commit is ever in the store's
objects, let alone on its branch, unrecorded (a kill between the record and the objects'
arrival leaves recorded a commit that never came, which changes nothing).

The record, `.beads/.git/gc-claimed` (`FILE`), holds one commit id a line, appended and
synced to disk. It lives beside the machine id (the store's git config): machine-local, never
synced, outside the index and `.runtime/`, so a rebuild of the index or a cleaned `.runtime/`
keeps it. It is empty (absent) unless some commit did that: a local write costs nothing, and a
reading command one failed open. `gc clone` records nothing: the clone's machine id is new
(random), so no commit that arrives can name it.

A commit this machine made and lost (a branch moved back by `gc doctor`) that comes back by
sync is recorded too: nothing here can tell it from a copy.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # on the hooks' path (inbox.origin), which never imports typing
if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from beads.sync.treegate import ObjectReader

FILE = "gc-claimed"  # in the store's git directory


def naming(objects: ObjectReader, commits: Iterable[bytes], machine_id: str) -> list[bytes]:
    """Those of `commits` (hex ids readable through `objects`) whose header names
    `machine_id` as a gc machine's committer (anywhere in the header: a commit whose header
    merely mentions it is taken too, which costs only a line)."""
    mark = f"<{machine_id}@gc-beads>".encode()
    found = []
    for sha in commits:
        try:
            _kind, raw = objects.get_raw(sha)
        except KeyError:  # not there: the gate has refused it already
            continue
        if mark in raw and mark in raw.split(b"\n\n", 1)[0]:
            found.append(sha)
    return found


def notice(root: Path, objects: ObjectReader, commits: Iterable[bytes]) -> list[bytes]:
    """Record those of `commits`, arriving in the store at `root` (its `.beads/`) from
    elsewhere, that name this machine's id as their committer (`naming`); returns them.
    Called once the gate passed them, before their objects enter the store. A store with no
    machine id yet has none that a commit could name. Raises OSError, StorageError."""
    from beads.settings.localconfig import machine_id

    here = machine_id(root / ".git", make=False)
    if not here:
        return []
    found = naming(objects, commits, here)
    record(root, found)
    return found


def record(root: Path, commits: Iterable[bytes]) -> None:
    """Append `commits` (hex ids) not recorded yet to the record of the store at `root`,
    synced to disk before it returns. Raises OSError, StorageError (a link in the way)."""
    known = recorded(root / ".git")
    fresh = [sha for sha in dict.fromkeys(commits) if sha not in known]
    if not fresh:
        return
    from beads import files

    fd = files.open_file(str(root), str(root / ".git" / FILE))
    try:
        os.write(fd, b"".join(sha + b"\n" for sha in fresh))
        os.fsync(fd)
    finally:
        os.close(fd)


def recorded(git_dir: Path) -> frozenset[bytes]:
    """The commits recorded in the store's git directory `git_dir` (hex ids): those that
    arrived from elsewhere naming this machine. A record that is not a regular file of its
    own (a link, a FIFO, a directory) or cannot be read counts as empty: the other
    machines' notes are still given, and no reader follows a link or waits on a pipe."""
    import stat

    try:
        fd = os.open(git_dir / FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # absent (the usual case), a link, no permission
        return frozenset()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return frozenset()
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read()
    except OSError:
        return frozenset()
    finally:
        os.close(fd)
    return frozenset(line for line in data.split() if len(line) == 40)
