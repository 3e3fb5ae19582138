"""Creating a store: the repository is built under a temporary name beside the store and
renamed into place once its first commit (`config.yaml`) is in, so a crash never leaves a
half-made store; what a killed `gc init` left behind is removed by the next one (or doctor).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from beads import files
from beads.errors import InvalidInput
from beads.faults import fault
from beads.location import (
    INIT_PREFIX,
    MARKER_SECTION,
    check_not_foreign,
    check_not_in_git_dir,
    exclude_from_project,
    is_store,
    store_dir_for,
)
from beads.receivehook import install as install_hook
from beads.records.ids import check_prefix
from beads.records.record import acting_agent, shown
from beads.settings.config import CONFIG_PATH, check_config, default_config
from beads.workdir import check_text_path

# What making a store can meet on a healthy disk is the place's fault (no such place, not a
# directory, not writable, a loop of links, a read-only or virtual file system): an input
# error, exit 30. Only a full disk or an I/O error is a storage error.
STORAGE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EIO)


@contextmanager
def making_store_in(path: str | Path) -> Iterator[None]:
    """Raise what the OS refuses while a store is made at the user's `path` as InvalidInput
    (`cannot create a store in PATH: reason`), unless the disk is at fault (STORAGE_ERRORS):
    `gc init` and `gc clone` refuse a place alike, by this one rule."""
    try:
        yield
    except OSError as exc:
        if exc.errno in STORAGE_ERRORS:
            raise
        reason = exc.strerror or str(exc)
        raise InvalidInput(f"cannot create a store in {shown(path)}: {reason}") from None


def create_store(
    path: str | Path,
    *,
    prefix: str | None = None,
    agent: str | None = None,
    config: dict[str, Any] | None = None,
) -> tuple[Path, bool]:
    """Make the store under `path` unless there is one; returns `(its root, created)`.

    `Store.init` opens it; see there for the arguments."""
    from beads.git import init_bare
    from beads.records.codec import dump_data  # lazy, with git: most commands never make a store
    from beads.settings.localconfig import committer

    root = store_dir_for(Path(os.path.abspath(os.path.expanduser(path))))
    check_text_path(root)
    if is_store(root):
        _exclude(root)  # again: a `gc init` killed just after the rename left it out
        return root, False
    check_not_in_git_dir(root)
    check_not_foreign(root)
    settings = check_config(config if config is not None else default_config())
    if prefix is not None:
        settings["store"]["prefix"] = check_prefix(prefix)
    author = acting_agent(agent)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a file, or a link to nowhere
        raise InvalidInput(
            f"cannot make {root}: something that is not a directory is in the way "
            "(a file, or a symbolic link to nowhere)"
        ) from None
    files.apply_shared(str(root), settings["store"].get("shared"))
    remove_dead_builds(root)
    building = root / f"{INIT_PREFIX}{os.getpid()}"
    _remove_tree(building)
    git = init_bare(building, marker=MARKER_SECTION, committer=committer)
    install_hook(building)
    message = "init: gc-beads store"
    commit, objects = git.build_commit(None, {CONFIG_PATH: dump_data(settings)}, message, author)
    git.store_objects(objects)
    fault("mid-init")
    git.swap_head(None, commit.id, f"commit (initial): {message}", author)
    git.close()
    try:
        os.rename(building, root / ".git")
    except OSError:
        _remove_tree(building)
        if is_store(root):  # another `gc init` got there first: use its store
            return root, False
        raise
    fault("init-renamed")
    _exclude(root)
    return root, True


def _exclude(root: Path) -> None:
    try:
        exclude_from_project(root)
    except OSError:
        pass  # best effort: the store works without it


def remove_dead_builds(root: Path) -> list[Path]:
    """Remove repositories that a killed `gc init` or `gc clone` left half built under `root`
    (their builder's process is gone); returns them. A live builder's is never touched."""
    from beads.git.repair import process_alive

    removed = []
    for path in root.glob(f"{INIT_PREFIX}*"):
        pid = path.name[len(INIT_PREFIX) :]
        if pid.isdigit() and process_alive(int(pid)):
            continue
        _remove_tree(path)
        removed.append(path)
    return removed


def _remove_tree(path: Path) -> None:
    import shutil  # only `init` needs it, and it pulls in bz2 and lzma: lazy for start-up

    shutil.rmtree(path, ignore_errors=True)
