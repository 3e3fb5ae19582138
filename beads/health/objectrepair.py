"""`gc doctor` and damaged or lost objects: loose objects that cannot be read or do not hash
to their name, and packs cut short or overwritten, each put right from a copy whose bytes
hash right; and the ways a lost object is written again (`restore_lost`): HEAD's trees from
the index's record of HEAD's files, a blob of HEAD from the view file that hashes to it,
anything else from a configured remote.
"""

from __future__ import annotations

from beads import files
from beads.errors import GcError
from beads.git import repair
from beads.health.problems import Problem, Report, shown_path
from beads.store import Store

# What to do about objects that are lost for good from this repository.
COPY_AGAIN = "copy the store again from a remote or a backup (gc clone URL makes a new one)"


# Where `gc doctor` moves a pack cut short, once the objects it could read are written again.
PACKS_ASIDE = "corrupt-objects"


def check_loose_objects(store: Store, report: Report) -> None:
    """Find loose objects that cannot be read or do not hash to their name (a full disk, a
    power cut, a disk fault: one object's bytes under another's name) and restore each from
    a copy whose bytes hash right: the view file at the path HEAD's tree names it (found by
    walking the tree, never through the index, which may have been rebuilt from the damaged
    bytes), else a pack, else a configured remote."""
    git = store.git
    head = git.head()
    for damaged in repair.damaged_loose(git, head):
        shown = shown_path(store, damaged.file)
        aside = store.runtime / "corrupt-objects" / damaged.sha.decode()
        files.make_dirs(str(store.root), str(aside.parent))  # never through a link
        if not repair.set_aside(damaged, aside):
            continue  # packed meanwhile by the background repack
        source = _restore(store, damaged)
        if source is not None:
            message, fixed = f"unreadable or misnamed; {source}", True
        else:
            message, fixed = (
                f"unreadable or misnamed, and no copy found in the view, the packs or a "
                f"remote (moved to {shown_path(store, aside)}); commits that use it are "
                "damaged",
                False,
            )
        report.problems.append(Problem("corrupt_object", shown, message, fixed))


def check_packs(store: Store, report: Report) -> None:
    """Salvage each pack cut short or overwritten (its end is not what its `.idx` records),
    which neither git nor gc reads while its checksum fails: the objects before the damage
    are written again as loose objects and the pack is moved to `.runtime/corrupt-objects/`.
    Each object past the damage comes from a configured remote, or (HEAD's trees and files)
    from the index's record of HEAD and the view; one found nowhere is lost from this
    repository, and reported by every run (from the pack set aside) until it is back."""
    git = store.git
    folder = store.runtime / PACKS_ASIDE
    aside_before = (
        sorted(folder.glob("pack-*.pack")) if files.real_dir(str(store.root), str(folder)) else []
    )
    for pack in aside_before:  # set aside by an earlier run: are its lost objects back?
        missing = {sha for sha in repair.pack_ids(pack) if not git.has_object(sha)}
        if missing:
            found = restore_lost(store, missing)
            told = _told(missing, found, "objects still missing")
            what = f"a pack cut short or overwritten, moved here by an earlier gc doctor: {told}"
            report.problems.append(
                Problem("corrupt_object", shown_path(store, pack), what, fixed=_all(missing, found))
            )
    for pack in repair.packs_cut_short(store.root / ".git"):
        if repair.index_pack(pack) is not None:  # the pack reads whole: its `.idx` was damaged
            git.objects.close()
            report.problems.append(
                Problem(
                    "corrupt_object",
                    shown_path(store, pack.with_suffix(".idx")),
                    "a pack's .idx that does not match it; the pack reads whole, so its .idx "
                    "was written again",
                    True,
                )
            )
            continue
        salvaged = repair.salvage_pack(git, pack)
        if salvaged is None:  # its `.idx` does not read either: nothing says where objects are
            report.problems.append(
                Problem(
                    "corrupt_object",
                    shown_path(store, pack),
                    "a pack cut short or overwritten, and its .idx cannot be read: objects in "
                    f"it cannot be read; {COPY_AGAIN}",
                )
            )
            continue
        written, lost = salvaged
        files.make_dirs(str(store.root), str(folder))  # never through a link
        try:
            aside = shown_path(store, repair.move_pack_aside(pack, folder))
        except FileNotFoundError:
            continue  # removed meanwhile (a repack)
        git.objects.close()  # read the packs again, without this one
        missing = {sha for sha in lost if not git.has_object(sha)}  # another copy is there
        found = restore_lost(store, missing)
        what = (
            f"a pack cut short or overwritten (its end is not the checksum its .idx records; "
            f"moved to {aside}): the {written} objects before the damage were written again"
        )
        if missing:
            what += f"; {_told(missing, found, 'objects past the damage')}"
        report.problems.append(
            Problem("corrupt_object", shown_path(store, pack), what, fixed=_all(missing, found))
        )


def _told(missing: set[bytes], found: dict[str, set[bytes]], what: str) -> str:
    """What became of the objects `missing` (`what` names them): where those found came
    from, and how many are still lost, with what to do."""
    parts = [f"of the {len(missing)} {what}, {', '.join(found)}"] if found else []
    left = len(missing) - sum(len(got) for got in found.values())
    if left:
        lost = str(left) if found else f"the {left} {what}"
        verb = "is" if left == 1 and found else "are"
        parts.append(f"{lost} {verb} lost from this repository: {COPY_AGAIN}")
    return "; ".join(parts)


def _all(missing: set[bytes], found: dict[str, set[bytes]]) -> bool:
    return sum(len(got) for got in found.values()) == len(missing)


def restore_lost(
    store: Store, missing: set[bytes], unread: dict[str, str] | None = None
) -> dict[str, set[bytes]]:
    """Write again what can be found of the objects `missing`: HEAD's trees from the index's
    record of HEAD's files, each file of HEAD from the view file that hashes to it, the
    others from the configured remotes in turn; returns how many came from where (as the
    report says it) and which. A remote that cannot be read (down, moved) is added to
    `unread` with why."""
    from beads.settings.localconfig import remotes
    from beads.sync.remote import restore_objects

    found: dict[str, set[bytes]] = {}
    left = set(missing)
    head = store.git.head()
    trees = _remake_head_trees(store, head, left) if head is not None and left else set()
    if trees:
        found[f"{len(trees)} trees of HEAD made again from the index's record of its files"] = trees
        left -= trees
    paths = repair.paths_in_tree(store.git, head, left) if head is not None and left else {}
    from_view = {sha for sha, path in paths.items() if _restore_from_view(store, sha, path)}
    if from_view:
        found[f"{len(from_view)} rewritten from the view files that hash to them"] = from_view
        left -= from_view
    try:
        known = remotes(store.git.git_dir) if left else {}
    except GcError:
        known = {}
    for name, url in known.items():
        try:
            fetched = restore_objects(store.git, url, left, store.max_body) if left else set()
        except GcError as exc:
            if unread is not None:
                unread[name] = exc.message
            continue
        if fetched:
            found[f"{len(fetched)} fetched from the remote {name}"] = fetched
            left -= fetched
    return found


def _remake_head_trees(store: Store, head: bytes, missing: set[bytes]) -> set[bytes]:
    """Write again HEAD's trees among `missing`, made from the index's record of HEAD's
    files (each bead file's blob id) and the view (the files it keeps no blob id of), when
    they come out exactly as HEAD names its tree; returns those written (none when the index
    is elsewhere or a file is not in the view)."""
    from beads.settings.config import CONFIG_PATH
    from beads.view.view import git_blob_sha

    git, index = store.git, store.index
    commit = git.commit_of(head)
    if commit is None or index.head() != head:
        return set()
    blobs: dict[str, bytes | None] = {path: blob.encode() for path, blob in index.rows(beads=False)}
    for path in [CONFIG_PATH, *index.invalid()]:
        data = store.view.read(path)
        if data is None:
            return set()
        blobs[path] = git_blob_sha(data)
    made, objects = git.build_commit(None, {}, "", store.agent, blobs=blobs)
    if made.tree != commit.tree:
        return set()
    trees = [obj for obj in objects if obj.id in missing and obj.type_name == b"tree"]
    git.store_objects(trees)
    return {tree.id for tree in trees}


def _restore(store: Store, damaged: repair.Damaged) -> str | None:
    """Put a damaged object's right bytes back; returns how (None: no copy found)."""
    if damaged.path is not None and _restore_from_view(store, damaged.sha, damaged.path):
        return f"rewritten from the view file {damaged.path}, whose bytes hash right"
    if store.git.has_object(damaged.sha):
        return "moved aside (a pack holds the object)"
    return _restore_from_remote(store, damaged.sha)


def _restore_from_view(store: Store, sha: bytes, path: str) -> bool:
    """Write blob `sha` again from the view file at `path` (where HEAD's tree names it) when
    that file's bytes hash to exactly `sha`; whether it was written."""
    data = store.view.read(path)
    return data is not None and repair.restore_blob(store.git, sha, data)


def restore_missing_blobs(
    store: Store, tree: dict[str, bytes], missing: list[str], report: Report
) -> None:
    """Report each file of HEAD's `tree` (path -> blob id) whose object is `missing` (its
    loose file deleted, not damaged), written again, and so fixed, when the view file at its
    path holds bytes that hash to exactly that id: the history that names it is whole
    again, and no reset that drops beads is ever suggested for it."""
    for path in missing:
        if _restore_from_view(store, tree[path], path):
            message, fixed = (
                "the file's object was missing; rewritten from the view file, whose bytes "
                "hash to it",
                True,
            )
        else:
            message, fixed = "the file's object is missing", False
        report.problems.append(Problem("repository", path, message, fixed))


def _restore_from_remote(store: Store, sha: bytes) -> str | None:
    """Fetch object `sha` from a configured remote (each in turn); its name if one had it."""
    from beads.settings.localconfig import remotes
    from beads.sync.remote import restore_objects

    try:
        known = remotes(store.git.git_dir)
    except GcError:
        return None
    for name, url in known.items():
        try:
            if sha in restore_objects(store.git, url, {sha}, store.max_body):
                return f"rewritten from the remote {name}"
        except GcError:
            continue
    return None
