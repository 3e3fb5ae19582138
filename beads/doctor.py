"""`gc doctor`: check the repository, the index and the view against HEAD, and repair them.

Git is the source of truth, so every repair rewrites derived data from it: the index
(`rebuild_index`), view files edited by hand (`restore_view`), loose objects (`compact`).
A bead that does not parse is reported by path; it cannot be repaired from git, and every
other bead stays readable.

What would brick the store is repaired by every run, under the write lock, and reported as a
problem marked fixed: git lock files and temporary files left by dead writers, half-made
repositories of a killed `gc init`, a lost or garbled branch ref (restored to the last good
commit), a missing `.git/HEAD`, loose objects cut short by a full disk or a power cut.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from beads import files
from beads.config import CONFIG_PATH, config_problems
from beads.errors import GcError
from beads.gitrefs import GC_LOCK_MTIME, lock_age
from beads.ids import parse_bead_path
from beads.initstore import remove_dead_builds
from beads.reader import BRANCH, branch_problem, is_sha
from beads.reconcile import tree_files
from beads.store import Store
from beads.view import git_blob_sha
from beads.viewscan import ViewScan

# Temporary files of git and dulwich (`tmp_pack_*`, `tmp_obj_*`): a push may write one for a
# while, so only one untouched this long is a dead writer's.
TEMP_STALE_SECONDS = 3600.0
HEAD_SYMREF = f"ref: {BRANCH}\n".encode()


@dataclass(frozen=True)
class Problem:
    """One thing wrong: `kind` (repository, unparsable, index, view_modified, view_missing,
    view_stray, symlink, stale_lock, stale_file, branch, git_head, packed_refs,
    corrupt_object), the file, and what to do; `fixed` when this run repaired it."""

    kind: str
    path: str
    message: str
    fixed: bool = False

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "path": self.path, "message": self.message, "fixed": self.fixed}


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    beads: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing is left wrong (problems this run repaired do not count)."""
        return all(problem.fixed for problem in self.problems)


def doctor(
    store: Store,
    *,
    rebuild_index: bool = False,
    restore_view: bool = False,
    compact: bool = False,
    use_git: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Check (and with the flags, repair) the store; returns what was found and fixed.

    `compact` repacks every object into one pack with deltas: by the `git` program where it
    is installed and `use_git`, else by a streaming merge in bounded memory (`beads.repack`).

    `progress` is told the name of each step as it starts (`doctor_steps` lists them), so a
    terminal can show how far a long rebuild or compaction has come."""
    report = Report()
    step = progress or (lambda name: None)
    with store.locked():
        step("checking files")
        _clear_stale_files(store, report)
        _check_git_head(store, report)
        _check_packed_refs(store, report)
        _check_loose_objects(store, report)
        if not _restore_branch(store, report):
            return report
        repacked = None
        if compact:  # first: the checks then read one small pack, not what the writers left
            step("packing objects")
            try:
                repacked = store.git.repack(use_git=use_git)
            except GcError as exc:  # git failing on a damaged store: reported, not fatal
                report.problems.append(Problem("repository", ".git", f"repack failed: {exc}"))
        head = store.git.head()
        # The view is walked and read (by a child process, for a large store) while the
        # index is brought up to date; what it found counts only if `sync` leaves the view as
        # it was (at HEAD under its setting: `view-applied` is unchanged).
        try:
            early = _ViewScan(store, head) if head is not None else None
        except Exception:  # a damaged object store: reported once the index is synced
            early = None
        step("rebuilding the index" if rebuild_index else "bringing the index up to date")
        # Not twice: a store whose index was lost rebuilt it into a new file when it opened.
        rebuild = rebuild_index and (head is None or not store.index.just_rebuilt(head))
        if rebuild:
            store.index.drop_file()  # from a fresh file: the old one may be damaged anywhere
        store.sync(rebuild_index=rebuild)
        if rebuild_index:
            report.fixed.append(f"index rebuilt from git ({store.index.count()} beads)")
        scan = early if early is not None and early.still_valid(store) else None
        try:
            tree = scan.tree if scan is not None else tree_files(store.git, head)
            # (a rebuild has just read every blob: none is missing)
            has = store.git.has_object
            missing = [] if rebuild_index else [p for p, sha in tree.items() if not has(sha)]
        except Exception as exc:  # a damaged object store raises many kinds
            report.problems.append(Problem("repository", ".git", f"cannot read HEAD's tree: {exc}"))
            return report
        for path in missing:
            report.problems.append(Problem("repository", path, "the file's object is missing"))
        step("checking the index")
        _check_index(store, tree, report, rebuilt=rebuild_index)
        step("checking the view")
        pruned = store.view.prune(store.index)
        if pruned:
            days = store.view.days
            report.fixed.append(f"removed {pruned} bead files older than {days} days from the view")
        if scan is None:
            scan = _ViewScan(store, head, tree)
        _check_links(store, scan.found()[1], report, restore=restore_view)
        _check_view(store, tree, scan, report, restore=restore_view)
        if repacked is not None:
            assert head is not None
            store.index.apply(head=head, loose_objects=0)
            report.fixed.append(repacked.describe())
        if compact:
            expired = store.git.expire_reflog()
            if expired:
                report.fixed.append(f"dropped {expired} reflog entries older than 90 days")
        report.beads = store.index.count()
    return report


def doctor_steps(compact: bool) -> int:
    """How many steps `doctor` reports to `progress`."""
    return 5 if compact else 4


def _check_index(store: Store, tree: dict[str, bytes], report: Report, *, rebuilt: bool) -> None:
    """Compare every row with git: its blob id and, unless the index was just `rebuilt` from
    these very blobs, its bead (a row altered in the index while its blob id stayed is found
    too). Rows are read one at a time: a store's worth of beads is never held at once."""
    from beads.codec import dump_bead, load_bead

    invalid = store.index.invalid()
    hint = "run gc doctor --rebuild-index"
    checked: set[str] = set()  # paths, not beads: rows are read one at a time
    # Just rebuilt from these blobs: the rows' beads are the files', only their places count
    # (decoding every row's bead would cost a rebuild a second or more at 100k).
    for path, blob, *bead in store.index.rows(beads=not rebuilt):
        sha = tree.get(path)
        if sha is None:
            report.problems.append(Problem("index", path, f"indexed but not in HEAD; {hint}"))
            continue
        if path in invalid or parse_bead_path(path) is None:
            continue
        checked.add(path)
        if blob != sha.decode():
            report.problems.append(Problem("index", path, f"the index differs from HEAD; {hint}"))
        elif (
            bead
            and git_blob_sha(dump_bead(bead[0])) != sha
            and bead[0] != load_bead(store.git.read(sha))
        ):
            # (a file git holds in another layout than gc writes is parsed and compared)
            report.problems.append(
                Problem("index", path, f"the index row differs from the file in HEAD; {hint}")
            )
    for path in tree:
        if path in invalid:
            report.problems.append(Problem("unparsable", path, invalid[path]))
        elif path not in checked and parse_bead_path(path) is not None:
            report.problems.append(Problem("index", path, f"the index differs from HEAD; {hint}"))
    if CONFIG_PATH not in tree:
        report.problems.append(Problem("repository", CONFIG_PATH, "HEAD has no config.yaml"))
    # Kind `config`: a setting an older gc accepted that `gc config set` now refuses. The store
    # still opens; the value is named so it can be set again.
    for key, problem in config_problems(store.config):
        fix = f"{key} {problem}; set it again with gc config set {key} VALUE"
        report.problems.append(Problem("config", CONFIG_PATH, fix))


class _ViewScan:
    """HEAD's tree, and the view's files, links and blob ids as `ViewScan` finds them (in the
    background, for a large store, until they are asked for)."""

    def __init__(self, store: Store, head: bytes | None, tree: dict[str, bytes] | None = None):
        self.marker = _view_marker(store)
        self.head = head
        self.tree = tree_files(store.git, head) if tree is None else tree
        self._scan = ViewScan(store.root, len(self.tree))
        self._found: tuple[list[str], list[str], dict[str, bytes]] | None = None

    def still_valid(self, store: Store) -> bool:
        """Whether `sync` left the view (and HEAD) as they were when this scan was made."""
        return _view_marker(store) == self.marker and store.git.head() == self.head

    def found(self) -> tuple[list[str], list[str], dict[str, bytes]]:
        """The view's files, its links and the blob ids of files read ahead (`ViewScan`)."""
        if self._found is None:
            self._found = self._scan.result()
        return self._found


def _view_marker(store: Store) -> bytes | None:
    """`view-applied` as it is: every change `sync` makes to the view rewrites it."""
    try:
        return store.view.applied_file.read_bytes()
    except OSError:
        return None


def _check_view(
    store: Store, tree: dict[str, bytes], scan: _ViewScan, report: Report, *, restore: bool
) -> None:
    """The view holds HEAD's files that `store.view` keeps, as HEAD has them, and no other.

    A file the scan read ahead with HEAD's blob id matches; any other is read (again) here
    and compared: a file the scan could not read is never taken for a match."""
    hint = "" if restore else "; gc doctor --restore-view puts HEAD's version back"
    expected = store.view.expected(tree, store.index)
    present, _links, hashed = scan.found()
    for path, sha in tree.items():
        if path not in expected or hashed.get(path) == sha:
            continue
        data = store.view.read(path)
        if data is not None and git_blob_sha(data) == sha:
            continue
        if restore:
            store.view.write(path, store.git.read(sha))
            report.fixed.append(f"restored {path} from HEAD")
        elif data is None:
            report.problems.append(Problem("view_missing", path, "missing from the view" + hint))
        else:
            report.problems.append(
                Problem(
                    "view_modified",
                    path,
                    "edited outside gc (edits go through gc bead edit)" + hint,
                )
            )
    for path in set(present) - expected:
        if not os.path.lexists(store.root / path):
            continue  # pruned since the scan (the files of a `recent` view that aged out)
        why = "not in HEAD" if path not in tree else f"left out by store.view={store.view.mode}"
        if restore:
            store.view.remove(path)
            report.fixed.append(f"removed {path} ({why})")
        else:
            report.problems.append(Problem("view_stray", path, why + hint))


def _clear_stale_files(store: Store, report: Report) -> None:
    """Remove git lock files, temporary files and half-built repositories of dead writers.

    We hold the write lock, so no gc process owns any of them; a git process (a push into
    the store) holds a lock for milliseconds, so a lock is waited for until it is either
    released or `store.stale_lock_seconds` old."""
    git_dir = store.root / ".git"
    stale_after = store.config["store"]["stale_lock_seconds"]
    for lock in sorted(git_dir.rglob("*.lock")):
        age = _age_once_stale(lock, stale_after)
        if age is None:
            continue
        dated_by_gc = time.time() - age < GC_LOCK_MTIME + 1  # see gitrefs.GC_LOCK_MTIME
        writer = "a killed gc writer" if dated_by_gc else f"a writer gone for {age:.0f}s"
        if _remove(lock):
            report.problems.append(
                Problem(
                    "stale_lock", _shown(store, lock), f"a lock left by {writer}; removed", True
                )
            )
    _clear_old_temp_files(store, report, git_dir.glob("objects/**/tmp_*"))
    for pack in sorted(git_dir.glob("objects/pack/pack-*.pack")):
        # A pack counts once its `.idx` exists, and the `.idx` is written last: one without
        # it is a dead writer's, unless a push is between the two (milliseconds).
        age = lock_age(pack)
        if age is not None and age >= stale_after and not pack.with_suffix(".idx").exists():
            if _remove(pack):
                report.problems.append(
                    Problem(
                        "stale_file",
                        _shown(store, pack),
                        "a pack without its .idx, left by a writer killed while writing it; "
                        "removed (its objects were never part of a commit)",
                        True,
                    )
                )
    for building in remove_dead_builds(store.root):
        report.problems.append(
            Problem(
                "stale_file",
                building.name,
                "a repository half built by a killed 'gc init'; removed",
                True,
            )
        )
    _clear_view_temp_files(store, report)


def _clear_view_temp_files(store: Store, report: Report) -> None:
    """Remove the view's temporary files (`.runtime/tmp/*.tmp`, random names) that a writer
    killed between writing and renaming left; one this young may still be renamed."""
    tmp_dir = store.root / ".runtime" / "tmp"
    if not files.real_dir(str(store.root), str(tmp_dir)):
        return  # none, or behind a link (reported by the link check): nothing of ours
    _clear_old_temp_files(store, report, tmp_dir.glob("*.tmp"))


def _clear_old_temp_files(store: Store, report: Report, found: Iterable[Path]) -> None:
    """Remove temporary files untouched for `TEMP_STALE_SECONDS`: a dead writer's."""
    for temp in sorted(found):
        age = lock_age(temp)
        if age is not None and age >= TEMP_STALE_SECONDS and temp.is_file() and _remove(temp):
            report.problems.append(
                Problem(
                    "stale_file",
                    _shown(store, temp),
                    "a temporary file of a dead writer; removed",
                    True,
                )
            )


def _age_once_stale(lock: Path, stale_after: float) -> float | None:
    """Wait until `lock` is gone (None) or `stale_after` old (its age)."""
    while True:
        age = lock_age(lock)
        if age is None or age >= stale_after:
            return age
        time.sleep(min(stale_after - age, 0.05))


def _check_git_head(store: Store, report: Report) -> None:
    """`.git/HEAD` names our branch; without it git commands cannot read the store. A lost
    `refs/` directory is remade, for `_restore_branch` to put the branch back into."""
    (store.root / ".git" / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    head_file = store.root / ".git" / "HEAD"
    try:
        content: bytes | None = head_file.read_bytes()
    except FileNotFoundError:
        content = None
    if content is not None and content.strip() == HEAD_SYMREF.strip():
        return
    what = "is missing" if content is None else f"holds {content[:60]!r}"
    temp = head_file.with_name("HEAD.gc-doctor")
    temp.write_bytes(HEAD_SYMREF)
    os.replace(temp, head_file)
    report.problems.append(
        Problem(
            "git_head",
            ".git/HEAD",
            f"{what} (git commands cannot read the store); rewritten to name {BRANCH}",
            True,
        )
    )


def _check_packed_refs(store: Store, report: Report) -> None:
    """Drop lines of `.git/packed-refs` that git cannot parse (a power cut mid-write): git
    refuses the whole repository for one of them. The original is kept in `.runtime/`."""
    path = store.root / ".git" / "packed-refs"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    kept: list[bytes] = []
    bad = 0
    for number, line in enumerate(data.splitlines()):
        sha, _, name = line.partition(b" ")
        if number == 0 and line.startswith(b"# pack-refs"):
            kept.append(line)
        elif is_sha(sha) and name.startswith(b"refs/") and b" " not in name:
            kept.append(line)
        elif line[:1] == b"^" and is_sha(line[1:]) and kept and not kept[-1].startswith(b"^"):
            kept.append(line)
        else:
            bad += 1
    if not bad and (not data or data.endswith(b"\n")):
        return
    from dulwich.file import FileLocked, GitFile

    aside = store.runtime / "packed-refs.damaged"
    files.write_atomic(str(store.root), str(aside), data, str(store.runtime / "tmp"))
    try:
        with GitFile(path, "wb") as handle:  # git's own lock: never under a git process
            handle.write(b"".join(line + b"\n" for line in kept))
    except FileLocked:
        report.problems.append(
            Problem("packed_refs", ".git/packed-refs", "unreadable lines; a git process holds it")
        )
        return
    report.problems.append(
        Problem(
            "packed_refs",
            ".git/packed-refs",
            f"{bad} line(s) git cannot read (git refuses the repository); rewritten without "
            f"them, the original kept as {_shown(store, aside)}",
            True,
        )
    )


def _check_loose_objects(store: Store, report: Report) -> None:
    """Find loose objects that cannot be read (a full disk, a power cut) and repair those
    whose content exists elsewhere: in a pack, or as a view file with the same id."""
    git = store.git
    objects = git.objects
    for sha in list(objects._iter_loose_objects()):
        try:
            if objects._get_loose_object(sha) is not None:
                continue
        except Exception:  # dulwich raises several kinds for a damaged object
            pass
        path = Path(objects._get_shafile_path(sha))
        shown = _shown(store, path)
        # Moved aside: an unreadable file hides any good copy and blocks rewriting it.
        aside = store.runtime / "corrupt-objects" / sha.decode()
        files.make_dirs(str(store.root), str(aside.parent))  # never through a link
        os.replace(path, aside)
        if sha in objects:
            message, fixed = "unreadable; moved aside (a pack holds the object)", True
        else:
            fixed = _restore_blob_from_view(store, sha)
            message = (
                "unreadable; rewritten from the view file with the same content"
                if fixed
                else f"unreadable and no copy found (moved to {_shown(store, aside)}); "
                "commits that use it are damaged"
            )
        report.problems.append(Problem("corrupt_object", shown, message, fixed))


def _restore_blob_from_view(store: Store, sha: bytes) -> bool:
    from dulwich.objects import Blob

    path = next((path for path, blob, _ in store.index.rows() if blob == sha.decode()), None)
    data = store.view.read(path) if path is not None else None
    if data is None or git_blob_sha(data) != sha:
        return False
    store.git.objects.add_object(Blob.from_string(data))
    return True


def _restore_branch(store: Store, report: Report) -> bool:
    """Point a lost, garbled or dangling branch ref back at the last good commit; returns
    False when the branch is broken and no commit was found for it."""
    git = store.git
    head = git.head()
    if head is not None and git.commit_of(head) is not None:
        return True
    if head is None:
        problem = branch_problem(store.root)
    else:
        problem = f"{BRANCH} names {head.decode()}, which is not a commit of the store"
    found = _last_good_commit(store)
    if found is None:
        report.problems.append(
            Problem("branch", f".git/{BRANCH}", f"{problem}; no commit found to restore")
        )
        return False
    sha, source = found
    git.swap_head(None, sha, f"gc doctor: restore the branch ({source})", store.agent, force=True)
    report.problems.append(
        Problem(
            "branch",
            f".git/{BRANCH}",
            f"{problem}; restored to {sha.decode()} ({source}); "
            "'git -C .beads reflog' lists where it has been",
            True,
        )
    )
    return True


def _last_good_commit(store: Store) -> tuple[bytes, str] | None:
    """The commit the branch last held: the newest of those the reflog, the index and the
    view recorded; when none of them is a commit of the store, the newest commit that no
    other commit descends from."""
    git = store.git
    candidates: list[tuple[bytes, str]] = []
    last = _last_reflog_entry(git.reflog_path)
    for sha, source in (
        (last, "the reflog's last entry"),
        (store.index.head(), "the commit the index recorded"),
        (store.view.applied(), "the commit the view recorded"),
    ):
        if sha is not None and git.commit_of(sha) is not None:
            candidates.append((sha, source))
    if candidates:
        for sha, source in candidates:
            others = {other for other, _ in candidates if other != sha}
            if not any(sha in _ancestors(store, other) for other in others):
                return sha, source
        return candidates[0]
    return _newest_tip(store)


def _last_reflog_entry(path: Path) -> bytes | None:
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        fields = line.split(b" ", 2)
        if len(fields) == 3 and is_sha(fields[1]) and fields[1] != b"0" * 40:
            return fields[1]
    return None


def _ancestors(store: Store, sha: bytes, limit: int = 100_000) -> set[bytes]:
    """Commits reachable from `sha` through its parents (at most `limit`)."""
    seen: set[bytes] = set()
    todo = [sha]
    while todo and len(seen) < limit:
        commit = store.git.commit_of(todo.pop())
        if commit is None:
            continue
        for parent in commit.parents:
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return seen


def _newest_tip(store: Store) -> tuple[bytes, str] | None:
    """The newest commit among the objects that is no other commit's parent."""
    commits = {}
    for sha in store.git.objects:
        commit = store.git.commit_of(sha)
        if commit is not None:
            commits[sha] = commit
    parents = {parent for commit in commits.values() for parent in commit.parents}
    tips = [commit for sha, commit in commits.items() if sha not in parents]
    if not tips:
        return None
    tips.sort(key=lambda commit: commit.commit_time, reverse=True)
    # A writer killed before its ref moved leaves a commit no one was told of: a person may
    # prefer another tip, so they are named.
    others = ", ".join(f"{c.id.decode()[:12]} ({_subject(c.message)})" for c in tips[1:6])
    more = (
        f"; other tips: {others} (git -C .beads update-ref {BRANCH} <commit> picks one)"
        if others
        else ""
    )
    return tips[0].id, f"the newest commit in the objects{more}"


def _subject(message: bytes) -> str:
    return message.decode("utf-8", "replace").partition("\n")[0][:40]


def _remove(path: Path) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def _shown(store: Store, path: Path) -> str:
    return path.relative_to(store.root).as_posix()


def _check_links(store: Store, view_links: list[str], report: Report, *, restore: bool) -> None:
    """Symbolic links in the view or `.runtime/`: gc never writes through them. A view link
    is removed with `restore` (the view check then writes HEAD's files in its place); one
    under `.runtime/` is for the user to move away (it may hold queues)."""
    import os

    for rel in view_links:
        path = store.root / rel
        if restore:
            os.unlink(path)  # the link only: what it points to is left alone
            report.fixed.append(f"removed the symbolic link {rel}")
        else:
            report.problems.append(
                Problem(
                    "symlink",
                    rel,
                    f"a symbolic link (to {os.readlink(path)}) in the view; "
                    "gc doctor --restore-view replaces it with HEAD's files",
                )
            )
    for rel in files.links(str(store.runtime)):
        report.problems.append(
            Problem(
                "symlink",
                f".runtime/{rel}",
                "a symbolic link: gc never writes through it; move it away (what it points to "
                "is not gc's)",
            )
        )
