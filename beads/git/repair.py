"""What would brick the repository, found and put right at git's level for `gc doctor`
(which decides what to report, and where a lost object's copy comes from).

Lock and temporary files of dead writers, a pack without its `.idx` (indexed again when
it reads whole), a pack cut short (found, and the objects before the damage written again
as loose objects), a missing or garbled
`HEAD`, lines of `packed-refs` git cannot parse, and loose objects that cannot be read or
do not hash to their name (a full disk, a power cut: one object's bytes under another's
name), found among the objects HEAD's tree names.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from beads.git.objects import DIR_TYPE, TreeData, hashes_to, loose_ids, loose_path, read_loose
from beads.git.refs import BRANCH, is_sha

if TYPE_CHECKING:
    from beads.git.repo import GitRepo

HEAD_SYMREF = f"ref: {BRANCH}\n".encode()


class RefsLocked(Exception):
    """A git process holds `packed-refs` locked: it is left as it is."""


def lock_files(git_dir: Path) -> list[Path]:
    """git's lock files anywhere in the repository (`*.lock`). A writer's lock is a regular
    file: anything else so named (a directory of refs, a link) is no lock and is left alone."""
    return [path for path in _files_named(git_dir, "*.lock") if _is_regular_file(path)]


def _is_regular_file(path: Path) -> bool:
    """Whether `path` is a regular file (a link is not followed); False once it is gone."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def temporary_files(git_dir: Path) -> list[Path]:
    """Temporary files of git and dulwich among the objects (`tmp_obj_*`, `tmp_pack_*`,
    dulwich's `tmp*.pack`)."""
    return _files_named(git_dir / "objects", "tmp*")


def _files_named(top: Path, pattern: str) -> list[Path]:
    """The paths under `top` whose names match `pattern`. A background repack's
    `git prune-packed` removes the fan-out directories it empties while this walks, so a
    directory gone by the time it is listed holds nothing (os.walk skips it; pathlib's
    glob would raise)."""
    return sorted(
        Path(dirpath, name)
        for dirpath, dirnames, filenames in os.walk(top)
        for name in fnmatch.filter(dirnames + filenames, pattern)
    )


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs on this machine (another user's counts): what a directory
    named for the pid of its maker is judged by, once the maker may have been killed (a
    fetch's quarantine, a repository `gc init` was building)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


def packs_without_index(git_dir: Path) -> list[Path]:
    """Packs whose `.idx` is missing (a pack counts once its `.idx`, written last, exists)."""
    return [
        pack
        for pack in sorted(git_dir.glob("objects/pack/pack-*.pack"))
        if not pack.with_suffix(".idx").exists()
    ]


def index_pack(pack: Path) -> Path | None:
    """Write the `.idx` of a pack that has none, when the pack reads whole (its checksum
    holds and each of its objects resolves within it); returns the `.idx`, or None for a
    pack that does not read whole (one cut short). The index is written beside the pack
    under a temporary name (`tmp_pack_*`, cleared by doctor when a kill leaves it) and
    renamed into place once complete."""
    import tempfile

    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.pack import PackData

    target = pack.with_suffix(".idx")
    handle, temp = tempfile.mkstemp(prefix="tmp_pack_", suffix=".idx", dir=pack.parent)
    os.close(handle)
    try:
        with PackData(str(pack), DEFAULT_OBJECT_FORMAT) as data:
            data.check()
            data.create_index(temp)
        os.chmod(temp, stat.S_IMODE(os.stat(pack).st_mode))  # read-only, as its pack
        os.rename(temp, target)
    except Exception:  # a pack cut short or garbled: dulwich raises several kinds
        return None
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return target


# The end of a pack is the checksum of its bytes; its `.idx` ends with that checksum, then
# its own.
CHECKSUM_BYTES = 20


def packs_cut_short(git_dir: Path) -> list[Path]:
    """Packs whose end is not the checksum their `.idx` records: cut short (a disk fault, a
    copy that stopped) or overwritten. Only the last bytes of each file are read, so every
    `gc doctor` run looks (a pack damaged inside reads whole at its ends: git fsck finds it).
    A pack removed meanwhile (a repack) is passed over."""
    found = []
    for index in sorted(git_dir.glob("objects/pack/pack-*.idx")):
        pack = index.with_suffix(".pack")
        try:
            recorded = _bytes_at_end(index, 2 * CHECKSUM_BYTES)[:CHECKSUM_BYTES]
            cut = _bytes_at_end(pack, CHECKSUM_BYTES) != recorded
        except FileNotFoundError:
            continue
        except OSError:  # shorter than a checksum (a seek before its start), unreadable
            cut = True
        if cut:
            found.append(pack)
    return found


# Resolved objects a salvage keeps as bases for the deltas after them (a delta's base is
# written before it, mostly close by).
SALVAGE_BASES = 512


def salvage_pack(git: GitRepo, pack: Path) -> tuple[int, list[bytes]] | None:
    """Write again, as loose objects, the objects of `pack` (one `packs_cut_short` found)
    that read whole and hash to their names: those before the damage, which no reader of
    the pack can reach while its checksum fails. Returns how many were written and the ids
    its `.idx` lists that were not (past the damage); None when the `.idx` cannot be read
    (nothing says where the objects are). Nothing of the pack is changed."""
    from collections import OrderedDict

    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.objects import ShaFile, sha_to_hex
    from dulwich.pack import OFS_DELTA, REF_DELTA, PackData, apply_delta, load_pack_index

    try:
        index = load_pack_index(str(pack.with_suffix(".idx")), DEFAULT_OBJECT_FORMAT)
        entries = sorted((offset, sha_to_hex(sha)) for sha, offset, _crc in index.iterentries())
    except Exception:  # an `.idx` that does not read: dulwich raises several kinds
        return None
    offsets = {sha: offset for offset, sha in entries}
    bases: OrderedDict[int, tuple[int, bytes]] = OrderedDict()

    def keep(offset: int, obj: tuple[int, bytes]) -> None:
        bases[offset] = obj
        if len(bases) > SALVAGE_BASES:
            bases.popitem(last=False)

    def resolve(data: PackData, offset: int) -> tuple[int, bytes] | None:
        """The type and bytes of the object at `offset`, its deltas applied (a stack, not
        recursion: a chain may be long); None when a part of it is past the damage."""
        deltas = []
        while offset not in bases:
            unpacked = data.get_unpacked_object_at(offset)
            kind = unpacked.pack_type_num
            if kind == OFS_DELTA:
                deltas.append((offset, unpacked.decomp_chunks))
                offset -= unpacked.delta_base
            elif kind == REF_DELTA:
                deltas.append((offset, unpacked.decomp_chunks))
                base = sha_to_hex(unpacked.delta_base)
                if base not in offsets:
                    return _delta_base_elsewhere(git, base, deltas, keep)
                offset = offsets[base]
            else:
                keep(offset, (kind, b"".join(unpacked.decomp_chunks)))
                break
            if len(deltas) > len(entries):  # a loop: the offsets are damaged
                return None
        kind, raw = bases[offset]
        for at, delta in reversed(deltas):
            raw = b"".join(apply_delta(raw, delta))
            keep(at, (kind, raw))
        return kind, raw

    written, lost = 0, []
    with PackData(str(pack), DEFAULT_OBJECT_FORMAT) as data:
        for offset, sha in entries:
            try:
                found = resolve(data, offset)
            except Exception:  # past the damage: dulwich and zlib raise several kinds
                found = None
            if found is None or not hashes_to(sha, *found):
                lost.append(sha)
                continue
            git.add_loose(ShaFile.from_raw_string(found[0], found[1], sha))
            written += 1
    return written, lost


def pack_ids(pack: Path) -> list[bytes]:
    """The ids of the objects the `.idx` of `pack` lists (none when it cannot be read)."""
    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.objects import sha_to_hex
    from dulwich.pack import load_pack_index

    try:
        index = load_pack_index(str(pack.with_suffix(".idx")), DEFAULT_OBJECT_FORMAT)
        return [sha_to_hex(sha) for sha, _offset, _crc in index.iterentries()]
    except Exception:  # an `.idx` that does not read: dulwich raises several kinds
        return []


def _delta_base_elsewhere(
    git: GitRepo, base: bytes, deltas: list[tuple[int, list[bytes]]], keep: Any
) -> tuple[int, bytes] | None:
    """Apply `deltas` (outermost first) to object `base`, read from the store's other
    copies (a loose object, another pack); None when none reads."""
    from dulwich.pack import apply_delta

    try:
        kind, raw = git.get_raw(base)
    except Exception:  # absent, or only in the damaged pack
        return None
    for at, delta in reversed(deltas):
        raw = b"".join(apply_delta(raw, delta))
        keep(at, (kind, raw))
    return kind, raw


def move_pack_aside(pack: Path, folder: Path) -> Path:
    """Move `pack` and its `.idx` into `folder`, the `.idx` first (a pack counts only while
    its `.idx` is there, as when it was written); returns where the pack now is."""
    index = pack.with_suffix(".idx")
    os.replace(index, folder / index.name)
    os.replace(pack, folder / pack.name)
    return folder / pack.name


def _bytes_at_end(path: Path, count: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(-count, os.SEEK_END)
        return handle.read(count)


def fix_head(git_dir: Path) -> bytes | None:
    """Make `HEAD` name the branch (and `refs/heads/` exist, for a lost branch to be put
    back into). Returns what HEAD held when it was rewritten (b"" when it was missing),
    None when it was right."""
    (git_dir / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    head_file = git_dir / "HEAD"
    try:
        content: bytes | None = head_file.read_bytes()
    except FileNotFoundError:
        content = None
    if content is not None and content.strip() == HEAD_SYMREF.strip():
        return None
    temp = head_file.with_name("HEAD.gc-doctor")
    temp.write_bytes(HEAD_SYMREF)
    os.replace(temp, head_file)
    return b"" if content is None else content


def packed_refs_path(git_dir: Path) -> Path:
    """Where git keeps its packed refs (for a message; `clean_packed_refs` repairs it)."""
    return git_dir / "packed-refs"


def clean_packed_refs(git_dir: Path) -> tuple[int, bytes] | None:
    """Drop the lines of `packed-refs` git cannot parse (git refuses the whole repository
    for one of them), under git's own lock. Returns how many were dropped and the original
    bytes, None when nothing was wrong; RefsLocked when a git process holds the file."""
    from dulwich.file import FileLocked, GitFile

    path = packed_refs_path(git_dir)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
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
        return None
    try:
        with GitFile(path, "wb") as handle:  # git's own lock: never under a git process
            handle.write(b"".join(line + b"\n" for line in kept))
    except FileLocked:
        raise RefsLocked() from None
    return bad, data


def last_reflog_entry(git_dir: Path) -> bytes | None:
    """The commit the branch's reflog last recorded (None: no reflog, or no entry)."""
    try:
        lines = (git_dir / "logs" / BRANCH).read_bytes().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        fields = line.split(b" ", 2)
        if len(fields) == 3 and is_sha(fields[1]) and fields[1] != b"0" * 40:
            return fields[1]
    return None


def reflog_entry_making(git_dir: Path, sha: bytes) -> tuple[bytes | None, str] | None:
    """The newest entry of the branch's reflog that moved it to `sha`: the commit it moved
    from (None: from no commit) and its message; None when no entry did."""
    try:
        lines = (git_dir / "logs" / BRANCH).read_bytes().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        moved, _, message = line.partition(b"\t")
        fields = moved.split(b" ", 2)
        if len(fields) == 3 and fields[1] == sha:
            old = fields[0] if is_sha(fields[0]) and fields[0] != b"0" * 40 else None
            return old, message.decode("utf-8", "replace")
    return None


# -- damaged loose objects -----------------------------------------------------------------


class Damaged(NamedTuple):
    """A loose object that cannot be read or does not hash to its name; `path` is where
    HEAD's tree names it (None: HEAD's tree does not)."""

    sha: bytes
    file: Path
    path: str | None


def damaged_loose(git: GitRepo, head: bytes | None) -> list[Damaged]:
    """The loose objects that cannot be read whole or do not hash to their name, each with
    the path HEAD's tree names it at, found by walking HEAD's tree (never an index: one
    built from the damaged bytes would not name it). The tree is walked only when a
    damaged object is found."""
    objects_dir = str(git.git_dir / "objects")
    bad = [sha for sha in list(loose_ids(objects_dir)) if read_loose(objects_dir, sha) is None]
    if not bad:
        return []
    paths = paths_in_tree(git, head, set(bad)) if head is not None else {}
    return [Damaged(sha, Path(loose_path(objects_dir, sha)), paths.get(sha)) for sha in bad]


def paths_in_tree(git: GitRepo, head: bytes, wanted: set[bytes]) -> dict[bytes, str]:
    """Where HEAD's tree names each of `wanted` (a blob, or a tree), walking the trees from
    their raw bytes; a tree that is itself damaged is named and not entered."""
    found: dict[bytes, str] = {}
    commit = git.commit_of(head)
    if commit is None:
        return found
    stack: list[tuple[bytes, str]] = [(commit.tree, "")]
    if commit.tree in wanted:
        found[commit.tree] = ""
    while stack:
        tree_id, prefix = stack.pop()
        if tree_id in wanted:
            continue  # damaged: its entries cannot be read
        try:
            _type, raw = git.get_raw(tree_id)
        except Exception:  # absent or unreadable: dulwich raises several kinds
            continue
        try:
            entries = TreeData.parse(raw).entries
        except ValueError:  # a malformed tree: nothing below it can be named
            continue
        for name, (mode, sha) in entries.items():
            path = prefix + name.decode("utf-8", "replace")
            if sha in wanted:
                found.setdefault(sha, path)
            if mode == DIR_TYPE:
                stack.append((sha, path + "/"))
    return found


def absent_in_trees(git: GitRepo, trees: dict[bytes, bytes]) -> dict[bytes, tuple[bytes, str]]:
    """The objects absent from the store among `trees` (each tree id with the commit that
    names it) and what they name, walking the trees from their raw bytes; each absent
    object with its commit and what it is ("tree" or "file"). A tree present but unreadable
    is not entered (the check of the objects reports it)."""
    absent: dict[bytes, tuple[bytes, str]] = {}
    seen: set[bytes] = set()
    stack = list(trees.items())
    while stack:
        sha, commit = stack.pop()
        if sha in seen:
            continue
        seen.add(sha)
        try:
            _type, raw = git.get_raw(sha)
        except KeyError:
            absent[sha] = (commit, "tree")
            continue
        except Exception:  # unreadable: dulwich raises several kinds
            continue
        try:
            entries = TreeData.parse(raw).entries
        except ValueError:  # a malformed tree: nothing below it can be named
            continue
        for _name, (mode, child) in entries.items():
            if mode == DIR_TYPE:
                stack.append((child, commit))
            elif child not in seen:
                seen.add(child)
                if not git.has_object(child):
                    absent[child] = (commit, "file")
    return absent


def set_aside(damaged: Damaged, aside: Path) -> bool:
    """Move a damaged object's file to `aside` (an unreadable file hides any good copy and
    blocks rewriting it); False when it is gone already (packed meanwhile)."""
    try:
        os.replace(damaged.file, aside)
    except FileNotFoundError:
        return False
    return True


def restore_blob(git: GitRepo, sha: bytes, data: bytes) -> bool:
    """Write `data` as blob `sha` when it hashes to that name; False (nothing written) else."""
    from dulwich.objects import Blob

    blob = Blob.from_string(data)
    if blob.id != sha:
        return False
    git.add_loose(blob)
    return True
