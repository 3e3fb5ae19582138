"""`gc doctor`: check the repository, the index and the view against HEAD, and repair them.

Git is the source of truth, so every repair rewrites derived data from it: the index
(`rebuild_index`), view files edited by hand (`restore_view`), loose objects (`compact`).
A bead that does not parse is reported by path; it cannot be repaired from git, and every
other bead stays readable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from beads.config import CONFIG_PATH
from beads.ids import parse_bead_path
from beads.store import Store
from beads.view import git_blob_sha


@dataclass(frozen=True)
class Problem:
    """One thing wrong: `kind` (repository, unparsable, index, view_modified, view_missing,
    view_stray), the file, and what to do."""

    kind: str
    path: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "path": self.path, "message": self.message}


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    beads: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def doctor(
    store: Store, *, rebuild_index: bool = False, restore_view: bool = False, compact: bool = False
) -> Report:
    """Check (and with the flags, repair) the store; returns what was found and fixed."""
    report = Report()
    with store.locked():
        if rebuild_index:
            store.index.drop_file()  # from a fresh file: the old one may be damaged anywhere
        store.sync(rebuild_index=rebuild_index)
        if rebuild_index:
            report.fixed.append(f"index rebuilt from git ({store.index.count()} beads)")
        head = store.git.head()
        try:
            tree = {path: sha for path, sha in store.git.files(head)}
            missing = [path for path, sha in tree.items() if not store.git.has_object(sha)]
        except Exception as exc:  # a damaged object store raises many kinds
            report.problems.append(Problem("repository", ".git", f"cannot read HEAD's tree: {exc}"))
            return report
        for path in missing:
            report.problems.append(Problem("repository", path, "the file's object is missing"))
        _check_index(store, tree, report)
        _check_view(store, tree, report, restore=restore_view)
        if compact:
            packed = store.git.pack_loose_objects()
            store.git.repack()
            assert head is not None
            store.index.apply(head=head, loose_objects=0)
            report.fixed.append(f"packed {packed} loose objects and compacted the packs")
        report.beads = store.index.count()
    return report


def _check_index(store: Store, tree: dict[str, bytes], report: Report) -> None:
    """Compare every row with git: its blob id and its bead (a row altered in the index
    while its blob id stayed is found too)."""
    from beads.codec import dump_bead, load_bead

    rows = {path: (blob, bead) for path, blob, bead in store.index.rows()}
    invalid = store.index.invalid()
    hint = "run gc doctor --rebuild-index"
    for path, sha in tree.items():
        if path in invalid:
            report.problems.append(Problem("unparsable", path, invalid[path]))
            continue
        if parse_bead_path(path) is None:
            continue
        blob, bead = rows.get(path, (None, None))
        if bead is None or blob != sha.decode():
            report.problems.append(Problem("index", path, f"the index differs from HEAD; {hint}"))
        elif git_blob_sha(dump_bead(bead)) != sha and bead != load_bead(store.git.read(sha)):
            # (a file git holds in another layout than gc writes is parsed and compared)
            report.problems.append(
                Problem("index", path, f"the index row differs from the file in HEAD; {hint}")
            )
    for path in rows.keys() - tree.keys():
        report.problems.append(Problem("index", path, f"indexed but not in HEAD; {hint}"))
    if CONFIG_PATH not in tree:
        report.problems.append(Problem("repository", CONFIG_PATH, "HEAD has no config.yaml"))


def _check_view(store: Store, tree: dict[str, bytes], report: Report, *, restore: bool) -> None:
    hint = "" if restore else "; gc doctor --restore-view puts HEAD's version back"
    for path, sha in tree.items():
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
    for path in set(store.view.files()) - tree.keys():
        if restore:
            store.view.remove(path)
            report.fixed.append(f"removed {path} (not in HEAD)")
        else:
            report.problems.append(Problem("view_stray", path, "not in HEAD" + hint))
