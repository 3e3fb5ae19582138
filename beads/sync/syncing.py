"""`gc sync` and `gc clone`: one store shared by several machines through any git remote.

A sync fetches the remote's branch into the store's objects (no lock while the network
talks; the commits it brings are checked by the gate for incoming trees, and those naming
this machine as committer recorded, `beads.sync.claimed`, before they enter the store), then
under the write lock integrates it: nothing to do, a fast-forward, or one
merge commit built from objects by `beads.sync.merge` (two parents, the acting agent its author).
Then it pushes with compare-and-swap: the remote's branch moves only from the commit we
merged; a push refused because someone pushed meanwhile fetches and merges again, at most
`RETRIES` times. The index and view catch up as after any commit, and notifications follow
the branch (`inbox.follow`), so mail that arrived is announced by the next hook.

The outcome of the last sync (when, which remote, the error if it failed) is kept in
`.runtime/sync/state.json` for `gc sync --status`.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from beads.errors import Conflict, GcError, InvalidInput, NotFound
from beads.location import (
    INIT_PREFIX,
    MARKER_SECTION,
    check_not_foreign,
    check_not_in_git_dir,
    is_store,
    store_dir_for,
)
from beads.settings.localconfig import (
    DEFAULT_REMOTE,
    add_remote,
    check_url,
    remote_url,
    tracking_ref,
)
from beads.sync import claimed
from beads.sync.remote import check_remote_store, fetch, object_limit, only_in, push
from beads.workdir import check_text_path

if TYPE_CHECKING:
    from beads.git import GitRepo
    from beads.store import Store

RETRIES = 6
STATE_DIR = "sync"


class SyncResult:
    """What one sync did."""

    def __init__(self, remote: str, url: str) -> None:
        self.remote = remote
        self.url = url
        self.action = "none"  # none, fast-forward, merge
        self.pushed = False
        self.head: str | None = None
        self.conflicts: list[str] = []
        self.attempts = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "url": self.url,
            "action": self.action,
            "pushed": self.pushed,
            "head": self.head,
            "conflicts": self.conflicts,
            "attempts": self.attempts,
        }


def sync(store: Store, remote: str | None = None, *, retries: int = RETRIES) -> SyncResult:
    """Fetch, integrate and push; see the module's docstring."""
    from beads.sync.treegate import RefusedHistory

    name = remote or ""
    try:
        name, url = remote_url(store.root / ".git", remote)
        result = SyncResult(name, url)
        _sync(store, result, retries)
    except RefusedHistory as exc:
        record_state(store.root, remote=name, error=exc.message, refused=exc.found[0].to_json())
        raise
    except GcError as exc:
        record_state(store.root, remote=name, error=exc.message)
        raise
    record_state(store.root, remote=name, error=None)
    if result.action != "none":  # commits came in: the layers above tell whom they concern
        from beads.sync import arrivals

        arrivals.announce(store.root)
    return result


def check_incoming(
    git: GitRepo, theirs: bytes, ours: bytes | None, url: str, prefix: str | None
) -> list[bytes]:
    """Refuse the remote's commit `theirs` unless it is a store (of our `prefix`, when given)
    whose every commit we lack keeps to the layout (`beads.sync.treegate`): before anything of it
    is merged, written or indexed. `git` reads the fetch's quarantine and the store: a
    refused commit's objects never enter the store (`beads.sync.remote.fetch`). Returns the
    commits checked (those of `theirs` that `ours` lacks)."""
    from beads.sync.treegate import check_commits, holds_config

    if not holds_config(git, theirs):
        raise NotFound(f"the remote {url} is not a gc-beads store (no config.yaml on main)")
    arriving = only_in(git, theirs, ours)
    check_commits(git, arriving, source=f"the remote {url}")
    check_remote_store(git, theirs, url, prefix)
    return arriving


def _sync(store: Store, result: SyncResult, retries: int) -> None:
    git = store.git
    for attempt in range(1, retries + 1):
        result.attempts = attempt
        limit = object_limit(store.max_body)

        def check(reader: GitRepo, theirs: bytes) -> None:
            arriving = check_incoming(reader, theirs, git.head(), result.url, store.prefix)
            # Before the objects enter the store: which of them name this machine.
            claimed.notice(store.root, reader, arriving)

        theirs = fetch(
            git, result.url, known_heads(git), store.locked, max_object=limit, check=check
        )
        if theirs is not None:
            set_tracking(git, result.remote, theirs)
        _integrate(store, theirs, result)
        head = git.head()
        assert head is not None
        result.head = head.decode()
        if head == theirs:
            return
        if push(git, result.url, theirs, head):
            set_tracking(git, result.remote, head)
            result.pushed = True
            return
        time.sleep(random.uniform(0.02, 0.1) * attempt)  # two machines racing: spread them
    raise Conflict(
        f"the remote {result.url} kept moving: {retries} pushes were refused; nothing is lost, "
        "run 'gc sync' again"
    )


def _integrate(store: Store, theirs: bytes | None, result: SyncResult) -> None:
    """Bring the remote's commit `theirs` into the local branch (under the write lock)."""
    from beads.sync.merge import merge_trees

    git = store.git
    with store.locked():
        store.refresh()
        ours = git.head()
        assert ours is not None
        if theirs is None or theirs == ours or not only_in(git, theirs, ours):
            return
        if not only_in(git, ours, theirs):
            git.swap_head(ours, theirs, f"sync: fast-forward to {result.remote}/main", store.agent)
            result.action = "fast-forward"
        else:
            base = merge_base(git, ours, theirs)
            merged = merge_trees(git, base, ours, theirs)
            message = f"sync: merge {result.remote}/main"
            if merged.conflicts:
                message += "\n\nValues both sides changed (the later kept, by the sync rules):\n"
                message += "\n".join(f"- {line}" for line in merged.conflicts)
            commit, objects = git.build_commit(
                ours, merged.files, message, store.agent, blobs=merged.taken, merged=theirs
            )
            git.store_objects(objects)
            git.swap_head(ours, commit.id, f"commit (merge): {message}", store.agent)
            result.action = "merge"
            result.conflicts = merged.conflicts
        store.refresh()


def merge_base(git: GitRepo, ours: bytes, theirs: bytes) -> bytes | None:
    """The best common ancestor of two commits (None: unrelated histories)."""
    from beads.git.history import merge_base as found

    return found(git, ours, theirs)


def set_tracking(git: GitRepo, name: str, sha: bytes) -> None:
    """Record where remote `name`'s branch was last seen (`refs/remotes/NAME/main`)."""
    from beads.git import refs

    refs.write_ref(git.git_dir, tracking_ref(name), sha)


def known_heads(git: GitRepo) -> list[bytes]:
    """Commits to offer a remote as ours: the branch, and every remote's as last seen."""
    from beads.git import refs

    found = [git.head()]
    found += [tracking(git, name) for name in refs.remote_names(git.git_dir)]
    return [sha for sha in dict.fromkeys(found) if sha is not None]


def tracking(git: GitRepo, name: str) -> bytes | None:
    """Where remote `name`'s branch was last seen (None: never fetched)."""
    from beads.git import refs

    return refs.read_named_ref(git.git_dir, tracking_ref(name))


# -- state --------------------------------------------------------------------------------


def state_path(root: Path) -> Path:
    return root / ".runtime" / STATE_DIR / "state.json"


def record_state(
    root: Path, *, remote: str, error: str | None, refused: dict[str, str] | None = None
) -> None:
    """Remember the outcome of a sync with `remote` (`gc sync --status`), each remote's
    apart; the file's mtime is the time of the last attempt with any, which the hooks compare
    with `sync.interval`. `refused`: the entry for which the remote's history was refused
    (kept, per remote, until a sync of that remote gets past the gate)."""
    state = read_state(root)
    now = time.time()
    mine = state["remotes"].setdefault(remote, {})
    mine.update({"last_attempt": now, "last_error": error})
    if error is None:
        mine["last_sync"] = now
    state.update({"remote": remote, "last_attempt": now})
    held = state.get("refused") if isinstance(state.get("refused"), dict) else {}
    if refused is not None:
        held[remote] = refused
    elif error is None:
        held.pop(remote, None)
    state["refused"] = held
    _write_state(root, state)


def _write_state(root: Path, state: dict[str, Any]) -> None:
    """Replace the recorded outcomes by `state` (whole: a reader sees the old or the new)."""
    path = state_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".state.{os.getpid()}.tmp")
    temp.write_text(json.dumps(state))
    os.replace(temp, path)


def remove_remote(root: Path, name: str) -> None:
    """Forget remote `name` of the store at `root`: its config, its remote-tracking refs
    (`beads.settings.localconfig.remove_remote`) and what `gc sync --status` kept of it, so
    that a remote added again under the name starts with no last error of the old one."""
    from beads.settings.localconfig import remove_remote as forget_config

    forget_config(root / ".git", name)
    state = read_state(root)
    held = state.get("refused") if isinstance(state.get("refused"), dict) else {}
    kept, refusal = state["remotes"].pop(name, None), held.pop(name, None)
    if kept is None and refusal is None:
        return
    if state.get("remote") == name:
        state.pop("remote")
    state["refused"] = held
    last_attempt = state_path(root).stat().st_mtime  # what `sync.auto` times its next sync by
    _write_state(root, state)
    os.utime(state_path(root), (last_attempt, last_attempt))


def read_state(root: Path) -> dict[str, Any]:
    """The recorded outcomes: `remotes` maps a remote's name to its last attempt, last
    success and last error. (A file of the single-remote form counts for the remote it
    names.)"""
    try:
        value = json.loads(state_path(root).read_text())
    except (OSError, ValueError):
        value = {}
    if not isinstance(value, dict):
        value = {}
    kept = value.get("remotes")
    if not isinstance(kept, dict):
        kept = {}
        if isinstance(value.get("remote"), str):
            kept[value["remote"]] = {
                key: value.get(key) for key in ("last_attempt", "last_sync", "last_error")
            }
    value["remotes"] = {k: v for k, v in kept.items() if isinstance(v, dict)}
    return value


def status(store: Store, remote: str | None = None) -> dict[str, Any]:
    """Ahead/behind against the remote as last fetched, and the last sync's outcome with
    that remote. A remote never reached has no figures (None): `synced` is false."""
    name, url = remote_url(store.root / ".git", remote)
    git = store.git
    head = git.head()
    seen = tracking(git, name)
    assert head is not None
    mine = read_state(store.root)["remotes"].get(name, {})
    reached = seen is not None or mine.get("last_sync") is not None
    ahead = len(only_in(git, head, seen)) if reached else None
    behind = (len(only_in(git, seen, head)) if seen is not None else 0) if reached else None
    return {
        "remote": name,
        "url": url,
        "head": head.decode(),
        "remote_head": seen.decode() if seen else None,
        "synced": reached,
        "ahead": ahead,
        "behind": behind,
        "last_sync": mine.get("last_sync"),
        "last_attempt": mine.get("last_attempt"),
        "last_error": mine.get("last_error"),
        "refused": refused(store.root, name),
    }


def refused(root: Path, remote: str) -> dict[str, str] | None:
    """The entry for which remote `remote`'s history was refused by its last sync, if it was
    (`beads.sync.treegate`): until a sync gets past it, commands that need the remote exit 30."""
    held = read_state(root).get("refused")
    found = held.get(remote) if isinstance(held, dict) else None
    return found if isinstance(found, dict) else None


# -- clone --------------------------------------------------------------------------------


def clone(url: str, path: str | Path, *, agent: str | None = None) -> Path:
    """Make a store under `path` from the store at `url`; returns its root. Built under a
    temporary name and renamed into place, as `gc init` does: a failed clone leaves nothing."""
    from beads.git import init_bare
    from beads.initstore import _exclude, _remove_tree, making_store_in, remove_dead_builds
    from beads.receivehook import install as install_hook
    from beads.records.record import DEFAULT_MAX_BODY_BYTES, acting_agent
    from beads.settings import approvals
    from beads.settings.localconfig import committer

    check_url(url)  # before anything is made
    root = store_dir_for(Path(os.path.abspath(os.path.expanduser(path))))
    check_text_path(root)
    with making_store_in(path):  # a place `gc init` refuses (a loop of links, /proc) too
        if is_store(root):
            raise InvalidInput(f"a store exists at {root} already; use 'gc sync' there")
        check_not_in_git_dir(root)
        check_not_foreign(root)
        made = next((p for p in (*reversed(root.parents), root) if not p.exists()), None)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise InvalidInput(
                f"cannot make {root}: something that is not a directory is in the way"
            ) from None
    remove_dead_builds(root)  # what a killed clone (or init) left half built here
    building = root / f"{INIT_PREFIX}{os.getpid()}"
    _remove_tree(building)
    try:
        with making_store_in(path):
            git = init_bare(building, marker=MARKER_SECTION, committer=committer)
            install_hook(building)
        try:
            head = fetch(
                git,
                url,
                [],
                max_object=object_limit(DEFAULT_MAX_BODY_BYTES),
                check=lambda reader, theirs: check_incoming(reader, theirs, None, url, None),
            )
            if head is None:
                raise NotFound(
                    f"the remote {url} is empty: no store to clone. Make one with 'gc init', "
                    "then 'gc remote add' and 'gc sync' to push it there"
                )
            author = acting_agent(agent)
            git.swap_head(None, head, f"clone: from {url}", author)
            add_remote(building, DEFAULT_REMOTE, url)
            set_tracking(git, DEFAULT_REMOTE, head)
        finally:
            git.close()
        # The remote is a stranger's: this machine has approved none of its settings that
        # run programs or weaken a protection (`gc trust` shows them), unlike a first run of
        # a store already here, whose settings were in force before.
        approvals.record(root, {}, how="clone", changes=[])
        os.rename(building, root / ".git")
    except BaseException:
        _remove_tree(building)
        if made is not None:  # what the clone made, up to the first directory it made
            _remove_tree(made)
        raise
    _exclude(root)
    return root
