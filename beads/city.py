"""Gas City's city: a directory holding `city.toml`, found as Gas City's `gc` finds it.

Order: `--city` (`use_city`), then the first of `$GC_CITY`, `$GC_CITY_PATH`, `$GC_CITY_ROOT`
that names a city directory (one that does not is passed over, as gc does), then the city
around `$GC_DIR`, then the city around the working directory. Walking up stops below the home
directory (`$HOME` itself and what lies above it are never taken for a city), as gc's does.

`city.toml` is the project's own file, trusted as its code is: what it says (its agents, its
named sessions, its `[mail] provider`) takes effect without approval, unlike the synced
settings of `config.yaml`. This module reads it generically; each layer reads its own section.
"""

from __future__ import annotations

import os

from beads.errors import InvalidInput, NotFound
from beads.workdir import start_directory

TYPE_CHECKING = False  # the PreToolUse hook finds the store through here: no typing, no dataclasses
if TYPE_CHECKING:
    from typing import Any

CITY_FILE = "city.toml"
CITY_ENV = ("GC_CITY", "GC_CITY_PATH", "GC_CITY_ROOT")
MAX_CITY_FILE = 4 * 1024 * 1024  # a city.toml larger than this is not a configuration

_chosen: list[str] = []  # the directory `--city` named, for the rest of this command


class City:
    """A city: its directory, its name, the identities its `city.toml` declares, and the
    whole parsed file (`section`)."""

    def __init__(
        self,
        path: str,
        name: str,
        agents: tuple[str, ...] = (),
        sessions: tuple[str, ...] = (),
        data: dict[str, Any] | None = None,
    ) -> None:
        self.path = path
        self.name = name
        self.agents = agents
        self.sessions = sessions
        self.data = data or {}

    def section(self, name: str) -> dict[str, Any]:
        """A top-level table of `city.toml` (`{}` when absent or not a table)."""
        value = self.data.get(name)
        return value if isinstance(value, dict) else {}

    def known(self) -> set[str]:
        """The mailbox identities the city declares: its agents, its named sessions, `human`."""
        return {*self.agents, *self.sessions, "human"}


def is_city(directory: str) -> bool:
    """Whether `directory` holds a `city.toml`."""
    return os.path.isfile(os.path.join(directory, CITY_FILE))


def use_city(directory: str) -> str:
    """Make `directory` (`--city`) this command's city; InvalidInput when it is not one."""
    path = os.path.abspath(os.path.expanduser(directory))
    if not is_city(path):
        raise InvalidInput(f"not a city directory: {path} (no {CITY_FILE})")
    _chosen[:] = [path]
    return path


def forget_chosen() -> None:
    """Drop a `--city` choice (a long-lived caller running several commands)."""
    _chosen.clear()


def find_city_dir(cwd: str | None = None) -> str | None:
    """The city directory to use (see the module's order), or None outside any city."""
    if _chosen:
        return _chosen[0]
    for name in CITY_ENV:
        raw = os.environ.get(name, "").strip()
        if raw:
            path = os.path.abspath(os.path.expanduser(raw))
            if is_city(path):
                return path
    gc_dir = os.environ.get("GC_DIR", "").strip()
    if gc_dir:
        found = _walk_up(os.path.abspath(os.path.expanduser(gc_dir)))
        if found is not None:
            return found
    try:
        start = start_directory(cwd)
    except NotFound:  # the working directory was removed: no city around it
        return None
    return _walk_up(start)


def found_by_walking(city_dir: str) -> bool:
    """Whether `city_dir` was found by walking up from the working directory rather than named
    (`--city`, `$GC_CITY`...): a found one must belong to this user (`location.check_owner`)."""
    if _chosen or any(os.environ.get(name, "").strip() for name in CITY_ENV):
        return False
    return not os.environ.get("GC_DIR", "").strip()


def _walk_up(start: str) -> str | None:
    home = os.path.expanduser("~")
    ceiling = os.path.normpath(home) if home and home != "~" else None
    directory = os.path.normpath(start)
    while directory != ceiling:
        if is_city(directory):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent
    return None


def load_city(directory: str) -> City:
    """The city at `directory`, its `city.toml` parsed (InvalidInput when it does not parse)."""
    import tomllib

    path = os.path.join(directory, CITY_FILE)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CITY_FILE + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > MAX_CITY_FILE:
        raise InvalidInput(f"{path} is larger than {MAX_CITY_FILE >> 20} MiB")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: {exc}") from None
    except RecursionError:
        raise InvalidInput(f"{path}: nests too deeply") from None
    workspace = data.get("workspace")
    name = workspace.get("name") if isinstance(workspace, dict) else None
    return City(
        path=directory,
        name=name if isinstance(name, str) and name else os.path.basename(directory),
        agents=_identities(data.get("agent"), "name"),
        sessions=_identities(data.get("named_session"), "name", "template"),
        data=data,
    )


def _identities(tables: Any, *keys: str) -> tuple[str, ...]:
    """The qualified identities of `[[agent]]` or `[[named_session]]` tables: the first of
    `keys` that is set, prefixed by `dir/` when the table has a `dir` (a rig's agent)."""
    if not isinstance(tables, list):
        return ()
    found: list[str] = []
    for table in tables:
        if not isinstance(table, dict):
            continue
        name = next((table[k] for k in keys if isinstance(table.get(k), str) and table[k]), None)
        if name is None:
            continue
        rig = table.get("dir")
        found.append(f"{rig}/{name}" if isinstance(rig, str) and rig else name)
    return tuple(dict.fromkeys(found))


def current_city(cwd: str | None = None) -> City | None:
    """The city this command runs in, loaded, or None outside any city."""
    directory = find_city_dir(cwd)
    return None if directory is None else load_city(directory)
