"""The exchange with a remote through dulwich's clients (a local path, `file://`, `git://`,
ssh, http(s)): git itself is never needed. Here are the clients, the pack a fetch receives
(streamed to a file by the caller, then unpacked into the store), and the pack a push sends;
what is allowed (timeouts, sizes, which refs) is decided by the caller (`beads.sync.remote`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from beads.errors import GcError, InvalidInput, StorageError

if TYPE_CHECKING:
    from dulwich.client import GitClient
    from dulwich.config import StackedConfig

    from beads.git.repo import GitRepo

# A fetch writes its blobs and trees in batches of about this many bytes as it inflates
# them, so what it holds stays near this, whatever the pack inflates to.
STORE_BATCH_BYTES = 8 * 1024 * 1024


class UnresolvedBase(Exception):
    """A received thin pack has a delta on an object the store does not hold."""


class Unusable(Exception):
    """dulwich has no client for a URL (its words are the message)."""


def client_for(url: str, *, thin_packs: bool = True, timeout: float) -> tuple[GitClient, str]:
    """dulwich's client for `url` (with the user's git config: credentials, ssh command)
    and the path it names; an http(s) client's requests wait at most `timeout` seconds for
    each answer. Unusable when dulwich cannot use the URL; InvalidInput naming the file when
    one of the user's git config files does not parse (`user_config`)."""
    from dulwich.client import default_urllib3_manager, get_transport_and_path

    _quiet_dulwich()
    check_url(url)
    _check_local_kind(url)
    config = user_config()
    try:
        manager = None
        if url.lower().startswith(("http://", "https://")):
            manager = default_urllib3_manager(
                config, base_url=url, timeout=timeout, **_single_wait_managers()
            )
        client, path = get_transport_and_path(
            url, config=config, quiet=True, thin_packs=thin_packs, pool_manager=manager
        )
    except Exception as exc:  # dulwich raises several kinds for a URL it cannot use
        raise Unusable(str(exc)) from None
    _check_local_file(client, path)
    return client, path


def _quiet_dulwich() -> None:
    """Keep dulwich's log records (a remote's ref line it cannot parse, "unknown part in
    pkt-ref") off stderr, where each command writes one line of its own: with no handler
    anywhere, Python's last resort would print every warning. An application that sets up
    logging still receives them. Older dulwich (1.0) logs some of them on the root logger
    (`logging.warning`, which also gives the root a stderr handler): those records, and only
    those, are dropped there."""
    import logging

    logger = logging.getLogger("dulwich")
    if not any(isinstance(handler, logging.NullHandler) for handler in logger.handlers):
        logger.addHandler(logging.NullHandler())
    root = logging.getLogger()
    if _not_dulwichs not in root.filters:
        root.addFilter(_not_dulwichs)


def _not_dulwichs(record: Any) -> bool:
    """Whether a log record on the root logger was made outside dulwich's modules."""
    import dulwich

    return not record.pathname.startswith(os.path.dirname(dulwich.__file__) + os.sep)


# `ext::sh -c cmd`, `fd::0`: git hands such a URL to a remote helper (`ext` runs a command);
# dulwich would take it for an scp-like ssh address on a host named after the helper.
_REMOTE_HELPER = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*::")


def check_url(url: str) -> None:
    """Unusable when `url` is empty (or blank), names one of git's remote helpers
    (`TRANSPORT::ADDRESS`), or has a scheme (`scheme://`) but no address
    that parses: a port out of range, a bracketed host left open. dulwich would take such a
    URL for an scp-like ssh address, and ssh would look up a host named after the scheme."""
    from urllib.parse import urlsplit

    if not url.strip():
        raise Unusable("it is empty: name a path or URL")
    if _REMOTE_HELPER.match(url):
        raise Unusable(
            "git's remote helpers (TRANSPORT::ADDRESS) are not used: name a path, or a "
            "file://, git://, ssh://, http:// or https:// URL"
        )
    if "://" not in url:
        return
    try:
        _ = urlsplit(url).port  # parsed when asked for: ValueError out of range
    except ValueError as exc:
        raise Unusable(str(exc)) from None


def _check_local_kind(url: str) -> None:
    """Unusable when `url` names a file on this machine that is neither a directory (a
    repository) nor a regular file (a bundle): dulwich opens the path to look for a bundle,
    and a FIFO or a device (`/dev/zero`) would hold the command for ever."""
    path = url[len("file://") :] if url.startswith("file://") else url
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return  # not a local path, or none there: the exchange says which
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise Unusable("it is not a directory (a remote is a git repository)")


def _check_local_file(client: GitClient, path: str) -> None:
    """Unusable when the local `path` is a regular file that is no git bundle whose list of
    refs reads: dulwich takes a file whose first line is a bundle's header for a bundle
    (and fails on the rest with its parser's words), any other for a repository."""
    from dulwich.client import BundleClient, LocalGitClient, get_transport_and_path

    if not isinstance(client, BundleClient | LocalGitClient) or not os.path.isfile(path):
        return
    if isinstance(client, LocalGitClient):
        if isinstance(get_transport_and_path(path)[0], BundleClient):  # a file:// URL
            raise Unusable("it is a git bundle: name it by its path, not a file:// URL")
        raise Unusable("it is a file that is neither a git repository nor a git bundle")
    try:
        client.get_refs(path)  # reads the bundle's header: its refs, up to the pack
    except OSError as exc:
        raise Unusable(f"cannot read it: {exc.strerror or exc}") from None
    except Exception:  # dulwich's parser raises several kinds for a header that does not read
        raise Unusable(
            "it is a file that is neither a git repository nor a git bundle "
            "(its bundle header is cut short or damaged)"
        ) from None


def read_only(client: GitClient) -> bool:
    """Whether `client` can only be fetched from: a git bundle's."""
    from dulwich.client import BundleClient

    return isinstance(client, BundleClient)


def absolute_url(url: str) -> str:
    """`url`, a relative path of a repository or bundle on this machine made absolute, as
    `git clone` records its remote: it then names the same remote from any directory."""
    from dulwich.client import BundleClient, LocalGitClient, get_transport_and_path

    try:
        client, path = get_transport_and_path(url, config=user_config())
    except Exception:  # dulwich raises several kinds for a URL it cannot use
        return url
    local = isinstance(client, BundleClient | LocalGitClient) and path == url  # no file://
    return os.path.abspath(url) if local else url


def user_config() -> StackedConfig:
    """The user's and the system's git config, as dulwich's `StackedConfig.default` reads
    them (credentials, ssh command, proxies, `url.*.insteadOf`), from the files git reads
    (git-config(1), FILES): `GIT_CONFIG_GLOBAL`, else `~/.gitconfig` and
    `$XDG_CONFIG_HOME/git/config`; then `GIT_CONFIG_SYSTEM`, else `/etc/gitconfig` (none
    with `GIT_CONFIG_NOSYSTEM`). A file that is absent, under a path that is no directory,
    or unreadable to this user is skipped, as git skips it; one that does not parse is
    InvalidInput naming it (git refuses it too: "bad config line 1 in file ...")."""
    from dulwich.config import ConfigFile, StackedConfig, get_xdg_config_home_path

    if "GIT_CONFIG_GLOBAL" in os.environ:
        paths = [os.environ["GIT_CONFIG_GLOBAL"]]
    else:
        paths = [os.path.expanduser("~/.gitconfig"), get_xdg_config_home_path("git", "config")]
    if "GIT_CONFIG_SYSTEM" in os.environ:
        paths.append(os.environ["GIT_CONFIG_SYSTEM"])
    elif "GIT_CONFIG_NOSYSTEM" not in os.environ:
        paths.append("/etc/gitconfig")
    backends = []
    for path in paths:
        try:
            backends.append(ConfigFile.from_path(path))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        except OSError as exc:
            raise InvalidInput(
                f"the git config file {path} cannot be read: {exc.strerror or exc}"
            ) from None
        except ValueError as exc:  # dulwich's parser: "expected trailing ]" and the like
            raise InvalidInput(f"the git config file {path} cannot be read: {exc}") from None
    return StackedConfig(backends)


def _single_wait_managers() -> dict[str, Any]:
    """urllib3's pool managers with no retry of a connection or a read that failed: a
    remote silent for `sync.timeout` fails the exchange then, not after urllib3's default
    three retries of as long each."""
    import functools

    from urllib3 import PoolManager, ProxyManager
    from urllib3.util.retry import Retry

    once = Retry(total=3, connect=0, read=0)  # redirects and answered statuses as before
    return {
        "pool_manager_cls": functools.partial(PoolManager, retries=once),
        "proxy_manager_cls": functools.partial(ProxyManager, retries=once),
    }


def needs_timer(client: GitClient) -> bool:
    """Whether an exchange through `client` is carried by no socket (ssh runs a program, a
    local path reads files): a timer must bound it then."""
    from dulwich.client import LocalGitClient, SSHGitClient

    return isinstance(client, LocalGitClient | SSHGitClient)


def is_not_a_repository(exc: BaseException, text: str) -> bool:
    """Whether a failed exchange says there is no git repository at the other end."""
    from dulwich.errors import HangupException, NotGitRepository

    if isinstance(exc, NotGitRepository | FileNotFoundError):
        return True
    return isinstance(exc, HangupException) and "does not appear to be a git repository" in text


def receive(
    git: GitRepo,
    client: GitClient,
    path: str,
    wants: Callable[..., list[bytes]],
    heads: list[bytes],
    write: Callable[[bytes], None],
    progress: Callable[..., None],
    max_object: int,
    what: str,
    max_fetch: int,
) -> dict[bytes, bytes] | None:
    """Ask the remote for what `wants(refs)` names, offering `heads` (commits we hold) so it
    sends only what we lack; the pack goes to `write` piece by piece. Returns the remote's
    refs (None when the client did not report them). A local-path remote is read here, each
    object refused over `max_object` bytes before it is read, its history walked as
    progress (`progress()`) up to what a pack of `max_fetch` bytes holds (`localfetch`)."""
    from dulwich.client import LocalGitClient
    from dulwich.object_store import ObjectStoreGraphWalker

    offered = [h for h in heads if git.has_object(h)]
    if isinstance(client, LocalGitClient):
        from beads.git import localfetch

        # Read here, the remote's history is walked down to the commits this store holds
        # (each with all it names). Offering none asks for everything (a repair).
        held = git.has_object if offered else _nothing_held
        return localfetch.fetch_pack(
            path, wants, held, write, max_object, what, working=progress, max_fetch=max_fetch
        )

    def parents(sha: bytes) -> list[bytes]:
        commit = git.commit_of(sha)
        return list(commit.parents) if commit is not None else []

    walker = ObjectStoreGraphWalker(offered, parents)
    return client.fetch_pack(path, wants, walker, write, progress=progress).refs


def _nothing_held(sha: bytes) -> bool:
    return False


def objects_in(received: Any, size: int) -> Iterator[Any]:
    """The objects of a pack in the file `received` (`size` bytes), deltas resolved against
    the pack's own objects only (a whole pack, as a peer sends when offered nothing)."""
    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.pack import PackData, PackInflater

    received.seek(0)
    data = PackData.from_file(received, DEFAULT_OBJECT_FORMAT, size)
    yield from PackInflater.for_pack_data(data)


def store_pack(
    git: GitRepo,
    received: Any,
    what: str,
    thin: bool = True,
    max_total: int | None = None,
    total_name: str = "the fetch's limit",
) -> None:
    """Unpack a received pack (deltas resolved against its own objects or ours) into `git`
    (a fetch's quarantine, `beads.git.quarantine.Incoming`), streaming: blobs and trees are
    handed to `git.store_objects` as they are inflated, a batch of about `STORE_BATCH_BYTES`
    at a time; only the commits (and tags) are kept, then handed over last, parents first
    (`referenced_first`). At most `max_total` bytes are inflated (InvalidInput past it,
    naming `total_name`). `what` names the sender in messages ("the remote URL")."""
    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.objects import sha_to_hex
    from dulwich.pack import PackData, PackInflater, UnresolvedDeltas

    def base(sha: bytes) -> tuple[int, list[bytes]]:
        # dulwich names an external base by its binary id, and takes a KeyError as "not
        # ours, perhaps later in the pack"; any other error would end the unpacking.
        # Read at once, not after `has_object`: a read that misses looks again, so a
        # background repack moving the base between two looks never makes it "absent".
        hex_id = sha_to_hex(sha) if len(sha) == 20 else sha
        try:
            type_num, raw = git.get_raw(hex_id)
        except KeyError:
            raise KeyError(hex_id) from None
        return type_num, [raw]

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
                    f"{what} sent objects that inflate to more than {max_total} "
                    f"bytes in one fetch ({total_name}); nothing was merged"
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
            raise UnresolvedBase() from None
        raise StorageError(f"{what} sent deltas on objects it did not send") from None
    except GcError:
        raise
    except Exception as exc:  # a damaged or truncated pack: dulwich raises several kinds
        raise StorageError(f"{what} sent a pack that does not read: {exc}") from None
    git.store_objects(batch + referenced_first(last))


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


def send(
    git: GitRepo,
    client: GitClient,
    path: str,
    update_refs: Callable[[dict[bytes, bytes]], dict[bytes, bytes]],
    objects: Callable[[], list[Any]],
    progress: Callable[..., None],
) -> Any | None:
    """Push: `update_refs(refs)` says what the remote's refs become, `objects()` what to
    send (whole objects, no deltas). Returns dulwich's result (its `ref_status`), None when
    a local-path remote's branch was locked by another push (that push moves it)."""
    from dulwich.file import FileLocked

    working = progress  # the deadline's: writing a large pack is work, not silence

    def pack_data(have: Any, want: Any, *, ofs_delta: bool = False, progress: Any = None) -> Any:
        from dulwich.pack import pack_objects_to_data

        count, records = pack_objects_to_data([(obj, None) for obj in objects()], ofs_delta=False)
        return count, _working_every(records, 1000, working)

    try:
        return client.send_pack(path, update_refs, pack_data, progress=progress)
    except FileLocked:
        return None


def _working_every(items: Iterator[Any], every: int, working: Callable[[], None]) -> Iterator[Any]:
    """`items`, calling `working()` once per `every` of them."""
    for n, item in enumerate(items, 1):
        if n % every == 0:
            working()
        yield item


def remote_head(client: GitClient, path: str, branch: bytes) -> bytes | None:
    """What the remote's `branch` holds now (None: absent). Raises what the client raises."""
    refs = client.get_refs(path)
    current = (refs.refs or {}).get(branch)
    return None if current == b"0" * 40 else current
