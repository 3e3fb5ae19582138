"""The exchange with a remote: fetch its branch, push ours, and what a push sends.

Transport goes through dulwich's clients (a local path, `file://`, `git://`, ssh, http(s)):
git itself is never needed. The network exchange holds no lock; writing the objects it
brought takes the store's write lock for the moment it lasts. Which remotes there are (the
store's git config) is `beads.localconfig`.

What a remote sends is bounded: every step waits at most `sync.timeout` without progress
(`beads.deadline`); the pack received streams to a temporary file, at most
`sync.max_fetch_bytes` of it, and each object in it is refused, from its header, when it is
larger than `object_limit` allows, before it is inflated (`beads.packcheck`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from beads.config import CONFIG_PATH, parse_config
from beads.deadline import deadline, is_timeout, timed_out
from beads.errors import GcError, InvalidInput, NotFound, StorageError
from beads.faults import fault
from beads.localconfig import DEFAULT_MAX_FETCH_BYTES, DEFAULT_TIMEOUT, local_settings
from beads.reader import BRANCH, is_sha
from beads.record import shown

if TYPE_CHECKING:
    from dulwich.client import GitClient

    from beads.git import GitRepo

# Seconds of clock difference between machines a history walk allows for (`only_in`): one
# machine's commits are never older than their parents, and 1 s covers commits of a second.
SKEW_SLACK = 5
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
# A fetch writes its blobs and trees in batches of about this many bytes as it inflates
# them, so what it holds stays near this, whatever the pack inflates to.
STORE_BATCH_BYTES = 8 * 1024 * 1024


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
    """dulwich's client for `url` (with the user's git config: credentials, ssh command);
    an http(s) client's requests wait at most `timeout` seconds for each answer."""
    from dulwich.client import default_urllib3_manager, get_transport_and_path
    from dulwich.config import StackedConfig

    try:
        config = StackedConfig.default()
        manager = None
        if url.lower().startswith(("http://", "https://")):
            manager = default_urllib3_manager(config, base_url=url, timeout=timeout)
        return get_transport_and_path(
            url, config=config, quiet=True, thin_packs=thin_packs, pool_manager=manager
        )
    except Exception as exc:  # dulwich raises several kinds for a URL it cannot use
        raise InvalidInput(f"cannot use remote {shown(url)}: {exc}") from None


def _needs_timer(client: GitClient) -> bool:
    """Whether an exchange through `client` is carried by no socket of ours (ssh runs a
    program, a local path reads files): the deadline's timer bounds it then."""
    from dulwich.client import LocalGitClient, SSHGitClient

    return isinstance(client, LocalGitClient | SSHGitClient)


def transport_error(url: str, exc: BaseException, timeout: float | None = None) -> GcError:
    """One line for a failed exchange with a remote: its kind decides the exit code."""
    from dulwich.errors import HangupException, NotGitRepository

    if timeout is not None and is_timeout(exc):
        return timed_out(url, timeout)
    if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], bytes):
        missing = exc.args[0].decode(errors="replace")  # an object id the remote's tree names
        return StorageError(
            f"the remote {url} cannot send object {missing}, which its own history names: "
            "its repository is damaged (git fsck there); nothing was merged"
        )
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, NotGitRepository | FileNotFoundError) or "not found" in text.lower():
        return NotFound(f"no git repository at {url}: {text}")
    if isinstance(exc, HangupException) and "does not appear to be a git repository" in text:
        return NotFound(f"no git repository at {url}: {text}")
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
) -> bytes | None:
    """See `_fetch`; a thin pack whose deltas name a base we cannot find is fetched again
    whole (no thin pack), rather than failing the sync. An object over `max_object` bytes
    (`object_limit`) is refused (InvalidInput) before it is inflated."""
    try:
        return _fetch(git, url, heads, locked, thin=True, max_object=max_object)
    except _UnresolvedBase:
        return _fetch(git, url, heads, locked, thin=False, max_object=max_object)


class _UnresolvedBase(Exception):
    """A received thin pack has a delta on an object the store does not hold."""


def _fetch(
    git: GitRepo,
    url: str,
    heads: list[bytes],
    locked: Callable[[], Any] | None,
    *,
    thin: bool,
    max_object: int,
) -> bytes | None:
    """Fetch the remote's branch into the store's objects; returns its commit (None for an
    empty remote). `heads` are the commits we have (our branch, the remotes' as last seen),
    offered so the remote sends only what we lack. A remote that has branches but not ours
    is not a store. `locked` is the store's write lock, held while the objects are written.

    The pack received is unpacked and stored by `GitRepo.store_objects` (loose objects, or
    one pack named as git names packs): dulwich's own pack install hashes every object id
    of every pack already in the store, a cost that grows with the store."""
    import tempfile

    timeout, max_fetch = limits(git)
    client, path = client_for(url, thin_packs=thin, timeout=timeout)
    seen: dict[bytes, bytes] = {}
    # On disk beside the store's objects: a pack is never held in memory whole.
    with tempfile.TemporaryFile(dir=git.git_dir, prefix="fetch-") as received:
        result_refs = _receive(
            git, url, (client, path), heads, seen, received, timeout, max_fetch, max_object
        )
        if received.tell():
            from beads.packcheck import check_pack

            max_total = INFLATED_FACTOR * max_fetch
            what = f"the remote {url}"
            check_pack(received, max_object, what, max_total=max_total, total_name=INFLATED_NAME)
            received.seek(0, 2)
            with locked() if locked is not None else contextlib.nullcontext():
                _store_pack(git, received, url, thin, max_total)
    # The refs `wants` saw are those the pack was made for: dulwich's local client reads the
    # refs again after packing, when a push may have moved the branch to a commit not sent.
    refs = {k: v for k, v in (seen or result_refs or {}).items() if v is not None}
    head = refs.get(BRANCH.encode())
    if head is None:
        if any(name.startswith(b"refs/heads/") for name in refs):
            raise NotFound(f"the remote {url} is not a gc-beads store (it has no branch main)")
        return None
    if not is_sha(head) or not git.has_object(head):
        raise StorageError(f"the remote {url} did not send the commit its branch names")
    return head


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
) -> dict[bytes, bytes] | None:
    """The network step of a fetch: the pack the remote sends is written to `received`, at
    most `max_fetch` bytes of it, each piece within `timeout` of the last; returns the
    remote's refs (None: those `seen` by `wants`)."""
    from dulwich.client import LocalGitClient
    from dulwich.object_store import ObjectStoreGraphWalker

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
        return [sha] if sha is not None and not git.has_object(sha) else []

    def parents(sha: bytes) -> list[bytes]:
        commit = git.commit_of(sha)
        return list(commit.parents) if commit is not None else []

    walker = ObjectStoreGraphWalker([h for h in heads if git.has_object(h)], parents)
    try:
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

            if isinstance(client, LocalGitClient):
                from beads import localfetch

                return localfetch.fetch_pack(
                    path, wants, walker, write, max_object, f"the remote {url}"
                )
            return client.fetch_pack(path, wants, walker, write, progress=progress).refs
    except GcError:
        raise
    except Exception as exc:
        raise transport_error(url, exc, timeout) from None


def _store_pack(
    git: GitRepo, received: Any, url: str, thin: bool = True, max_total: int | None = None
) -> None:
    """Unpack a received pack (deltas resolved against its own objects or ours) into the
    store's objects, streaming: blobs and trees are written as they are inflated, a batch of
    at most `STORE_BATCH_BYTES` at a time (unreachable and harmless until a commit names
    them); only the commits (and tags) are kept, then written last, parents first
    (`referenced_first`). At most `max_total` bytes are inflated (InvalidInput past it)."""
    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.objects import sha_to_hex
    from dulwich.pack import PackData, PackInflater, UnresolvedDeltas

    from beads.git.repo import PACK_OBJECTS_AT

    def base(sha: bytes) -> tuple[int, list[bytes]]:
        # dulwich names an external base by its binary id, and takes a KeyError as "not
        # ours, perhaps later in the pack"; any other error would end the unpacking.
        hex_id = sha_to_hex(sha) if len(sha) == 20 else sha
        if not git.has_object(hex_id):
            raise KeyError(hex_id)
        obj = git.objects[hex_id]
        return obj.type_num, obj.as_raw_chunks()

    size = received.tell()
    received.seek(0)
    batch: list[Any] = []  # blobs and trees not written yet
    batch_bytes = inflated = 0
    last: list[Any] = []  # commits and tags: written once everything they name is
    try:
        data = PackData.from_file(received, DEFAULT_OBJECT_FORMAT, size)
        for obj in PackInflater.for_pack_data(data, resolve_ext_ref=base):
            raw_size = obj.raw_length()
            inflated += raw_size
            if max_total is not None and inflated > max_total:
                raise InvalidInput(
                    f"the remote {url} sent objects that inflate to more than {max_total} "
                    f"bytes in one fetch ({INFLATED_NAME}); nothing was merged"
                )
            if git.has_object(obj.id):
                continue
            if obj.type_name in (b"commit", b"tag"):
                last.append(obj)
                continue
            batch.append(obj)
            batch_bytes += raw_size
            if batch_bytes >= STORE_BATCH_BYTES:
                git.store_objects(batch)
                batch, batch_bytes = [], 0
    except UnresolvedDeltas:
        if thin:
            raise _UnresolvedBase() from None
        raise StorageError(f"the remote {url} sent deltas on objects it did not send") from None
    except GcError:
        raise
    except Exception as exc:  # a damaged or truncated pack: dulwich raises several kinds
        raise StorageError(f"the remote {url} sent a pack that does not read: {exc}") from None
    ordered = batch + referenced_first(last)
    if len(ordered) >= PACK_OBJECTS_AT:
        git.store_objects(ordered)  # one pack, its index last: all or nothing
        return
    half = len(ordered) // 2  # loose, one by one: a kill can fall between any two
    git.store_objects(ordered[:half])
    fault("fetch-half-stored")
    git.store_objects(ordered[half:])


def referenced_first(objects: list[Any]) -> list[Any]:
    """`objects` in an order where each comes after what it names: blobs and trees before
    any commit, a commit after its parents. Written loose one by one, a fetch killed midway
    then leaves no commit without its tree or its parents: the next fetch, which asks for
    the remote's commit only when it is missing here, sends everything again."""
    commits = {obj.id: obj for obj in objects if obj.type_name == b"commit"}
    ordered = [obj for obj in objects if obj.type_name not in (b"commit", b"tag")]
    placed: set[bytes] = set()
    for start in commits:
        stack = [(start, False)]
        while stack:  # depth first, parents before children, without recursion
            sha, parents_done = stack.pop()
            if sha in placed:
                continue
            if parents_done:
                placed.add(sha)
                ordered.append(commits[sha])
                continue
            stack.append((sha, True))
            stack += [(p, False) for p in commits[sha].parents if p in commits and p not in placed]
    return ordered + [obj for obj in objects if obj.type_name == b"tag"]


def check_remote_store(git: GitRepo, head: bytes, url: str, prefix: str | None) -> None:
    """Refuse a remote whose branch is not a store (no `config.yaml`), or a store of another
    id prefix (its ids would mix with ours)."""
    raw = git.read_path(head, CONFIG_PATH) if git.commit_of(head) is not None else None
    config = parse_config(raw)[0] if raw is not None else None
    if not isinstance(config, dict) or not isinstance(config.get("store"), dict):
        raise NotFound(f"the remote {url} is not a gc-beads store (no config.yaml on main)")
    theirs = config["store"].get("prefix", "gc")
    if prefix is not None and theirs != prefix:
        raise NotFound(
            f"the remote {url} holds a store of prefix {theirs}, not {prefix}; nothing was changed"
        )


def push(git: GitRepo, url: str, expected: bytes | None, new: bytes) -> bool:
    """Move the remote's branch from `expected` to `new`, sending only the objects of the
    commits it lacks. False when the remote's branch was no longer `expected` (someone
    pushed meanwhile: fetch and merge again); the server compares too (git's receive-pack
    refuses an update whose old value is stale)."""
    timeout, _max_fetch = limits(git)
    client, path = client_for(url, timeout=timeout)
    stale = []

    def update_refs(refs: dict[bytes, bytes]) -> dict[bytes, bytes]:
        current = refs.get(BRANCH.encode())
        if current is not None and current == b"0" * 40:
            current = None
        if current != expected:
            stale.append(current)
            return dict(refs)  # nothing changes: the caller fetches and merges again
        return {**refs, BRANCH.encode(): new}

    def pack_data(have: Any, want: Any, *, ofs_delta: bool = False, progress: Any = None) -> Any:
        from dulwich.pack import pack_objects_to_data

        objects = objects_since(git, new, expected)
        return pack_objects_to_data([(obj, None) for obj in objects], ofs_delta=False)

    from dulwich.file import FileLocked

    try:
        with deadline(timeout, timer=_needs_timer(client)) as progress:
            result = client.send_pack(path, update_refs, pack_data, progress=progress)
    except GcError:
        raise
    except FileLocked:
        # A local-path or file:// remote whose branch another push holds locked right now:
        # that push moves the branch, so ours is stale, as a refused compare-and-swap is.
        return False
    except Exception as exc:
        raise transport_error(url, exc, timeout) from None
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
    try:
        refs = client.get_refs(path)
    except Exception:  # the remote answered the push; a second question failing says nothing
        return False
    current = (refs.refs or {}).get(BRANCH.encode())
    return (None if current == b"0" * 40 else current) != expected


# Words of a refused ref update that mean "the branch moved or is moving": another push won
# the race, so fetch and merge again. git's receive-pack says stale, non-fast-forward, fetch
# first or "failed to lock"; dulwich's local client "unable to set" when its compare-and-swap
# of the ref found another value.
_MOVED = ("stale", "non-fast-forward", "fetch first", "lock", "unable to set")


def only_in(git: GitRepo, new: bytes, known: bytes | None) -> list[bytes]:
    """The commits reachable from `new` and not from `known`, newest first.

    Both histories are walked together, newest commit first, painting what `known` reaches;
    the walk stops once every commit left to visit is painted and is older, by `SKEW_SLACK`,
    than the oldest unpainted one found: its cost follows the divergence and the last few
    seconds of history, not the whole history.
    (A clock skewed past that slack can make it list a commit `known` reaches as well:
    sending an object twice, or one needless merge commit, is harmless.)"""
    import heapq

    new_flag, known_flag = 1, 2
    flags: dict[bytes, int] = {}
    times: dict[bytes, int] = {}
    parents: dict[bytes, list[bytes]] = {}  # each commit read once
    heap: list[tuple[int, int, bytes]] = []

    def mark(sha: bytes, flag: int) -> None:
        had = flags.get(sha, 0)
        if had | flag != had:
            flags[sha] = had | flag
            if sha not in times:
                commit = git.commit_of(sha)
                if commit is None:
                    raise StorageError(f"commit {sha.decode()} is missing from the store's objects")
                times[sha], parents[sha] = commit.commit_time, commit.parents
            # Painted commits first among equal times: a second's commits stay in order.
            heapq.heappush(heap, (-times[sha], -flags[sha], sha))

    mark(new, new_flag)
    if known is not None and git.commit_of(known) is not None:
        mark(known, known_flag)
    oldest = times[new]
    while heap:
        if (
            all(flags[sha] & known_flag for _t, _f, sha in heap)
            and -heap[0][0] < oldest - SKEW_SLACK
        ):
            break
        _time, _flag, sha = heapq.heappop(heap)
        if flags[sha] == new_flag:
            oldest = min(oldest, times[sha])
        for parent in parents[sha]:
            mark(parent, flags[sha])
    only = [sha for sha, flag in flags.items() if flag == new_flag]
    return sorted(only, key=lambda sha: -times[sha])


def objects_since(git: GitRepo, new: bytes, known: bytes | None) -> list[Any]:
    """The objects a holder of `known` lacks to have `new`: each commit `known` does not
    reach, with the trees and blobs its tree holds that none of its parents hold at the same
    path (read only along the paths that changed)."""
    from dulwich.objects import Tree

    out: dict[bytes, Any] = {}

    def walk(tree_id: bytes, olds: list[bytes]) -> None:
        if tree_id in out or tree_id in olds:
            return
        tree = git.objects[tree_id]
        out[tree_id] = tree
        old_trees = [git.objects[old] for old in olds]
        for entry in tree.iteritems():
            before = [t[entry.path][1] for t in old_trees if entry.path in t]
            if entry.sha in before:
                continue
            if entry.mode & 0o170000 == 0o040000:
                walk(entry.sha, [b for b in before if isinstance(git.objects[b], Tree)])
            elif entry.sha not in out:
                out[entry.sha] = git.objects[entry.sha]

    for sha in only_in(git, new, known):
        commit = git.commit_of(sha)
        assert commit is not None
        out[sha] = commit
        walk(commit.tree, [git.tree_of(parent) for parent in commit.parents])  # type: ignore[misc]
    return list(out.values())
