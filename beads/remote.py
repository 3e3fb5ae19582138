"""Remotes and machine-local settings: what belongs to one machine, never synced.

Both live in the store's git config (`.beads/.git/config`), which git never transfers:
remotes as git writes them (`[remote "origin"] url = ...`, so plain git sees them too), and
the local settings of `gc config set --local` (`sync.auto`, `sync.interval`,
`sync.remote`) as their own sections. The synced `config.yaml` never holds them.

Transport goes through dulwich's clients (a local path, `file://`, `git://`, ssh, http(s)):
git itself is never needed. The network exchange holds no lock; writing the objects it
brought takes the store's write lock for the moment it lasts.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from beads.config import CONFIG_PATH, parse_config
from beads.errors import GcError, InvalidInput, NotFound, StorageError
from beads.reader import BRANCH, is_sha
from beads.record import shown

if TYPE_CHECKING:
    from dulwich.client import GitClient

    from beads.gitrepo import GitRepo

REMOTE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
DEFAULT_REMOTE = "origin"
DEFAULT_INTERVAL = 30.0
# Seconds of clock difference between machines a history walk allows for (`only_in`): one
# machine's commits are never older than their parents, and 1 s covers commits of a second.
SKEW_SLACK = 5
# The local settings `gc config set --local` takes, and how each value is read.
LOCAL_KEYS: dict[str, Callable[[Any], Any]] = {}


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise InvalidInput(f"expected true or false, not {shown(value)}")


def _seconds(value: Any) -> float:
    from beads.times import parse_duration

    seconds = parse_duration(str(value))
    if seconds < 0.5:
        raise InvalidInput(f"sync.interval must be at least 0.5s, not {shown(value)}")
    return seconds


def _remote_name(value: Any) -> str:
    return check_remote_name(str(value))


def _store_path(value: Any) -> str:
    """Another store on this machine (`stores.<name>`, for gates on its beads): an absolute
    path to it (its project directory or its `.beads/`)."""
    path = Path(str(value)).expanduser()
    if not path.is_absolute():
        raise InvalidInput(f"a store path must be absolute, not {shown(value)}")
    return str(path)


LOCAL_KEYS.update({"sync.auto": _bool, "sync.interval": _seconds, "sync.remote": _remote_name})
# Named other stores (`gc config set --local stores.NAME PATH`): a name is what git allows in
# a config key, lower case (git reads the keys case-blind).
LOCAL_KEYS["stores.*"] = _store_path
STORE_NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,63}")


def _nats_url(value: Any) -> str:
    """`delivery.nats.url`: one server URL or several, comma-separated, as nats-py takes them."""
    urls = [u.strip() for u in str(value).split(",") if u.strip()]
    schemes = ("nats://", "tls://", "ws://", "wss://")
    if not urls or not all(u.startswith(schemes) and " " not in u for u in urls):
        raise InvalidInput(
            f"a NATS URL is nats://HOST:PORT (or tls://, ws://, wss://), not {shown(value)}"
        )
    return ",".join(urls)


def _names_here(value: Any) -> list[str]:
    """`delivery.nats.agents`: the agents living on this machine (a list, or comma-separated)."""
    from beads.record import check_agent

    names = value if isinstance(value, list) else str(value).split(",")
    return [check_agent(str(n).strip(), what="agent") for n in names if str(n).strip()]


def _machine(value: Any) -> str:
    """`delivery.nats.machine`: this machine's name (its relay's durable consumer)."""
    if not MACHINE_RE.fullmatch(str(value)):
        raise InvalidInput(f"a machine name is letters, digits, _ and -, not {shown(value)}")
    return str(value)


def _file_path(value: Any) -> str:
    """A file of this machine (NATS credentials, TLS certificates): an absolute path."""
    path = Path(str(value)).expanduser()
    if not path.is_absolute():
        raise InvalidInput(f"a file path must be absolute, not {shown(value)}")
    return str(path)


def _secret(value: Any) -> str:
    if not str(value).strip() or "\n" in str(value):
        raise InvalidInput("a token is one line of text")
    return str(value).strip()


MACHINE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# Real-time delivery across machines (inbox/nats): where the server is, how to log in, and
# which agents live here. Machine-local: another machine has its own.
LOCAL_KEYS.update(
    {
        "delivery.nats.url": _nats_url,
        "delivery.nats.creds": _file_path,
        "delivery.nats.token": _secret,
        "delivery.nats.tls_ca": _file_path,
        "delivery.nats.tls_cert": _file_path,
        "delivery.nats.tls_key": _file_path,
        "delivery.nats.agents": _names_here,
        "delivery.nats.machine": _machine,
    }
)


def _local_key(key: str) -> Callable[[Any], Any] | None:
    """How the local setting `key` is read (`stores.<name>` by its pattern); None: unknown."""
    section, _, name = key.partition(".")
    if key in LOCAL_KEYS:
        return LOCAL_KEYS[key] if not key.endswith(".*") else None
    if f"{section}.*" in LOCAL_KEYS and STORE_NAME_RE.fullmatch(name):
        return LOCAL_KEYS[f"{section}.*"]
    return None


def other_store(git_dir: Path, name: str) -> Path:
    """The `.beads/` directory of the store named `name` in the local settings."""
    from beads.location import find_store

    path = local_settings(git_dir).get(f"stores.{name}")
    if path is None:
        raise NotFound(
            f"no store {shown(name)}: name one with gc config set --local stores.NAME PATH"
        )
    return find_store(path)


def check_remote_name(name: str) -> str:
    if not REMOTE_NAME_RE.fullmatch(name):
        raise InvalidInput(f"a remote name is letters, digits, . _ -, not {shown(name)}")
    return name


def tracking_ref(name: str) -> bytes:
    """Where the last fetch from remote `name` left its branch (`refs/remotes/NAME/main`)."""
    return f"refs/remotes/{name}/main".encode()


# -- the store's git config ---------------------------------------------------------------


def _read_config(git_dir: Path) -> Any:
    from dulwich.config import ConfigFile

    try:
        return ConfigFile.from_path(str(git_dir / "config"))
    except OSError as exc:
        raise StorageError(f"cannot read {git_dir / 'config'}: {exc.strerror}") from None
    except ValueError as exc:
        raise StorageError(f"{git_dir / 'config'} does not parse: {exc}") from None


def remotes(git_dir: Path) -> dict[str, str]:
    """The remotes of the store: name -> url."""
    config = _read_config(git_dir)
    out = {}
    for section in config.sections():
        if len(section) == 2 and section[0] == b"remote":
            try:
                out[section[1].decode()] = config.get(section, b"url").decode()
            except KeyError:
                continue
    return dict(sorted(out.items()))


def add_remote(git_dir: Path, name: str, url: str) -> None:
    """Record remote `name` (refused when it exists)."""
    check_remote_name(name)
    if not url.strip() or "\n" in url:
        raise InvalidInput(f"not a remote URL: {shown(url)}")
    config = _read_config(git_dir)
    if name in remotes(git_dir):
        raise InvalidInput(f"remote {name} exists; remove it first with 'gc remote remove {name}'")
    section = (b"remote", name.encode())
    config.set(section, b"url", url.encode())
    config.set(section, b"fetch", f"+refs/heads/*:refs/remotes/{name}/*".encode())
    config.write_to_path()


def remove_remote(git_dir: Path, name: str) -> None:
    """Forget remote `name` and its tracking ref."""
    config = _read_config(git_dir)
    section = (b"remote", name.encode())
    if section not in config.sections():
        raise NotFound(f"no remote {name}")
    del config[section]
    config.write_to_path()
    (git_dir / tracking_ref(name).decode()).unlink(missing_ok=True)


def remote_url(git_dir: Path, name: str | None) -> tuple[str, str]:
    """`(name, url)` of the remote to use: `name`, else `sync.remote`, else the only one
    (or `origin` among several)."""
    known = remotes(git_dir)
    if name is None:
        name = local_settings(git_dir).get("sync.remote")
    if name is None:
        if not known:
            raise NotFound("no remote configured; add one with 'gc remote add NAME URL'")
        name = next(iter(known)) if len(known) == 1 else DEFAULT_REMOTE
    if name not in known:
        raise NotFound(f"no remote {name} (known: {', '.join(known) or 'none'})")
    return name, known[name]


def local_settings(git_dir: Path) -> dict[str, Any]:
    """The machine-local settings (`sync.auto`, ...) set with `gc config set --local`; a
    value edited by hand into nonsense counts as unset."""
    from beads.autosync import read_local

    out: dict[str, Any] = {}
    for key, value in read_local(git_dir).items():
        read = _local_key(key)
        if read is not None:
            try:
                out[key] = read(value)
            except GcError:
                continue
    return out


def set_local(git_dir: Path, key: str, value: Any) -> Any:
    """Set (value None: unset) one machine-local setting; returns the value as read."""
    read = _local_key(key)
    if read is None:
        raise InvalidInput(f"not a local setting: {shown(key)} (known: {', '.join(LOCAL_KEYS)})")
    *parts, name = key.split(".")  # `delivery.nats.url`: section `delivery "nats"`
    section = tuple(part.encode() for part in parts)
    config = _read_config(git_dir)
    if value is None:
        try:
            del config[section][name.encode()]
        except KeyError:
            pass
        config.write_to_path()
        return None
    checked = read(value)
    text = str(checked).lower() if isinstance(checked, bool) else str(checked)
    if isinstance(checked, list):
        text = ",".join(checked)
    config.set(section, name.encode(), text.encode())
    config.write_to_path()
    return checked


def adopt(git_dir: Path) -> bool:
    """Give a plain git clone of a store (bare, its branch main holding `config.yaml`) the
    marker and settings of a store; False, untouched, for any other repository."""
    from dulwich.repo import Repo

    from beads.location import MARKER_SECTION

    try:
        repo = Repo(str(git_dir))
    except Exception:  # not a repository at all: dulwich raises several kinds
        return False
    try:
        head = repo.refs.as_dict().get(BRANCH.encode())
        config = repo.get_config()
        if head is None or not repo.bare:
            return False
        from dulwich.object_store import tree_lookup_path

        tree = repo.object_store[head].tree  # type: ignore[union-attr]
        _mode, sha = tree_lookup_path(repo.object_store.__getitem__, tree, CONFIG_PATH.encode())
        settings = parse_config(repo.object_store[sha].as_raw_string())[0]
        if not isinstance(settings, dict) or "format" not in settings:
            return False
        config.set((b"gc",), b"auto", b"0")
        config.set((b"core",), b"logAllRefUpdates", True)
        config.set((MARKER_SECTION,), b"format", b"1")
        config.write_to_path()
        return True
    except Exception:  # no branch, no config.yaml, a damaged object: not a store
        return False
    finally:
        repo.close()


# -- transport ----------------------------------------------------------------------------


def client_for(url: str, *, thin_packs: bool = True) -> tuple[GitClient, str]:
    """dulwich's client for `url` (with the user's git config: credentials, ssh command)."""
    from dulwich.client import get_transport_and_path
    from dulwich.config import StackedConfig

    try:
        config = StackedConfig.default()
        return get_transport_and_path(url, config=config, quiet=True, thin_packs=thin_packs)
    except Exception as exc:  # dulwich raises several kinds for a URL it cannot use
        raise InvalidInput(f"cannot use remote {shown(url)}: {exc}") from None


def transport_error(url: str, exc: BaseException) -> GcError:
    """One line for a failed exchange with a remote: its kind decides the exit code."""
    from dulwich.errors import HangupException, NotGitRepository

    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, NotGitRepository | FileNotFoundError) or "not found" in text.lower():
        return NotFound(f"no git repository at {url}: {text}")
    if isinstance(exc, HangupException) and "does not appear to be a git repository" in text:
        return NotFound(f"no git repository at {url}: {text}")
    if "401" in text or "403" in text or "auth" in text.lower() or "denied" in text.lower():
        return StorageError(f"the remote {url} refused our credentials: {text}")
    return StorageError(f"cannot reach the remote {url}: {text}")


def fetch(
    git: GitRepo, url: str, heads: list[bytes], locked: Callable[[], Any] | None = None
) -> bytes | None:
    """See `_fetch`; a thin pack whose deltas name a base we cannot find is fetched again
    whole (no thin pack), rather than failing the sync."""
    try:
        return _fetch(git, url, heads, locked, thin=True)
    except _UnresolvedBase:
        return _fetch(git, url, heads, locked, thin=False)


class _UnresolvedBase(Exception):
    """A received thin pack has a delta on an object the store does not hold."""


def _fetch(
    git: GitRepo,
    url: str,
    heads: list[bytes],
    locked: Callable[[], Any] | None,
    *,
    thin: bool,
) -> bytes | None:
    """Fetch the remote's branch into the store's objects; returns its commit (None for an
    empty remote). `heads` are the commits we have (our branch, the remotes' as last seen),
    offered so the remote sends only what we lack. A remote that has branches but not ours
    is not a store. `locked` is the store's write lock, held while the objects are written.

    The pack received is unpacked and stored by `GitRepo.store_objects` (loose objects, or
    one pack named as git names packs): dulwich's own pack install hashes every object id
    of every pack already in the store, a cost that grows with the store."""
    import io

    from dulwich.object_store import ObjectStoreGraphWalker

    client, path = client_for(url, thin_packs=thin)
    seen: dict[bytes, bytes] = {}
    received = io.BytesIO()

    def wants(refs: dict[bytes, bytes], depth: int | None = None) -> list[bytes]:
        seen.update(refs)
        sha = refs.get(BRANCH.encode())
        return [sha] if sha is not None and not git.has_object(sha) else []

    def parents(sha: bytes) -> list[bytes]:
        commit = git.commit_of(sha)
        return list(commit.parents) if commit is not None else []

    walker = ObjectStoreGraphWalker([h for h in heads if git.has_object(h)], parents)
    try:
        result = client.fetch_pack(path, wants, walker, received.write)
    except GcError:
        raise
    except Exception as exc:
        raise transport_error(url, exc) from None
    if received.tell():
        with locked() if locked is not None else contextlib.nullcontext():
            _store_pack(git, received, url, thin)
    refs = {k: v for k, v in (result.refs or seen).items() if v is not None}
    head = refs.get(BRANCH.encode())
    if head is None:
        if any(name.startswith(b"refs/heads/") for name in refs):
            raise NotFound(f"the remote {url} is not a gc-beads store (it has no branch main)")
        return None
    if not is_sha(head) or not git.has_object(head):
        raise StorageError(f"the remote {url} did not send the commit its branch names")
    return head


def _store_pack(git: GitRepo, received: Any, url: str, thin: bool = True) -> None:
    """Unpack a received pack (deltas resolved against its own objects or ours) into the
    store's objects."""
    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.objects import sha_to_hex
    from dulwich.pack import PackData, PackInflater, UnresolvedDeltas

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
    try:
        data = PackData.from_file(received, DEFAULT_OBJECT_FORMAT, size)
        objects = list(PackInflater.for_pack_data(data, resolve_ext_ref=base))
    except UnresolvedDeltas:
        if thin:
            raise _UnresolvedBase() from None
        raise StorageError(f"the remote {url} sent deltas on objects it did not send") from None
    except Exception as exc:  # a damaged or truncated pack: dulwich raises several kinds
        raise StorageError(f"the remote {url} sent a pack that does not read: {exc}") from None
    git.store_objects([obj for obj in objects if not git.has_object(obj.id)])


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
    client, path = client_for(url)
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

    try:
        result = client.send_pack(path, update_refs, pack_data)
    except GcError:
        raise
    except Exception as exc:
        raise transport_error(url, exc) from None
    if stale:
        return False
    status = (result.ref_status or {}).get(BRANCH.encode())
    if status is not None:
        text = status.decode() if isinstance(status, bytes) else str(status)
        if "stale" in text or "non-fast-forward" in text or "fetch first" in text:
            return False
        if "lock" in text:
            return False
        raise StorageError(f"the remote {url} refused the push: {text}")
    return True


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
