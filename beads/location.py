"""Where the store is: discovery, and keeping it out of the surrounding project's git.

Order: an explicit directory (`--beads-dir`), `$GC_BEADS_DIR`, a `.beads/` found walking up
from the working directory, then the `.beads/` of the main worktree of the git repository
around it (so linked worktrees share one store). A `.beads/` made by another tool is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from beads.errors import InvalidInput, NotFound

STORE_DIR = ".beads"
# Files that mark a `.beads/` of another tool (the beads issue tracker and its kin).
FOREIGN_MARKERS = ("issues.jsonl", "beads.db", "dolt", "metadata.json", "beads.jsonl")
# The section of `.beads/.git/config` that marks a repository made by `gc init`.
MARKER_SECTION = b"gc-beads"
# `gc init` builds the repository under this name, then renames it to `.git`.
INIT_PREFIX = ".git-init-"


def store_dir_for(path: Path) -> Path:
    """The store directory for a user-given path: the path itself if it is named `.beads`."""
    return path if path.name == STORE_DIR else path / STORE_DIR


def check_not_foreign(beads_dir: Path) -> None:
    """Raise if `beads_dir` exists and is not ours (never adopt another tool's data)."""
    if not beads_dir.exists():
        return
    if not beads_dir.is_dir():
        raise InvalidInput(f"{beads_dir} exists and is not a directory")
    if is_our_repo(beads_dir / ".git") or adopt_clone(beads_dir / ".git"):
        return
    found = [m for m in FOREIGN_MARKERS if (beads_dir / m).exists()]
    leftovers = [p for p in beads_dir.iterdir() if not p.name.startswith(INIT_PREFIX)]
    if found or leftovers:
        why = f" (it holds {', '.join(found)})" if found else ""
        raise InvalidInput(
            f"{beads_dir} belongs to another tool{why}; gc-beads will not use or overwrite it. "
            "Choose another place with --beads-dir or GC_BEADS_DIR"
        )


def is_our_repo(git_dir: Path) -> bool:
    """True when `git_dir` is a bare repository made by `gc init` (it carries our marker)."""
    try:
        text = (git_dir / "config").read_bytes()
    except OSError:
        return False
    return b"[" + MARKER_SECTION + b"]" in text


def adopt_clone(git_dir: Path) -> bool:
    """Make a store of a plain `git clone --bare` of one (made without `gc clone`): a bare
    repository whose branch main holds a `config.yaml` gets our marker and settings."""
    if not (git_dir / "objects").is_dir():
        return False
    from beads.remote import adopt  # lazy: only a repository without our marker gets here

    return adopt(git_dir)


def is_store(beads_dir: Path) -> bool:
    return is_our_repo(beads_dir / ".git")


def find_store(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Path:
    """The store directory to use, or NotFound telling the user to run `gc init`."""
    given = explicit if explicit is not None else os.environ.get("GC_BEADS_DIR") or None
    if given is not None:
        path = Path(given).expanduser().absolute()
        try:
            for candidate in (path, path / STORE_DIR):
                if is_store(candidate):
                    return candidate
            check_not_foreign(store_dir_for(path))
            if is_store(store_dir_for(path)):  # a plain git clone, adopted just now
                return store_dir_for(path)
        except OSError as exc:  # a name too long, a loop of links, no permission
            shown = str(path) if len(str(path)) <= 80 else str(path)[:80] + "..."
            raise InvalidInput(f"cannot use the store directory {shown}: {exc.strerror}") from None
        raise NotFound(f"no gc-beads store at {path}; run 'gc init' to create one")
    start = (cwd or Path.cwd()).absolute()
    for directory in (start, *start.parents):
        candidate = directory / STORE_DIR
        if candidate.exists():
            if not os.access(candidate, os.R_OK | os.X_OK):
                raise InvalidInput(
                    f"{candidate} cannot be read by this user (a store is private to its owner "
                    "unless its store.shared setting says otherwise)"
                )
            check_not_foreign(candidate)
            if is_store(candidate):
                return check_owner(candidate)
    main = main_worktree(start)
    if main is not None and is_store(main / STORE_DIR):
        return check_owner(main / STORE_DIR)
    raise NotFound("no gc-beads store here or above; run 'gc init' to create one")


def check_owner(beads_dir: Path) -> Path:
    """A store found by walking up is used only when it is ours: owned by this user, or a
    group store (`store.shared: group`) of one of our groups. Its config names programs gc
    runs (an exec mail script, nudges, checks), so a `.beads/` planted by someone else above
    the working directory (in a shared /tmp) must never be picked up silently; one named
    with --beads-dir or $GC_BEADS_DIR is the user's own choice."""
    info = beads_dir.stat()
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


def git_dirs(start: Path) -> tuple[Path, Path] | None:
    """`(work tree, common git dir)` of the git repository around `start`, if any."""
    for directory in (start, *start.parents):
        dot_git = directory / ".git"
        if dot_git.is_dir():
            return directory, dot_git
        if dot_git.is_file():  # a linked worktree: "gitdir: <main>/.git/worktrees/<name>"
            text = dot_git.read_text(errors="replace").strip()
            if not text.startswith("gitdir:"):
                return None
            git_dir = (directory / text[len("gitdir:") :].strip()).resolve()
            common = git_dir
            commondir_file = git_dir / "commondir"
            if commondir_file.is_file():
                common = (git_dir / commondir_file.read_text().strip()).resolve()
            return directory, common
    return None


def main_worktree(start: Path) -> Path | None:
    """The main worktree of the repository around `start` (its common dir's parent)."""
    found = git_dirs(start)
    if found is None:
        return None
    _work_tree, common = found
    return common.parent if common.name == ".git" else None


def exclude_from_project(beads_dir: Path) -> Path | None:
    """Add the store to the surrounding repository's `info/exclude`; return that file if changed."""
    found = git_dirs(beads_dir.parent)
    if found is None:
        return None
    work_tree, common = found
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
