"""Remotes and machine-local settings: what belongs to one machine, never synced.

Both live in the store's git config (`.beads/.git/config`), which git never transfers:
remotes as git writes them (`[remote "origin"] url = ...`, so plain git sees them too), and
the local settings of `gc config set --local` (`sync.auto`, `sync.interval`,
`sync.remote`, `sync.timeout`, `sync.max_fetch_bytes`, `stores.*`, `delivery.nats.*`,
`gates.destructive.unjudged`) as their own sections. The synced `config.yaml` never holds
them. The exchange with a remote is `beads.sync.remote`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from beads.errors import GcError, InvalidInput, NotFound, StorageError
from beads.records.record import shown

# Names of remotes and of stores: compiled by `re` on first use (a write checks neither).
REMOTE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
STORE_NAME = r"[a-z][a-z0-9-]{0,63}"
MACHINE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
MACHINE_ID_RE = re.compile(r"m-[0-9a-f]{16}")
DEFAULT_REMOTE = "origin"
DEFAULT_INTERVAL = 30.0
DEFAULT_TIMEOUT = 30.0  # seconds a remote may stay silent (`sync.timeout`)
DEFAULT_MAX_FETCH_BYTES = 1024**3  # the largest pack one fetch takes (`sync.max_fetch_bytes`)


# Each reader below refuses a value as "must be ..., not VALUE"; `set_local` puts the setting's
# name in front (`sync.auto must be true or false, not 'maybe'`), and docs/config.md's rows
# are made of these words.


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise InvalidInput(f"must be true or false, not {shown(value)}")


def _duration(value: Any, low: float, high: float, accepts: str) -> float:
    """`value` as seconds, from `low` to `high`; refused as "must be `accepts`"."""
    from beads.records.times import parse_duration

    try:
        seconds = parse_duration(str(value))
    except InvalidInput:
        seconds = -1.0
    if not low <= seconds <= high:
        raise InvalidInput(f"must be {accepts}, not {shown(value)}")
    return seconds


def _seconds(value: Any) -> float:
    """`sync.interval`: how long after a sync the next one may run."""
    return _duration(value, 0.5, float("inf"), "a duration of at least 0.5s, such as 45s or 10m")


def _timeout(value: Any) -> float:
    """`sync.timeout`: how long a remote may stay silent before the exchange fails."""
    return _duration(value, 0.1, 86400, "a duration from 0.1s to 1d, such as 45s or 10m")


def _byte_count(value: Any) -> int:
    """`sync.max_fetch_bytes`: the largest pack one fetch takes."""
    match = re.fullmatch(r"\s*(\d{1,15})\s*([KMGT]i?B?|B)?\s*", str(value), re.IGNORECASE)
    size = -1
    if match:
        unit = (match.group(2) or "B")[0].upper()
        size = int(match.group(1)) * 1024 ** "BKMGT".index(unit)
    if size < 1024:
        raise InvalidInput(
            "must be a size of at least 1KiB: bytes, or with a unit (64KiB, 512MiB, 1GiB), "
            f"not {shown(value)}"
        )
    return size


def _remote_name(value: Any) -> str:
    """`sync.remote`: the remote a sync uses when none is named."""
    try:
        return check_remote_name(str(value))
    except InvalidInput:
        raise InvalidInput(
            "must be a remote's name: letters, digits, '.', '_' and '-' (no '..', not ending "
            f"in '.' or '.lock'), not {shown(value)}"
        ) from None


def _absolute(what: str) -> Callable[[Any], str]:
    """How a path of this machine is read: absolute (`~` expanded); `what` names it."""

    def read(value: Any) -> str:
        path = Path(os.path.expanduser(str(value)))
        if not path.is_absolute():
            raise InvalidInput(f"must be the absolute path of a {what}, not {shown(value)}")
        return str(path)

    return read


def _nats_url(value: Any) -> str:
    """`delivery.nats.url`: the NATS server, or several servers of one cluster."""
    urls = [u.strip() for u in str(value).split(",") if u.strip()]
    schemes = ("nats://", "tls://", "ws://", "wss://")
    if not urls or not all(u.startswith(schemes) and " " not in u for u in urls):
        raise InvalidInput(
            "must be nats://HOST:PORT (or tls://, ws://, wss://), or several comma-separated, "
            f"not {shown(value)}"
        )
    return ",".join(urls)


def _names_here(value: Any) -> list[str]:
    """`delivery.nats.agents`: the agents living on this machine."""
    from beads.records.record import check_agent

    names = value if isinstance(value, list) else str(value).split(",")
    try:
        return [check_agent(str(n).strip(), what="agent") for n in names if str(n).strip()]
    except InvalidInput:
        raise InvalidInput(
            "must be agent names (letters, digits, '.', '_' or '-', at most 64, or rig/name), "
            f"a list or comma-separated, not {shown(value)}"
        ) from None


def _machine(value: Any) -> str:
    """`delivery.nats.machine`: this machine's name (its relay's durable consumer)."""
    if not MACHINE_RE.fullmatch(str(value)):
        raise InvalidInput(f"must be letters, digits, '_' and '-' (at most 64), not {shown(value)}")
    return str(value)


def _unjudged(value: Any) -> str:
    """`gates.destructive.unjudged`: what the gate answers when it cannot judge a command."""
    if str(value).strip().lower() not in ("ask", "deny"):
        raise InvalidInput(f"must be ask or deny, not {shown(value)}")
    return str(value).strip().lower()


def _secret(value: Any) -> str:
    """`delivery.nats.token`: the token the NATS server asks for."""
    if not str(value).strip() or "\n" in str(value):
        raise InvalidInput("must be one line of text")  # never shown: it is a secret
    return str(value).strip()


_file = _absolute("file")  # a file of this machine: NATS credentials, TLS certificates
# The local settings `gc config set --local` takes, and how each value is read.
LOCAL_KEYS: dict[str, Callable[[Any], Any]] = {
    "sync.auto": _bool,
    "sync.interval": _seconds,
    "sync.remote": _remote_name,
    "sync.timeout": _timeout,
    "sync.max_fetch_bytes": _byte_count,
    # Named other stores (`gc config set --local stores.NAME PATH`, for gates on their
    # beads): the store's project directory or its `.beads/`. A name (STORE_NAME) is what
    # git allows in a config key, lower case (git reads the keys case-blind).
    "stores.*": _absolute("store"),
    # Real-time delivery across machines (inbox/nats): where the server is, how to log in,
    # and which agents live here. Machine-local: another machine has its own.
    "delivery.nats.url": _nats_url,
    "delivery.nats.creds": _file,
    "delivery.nats.token": _secret,
    "delivery.nats.tls_ca": _file,
    "delivery.nats.tls_cert": _file,
    "delivery.nats.tls_key": _file,
    "delivery.nats.agents": _names_here,
    "delivery.nats.machine": _machine,
    # The destructive-op gate on this machine: "deny" turns its every "ask" into a deny, for
    # unattended agents where no person can answer (docs/gates.md).
    "gates.destructive.unjudged": _unjudged,
    # Take every guarded setting of config.yaml as it comes (beads.settings.trust): for an
    # unattended
    # machine, which then runs whatever programs anyone who can push to the remote names.
    "trust.follow_team": _bool,
}


# A local setting whose name git refuses in its config file (git takes letters, digits and
# `-`): the variable it is kept under (as `read_local` reports it, lower case).
def _local_key(key: str) -> Callable[[Any], Any] | None:
    """How the local setting `key` is read (`stores.<name>` by its pattern); None: unknown."""
    section, _, name = key.partition(".")
    if key in LOCAL_KEYS:
        return LOCAL_KEYS[key] if not key.endswith(".*") else None
    if f"{section}.*" in LOCAL_KEYS and re.fullmatch(STORE_NAME, name):
        return LOCAL_KEYS[f"{section}.*"]
    return None


def _to_git(key: str) -> str:
    """The name git keeps `key` under: git's variable names allow `-`, not `_`
    (`sync.max_fetch_bytes` is `max-fetch-bytes` in section `sync`)."""
    if key in LOCAL_KEYS:
        section, _, name = key.rpartition(".")
        return f"{section}.{name.replace('_', '-')}"
    return key


def _from_git(key: str) -> str:
    """The setting a key read from git's config is (see `_to_git`)."""
    section, _, name = key.rpartition(".")
    named = f"{section}.{name.replace('-', '_')}"
    return named if named in LOCAL_KEYS else key


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
    """`name`, when it is a remote name git can use: its branches are the refs
    `refs/remotes/NAME/...`, so it is refused where that makes a ref name git rejects (a name
    ending in `.lock` or `.`, holding `..`), and a sync or `gc doctor` would trip on it."""
    from beads.git.refs import valid_ref_name

    if not re.fullmatch(REMOTE_NAME, name):
        raise InvalidInput(f"a remote name is letters, digits, . _ -, not {shown(name)}")
    # Only a '.' can make a name of those characters a bad ref: others skip dulwich's import.
    # `refs/remotes/NAME` on its own catches a final '.', which git refuses at a ref's end.
    if "." in name and not all(
        valid_ref_name(ref) for ref in (f"refs/remotes/{name}".encode(), tracking_ref(name))
    ):
        raise InvalidInput(
            f"not a remote name git can use: {shown(name)} (no '..', no ending in '.' or '.lock')"
        )
    return name


def tracking_ref(name: str) -> bytes:
    """Where the last fetch from remote `name` left its branch (`refs/remotes/NAME/main`)."""
    return f"refs/remotes/{name}/main".encode()


def check_url(url: str) -> str:
    """`url`, when it can name a remote (`beads.git.transport.check_url`: not empty, an
    address that parses); else InvalidInput in the words a sync refuses it with. For what
    records a remote before any exchange (`gc remote add`, `gc clone`)."""
    from beads.git import transport

    try:
        transport.check_url(url)
    except transport.Unusable as exc:
        raise unusable_remote(url, exc) from None
    return url


def unusable_remote(url: str, reason: object) -> InvalidInput:
    """The refusal of a remote URL no client can use, quoting it and saying why."""
    return InvalidInput(f"cannot use remote {shown(url)}: {reason}")


def remotes(git_dir: Path) -> dict[str, str]:
    """The remotes of the store: name -> url."""
    from beads.git import config

    return config.remotes(git_dir)


def add_remote(git_dir: Path, name: str, url: str) -> str:
    """Record remote `name` and return the URL recorded: a relative path made absolute, as
    `git clone` records one, so that it names the same remote from any directory. Refused
    when `name` exists, or when `url` can name no remote, in the words a sync would refuse
    it (`check_url`)."""
    from beads.git import config, transport

    check_remote_name(name)
    check_url(url)
    if "\n" in url:  # a git config value is one line
        raise InvalidInput(f"not a remote URL: {shown(url)}")
    if name in remotes(git_dir):
        raise InvalidInput(f"remote {name} exists; remove it first with 'gc remote remove {name}'")
    url = transport.absolute_url(url)
    config.add_remote(git_dir, name, url, f"+refs/heads/*:refs/remotes/{name}/*")
    return url


def remove_remote(git_dir: Path, name: str) -> None:
    """Forget remote `name` and its remote-tracking refs (`refs/remotes/NAME/...`, with
    their directory), as `git remote remove` does."""
    from beads.git import config, refs

    if name not in remotes(git_dir):
        raise NotFound(f"no remote {name}")
    # The refs first, as git does: a removal that fails there leaves the remote to retry.
    refs.delete_refs_under(git_dir, f"refs/remotes/{name}/".encode())
    config.remove_remote(git_dir, name)


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
    from beads.git.config import read_values as read_local

    out: dict[str, Any] = {}
    for key, value in read_local(git_dir).items():
        key = _from_git(key)
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
    if key.startswith("trust."):
        from beads.settings.person import agent_session

        if agent_session():
            raise InvalidInput(
                f"{key} is a person's choice: an agent session ({agent_session()} is set) "
                "cannot change it"
            )
    *parts, name = _to_git(key).split(".")  # `delivery.nats.url`: section `delivery "nats"`
    section = tuple(part.encode() for part in parts)
    from beads.git import config

    if value is None:
        config.set_value(git_dir, section, name.encode(), None)
        return None
    try:
        checked = read(value)
    except InvalidInput as exc:
        raise InvalidInput(f"{key} {exc.message}") from None
    text = str(checked).lower() if isinstance(checked, bool) else str(checked)
    if isinstance(checked, list):
        text = ",".join(checked)
    config.set_value(git_dir, section, name.encode(), text.encode())
    return checked


def machine_name(local: dict[str, str]) -> str:
    """This machine's name, as its relay's consumer and its commits show it: the local
    setting `delivery.nats.machine`, else the host name (letters, digits, _ and - kept).
    `local` is `beads.sync.auto.read_local`'s raw values."""
    name = local.get("delivery.nats.machine", "")
    if MACHINE_RE.fullmatch(name):
        return name
    # The host name as `socket.gethostname()` gives it, without importing socket (a commit's
    # start-up: docs/benchmarks.md).
    host = re.sub(r"[^A-Za-z0-9_-]", "-", os.uname().nodename)[:64].strip("-")
    return host if MACHINE_RE.fullmatch(host) else "machine"


def committer(git_dir: Path) -> bytes:
    """This machine as the committer of the commits made in the store at `git_dir`:
    `<machine name> <<machine id>@gc-beads>`, so a commit that arrived by sync says where
    it was made (`GitRepo` asks for it on its first commit)."""
    from beads.git.config import read_values as read_local

    name = machine_name(read_local(git_dir))
    return f"{name} <{machine_id(git_dir)}@gc-beads>".encode()


def machine_id_problem(value: str) -> str:
    """What is wrong with `value`, a `machine.id` that is no machine id, and what to do."""
    return (
        f"is {shown(value)}, not a machine id (m- and 16 hex digits): set this machine's id "
        "back (its commits name it: git -C .beads log -1 --format=%ce), or unset it for a new "
        "one (git -C .beads config --unset machine.id), under which this machine's earlier "
        "commits read as made elsewhere"
    )


def machine_id(git_dir: Path, *, make: bool = True) -> str:
    """This clone's machine id (`machine.id`), made on first use: random, machine-local
    (the store's git config, never synced). Host names repeat (cloned VMs, containers); the
    id tells two machines of one name apart (their relays' consumers, their commits).
    With `make` false, "" when none was made yet.

    One set by hand to something that is no id is never replaced: a new id would make this
    machine's own commits read as made elsewhere. It is StorageError, saying what to do."""
    from beads.git.config import read_values as read_local

    found = read_local(git_dir).get("machine.id", "")
    if MACHINE_ID_RE.fullmatch(found):
        return found
    if found:
        raise StorageError(f"machine.id in {git_dir / 'config'} {machine_id_problem(found)}")
    if not make:
        return ""
    import secrets

    # Not a setting of `gc config set --local`: nobody chooses it. Unset in a copy of a
    # store (a cloned VM image), it is made anew.
    from beads.git import config

    # Of two processes making one at once, the second finds the first's and goes on with it.
    made = config.set_default(
        git_dir, (b"machine",), b"id", f"m-{secrets.token_hex(8)}".encode(),
        keep=lambda value: MACHINE_ID_RE.fullmatch(value.decode("utf-8", "replace")) is not None,
    )  # fmt: skip
    return made.decode("utf-8", "replace")
