"""The exchange with a remote: fetch its branch, push ours, and what a push sends.

Transport goes through dulwich's clients (a local path, `file://`, `git://`, ssh, http(s)):
git itself is never needed. The network exchange holds no lock; writing the objects it
brought takes the store's write lock for the moment it lasts. Which remotes there are (the
store's git config) is `beads.settings.localconfig`.

What a remote sends is bounded: every step waits at most `sync.timeout` without progress
(`beads.sync.deadline`); the pack received streams to a temporary file, at most
`sync.max_fetch_bytes` of it, and each object in it is refused, from its header, when it is
larger than `object_limit` allows, before it is inflated (`beads.git.packcheck`).

Fetched objects enter the store through one door: they are written to a quarantine, checked
there (the caller's `check`: the gate for incoming trees), and moved in only once accepted
(`beads.git.quarantine`). A refused fetch leaves nothing in the store's objects.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from beads.branch import BRANCH, is_sha
from beads.errors import GcError, InvalidInput, NotFound, StorageError
from beads.records.ids import PREFIX_RE
from beads.records.record import DEFAULT_MAX_BODY_BYTES
from beads.settings.config import CONFIG_PATH, parse_config
from beads.settings.localconfig import (
    DEFAULT_MAX_FETCH_BYTES,
    DEFAULT_TIMEOUT,
    local_settings,
    unusable_remote,
)
from beads.sync.deadline import deadline, is_timeout, timed_out

if TYPE_CHECKING:
    from beads.git import GitRepo

GitClient = Any  # dulwich's client, which only `beads.git.transport` names
# The judge of a fetched commit: `check(reader, commit)` raises to refuse it (what it
# returns is not used).
Check = Callable[["GitRepo", bytes], object]

# An object a remote sends may be this many times `store.max_body_bytes` (a bead's YAML
# holds its body and the rest of its fields), plus this much, before it is refused.
OBJECT_LIMIT_FACTOR = 4
OBJECT_LIMIT_SLACK = 64 * 1024
# What the objects of one fetch may inflate to, in all: this many times
# `sync.max_fetch_bytes` (a store's history deflates well: each commit rewrites a few trees
# of 256 entries, sent as small deltas).
INFLATED_FACTOR = 4
INFLATED_NAME = f"{INFLATED_FACTOR} x sync.max_fetch_bytes"
# The most refs a remote may list: a store's remote needs only refs/heads/main.
MAX_REFS = 10_000


def object_limit(max_body_bytes: int) -> int:
    """The largest object a remote may send a store whose `store.max_body_bytes` is this."""
    return OBJECT_LIMIT_FACTOR * max_body_bytes + OBJECT_LIMIT_SLACK


def limits(git: GitRepo) -> tuple[float, int]:
    """This machine's `sync.timeout` (seconds) and `sync.max_fetch_bytes`."""
    local = local_settings(git.git_dir)
    return (
        local.get("sync.timeout", DEFAULT_TIMEOUT),
        local.get("sync.max_fetch_bytes", DEFAULT_MAX_FETCH_BYTES),
    )


def client_for(
    url: str, *, thin_packs: bool = True, timeout: float = DEFAULT_TIMEOUT
) -> tuple[GitClient, str]:
    """dulwich's client for `url` (`beads.git.transport`); InvalidInput when none fits."""
    from beads.git import transport

    try:
        return transport.client_for(url, thin_packs=thin_packs, timeout=timeout)
    except transport.Unusable as exc:
        raise unusable_remote(url, exc) from None


def _needs_timer(client: GitClient) -> bool:
    from beads.git import transport

    return transport.needs_timer(client)


def transport_error(url: str, exc: BaseException, timeout: float | None = None) -> GcError:
    """One line for a failed exchange with a remote: its kind decides the exit code."""
    from beads.git.transport import is_not_a_repository

    if timeout is not None and is_timeout(exc):
        return timed_out(url, timeout)
    if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], bytes):
        missing = exc.args[0].decode(errors="replace")  # an object id the remote's tree names
        return StorageError(
            f"the remote {url} cannot send object {missing}, which its own history names: "
            "its repository is damaged (git fsck there); nothing was merged"
        )
    text = " ".join(str(exc).split()) or type(exc).__name__
    if is_not_a_repository(exc, text) or "not found" in text.lower():
        # dulwich's own words for a local path ("No git repository was found at PATH") say
        # it again: shown only when they say more.
        said = "" if text.lower().startswith("no git repository was found at") else f": {text}"
        return NotFound(f"no git repository at {url}{said}")
    if url.startswith("git://") and "denied" in text.lower():
        # The git protocol carries no credentials: a daemon says "access denied or
        # repository not exported" of a repository it lacks or does not export, and of a
        # push it was not started to take.
        return StorageError(
            f"the git daemon at {url} refused the request: {text} (no such repository "
            "there, or not exported; a push also needs the daemon's --enable=receive-pack)"
        )
    if "401" in text or "403" in text or "auth" in text.lower() or "denied" in text.lower():
        return StorageError(f"the remote {url} refused our credentials: {text}")
    return StorageError(f"cannot reach the remote {url}: {text}")


def fetch(
    git: GitRepo,
    url: str,
    heads: list[bytes],
    locked: Callable[[], Any] | None = None,
    *,
    max_object: int,
    check: Check | None = None,
) -> bytes | None:
    """See `_fetch`; a thin pack whose deltas name a base we cannot find is fetched again
    whole (no thin pack), rather than failing the sync. An object over `max_object` bytes
    (`object_limit`) is refused (InvalidInput) before it is inflated."""
    from beads.git.transport import UnresolvedBase

    try:
        return _fetch(git, url, heads, locked, thin=True, max_object=max_object, check=check)
    except UnresolvedBase:
        return _fetch(git, url, heads, locked, thin=False, max_object=max_object, check=check)


def restore_objects(
    git: GitRepo, url: str, wanted: set[bytes], max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> set[bytes]:
    """Write into the store the objects among `wanted` that the remote's branch holds
    (`gc doctor` restoring a damaged object); returns their ids. The remote's whole history
    is asked for, as a clone does, within this machine's limits, and only the wanted
    objects are kept (their ids as computed from the bytes received). The caller holds the
    store's write lock."""
    import tempfile

    from beads.git.packcheck import check_pack
    from beads.git.quarantine import receiving
    from beads.git.transport import objects_in

    timeout, max_fetch = limits(git)
    client, path = client_for(url, thin_packs=False, timeout=timeout)
    seen: dict[bytes, bytes] = {}
    max_object = object_limit(max_body_bytes)
    found: set[bytes] = set()
    with tempfile.TemporaryFile(dir=git.git_dir, prefix="fetch-") as received:
        _receive(git, url, (client, path), [], seen, received, timeout, max_fetch, max_object,
                 want_all=True)  # fmt: skip
        if not received.tell():
            return found
        what = f"the remote {url}"
        check_pack(received, max_object, what, max_total=INFLATED_FACTOR * max_fetch,
                   total_name=INFLATED_NAME)  # fmt: skip
        size = received.seek(0, 2)
        with receiving(git) as incoming:
            try:
                for obj in objects_in(received, size):
                    if obj.id in wanted:
                        incoming.store_objects([obj])
                        found.add(obj.id)
            except GcError:
                raise
            except Exception as exc:  # a damaged pack: dulwich raises several kinds
                raise StorageError(f"{what} sent a pack that does not read: {exc}") from None
            incoming.admit()
    return found


def _fetch(
    git: GitRepo,
    url: str,
    heads: list[bytes],
    locked: Callable[[], Any] | None,
    *,
    thin: bool,
    max_object: int,
    check: Check | None,
) -> bytes | None:
    """Fetch the remote's branch into the store's objects; returns its commit (None for an
    empty remote). `heads` are the commits we have (our branch, the remotes' as last seen),
    offered so the remote sends only what we lack. A remote that has branches but not ours
    is not a store. `locked` is the store's write lock, held while the objects move in.

    The objects received are unpacked into a quarantine (`beads.git.quarantine`), and from
    there stored by `GitRepo.store_objects` (loose objects, or one pack named as git names
    packs: dulwich's own pack install hashes every object id of every pack already in the
    store, a cost that grows with the store). `check(reader, commit)` first judges the
    remote's commit, reading the quarantine and the store's objects through `reader`; it
    raises to refuse the fetch. Only once it passes do the objects enter the store
    (`Incoming.admit`): a refused fetch, or one that failed, leaves nothing of what it
    received."""
    import tempfile

    timeout, max_fetch = limits(git)
    client, path = client_for(url, thin_packs=thin, timeout=timeout)
    seen: dict[bytes, bytes] = {}
    # On disk beside the store's objects: a pack is never held in memory whole.
    with tempfile.TemporaryFile(dir=git.git_dir, prefix="fetch-") as received:
        result_refs = _receive(
            git, url, (client, path), heads, seen, received, timeout, max_fetch, max_object
        )
        # The refs `wants` saw are those the pack was made for: dulwich's local client reads
        # the refs again after packing, when a push may have moved the branch to a commit not
        # sent.
        refs = {k: v for k, v in (seen or result_refs or {}).items() if v is not None}
        if not received.tell():  # nothing new: the commit is the store's already, or none
            return _checked_head(git, refs, url, check)
        from beads.git.packcheck import check_pack
        from beads.git.quarantine import receiving

        max_total = INFLATED_FACTOR * max_fetch
        what = f"the remote {url}"
        check_pack(received, max_object, what, max_total=max_total, total_name=INFLATED_NAME)
        received.seek(0, 2)
        with receiving(git) as incoming:
            _store_pack(incoming, received, url, thin, max_total)
            head = _checked_head(incoming, refs, url, check)
            with locked() if locked is not None else contextlib.nullcontext():
                incoming.admit()
    return head


def _checked_head(
    reader: GitRepo, refs: dict[bytes, bytes], url: str, check: Check | None
) -> bytes | None:
    """The remote's branch from its `refs` (None: an empty remote), once `reader` holds its
    commit and `check` passed it."""
    head = refs.get(BRANCH.encode())
    if head is None:
        if any(name.startswith(b"refs/heads/") for name in refs):
            raise NotFound(f"the remote {url} is not a gc-beads store (it has no branch main)")
        return None
    if not is_sha(head) or not reader.has_object(head):
        raise StorageError(f"the remote {url} did not send the commit its branch names")
    kind = _object_kind(reader, head)
    if kind != "a commit":
        # Git never puts another object on a branch: a ref written by hand, or a tool's
        # fault. Said as such, not as a branch without config.yaml.
        raise StorageError(
            f"the remote {url} is damaged: its branch main names {head[:12].decode()}, "
            f"{kind}, not a commit (git fsck there); nothing was merged"
        )
    if check is not None:
        check(reader, head)
    return head


# Git's object type numbers, as a message names them.
_KINDS = {1: "a commit", 2: "a tree", 3: "a blob", 4: "an annotated tag"}


def _object_kind(reader: GitRepo, sha: bytes) -> str:
    """What object `sha` is (`a commit`, `a blob`, ...) as a message names it."""
    try:
        type_num, _raw = reader.get_raw(sha)
    except Exception:  # unreadable: dulwich raises several kinds
        return "an unreadable object"
    return _KINDS.get(type_num, f"an object of type {type_num}")


def _receive(
    git: GitRepo,
    url: str,
    client_path: tuple[GitClient, str],
    heads: list[bytes],
    seen: dict[bytes, bytes],
    received: Any,
    timeout: float,
    max_fetch: int,
    max_object: int,
    *,
    want_all: bool = False,
) -> dict[bytes, bytes] | None:
    """The network step of a fetch: the pack the remote sends is written to `received`, at
    most `max_fetch` bytes of it, each piece within `timeout` of the last; returns the
    remote's refs (None: those `seen` by `wants`). `want_all`: the branch's commit is asked
    for even when we hold it (a repair asking for every object again)."""
    from beads.git import transport

    client, path = client_path
    size = [0]

    def wants(refs: dict[bytes, bytes], depth: int | None = None) -> list[bytes]:
        if len(refs) > MAX_REFS:  # only main is read: a flood of tags is no store's
            raise InvalidInput(
                f"the remote {url} lists {len(refs)} refs, over the {MAX_REFS} a store's "
                "remote may list (only refs/heads/main is read); nothing was merged"
            )
        seen.update(refs)
        sha = refs.get(BRANCH.encode())
        return [sha] if sha is not None and (want_all or not git.has_object(sha)) else []

    try:
        if transport.read_only(client):  # dulwich reads a bundle's whole pack into memory
            whole = os.path.getsize(path)
            if whole > max_fetch:
                raise InvalidInput(
                    f"the remote {url} is a bundle of {whole} bytes, over the {max_fetch} "
                    "one fetch may bring (sync.max_fetch_bytes); nothing was merged"
                )
        with deadline(timeout, timer=_needs_timer(client)) as progress:

            def write(data: bytes) -> None:
                size[0] += len(data)
                if size[0] > max_fetch:
                    raise InvalidInput(
                        f"the remote {url} sent more than {max_fetch} bytes in one fetch "
                        "(sync.max_fetch_bytes); nothing was merged"
                    )
                progress()
                received.write(data)

            return transport.receive(
                git, client, path, wants, heads, write, progress, max_object,
                f"the remote {url}", max_fetch,
            )  # fmt: skip
    except GcError:
        raise
    except Exception as exc:
        raise transport_error(url, exc, timeout) from None


def _store_pack(
    git: GitRepo, received: Any, url: str, thin: bool = True, max_total: int | None = None
) -> None:
    """Unpack a received pack into the store's objects (`beads.git.transport.store_pack`)."""
    from beads.git.transport import store_pack

    store_pack(git, received, f"the remote {url}", thin, max_total, INFLATED_NAME)


def check_remote_store(git: GitRepo, head: bytes, url: str, prefix: str | None) -> None:
    """Refuse a remote whose branch is not a store (no `config.yaml`), or a store of another
    id prefix (its ids would mix with ours), saying the command that makes ours its own."""
    raw = git.read_path(head, CONFIG_PATH) if git.commit_of(head) is not None else None
    if raw is None:
        raise NotFound(f"the remote {url} is not a gc-beads store (no config.yaml on main)")
    config, why = parse_config(raw)
    if not isinstance(config, dict) or not isinstance(config.get("store"), dict):
        # A config.yaml is there but unreadable: say what is wrong with it, not that it is
        # missing, so whoever runs the remote knows what to repair.
        why = why or "config.yaml has no 'store' section"
        raise NotFound(f"the remote {url} is not a gc-beads store: on main, {why}")
    theirs = config["store"].get("prefix", "gc")
    if prefix is not None and theirs != prefix:
        said = (
            f"the remote {url} holds a store of prefix {theirs}, not {prefix}; nothing was changed"
        )
        if isinstance(theirs, str) and PREFIX_RE.fullmatch(theirs):  # a command safe to paste
            said += (
                ": to sync with it, give this store its prefix: "
                f"'gc config set store.prefix {theirs}'"
            )
        raise NotFound(said)


def push(git: GitRepo, url: str, expected: bytes | None, new: bytes) -> bool:
    """Move the remote's branch from `expected` to `new`, sending only the objects of the
    commits it lacks. False when the remote's branch was no longer `expected` (someone
    pushed meanwhile: fetch and merge again); the server compares too (git's receive-pack
    refuses an update whose old value is stale)."""
    from beads.git import transport

    timeout, _max_fetch = limits(git)
    client, path = client_for(url, timeout=timeout)
    if transport.read_only(client):
        raise InvalidInput(
            f"the remote {url} is a git bundle, which is only read: nothing was pushed "
            "(to share this store's commits, sync with a repository)"
        )
    stale = []

    def update_refs(refs: dict[bytes, bytes]) -> dict[bytes, bytes]:
        current = refs.get(BRANCH.encode())
        if current is not None and current == b"0" * 40:
            current = None
        if current != expected:
            stale.append(current)
            return dict(refs)  # nothing changes: the caller fetches and merges again
        return {**refs, BRANCH.encode(): new}

    try:
        with deadline(timeout, timer=_needs_timer(client)) as progress:
            result = transport.send(
                git,
                client,
                path,
                update_refs,
                lambda: objects_since(git, new, expected, progress),
                progress,
            )
    except GcError:
        raise
    except Exception as exc:
        raise transport_error(url, exc, timeout) from None
    if result is None:
        # A local-path or file:// remote whose branch another push holds locked right now:
        # that push moves the branch, so ours is stale, as a refused compare-and-swap is.
        return False
    if stale:
        return False
    status = (result.ref_status or {}).get(BRANCH.encode())
    if status is not None:
        text = status.decode() if isinstance(status, bytes) else str(status)
        if any(word in text for word in _MOVED) or _moved(client, path, expected):
            return False
        raise StorageError(f"the remote {url} refused the push: {text}")
    return True


def _moved(client: GitClient, path: str, expected: bytes | None) -> bool:
    """Whether the remote's branch is no longer `expected`: a refusal worded otherwise
    (git's "failed to update ref" when another push moved the branch under its lock) is a
    lost race only then."""
    from beads.git.transport import remote_head

    try:
        current = remote_head(client, path, BRANCH.encode())
    except Exception:  # the remote answered the push; a second question failing says nothing
        return False
    return current != expected


# Words of a refused ref update that mean "the branch moved or is moving": another push won
# the race, so fetch and merge again. git's receive-pack says stale, non-fast-forward, fetch
# first or "failed to lock"; dulwich's local client "unable to set" when its compare-and-swap
# of the ref found another value.
_MOVED = ("stale", "non-fast-forward", "fetch first", "lock", "unable to set")


def only_in(git: GitRepo, new: bytes, known: bytes | None) -> list[bytes]:
    """The commits reachable from `new` and not from `known` (`beads.git.history`)."""
    from beads.git.history import only_in as walk

    return walk(git, new, known)


def objects_since(
    git: GitRepo, new: bytes, known: bytes | None, working: Callable[[], None] = lambda: None
) -> list[Any]:
    """The objects a holder of `known` lacks to have `new` (`beads.git.history`)."""
    from beads.git.history import objects_since as walk

    return walk(git, new, known, working)
