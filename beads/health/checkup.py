"""`gc doctor`: check the repository, the index and the view against HEAD, and repair them.

Git is the source of truth, so every repair rewrites derived data from it: the index
(`rebuild_index`), view files edited by hand (`restore_view`), loose objects (`compact`); a
blob of HEAD whose object is missing is written again from the view file that hashes to it.
A bead that does not parse is reported by path, with its repair (`gc bead edit ID` opens it
as it is); every other bead stays readable.

What would brick the store is repaired by every run, under the write lock, and reported as a
problem marked fixed: git lock files and temporary files left by dead writers, half-made
repositories of a killed `gc init`, a lost or garbled branch ref (restored to the last good
commit), a missing `.git/HEAD`, loose objects cut short by a full disk or a power cut, a
pack cut short (what reads of it is written again, the pack moved aside), a commit of the
history whose object is missing (fetched again from a remote).

The files the layers above keep under `.runtime/` (the delivery database) are theirs to
check: the program registers each layer's check (`beads.health.layerchecks`), and every run
reports what they find; and the caches they derive from git (the origins kept for reading
commands), which `rebuild_index` removes. This layer names none of them.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from beads import files
from beads.errors import GcError, StorageError
from beads.git.objects import DamagedObject
from beads.health.gitrepair import (
    COPY_AGAIN,
    check_git_head,
    check_loose_objects,
    check_packed_refs,
    check_packs,
    clear_stale_files,
    restore_branch,
    restore_history,
    restore_missing_blobs,
)
from beads.health.historycheck import check_history, history_trust
from beads.health.layerchecks import remove_caches, run_checks
from beads.health.problems import Problem, Report, shown_path
from beads.records.ids import parse_bead_path
from beads.refresh import tree_files
from beads.settings.config import CONFIG_PATH, config_problems
from beads.settings.trust import notices
from beads.store import Store
from beads.view.scan import ViewScan
from beads.view.view import git_blob_sha


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
    is installed and `use_git`, else by dulwich (`beads.git.maintenance`).

    `progress` is told the name of each step as it starts (`doctor_steps` lists them), so a
    terminal can show how far a long rebuild or compaction has come."""
    report = Report()
    step = progress or (lambda name: None)
    with store.locked():
        step("checking files")
        clear_stale_files(store, report)
        check_git_head(store, report)
        check_packed_refs(store, report)
        check_loose_objects(store, report)
        check_packs(store, report)
        if not restore_branch(store, report):
            return report
        # (before the history check, which walks the commits: one missing is fetched again)
        trust = history_trust(store)
        history_whole = restore_history(store, report, trust.present_to)
        _check_hook(store, report)
        _check_machine_id(store, report)
        if rebuild_index:  # before the layers' checks, which then find what is left
            removed, failed = remove_caches(store.root)  # the layers' (the origins kept)
            report.fixed.extend(removed)
            report.problems.extend(failed)
        report.problems.extend(run_checks(store.root))  # the layers' own (the delivery database)
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
        rebuild = rebuild_index and head is not None and not store.index.just_rebuilt(head)
        if rebuild:
            # The rebuild reads every blob of HEAD: the missing ones are written again first.
            _restore_before_rebuild(store, head, early, report)
            try:
                store.rebuild_index()  # into a new file: the old one may be damaged anywhere
            except StorageError as exc:  # git cannot read HEAD's files: the old one is kept
                _not_rebuilt(store, exc, report)
                return report
        store.refresh()
        if rebuild_index:
            report.fixed.append(f"index rebuilt from git ({store.index.count()} beads)")
        scan = early if early is not None and early.still_valid(store) else None
        try:
            tree = scan.tree if scan is not None else tree_files(store.git, head)
            # (a rebuild has just read every blob: none is missing)
            has = store.git.has_object
            missing = [] if rebuild_index else [p for p, sha in tree.items() if not has(sha)]
        except Exception as exc:  # a damaged object store raises many kinds
            why = exc.what if isinstance(exc, DamagedObject) else str(exc)
            report.problems.append(Problem("repository", ".git", f"cannot read HEAD's tree: {why}"))
            return report
        # (before the history check: a blob written again leaves no history to reset)
        restore_missing_blobs(store, tree, missing, report)
        step("checking the index")
        _check_index(store, tree, report, rebuilt=rebuild_index)
        if head is not None and history_whole:  # a history cut short was reported above
            check_history(store, head, report, trust)
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


def _restore_before_rebuild(
    store: Store, head: bytes, early: _ViewScan | None, report: Report
) -> None:
    """Write again, from the view, each blob of HEAD whose object is missing (as a check
    without a rebuild does after it), so the rebuild can read them; a tree that cannot be
    read is left for the rebuild to name."""
    try:
        tree = early.tree if early is not None else tree_files(store.git, head)
        missing = [path for path, sha in tree.items() if not store.git.has_object(sha)]
    except Exception:  # a damaged object store raises many kinds; the rebuild names it
        return
    restore_missing_blobs(store, tree, missing, report)


def _not_rebuilt(store: Store, exc: StorageError, report: Report) -> None:
    """Report a rebuild of the index that git could not finish: what it could not read,
    that the index was kept, and (unless a lost object was reported already, saying it)
    what to do."""
    why = exc.what if isinstance(exc, DamagedObject) else exc.message
    told = any(p.kind == "corrupt_object" and not p.fixed for p in report.problems)
    advice = "" if told else f"; {COPY_AGAIN}"
    report.problems.append(
        Problem(
            "index",
            shown_path(store, store.index.path),
            f"not rebuilt: {why}; the index was kept as it was, so reads go on{advice}",
        )
    )


def _check_hook(store: Store, report: Report) -> None:
    """gc's `pre-receive` hook (`beads.receivehook`) is in place, written if it is not; a
    hook that is not gc's is left as it is and reported."""
    from beads.receivehook import HOOK, install

    try:
        done = install(store.root / ".git")
    except OSError as exc:
        done = f"cannot write it: {exc.strerror or exc}"
    if done == "installed":
        report.fixed.append("installed the pre-receive hook (the gate for a plain git push)")
    elif done == "foreign":
        report.problems.append(
            Problem(
                "hook",
                f".git/hooks/{HOOK}",
                "a pre-receive hook that is not gc's is there (left as it is): a plain git "
                "push into the store is not checked by the gate for incoming trees; add the "
                "line 'python -m beads.receivehook' to it, or move it away and run gc doctor",
            )
        )
    elif done is not None:
        report.problems.append(Problem("hook", f".git/hooks/{HOOK}", done))


def _check_machine_id(store: Store, report: Report) -> None:
    """This machine's id (`machine.id` in `.git/config`), when set by hand to no id: every
    write fails on it, and it is never replaced (beads.settings.localconfig.machine_id)."""
    from beads.settings.localconfig import machine_id

    try:
        machine_id(store.root / ".git", make=False)
    except StorageError as exc:
        report.problems.append(Problem("config", ".git/config", exc.message))


def doctor_steps(compact: bool) -> int:
    """How many steps `doctor` reports to `progress`."""
    return 5 if compact else 4


def _check_index(store: Store, tree: dict[str, bytes], report: Report, *, rebuilt: bool) -> None:
    """Compare every row with git: its blob id and, unless the index was just `rebuilt` from
    these very blobs, its bead (a row altered in the index while its blob id stayed is found
    too). Rows are read one at a time: a store's worth of beads is never held at once."""
    from beads.records.codec import dump_bead, load_bead

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
        if path == CONFIG_PATH and path in invalid:
            # The last valid config stays in force; setting one key writes it out whole.
            fix = (
                "gc config set KEY VALUE writes it again from the settings in force (gc config get)"
            )
            report.problems.append(Problem("unparsable", path, f"{invalid[path]}; {fix}"))
        elif path in invalid:
            located = parse_bead_path(path)
            fix = (
                f"; gc bead edit {located[1]} opens the file as it is and commits it once it parses"
                if located is not None
                else ""
            )
            report.problems.append(Problem("unparsable", path, invalid[path] + fix))
        elif path not in checked and parse_bead_path(path) is not None:
            report.problems.append(Problem("index", path, f"the index differs from HEAD; {hint}"))
    if CONFIG_PATH not in tree:
        report.problems.append(Problem("repository", CONFIG_PATH, "HEAD has no config.yaml"))
    # Kind `config`: a setting an older gc accepted that `gc config set` now refuses. The store
    # still opens; the value is named so it can be set again.
    for key, problem in config_problems(store.committed_config):
        fix = f"{key} {problem}; set it again with gc config set {key} VALUE"
        report.problems.append(Problem("config", CONFIG_PATH, fix))
    # A guarded setting of a type no reader can use: ignored (its default is in force).
    in_force = store.config
    for key in getattr(in_force, "ignored", None) or []:
        why = f"{key} has the wrong type and is ignored; set it again with gc config set {key}"
        report.problems.append(Problem("config", CONFIG_PATH, why))
    # Guarded settings that wait for a person here, or an approval file that cannot be read:
    # told, not a fault of the store.
    for line in notices(in_force, types=False):
        report.notices.append(line.removeprefix("gc: "))


class _ViewScan:
    """HEAD's tree, and the view's files, links and blob ids as `ViewScan` finds them (in the
    background, for a large store, until they are asked for)."""

    def __init__(self, store: Store, head: bytes | None, tree: dict[str, bytes] | None = None):
        self.marker = store.view.marker()
        self.head = head
        self.tree = tree_files(store.git, head) if tree is None else tree
        self._scan = ViewScan(store.root, len(self.tree))
        self._found: tuple[list[str], list[str], dict[str, bytes]] | None = None

    def still_valid(self, store: Store) -> bool:
        """Whether `sync` left the view (and HEAD) as they were when this scan was made."""
        return store.view.marker() == self.marker and store.git.head() == self.head

    def found(self) -> tuple[list[str], list[str], dict[str, bytes]]:
        """The view's files, its links and the blob ids of files read ahead (`ViewScan`)."""
        if self._found is None:
            self._found = self._scan.result()
        return self._found


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
        why = hint
        if restore:
            try:
                store.view.write(path, store.git.read(sha))
            except (KeyError, StorageError):  # its object missing or damaged, reported already
                why = "; HEAD's version cannot be read to put it back"
            else:
                report.fixed.append(f"restored {path} from HEAD")
                continue
        if data is None:
            report.problems.append(Problem("view_missing", path, "missing from the view" + why))
        else:
            report.problems.append(
                Problem(
                    "view_modified",
                    path,
                    "edited outside gc (edits go through gc bead edit)" + why,
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


def _check_links(store: Store, view_links: list[str], report: Report, *, restore: bool) -> None:
    """Symbolic links in the view or `.runtime/`: gc never writes through them. A view link
    is removed with `restore` (the view check then writes HEAD's files in its place); one
    under `.runtime/` is for the user to move away (it may hold queues)."""
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
