"""Spare files: loose objects a repack has packed, kept for writers to reuse as new ones.

Why: on ext4 without a journal (common on cloud disks), creating a file skips every inode of
its block group freed in the last seconds to minutes, reading the inode table for each. A
repack frees loose objects by the thousand, so after a busy spell each new loose object (six
a send) cost ~180 µs instead of ~20 µs. A packed loose object is instead moved here, and a
writer renames a spare into place and overwrites it: no inode is freed or allocated.

Spares sit in small buckets, `.git/spare-objects/<retired at, epoch ms>-<random>/`
(git never looks there), so a writer lists a few dozen names, not thousands. A bucket is
used only `GRACE_SECONDS` after it was filled, so a reader that opened an old loose object
just before the repack moved it has read it long before its bytes change. At most
`MAX_BUCKETS` are kept; past that a packed loose object is deleted, as before.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time

SPARE_DIR = "spare-objects"
# A reader of a loose object opens it and reads it at once (dulwich, git, `read_loose`, which
# also checks the hash): a second is ample, two keep the pool small at a high write rate.
GRACE_SECONDS = 2.0
BUCKET_SIZE = 64
MAX_BUCKETS = 128
# A bucket takes spares for at most this long, so its name dates all of them.
BUCKET_OPEN_SECONDS = 0.5
# Spares a writer tries per object before it creates the file instead.
TRIES = 8
# After finding no spare old enough, a process looks again only this much later (at most:
# sooner when the youngest bucket comes of age). Each object created meanwhile becomes one
# more spare, and a pool past its bound deletes files again.
RELIST_SECONDS = 0.2
_STAMP = 13  # digits of the retirement time (ms) in a bucket's name: sorts as it ages


def spare_dir(objects_dir: str) -> str:
    """The spare directory of the repository whose object directory is `objects_dir`."""
    return os.path.join(os.path.dirname(objects_dir), SPARE_DIR)


def retire(objects_dir: str, shas: list[bytes]) -> None:
    """Remove the loose copies of `shas` (hex ids, now in a pack): kept as spares while
    there is room, deleted past it. One already gone is skipped."""
    spares = spare_dir(objects_dir)
    try:
        buckets_left = MAX_BUCKETS - len(os.listdir(spares))
    except FileNotFoundError:
        buckets_left = MAX_BUCKETS
    except OSError:  # not a folder, unreadable: no spares here
        buckets_left = 0
    bucket, room, opened = "", 0, 0.0
    for sha in shas:
        name = sha.decode()
        path = os.path.join(objects_dir, name[:2], name[2:])
        if room == 0 or time.time() > opened + BUCKET_OPEN_SECONDS:
            bucket, room = "", 0  # full, or open too long for its name to date what it holds
            if buckets_left > 0:
                bucket, room, opened = _new_bucket(spares), BUCKET_SIZE, time.time()
                buckets_left -= 1
        if not (bucket and _keep(path, os.path.join(bucket, name))):
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        room -= 1


def _new_bucket(spares: str) -> str:
    """A new empty bucket, or "" when it cannot be made (then loose objects are deleted)."""
    bucket = os.path.join(spares, f"{_now_ms():0{_STAMP}d}-{os.urandom(4).hex()}")
    try:
        os.makedirs(bucket)
    except OSError:
        return ""
    return bucket


def _keep(path: str, spare: str) -> bool:
    """Move a loose object to `spare`; False if it cannot be, or must
    not be: a file with other names (a local `git clone` hard-links the objects it copies)
    would change under them when reused."""
    try:
        found = os.lstat(path)
        if not (stat.S_ISREG(found.st_mode) and found.st_nlink == 1):
            return False
        os.rename(path, spare)  # same file system: no inode is freed
    except OSError:
        return False
    return True


class _Taking:
    """The bucket this process takes spares from, the names it saw there, and when to look
    for another bucket after finding none."""

    __slots__ = ("bucket", "names", "look_at")

    def __init__(self) -> None:
        self.bucket = ""
        self.names: list[str] = []
        self.look_at = 0.0


_taking: dict[str, _Taking] = {}


def reuse(objects_dir: str, temp: str) -> tuple[int, int] | None:
    """A spare renamed to `temp`, emptied and opened for writing, and the mode to give it
    once written (the one it was made with: read-only); None when there is none fit to use,
    and the caller creates `temp`."""
    spares = spare_dir(objects_dir)
    taking = _taking.get(spares)
    if taking is None:
        taking = _taking[spares] = _Taking()
    for _try in range(TRIES):
        if not taking.names and not _next_bucket(spares, taking):
            return None
        spare = os.path.join(taking.bucket, taking.names.pop())
        mode = _fit(spare)
        if mode is None:
            continue
        try:
            os.chmod(spare, 0o600)  # git made it read-only
            _rename_into(spare, temp)
        except FileNotFoundError:
            continue  # taken by another writer
        except OSError:
            break  # no right to, a full or read-only disk: create the file (and fail there)
        fd = _open_own(temp)
        if fd is not None:
            return fd, mode
        with contextlib.suppress(OSError):
            os.unlink(temp)  # changed hands since `_fit`: dropped
    taking.names = []
    taking.look_at = time.monotonic() + RELIST_SECONDS
    return None


def _fit(spare: str) -> int | None:
    """The mode of `spare` if it may be overwritten: a regular file of ours with no other
    name, moved here at least `GRACE_SECONDS` ago (its ctime: the move set it). One with
    other names or of another kind is dropped from the bucket (only that name: the file is
    untouched)."""
    try:
        found = os.lstat(spare)
    except OSError:
        return None
    if not (stat.S_ISREG(found.st_mode) and found.st_nlink == 1):
        with contextlib.suppress(OSError):
            os.unlink(spare)
        return None
    if found.st_uid != os.geteuid() or found.st_ctime > time.time() - GRACE_SECONDS:
        return None
    return stat.S_IMODE(found.st_mode)


def _open_own(temp: str) -> int | None:
    """`temp` opened for writing, if it is still a regular file with one name; never through
    a link, and never waiting on a FIFO. The caller overwrites it and cuts it to length (not
    emptied first: on ext4 that starts a writeback at close, ~180 µs an object). A power cut
    before the new bytes reach the disk can leave the old object's bytes under the new name:
    they do not hash to it, which `read_loose` and `gc doctor` check."""
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        found = os.fstat(fd)
        if stat.S_ISREG(found.st_mode) and found.st_nlink == 1:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _rename_into(spare: str, temp: str) -> None:
    """Rename `spare` to `temp`, making `temp`'s folder when it is missing."""
    try:
        os.rename(spare, temp)
    except FileNotFoundError:
        folder = os.path.dirname(temp)
        if os.path.isdir(folder):
            raise  # the spare is gone
        os.makedirs(folder, exist_ok=True)
        os.rename(spare, temp)


def _next_bucket(spares: str, taking: _Taking) -> bool:
    """Move `taking` to the oldest bucket old enough to use that still holds spares,
    removing the empty ones; False if there is none (looked for again only later)."""
    if taking.bucket:
        with contextlib.suppress(OSError):
            os.rmdir(taking.bucket)  # drained (by us or others); kept if spares remain
        taking.bucket = ""
    now = time.monotonic()
    if now < taking.look_at:
        return False
    try:
        buckets = sorted(os.listdir(spares))
    except OSError:
        buckets = []
    filled_before = _now_ms() - int(GRACE_SECONDS * 1000)
    for bucket in buckets:
        stamp = bucket[:_STAMP]
        if not (stamp.isascii() and stamp.isdigit()):
            continue  # not ours
        if int(stamp) > filled_before:  # too young, and so are those after it
            wait = (int(stamp) - filled_before) / 1000
            taking.look_at = now + min(wait, RELIST_SECONDS)
            return False
        path = os.path.join(spares, bucket)
        try:
            names = os.listdir(path)
        except OSError:
            continue
        if names:
            taking.bucket, taking.names = path, names
            return True
        with contextlib.suppress(OSError):
            os.rmdir(path)
    taking.look_at = now + RELIST_SECONDS
    return False


def _now_ms() -> int:
    return int(time.time() * 1000)
