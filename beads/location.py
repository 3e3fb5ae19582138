"""Where the store is: discovery, and keeping it out of the surrounding project's git.

Order: an explicit directory (`--beads-dir`), `$GC_BEADS_DIR`, the `.beads/` of the Gas City
city this command runs in (`beads.city`: `--city`, `$GC_CITY`..., `$GC_DIR`, or a `city.toml`
above the working directory; so an agent anywhere under the city finds its store), a
`.beads/` found walking up from the working directory, then the `.beads/` of the main worktree
of the git repository around it (so linked worktrees share one store). A `.beads/` made by
another tool is refused.
"""

from __future__ import annotations

import errno
import os
import stat

from beads.errors import InvalidInput, NoStore
from beads.workdir import check_text_path, start_directory

TYPE_CHECKING = False  # the PreToolUse hook avoids pathlib: paths here are os.path's
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import TypeVar

    P = TypeVar("P", str, Path)

STORE_DIR = ".beads"
# Files that mark a `.beads/` of another tool (the beads issue tracker and its kin).
FOREIGN_MARKERS = ("issues.jsonl", "beads.db", "dolt", "metadata.json", "beads.jsonl")
# The section of `.beads/.git/config` that marks a repository made by `gc init`.
MARKER_SECTION = b"gc-beads"
# `gc init` builds the repository under this name, then renames it to `.git`.
INIT_PREFIX = ".git-init-"


def store_dir_for(path: P) -> P:
    """The store directory for a user-given path: the path itself if it is named `.beads`."""
    if os.path.basename(path) == STORE_DIR:
        return path
    return os.path.join(path, STORE_DIR) if isinstance(path, str) else path / STORE_DIR


# What a path that is not a directory is, in words (`check_directory`).
KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _stat(path: str | Path) -> os.stat_result | None:
    """`os.stat(path)`, or None when it is not there; an error other than "not there" (a name
    too long, no permission) is raised, as pathlib's `exists` does, not taken for "not there"."""
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return None
        if exc.errno == errno.ENAMETOOLONG:  # the user's path, not our storage: exit 30
            raise InvalidInput(f"path name too long: {str(path)[:60]}...") from None
        raise


def _exists(path: str | Path) -> bool:
    """Whether `path` exists (see `_stat` for the errors raised)."""
    return _stat(path) is not None


def check_directory(path: str | Path) -> bool:
    """Whether `path` exists; InvalidInput, saying what it is, when it is there and is not a
    directory (a store is one). Only its status is read: a FIFO or a device is never opened."""
    info = _stat(path)
    if info is None:
        return False
    if stat.S_ISDIR(info.st_mode):
        return True
    what = next((name for test, name in KINDS if test(info.st_mode)), "not a directory")
    raise InvalidInput(f"{path} is not a store: it is {what}")


def check_not_in_git_dir(beads_dir: str | Path) -> None:
    """InvalidInput when a new store would be made inside a repository's own `.git`
    directory: git treats what it finds there as its own (`git gc` prunes it)."""
    parts = os.path.normpath(os.fspath(beads_dir)).split(os.sep)
    if ".git" in parts[:-1]:
        inside = os.sep.join(parts[: parts.index(".git") + 1]) or os.sep
        raise InvalidInput(
            f"cannot make a store inside {inside}: that is a git repository's own directory"
        )


def check_not_foreign(beads_dir: str | Path) -> None:
    """Raise if `beads_dir` exists and is not ours (never adopt another tool's data)."""
    if not check_directory(beads_dir):
        return
    git_dir = os.path.join(beads_dir, ".git")
    if is_our_repo(git_dir) or adopt_clone(git_dir):
        return
    found = [m for m in FOREIGN_MARKERS if os.path.exists(os.path.join(beads_dir, m))]
    leftovers = [name for name in os.listdir(beads_dir) if not name.startswith(INIT_PREFIX)]
    if found or leftovers:
        why = f" (it holds {', '.join(found)})" if found else ""
        raise InvalidInput(
            f"{beads_dir} belongs to another tool{why}; gc-beads will not use or overwrite it. "
            "Choose another place with --beads-dir or GC_BEADS_DIR"
        )


def is_our_repo(git_dir: str | Path) -> bool:
    """True when `git_dir` is a bare repository made by `gc init` (it carries our marker)."""
    from beads.git.config import has_section

    return has_section(git_dir, MARKER_SECTION)


def adopt_clone(git_dir: str | Path) -> bool:
    """Make a store of a plain `git clone --bare` of one (made without `gc clone`): a bare
    repository whose branch main holds a `config.yaml` gets our marker and settings."""
    from pathlib import Path

    from beads.branch import BRANCH  # lazy: only a repository without our marker gets here
    from beads.git import config
    from beads.settings.config import CONFIG_PATH, parse_config

    def is_store(read_path: Callable[[str], bytes | None]) -> bool:
        raw = read_path(CONFIG_PATH)
        settings = parse_config(raw)[0] if raw is not None else None
        return isinstance(settings, dict) and "format" in settings

    return config.adopt(
        Path(git_dir), branch=BRANCH.encode(), marker=MARKER_SECTION, check=is_store
    )


def is_store(beads_dir: str | Path) -> bool:
    return is_our_repo(os.path.join(beads_dir, ".git"))


def find_store(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Path:
    """The store directory to use, or NoStore telling the user to run `gc init`."""
    from pathlib import Path

    return Path(find_store_dir(explicit, None if cwd is None else os.fspath(cwd)))


def find_store_dir(explicit: str | os.PathLike[str] | None = None, cwd: str | None = None) -> str:
    """`find_store` as a plain path (what the PreToolUse hook uses: no pathlib)."""
    # Trimmed, as gc's other variables are ($GC_CITY, $GC_AGENT): a blank one is unset.
    given = explicit if explicit is not None else os.environ.get("GC_BEADS_DIR", "").strip() or None
    if given is not None:
        path = os.path.abspath(os.path.expanduser(os.fspath(given)))
        check_text_path(path)
        try:
            check_directory(path)  # a file named as the store is said to be one
            for candidate in (path, os.path.join(path, STORE_DIR)):
                if is_store(candidate):
                    return candidate
            check_not_foreign(store_dir_for(path))
            if is_store(store_dir_for(path)):  # a plain git clone, adopted just now
                return store_dir_for(path)
        except OSError as exc:  # a name too long, a loop of links, no permission
            shown = path if len(path) <= 80 else path[:80] + "..."
            raise InvalidInput(f"cannot use the store directory {shown}: {exc.strerror}") from None
        raise NoStore(f"no gc-beads store at {path}; run 'gc init' to create one", where=path)
    found = _store_around(start_directory(cwd))
    check_text_path(found)  # the store's path, not the start's: a subdirectory may be odd
    return found


def init_place(given: str | os.PathLike[str] | None) -> str:
    """The directory whose `.beads/` `gc init` makes: `given` (PATH or --beads-dir), else
    $GC_BEADS_DIR, else the working directory; as every other command reads them, a directory
    named `.beads` is the store itself, so its parent is the place."""
    if given is None:
        given = os.environ.get("GC_BEADS_DIR", "").strip() or "."
    path = os.path.expanduser(os.fspath(given))  # relative stays so: errors name it as given
    if os.path.basename(os.path.normpath(path)) == STORE_DIR:
        return os.path.dirname(os.path.normpath(path)) or "."
    return path


def _store_around(start: str) -> str:
    """The store of the city around `start`, else the nearest `.beads` at or above it, else
    the main worktree's; NoStore when there is none."""
    in_city = _city_store(start)
    if in_city is not None:
        return in_city
    for directory in _up_from(start):
        candidate = os.path.join(directory, STORE_DIR)
        if check_directory(candidate):
            if not os.access(candidate, os.R_OK | os.X_OK):
                raise InvalidInput(
                    f"{candidate} cannot be read by this user (a store is private to its owner "
                    "unless its store.shared setting says otherwise)"
                )
            check_not_foreign(candidate)
            if is_store(candidate):
                return check_owner(candidate)
    main = main_worktree(start)
    if main is not None and is_store(os.path.join(main, STORE_DIR)):
        return check_owner(os.path.join(main, STORE_DIR))
    raise NoStore("no gc-beads store here or above; run 'gc init' to create one")


def _city_store(start: str) -> str | None:
    """The store of the city around `start` (`beads.city`), if it has one: a city without a
    store yet leaves the search to go on."""
    from beads import city

    found = city.find_city_dir(start)
    if found is None:
        return None
    candidate = os.path.join(found, STORE_DIR)
    if not _exists(candidate):
        return None
    check_not_foreign(candidate)
    if not is_store(candidate):
        return None
    return check_owner(candidate) if city.found_by_walking(found) else candidate


def _up_from(start: str) -> list[str]:
    """`start` and each of its parents, up to the root."""
    found = [start]
    while (parent := os.path.dirname(found[-1])) != found[-1]:
        found.append(parent)
    return found


def check_owner(beads_dir: P) -> P:
    """A store found by walking up is used only when it is ours: owned by this user, or a
    group store (`store.shared: group`) of one of our groups. Its config names programs gc
    runs (an exec mail script, nudges, checks), so a `.beads/` planted by someone else above
    the working directory (in a shared /tmp) must never be picked up silently; one named
    with --beads-dir or $GC_BEADS_DIR is the user's own choice."""
    info = os.stat(beads_dir)
    uid = os.geteuid()
    if info.st_uid == uid:
        return beads_dir
    group_store = info.st_mode & 0o2070 == 0o2070 and not info.st_mode & 0o002
    if group_store and (info.st_gid == os.getegid() or info.st_gid in os.getgroups()):
        return beads_dir
    raise InvalidInput(
        f"{beads_dir} belongs to another user (uid {info.st_uid}); gc-beads does not use a "
        "store it finds that is not yours. Name it with --beads-dir or GC_BEADS_DIR to use it"
    )


def git_dirs(start: str | Path) -> tuple[str, str] | None:
    """`(work tree, common git dir)` of the git repository around `start`, if any."""
    for directory in _up_from(os.path.abspath(start)):
        dot_git = os.path.join(directory, ".git")
        if os.path.isdir(dot_git):
            return directory, dot_git
        if os.path.isfile(dot_git):  # a linked worktree: "gitdir: <main>/.git/worktrees/<name>"
            with open(dot_git, errors="replace") as handle:
                text = handle.read().strip()
            if not text.startswith("gitdir:"):
                return None
            git_dir = os.path.realpath(os.path.join(directory, text[len("gitdir:") :].strip()))
            common = git_dir
            commondir_file = os.path.join(git_dir, "commondir")
            if os.path.isfile(commondir_file):
                with open(commondir_file) as handle:
                    common = os.path.realpath(os.path.join(git_dir, handle.read().strip()))
            return directory, common
    return None


def main_worktree(start: str | Path) -> str | None:
    """The main worktree of the repository around `start` (its common dir's parent)."""
    found = git_dirs(start)
    if found is None:
        return None
    _work_tree, common = found
    return os.path.dirname(common) if os.path.basename(common) == ".git" else None


def exclude_from_project(beads_dir: Path) -> Path | None:
    """Add the store to the surrounding repository's `info/exclude`; return that file if changed."""
    from pathlib import Path

    found = git_dirs(beads_dir.parent)
    if found is None:
        return None
    work_tree, common = Path(found[0]), Path(found[1])
    try:
        rel = beads_dir.resolve().relative_to(work_tree.resolve()).as_posix()
    except ValueError:
        return None
    line = f"/{rel}/"
    exclude = common / "info" / "exclude"
    existing = exclude.read_text().splitlines() if exclude.exists() else []
    if line in existing:
        return None
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with open(exclude, "a") as handle:
        if existing and not exclude.read_text().endswith("\n"):
            handle.write("\n")
        handle.write(f"# gc-beads store (a git repository of its own)\n{line}\n")
    return exclude
