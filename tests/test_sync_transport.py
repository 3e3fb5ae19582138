"""The exchange with a remote, under what a remote or the network can do to it: remotes that
real git maintains (bitmaps), objects and fetches too large, remotes that accept a
connection and then say nothing, and `gc sync --status` for each remote apart.

Remotes are real bare repositories, changed with real `git`, served by a real `git daemon`
or read as local paths; the silent remotes are TCP servers on 127.0.0.1 that accept and
never answer.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import GcRunner, copy_store, gc_program
from tests.test_sync import (  # noqa: F401 - fixtures
    bare,
    copy_template,
    daemon,
    git,
    head,
    holds_no_more,
    machine,
    make_id,
    objects_held,
    pair_template,
    quarantines,
    served_pair,
)

assert daemon  # the fixture is used by name


def cloned_pair(
    tmp_path: Path, daemon_url: str | None, name: str, request: pytest.FixtureRequest
) -> tuple[Path, str, GcRunner, GcRunner]:
    """A bare remote named `name`, reached through the `git daemon` of `daemon_url` (its
    base is `tmp_path/srv`) or, for None, as a local path; its URL; machine a (made there by
    `gc init`, synced) and machine b (its clone): `pair_template`'s, copied (`served_pair`)."""
    return served_pair(tmp_path, request.getfixturevalue("pair_template"), daemon_url, name)


def made_one_commit_each(side: GcRunner, beads: dict[str, str]) -> list[str]:
    """Beads titled as `beads`' keys, with its values as bodies, made on `side` a commit each
    as `gc bead create` makes them, through the store's API (what a fetch then takes is
    under test, not how the beads were made): their ids, in order."""
    from beads.store import Store

    with Store.open(side.cwd, agent="tester") as store:
        return [store.create("task", title, body).id for title, body in beads.items()]


def bodies_on(side: GcRunner, beads: list[str]) -> list[str]:
    """The bodies `side` holds of the beads `beads`, read through the store's API."""
    from beads.store import Store

    with Store.open(side.cwd, agent="tester") as store:
        return [store.get(bead_id).body for bead_id in beads]


@pytest.fixture(params=["local", "daemon"])
def remote_kind(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """None for a local-path remote, else the base URL of a real `git daemon`."""
    if request.param == "local":
        return None
    return request.getfixturevalue("daemon")


def test_a_remote_that_git_gc_gave_a_bitmap_still_syncs_after_a_large_push(
    tmp_path: Path, remote_kind: str | None, request: pytest.FixtureRequest
) -> None:
    remote, _url, a, b = cloned_pair(tmp_path, remote_kind, "gcd", request)
    make_id(a, "--title", "before the gc")
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    git("gc", "-q", cwd=remote)  # what a person maintaining the remote runs
    packs = remote / "objects" / "pack"
    assert list(packs.glob("*.bitmap")), "git gc wrote no bitmap"
    # One push of 120 objects (6 a bead): a pack without a bitmap beside git gc's, on a
    # local path as on a daemon's remote (git keeps a push over receive.unpackLimit, 100,
    # as a pack).
    made = made_one_commit_each(a, {f"sent {n}": "" for n in range(20)})
    assert a("sync").returncode == 0
    assert len(list(packs.glob("*.pack"))) == 2 == len(list(packs.glob("*.bitmap"))) + 1
    for _ in range(2):  # every sync after it, not only the first
        result = b("sync")
        assert result.returncode == 0, result.stderr
    assert head(b) == head(a) == git("rev-parse", "main", cwd=remote)
    assert b.json("bead", "show", made[-1])["bead"]["title"] == "sent 19"
    # And b's own push on top of it is read by git and by a again.
    mine = make_id(b, "--title", "from b")
    assert b("sync").returncode == 0 and a("sync").returncode == 0
    assert a.json("bead", "show", mine)["bead"]["title"] == "from b"
    git("fsck", "--strict", cwd=remote)


def commit_blob(tmp_path: Path, remote: Path, size: int) -> str:
    """With real git in the remote, commit a blob of `size` zero bytes at a bead's place in
    its store and move main to it; returns the commit. The blob is a loose object, as git's
    receive-pack leaves a push of a few objects (a few hundred KB: git deflates it)."""
    zeros = tmp_path / "zeros"
    with zeros.open("wb") as handle:
        handle.truncate(size)
    # The remote deflates at level 1 from here on (writing the blob, and packing it for a
    # fetch through the daemon): how small zeros deflate is not what any test is about.
    git("config", "core.compression", "1", cwd=remote)
    return commit_naming(tmp_path, remote, git("hash-object", "-w", str(zeros), cwd=remote))


def commit_naming(tmp_path: Path, remote: Path, blob: str) -> str:
    """With real git in the remote, commit `blob` (its id: git reads none of it) at a bead's
    place in its store and move main to it; returns the commit."""
    names = git("ls-tree", "-r", "--name-only", "main", cwd=remote).split()
    place = next((name for name in names if name.startswith("tasks/")), "big.yaml")
    index = {**os.environ, "GIT_INDEX_FILE": str(tmp_path / "index")}  # the remote is bare
    for step in (["read-tree", "main"], ["update-index", "--add", "--cacheinfo",
                                         f"100644,{blob},{place}"]):  # fmt: skip
        subprocess.run(["git", *step], cwd=remote, env=index, check=True, capture_output=True)
    tree = subprocess.run(["git", "write-tree", "--missing-ok"], cwd=remote, env=index,
                          check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    commit = git("-c", "user.name=p", "-c", "user.email=p@x", "commit-tree", tree, "-p", "main",
                 "-m", "big", cwd=remote)  # fmt: skip
    git("update-ref", "refs/heads/main", commit, cwd=remote)
    return commit


# Runs a command and reports its exit code and peak RSS (KiB). A child's ru_maxrss counts
# the image it was forked from until its exec: this small process starts the command, so a
# large test process does not count as the command's memory.
MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
sys.stderr.buffer.write(done.stderr)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def sync_measured(side: GcRunner, *args: str) -> tuple[int, str, int]:
    """Run `gc sync` in a process of its own: exit code, stderr, and its peak RSS in KiB."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, gc_program(), "sync", *args], cwd=side.cwd,
        env=side.env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    code, peak = done.stdout.split()
    return int(code), done.stderr, int(peak)


def test_an_object_over_the_size_limit_is_refused_before_it_is_inflated_and_nothing_merged(
    tmp_path: Path, remote_kind: str | None, request: pytest.FixtureRequest
) -> None:
    remote, url, a, b = cloned_pair(tmp_path, remote_kind, "hostile", request)
    kept = make_id(a, "--title", "kept")
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    before = head(b)
    # 48 MiB of zeros, far over the limit (4 x store.max_body_bytes + 64 KiB). Inflated whole,
    # it would take the process (~30 MB itself) well past the bound below, its own size;
    # refused from the pack's headers, the process stays at its own ~30 MB.
    hostile = commit_blob(tmp_path, remote, 48 * 1024 * 1024)
    code, stderr, peak_kib = sync_measured(b)
    assert code == 30, stderr
    assert len(stderr.strip().splitlines()) == 1 and "over this store's limit" in stderr
    assert "50331648 bytes" in stderr
    assert peak_kib < 48 * 1024, f"gc sync held {peak_kib} KiB"
    assert head(b) == before != hostile
    assert b.json("bead", "show", kept)["bead"]["title"] == "kept"
    assert not list((b.cwd / ".beads" / ".git").glob("fetch-*"))  # the temporary pack is gone
    status = b.json("sync", "--status")["status"]
    assert "over this store's limit" in status["last_error"]
    assert b("clone", url, str(tmp_path / "c")).returncode == 30  # a clone refuses it too
    assert not (tmp_path / "c").exists()
    # The store goes on working locally.
    assert b("bead", "create", "--type", "task", "--title", "still usable").returncode == 0


def test_a_tree_over_the_size_limit_is_refused_before_it_is_read(
    tmp_path: Path, remote_kind: str | None, request: pytest.FixtureRequest
) -> None:
    """A remote's tree of 100,000 entries (~4.8 MB, over the limit of 4 x
    store.max_body_bytes + 64 KiB, a few hundred KB on disk) is refused from its header:
    the walk of a local-path remote sizes each tree before it reads it, as the pack check
    sizes what a server sends. Read and parsed, it would take the process far past the
    bound below."""
    remote, _url, _a, b = cloned_pair(tmp_path, remote_kind, "wide", request)
    before = head(b)

    def write_loose(kind: bytes, body: bytes) -> str:
        raw = kind + b" %d\0" % len(body) + body
        name = hashlib.sha1(raw).hexdigest()
        loose = remote / "objects" / name[:2] / name[2:]
        loose.parent.mkdir(exist_ok=True)
        loose.write_bytes(zlib.compress(raw, 1))
        return name

    blob = bytes.fromhex(write_loose(b"blob", b"x"))
    body = b"".join(b"100644 n%019d\0" % n + blob for n in range(100_000))
    tree = write_loose(b"tree", body)
    commit = git("-c", "user.name=p", "-c", "user.email=p@x", "commit-tree", tree, "-p", "main",
                 "-m", "wide", cwd=remote)  # fmt: skip
    git("update-ref", "refs/heads/main", commit, cwd=remote)
    code, stderr, peak_kib = sync_measured(b)
    assert code == 30, stderr
    assert len(stderr.strip().splitlines()) == 1 and "over this store's limit" in stderr
    assert f"{len(body)} bytes" in stderr
    assert peak_kib < 48 * 1024, f"gc sync held {peak_kib} KiB"
    assert head(b) == before


def test_a_commit_whose_parent_is_no_commit_is_refused_in_words(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A local-path remote's history crafted with a tree where a parent commit belongs is
    refused as a history, in one line, not as an unreachable remote."""
    remote, _url, _a, b = cloned_pair(tmp_path, None, "crafted", request)
    before = head(b)
    tree = git("rev-parse", "main^{tree}", cwd=remote)
    body = (
        f"tree {tree}\nparent {tree}\nauthor p <p@x> 1700000000 +0000\n"
        "committer p <p@x> 1700000000 +0000\n\ncrafted\n"
    ).encode()
    raw = b"commit %d\0" % len(body) + body
    commit = hashlib.sha1(raw).hexdigest()
    loose = remote / "objects" / commit[:2] / commit[2:]
    loose.parent.mkdir(exist_ok=True)
    loose.write_bytes(zlib.compress(raw))
    (remote / "refs" / "heads" / "main").write_text(f"{commit}\n")  # git itself refuses it
    synced = b("sync")
    assert synced.returncode == 50, synced.stderr
    assert synced.stderr == f"gc: the history names {tree} as a commit, which is not a commit\n"
    assert head(b) == before


def big_bodies(tmp_path: Path, side: GcRunner, count: int, tag: str) -> dict[str, str]:
    """`count` beads whose bodies (~73 KB of base64 lines, ~55 KB deflated) inflate past one
    read chunk of a pack (64 KiB) from less than one: their ids and bodies. Two of them
    make a pack of over one chunk, so more of it is read after such an object ends."""
    draw = random.Random(f"{tag}{count}").randbytes
    made = {}
    for n in range(count):
        body = base64.encodebytes(draw(54_000)).decode()
        path = tmp_path / f"body-{tag}-{n}.txt"
        path.write_text(body)
        made[make_id(side, "--title", f"{tag} {n}", "--body-file", str(path))] = body
    return made


def test_beads_with_bodies_over_a_pack_chunk_sync_and_clone(
    tmp_path: Path, remote_kind: str | None, request: pytest.FixtureRequest
) -> None:
    _remote, url, a, _b = cloned_pair(tmp_path, remote_kind, "big", request)
    first = big_bodies(tmp_path, a, 2, "first")
    assert a("sync").returncode == 0
    c = machine(tmp_path, "c")
    cloned = c("clone", url)
    assert cloned.returncode == 0, cloned.stderr
    later = big_bodies(tmp_path, a, 2, "later")
    assert a("sync").returncode == 0
    synced = c("sync")
    assert synced.returncode == 0, synced.stderr
    assert head(c) == head(a)
    for made, body in {**first, **later}.items():
        assert c.json("bead", "show", made)["bead"]["body"] == body


def entry_header(kind: int, size: int) -> bytes:
    """A pack entry's header: its type and the size of its inflated data."""
    out = [(kind << 4) | (size & 0x0F)]
    size >>= 4
    while size:
        out[-1] |= 0x80
        out.append(size & 0x7F)
        size >>= 7
    return bytes(out)


def varint(n: int) -> bytes:
    """A size in a delta's header (7 bits a byte, least significant first)."""
    out = []
    while True:
        more, n = n & 0x7F, n >> 7
        out.append(more | 0x80 if n else more)
        if not n:
            return bytes(out)


def ofs(n: int) -> bytes:
    """The distance back to an OFS_DELTA's base, as a pack entry gives it."""
    out = [n & 0x7F]
    n >>= 7
    while n:
        n -= 1
        out.insert(0, 0x80 | (n & 0x7F))
        n >>= 7
    return bytes(out)


def oid(kind: bytes, data: bytes) -> bytes:
    """The id of an object of this kind and data."""
    return hashlib.sha1(b"%s %d\0" % (kind, len(data)) + data).digest()


def copy_op(offset: int, size: int) -> bytes:
    """A delta's instruction copying `size` bytes (1 to 65535) of the base from `offset`
    (under 256)."""
    return bytes([0x80 | 0x01 | 0x10 | 0x20, offset, size & 0xFF, size >> 8])


class HandPack:
    """A pack written entry by entry, with its index (every id given: git's index-pack would
    inflate every object to find them), as a hostile remote can put in its objects."""

    def __init__(self) -> None:
        self.body = bytearray()
        self.index: list[tuple[bytes, int, int]] = []  # id, offset, CRC-32 of each entry

    def add(
        self, kind: int, data: bytes, name: bytes, prefix: bytes = b"", size: int | None = None
    ) -> int:
        """Add an entry of type `kind` (its header giving `size`, else the data's own size)
        for the object `name`; returns its offset."""
        at = 12 + len(self.body)
        header = entry_header(kind, len(data) if size is None else size)
        entry = header + prefix + zlib.compress(data, 1)
        self.body.extend(entry)
        self.index.append((name, at, zlib.crc32(entry)))
        return at

    def write(self, pack_dir: Path, prefix: str = "pack") -> Path:
        """Write the pack into `pack_dir`, then its index (a pack counts once its index is
        there), named `PREFIX-<checksum>`; returns the pack's path."""
        from dulwich.pack import write_pack_index_v2

        pack = b"PACK" + struct.pack(">II", 2, len(self.index)) + bytes(self.body)
        checksum = hashlib.sha1(pack).digest()
        stem = pack_dir / f"{prefix}-{checksum.hex()}"
        Path(f"{stem}.pack").write_bytes(pack + checksum)
        with open(f"{stem}.idx", "wb") as idx:
            write_pack_index_v2(idx, sorted(self.index), checksum)
        return Path(f"{stem}.pack")


def delta_bomb(remote: Path, count: int, parent: str, copies: int = 66) -> str:
    """Move the remote's main to a commit on `parent` holding `count` blobs of `copies` x
    60,000 bytes and a number (~4 MB each, each under the object limit), each a delta of a
    few hundred bytes on one small base: a pack of a few KB that inflates to `count` x
    4 MB. Installed in the remote's objects with its index written here (`HandPack`); the
    base is in the commit's tree too, so git (and dulwich, for a local path) sends the
    deltas as they are. Returns the commit."""
    pack = HandPack()

    def tree(entries: list[tuple[bytes, bytes, bytes]]) -> bytes:
        data = b"".join(m + b" " + n + b"\0" + i for m, n, i in sorted(entries, key=lambda e: e[1]))
        pack.add(2, data, oid(b"tree", data))
        return oid(b"tree", data)

    base = bytes((i * 7 + 3) % 251 for i in range(60000))
    base_at = pack.add(3, base, oid(b"blob", base))
    config = git("cat-file", "blob", f"{parent}:config.yaml", cwd=remote).encode() + b"\n"
    pack.add(3, config, oid(b"blob", config))
    copy = bytes([0x80 | 0x10 | 0x20, 60000 & 0xFF, 60000 >> 8])  # copy base[0:60000]
    size = 60000 * copies + 8
    # Every blob is the same copies, then its number: each id is hashed on from theirs.
    copies_hashed = hashlib.sha1(b"blob %d\0" % size + base * copies)
    names = [(b"100644", b"base.yaml", oid(b"blob", base))]
    for n in range(count):
        number = b"%08d" % n
        delta = varint(len(base)) + varint(size) + copy * copies + bytes([len(number)]) + number
        blob_id = copies_hashed.copy()
        blob_id.update(number)
        pack.add(6, delta, blob_id.digest(), ofs(12 + len(pack.body) - base_at))
        names.append((b"100644", b"gc-%08d.yaml" % n, blob_id.digest()))
    shard = tree(names)
    tasks = tree([(b"40000", b"00", tree([(b"40000", b"00", shard)]))])
    root = tree([(b"100644", b"config.yaml", oid(b"blob", config)), (b"40000", b"tasks", tasks)])
    commit = (
        b"tree %s\nparent %s\nauthor a <a@a> 1700000000 +0000\n"
        b"committer a <a@a> 1700000000 +0000\n\nbomb\n" % (root.hex().encode(), parent.encode())
    )
    pack.add(1, commit, oid(b"commit", commit))
    pack.write(remote / "objects" / "pack")
    sha = oid(b"commit", commit).hex()
    git("update-ref", "refs/heads/main", sha, cwd=remote)
    return sha


# Blobs of a delta bomb that pass, together, what a fetch holds in memory and what it hands
# over in one batch (8 MiB each: `beads.git.quarantine.SPILL_BYTES`,
# `beads.git.transport.STORE_BATCH_BYTES`): 3 x ~4 MB do, two (~7.9 MB) do not.
SPILLING = 3


@pytest.mark.slow
def test_a_pack_of_small_deltas_making_large_blobs_is_streamed_and_bounded(
    tmp_path: Path, remote_kind: str | None, request: pytest.FixtureRequest
) -> None:
    remote, url, a, b = cloned_pair(tmp_path, remote_kind, "bomb", request)
    before = head(b)
    # ~120 MB inflated from a pack of a few KB: held at once, the process (~30 MB
    # itself) would peak near 150 MB, well over the bound below; streamed, a batch of
    # blobs at a time, it stays far under it (near 55 MB).
    delta_bomb(remote, 30, before)
    # Within the limits: each blob is written as it is inflated, never all held at once;
    # the gate then refuses the commit (its names are outside the layout).
    code, stderr, peak_kib = sync_measured(b)
    assert code == 30 and "outside the store's layout" in stderr, stderr
    assert peak_kib < 100 * 1024, f"gc sync held {peak_kib} KiB"
    assert head(b) == before
    # Over what one fetch may inflate to (4 x sync.max_fetch_bytes): refused from the
    # pack's headers, before any blob is inflated. 3 blobs (~12 MB) are over 8 MiB.
    assert b("config", "set", "--local", "sync.max_fetch_bytes", "2MiB").returncode == 0
    delta_bomb(remote, SPILLING, before)
    refused = b("sync")
    code, stderr = refused.returncode, refused.stderr
    assert code == 30 and "inflate to more than 8388608 bytes" in stderr, stderr
    assert "4 x sync.max_fetch_bytes" in stderr and head(b) == before
    assert b("bead", "create", "--type", "task", "--title", "still usable").returncode == 0
    # A clone, within its limits, streams such a pack too, then refuses it (the memory
    # bound is the measured sync's: 3 blobs, past what a fetch holds in memory, take the
    # clone down the same path as 50).
    c = machine(tmp_path, "c")
    assert c("clone", url).returncode == 30


def bulk(side: GcRunner) -> None:
    """Ten beads on `side`, a commit each: a pack of over 7 KiB, well over the 4 KiB
    `sync.max_fetch_bytes` the tests set."""
    made_one_commit_each(side, {f"bulk {n}": f"text {n} " * 200 for n in range(10)})


def refuse(kind: str, tmp_path: Path, remote: Path, a: GcRunner, b: GcRunner) -> str:
    """Move the remote's branch to something `b`'s next sync refuses, of the kind `kind`;
    returns words of the refusal."""
    if kind == "object-too-large":  # refused from the pack's headers
        commit_blob(tmp_path, remote, 8 * 1024 * 1024)
        return "over this store's limit"
    if kind == "fetch-too-large":  # refused as the pack streams in
        bulk(a)
        assert a("sync").returncode == 0
        assert b("config", "set", "--local", "sync.max_fetch_bytes", "4KiB").returncode == 0
        return "sync.max_fetch_bytes"
    if kind == "inflates-too-far":  # refused from the pack's headers: 3 x 4 MB > 8 MiB
        assert b("config", "set", "--local", "sync.max_fetch_bytes", "2MiB").returncode == 0
        delta_bomb(remote, SPILLING, head(b))
        return "inflate to more than 8388608 bytes"
    # Within every limit: ~12 MB inflated, past what a fetch holds in memory (so partly
    # written to its quarantine directory), then refused.
    assert kind == "refused-by-the-gate"
    delta_bomb(remote, SPILLING, head(b))
    return "outside the store's layout"


@pytest.mark.parametrize(
    "refusal", ["object-too-large", "fetch-too-large", "inflates-too-far", "refused-by-the-gate"]
)
def test_a_refused_fetch_leaves_nothing_in_the_stores_objects(
    tmp_path: Path, remote_kind: str | None, request: pytest.FixtureRequest, refusal: str
) -> None:
    remote, url, a, b = cloned_pair(tmp_path, remote_kind, "refused", request)
    ours = head(b)
    words = refuse(refusal, tmp_path, remote, a, b)
    before = objects_held(b)
    for _ in range(2):  # a remote refused on every sync: nothing piles up either
        refused = b("sync")
        assert refused.returncode == 30 and words in refused.stderr, refused.stderr
        assert head(b) == ours
        assert holds_no_more(b, before), (before, objects_held(b), quarantines(b))
    assert b("bead", "create", "--type", "task", "--title", "still usable").returncode == 0


def fsck_settled(git_dir: Path) -> None:
    """`git fsck` of a store's repository once the background repacks its syncs started
    have ended: fsck reads the packs it listed at its start, which a repack may remove."""
    from beads.git import repacker

    assert repacker.wait_idle(git_dir, 600)
    git("-C", str(git_dir), "fsck", "--strict", "--no-dangling")


def test_an_accepted_fetch_lands_every_object_and_leaves_no_quarantine(
    tmp_path: Path,
    remote_kind: str | None,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import beads.git.quarantine as quarantine
    import beads.git.transport as transport

    _remote, url, a, b = cloned_pair(tmp_path, remote_kind, "accepted", request)
    # A few objects (stored loose), then over a hundred (stored as one pack).
    for count in (2, 20):
        made = made_one_commit_each(a, {f"bead {count}.{n}": "" for n in range(count)})
        assert a("sync").returncode == 0
        synced = b("sync")
        assert synced.returncode == 0, synced.stderr
        assert head(b) == head(a) and not quarantines(b)
        assert b.json("bead", "show", made[-1])["bead"]["title"] == f"bead {count}.{count - 1}"
        fsck_settled(b.cwd / ".beads" / ".git")
    # Past what a fetch holds in memory, so partly moved in from its quarantine directory.
    # The fetch runs in this process: with its batch and its memory bound 48 KiB (8 MiB
    # each in use), ~80 KB of objects take the path ~10 MB would. Its first batch (over 64
    # objects) is written to the quarantine as a pack; the rest and the commits are held.
    monkeypatch.setattr(transport, "STORE_BATCH_BYTES", 48 * 1024)
    monkeypatch.setattr(quarantine, "SPILL_BYTES", 48 * 1024)
    admitted: list[tuple[list[str], int]] = []  # what each admit moves in, what it holds
    admit = quarantine.Incoming.admit

    def admit_seen(incoming: quarantine.Incoming) -> None:
        admitted.append(([kind for kind, _name in incoming.written], len(incoming.held)))
        admit(incoming)

    monkeypatch.setattr(quarantine.Incoming, "admit", admit_seen)
    bodies = [f"spilled {n}\n" + "words of a bead's body " * 40 for n in range(30)]
    made = made_one_commit_each(a, {f"spilled {n}": body for n, body in enumerate(bodies)})
    assert a("sync").returncode == 0
    synced = b("sync")
    assert synced.returncode == 0, synced.stderr
    [(spilled, held)] = admitted
    assert "pack" in spilled and held, admitted
    assert head(b) == head(a) and not quarantines(b)
    assert bodies_on(b, made) == bodies
    fsck_settled(b.cwd / ".beads" / ".git")


def test_a_remote_listing_more_refs_than_a_store_needs_is_refused_in_one_line(
    tmp_path: Path, remote_kind: str | None, request: pytest.FixtureRequest
) -> None:
    remote, url, a, b = cloned_pair(tmp_path, remote_kind, "tags", request)
    made = make_id(a, "--title", "after the tags")
    assert a("sync").returncode == 0
    tip = git("rev-parse", "main", cwd=remote)
    with (remote / "packed-refs").open("a") as refs:  # 10,001 tags, as git packs them
        refs.writelines(f"{tip} refs/tags/t{n}\n" for n in range(10_001))
    result = b("sync")
    assert result.returncode == 30, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "refs, over the 10000" in result.stderr
    assert b("bead", "show", made).returncode == 40  # nothing merged
    assert b("clone", url, str(tmp_path / "c")).returncode == 30


def test_a_fetch_larger_than_sync_max_fetch_bytes_is_refused(pair_remote: tuple) -> None:
    a, b, _url = pair_remote
    bulk(a)
    assert a("sync").returncode == 0
    before = head(b)
    assert b("config", "set", "--local", "sync.max_fetch_bytes", "4KiB").returncode == 0
    assert b.json("config", "get", "--local")["value"]["sync"]["max_fetch_bytes"] == 4096
    result = b("sync")
    assert result.returncode == 30, result.stderr
    assert "sync.max_fetch_bytes" in result.stderr and head(b) == before
    assert b("config", "set", "--local", "sync.max_fetch_bytes", "1GiB").returncode == 0
    assert b("sync").returncode == 0 and head(b) == head(a)
    assert b("config", "set", "--local", "sync.max_fetch_bytes", "lots").returncode == 30


@pytest.fixture
def pair_remote(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[GcRunner, GcRunner, str]:
    """Machine a (made with `gc init`, pushed to a local-path remote) and b (its clone)."""
    copy_template(request.getfixturevalue("pair_template"), tmp_path)
    return GcRunner(tmp_path / "a"), GcRunner(tmp_path / "b"), str(tmp_path / "remote.git")


class Silent:
    """A TCP server on 127.0.0.1 that accepts every connection and never says a word."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.held: list[socket.socket] = []
        self.accepted = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _addr = self.server.accept()
            except OSError:
                return  # closed
            self.held.append(connection)
            self.accepted.set()

    def close(self) -> None:
        self.server.close()
        for connection in self.held:
            connection.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    try:
        yield server
    finally:
        server.close()


def quiet_store(tmp_path: Path, url: str, gc_init_template: Path) -> GcRunner:
    """A store as `gc init` makes it (`gc_init_template`'s, copied) whose only remote is
    `url`, with `sync.timeout` 0.5 s (the server never answers: any timeout ends the same
    way)."""
    side = machine(tmp_path, "quiet")
    copy_store(gc_init_template, side.cwd / ".beads")
    assert side("remote", "add", "origin", url).returncode == 0
    assert side("config", "set", "--local", "sync.timeout", "0.5s").returncode == 0
    return side


@pytest.mark.parametrize("scheme", ["git", "http"])
def test_a_remote_that_accepts_and_stays_silent_times_out(
    tmp_path: Path, gc_init_template: Path, silent: Silent, scheme: str
) -> None:
    side = quiet_store(tmp_path, f"{scheme}://127.0.0.1:{silent.port}/shared.git", gc_init_template)
    before = head(side)
    # A process of its own: were the deadline missing, the run's own limit ends it.
    result = side.subprocess("sync")
    assert silent.accepted.is_set()  # it did connect: the silence came after
    assert len(silent.held) == 1  # one wait of sync.timeout: nothing retried after it
    assert result.returncode == 50, result.stderr
    assert "timed out" in result.stderr and "sync.timeout" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert head(side) == before
    assert "timed out" in side.json("sync", "--status")["status"]["last_error"]


def test_a_claim_whose_remote_stays_silent_ends_with_exit_50(
    tmp_path: Path, gc_init_template: Path, silent: Silent
) -> None:
    side = quiet_store(tmp_path, f"git://127.0.0.1:{silent.port}/shared.git", gc_init_template)
    sent = side.json("thread", "send", "--to", "bee", "--subject", "work", "--body", "do it",
                     env={"GC_AGENT": "leader"})  # fmt: skip
    thread = sent["thread"]["thread_id"]
    result = side.subprocess("thread", "claim", "--thread", thread, "--agent", "bee", "--json")
    assert result.returncode == 50, result.stderr
    assert "timed out" in json.loads(result.stdout)["error"]["message"]


def test_an_ssh_remote_that_stays_silent_times_out(tmp_path: Path, gc_init_template: Path) -> None:
    # ssh runs a program: no socket of ours carries the exchange. The "ssh" here connects
    # to nothing and waits for its input to end, silent, as a hung server would be.
    home = tmp_path / "home"
    home.mkdir()
    ssh = home / "silent-ssh"
    ssh.write_text("#!/bin/sh\ncat >/dev/null\n")
    ssh.chmod(0o755)
    (home / ".gitconfig").write_text(f"[core]\n\tsshCommand = {ssh}\n")
    side = quiet_store(tmp_path, "ssh://nobody@127.0.0.1/srv/shared.git", gc_init_template)
    result = side.subprocess("sync", env={"HOME": str(home)})
    assert result.returncode == 50, result.stderr
    assert "timed out" in result.stderr


def test_a_local_fetch_reuses_the_remote_deltas_without_reading_its_whole_index(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git gc stores a delta's base by its offset in the pack; dulwich finds the id at an
    # offset by reading the whole index, once per delta: a clone's cost grew with the square
    # of the history.
    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.pack import REF_DELTA, PackData, PackIndex

    import beads.git.packcheck

    remote, _url, a, b = cloned_pair(tmp_path, None, "deltas", request)
    made = made_one_commit_each(a, {f"delta {n}": "a body\n" * 50 for n in range(20)})
    assert a("sync").returncode == 0
    git("repack", "-q", "-a", "-d", "-f", cwd=remote)  # as git gc does, with deltas
    scans: list[int] = []
    scan = PackIndex.object_sha1
    monkeypatch.setattr(PackIndex, "object_sha1", lambda *args: scans.append(1) or scan(*args))
    kinds: list[int] = []
    check = beads.git.packcheck.check_pack

    def seen(file: Any, *args: Any, **kwargs: Any) -> None:
        at = file.tell()
        file.seek(0)
        # A copy: dulwich 1.0 reads the header where the file stands and closes it when done.
        copy = io.BytesIO(file.read())
        file.seek(at)
        data = PackData.from_file(copy, DEFAULT_OBJECT_FORMAT, len(copy.getvalue()))
        kinds.extend(entry.pack_type_num for entry in data.iter_unpacked())
        check(file, *args, **kwargs)

    monkeypatch.setattr(beads.git.packcheck, "check_pack", seen)
    result = b("sync")
    assert result.returncode == 0, result.stderr
    assert scans == []
    assert REF_DELTA in kinds  # the remote's deltas were sent as they are
    assert head(b) == head(a)
    assert b.json("bead", "show", made[-1])["bead"]["title"] == "delta 19"


def test_a_packed_object_over_the_limit_is_refused_unread_beside_a_small_loose_copy(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # dulwich reads an object from a pack before its loose file: a small loose file under
    # the id of a packed object over the limit must not stand for the size of what is read.
    remote, _url, a, b = cloned_pair(tmp_path, None, "twice", request)
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    before = head(b)
    commit_blob(tmp_path, remote, 48 * 1024 * 1024)
    git("repack", "-q", "-a", "-d", cwd=remote)  # the blob is packed, its loose file gone
    big = git("hash-object", str(tmp_path / "zeros"), cwd=remote)  # commit_blob's file
    loose = remote / "objects" / big[:2] / big[2:]
    loose.parent.mkdir(exist_ok=True)
    loose.write_bytes(zlib.compress(b"blob 1\0x"))
    code, stderr, peak_kib = sync_measured(b)
    assert code == 30, stderr
    assert "50331648 bytes" in stderr and "over this store's limit" in stderr
    assert peak_kib < 48 * 1024, f"gc sync held {peak_kib} KiB"
    assert head(b) == before


# What a hostile local-path remote does to have its sender (this process) inflate 48 MiB
# while every object its history names looks small: `hide(tmp_path, remote)` returns the id
# of the blob to commit, and what the refusal says, with its exit code.
BIG = 48 * 1024 * 1024
SMALL = b"\0" * 100  # what the delta cases' blob is: the first 100 bytes of their base


def small_delta_on(base_id: bytes, base: int) -> bytes:
    """A delta making `SMALL` from the first bytes of a base of `base` bytes."""
    return varint(base) + varint(len(SMALL)) + copy_op(0, len(SMALL))


def hide_a_delta_on_a_large_base_in_its_pack(tmp_path: Path, remote: Path) -> bytes:
    pack = HandPack()
    base_at = pack.add(3, bytes(BIG), oid(b"blob", bytes(BIG)))
    at = 12 + len(pack.body)
    pack.add(
        6, small_delta_on(oid(b"blob", bytes(BIG)), BIG), oid(b"blob", SMALL), ofs(at - base_at)
    )
    pack.write(remote / "objects" / "pack")
    return oid(b"blob", SMALL)


def hide_a_delta_on_a_large_base_in_another_pack(tmp_path: Path, remote: Path) -> bytes:
    large = HandPack()
    large.add(3, bytes(BIG), oid(b"blob", bytes(BIG)))
    large.write(remote / "objects" / "pack")
    small = HandPack()
    base = oid(b"blob", bytes(BIG))
    small.add(7, small_delta_on(base, BIG), oid(b"blob", SMALL), base)
    small.write(remote / "objects" / "pack")
    return oid(b"blob", SMALL)


def hide_a_chain_of_small_deltas_through_a_large_one(tmp_path: Path, remote: Path) -> bytes:
    # A small base; a delta of ~200 KB making 48 MiB of it (no history names that one);
    # a delta on it making the small blob. Each delta is small, the chain's middle is not.
    pack = HandPack()
    seed = bytes(60000)
    seed_at = pack.add(3, seed, oid(b"blob", seed))
    copies = BIG // 60000
    middle = bytes(60000 * copies)
    grow = varint(len(seed)) + varint(len(middle)) + copy_op(0, 60000) * copies
    middle_at = 12 + len(pack.body)
    pack.add(6, grow, oid(b"blob", middle), ofs(middle_at - seed_at))
    at = 12 + len(pack.body)
    pack.add(6, small_delta_on(oid(b"blob", middle), len(middle)), oid(b"blob", SMALL),
             ofs(at - middle_at))  # fmt: skip
    pack.write(remote / "objects" / "pack")
    return oid(b"blob", SMALL)


def hide_a_large_blob_in_an_alternate(tmp_path: Path, remote: Path) -> bytes:
    other = bare(tmp_path / "other.git")
    pack = HandPack()
    pack.add(3, bytes(BIG), oid(b"blob", bytes(BIG)))
    pack.write(other / "objects" / "pack")
    (remote / "objects" / "info" / "alternates").write_text(f"{other / 'objects'}\n")
    return oid(b"blob", bytes(BIG))


def hide_a_large_blob_in_a_pack_named_as_git_maintenance_names_one(
    tmp_path: Path, remote: Path
) -> bytes:
    pack = HandPack()
    pack.add(3, bytes(BIG), oid(b"blob", bytes(BIG)))
    pack.write(remote / "objects" / "pack", prefix="loose")  # git maintenance's loose-objects
    return oid(b"blob", bytes(BIG))


def hide_a_loose_file_understating_its_size(tmp_path: Path, remote: Path) -> bytes:
    name = oid(b"blob", b"x").hex()
    loose = remote / "objects" / name[:2] / name[2:]
    loose.parent.mkdir(exist_ok=True)
    loose.write_bytes(zlib.compress(b"blob 1\0" + bytes(BIG), 1))
    return bytes.fromhex(name)


def hide_a_packed_entry_understating_its_size(tmp_path: Path, remote: Path) -> bytes:
    pack = HandPack()
    pack.add(3, bytes(BIG), oid(b"blob", b"x"), size=1)
    pack.write(remote / "objects" / "pack")
    return oid(b"blob", b"x")


HIDDEN = {
    "a-delta-on-a-large-base-in-its-pack": (hide_a_delta_on_a_large_base_in_its_pack, 30),
    "a-delta-on-a-large-base-in-another-pack": (hide_a_delta_on_a_large_base_in_another_pack, 30),
    "a-chain-of-small-deltas-through-a-large-one": (
        hide_a_chain_of_small_deltas_through_a_large_one, 30),
    "a-large-blob-in-an-alternate": (hide_a_large_blob_in_an_alternate, 30),
    "a-large-blob-in-a-loose-named-pack": (
        hide_a_large_blob_in_a_pack_named_as_git_maintenance_names_one, 30),
    "a-loose-file-understating-its-size": (hide_a_loose_file_understating_its_size, 50),
    "a-packed-entry-understating-its-size": (hide_a_packed_entry_understating_its_size, 50),
}  # fmt: skip


@pytest.mark.parametrize("hidden", list(HIDDEN))
def test_a_local_remote_hiding_a_large_object_behind_a_small_one_is_refused_unread(
    tmp_path: Path, request: pytest.FixtureRequest, hidden: str
) -> None:
    # Every read of a local-path remote's objects is bounded, whatever the object is made
    # from: a delta's bases, an alternate's objects, any pack dulwich would read, and the
    # size its stored header gives (a lying header is damage, found before more is read).
    remote, _url, a, b = cloned_pair(tmp_path, None, "hiding", request)
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    before = head(b)
    hide, exit_code = HIDDEN[hidden]
    commit_naming(tmp_path, remote, hide(tmp_path, remote).hex())
    code, stderr, peak_kib = sync_measured(b)
    assert peak_kib < 40 * 1024, f"gc sync held {peak_kib} KiB, exit {code}: {stderr}"
    assert code == exit_code, stderr
    assert len(stderr.strip().splitlines()) == 1
    if exit_code == 30:
        assert "over this store's limit" in stderr, stderr
    else:
        assert "does not read" in stderr and "inflates to more than" in stderr, stderr
    assert head(b) == before


def test_a_local_remote_swapping_in_a_large_pack_after_its_objects_were_sized_is_refused(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A remote writes into its own directory as it pleases: once its objects were sized, a
    # new pack holds a large object under the id of a small loose one, and the loose file
    # goes. The read of it is bounded too (dulwich lists the packs again after a miss).
    import dulwich.pack

    remote, _url, a, b = cloned_pair(tmp_path, None, "swapping", request)
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    before = head(b)
    small = oid(b"blob", SMALL).hex()
    loose = remote / "objects" / small[:2] / small[2:]
    loose.parent.mkdir(exist_ok=True)
    loose.write_bytes(zlib.compress(b"blob %d\0" % len(SMALL) + SMALL))
    commit_naming(tmp_path, remote, small)
    later = tmp_path / "later"
    later.mkdir()
    pack = HandPack()
    pack.add(3, bytes(BIG), bytes.fromhex(small))
    made = pack.write(later)
    write = dulwich.pack.write_pack_from_container

    def swapped(*args: Any, **kwargs: Any) -> Any:
        for suffix in (".pack", ".idx"):  # a pack counts once its index is there
            made.with_suffix(suffix).rename(
                remote / "objects" / "pack" / made.with_suffix(suffix).name
            )
        loose.unlink()
        return write(*args, **kwargs)

    monkeypatch.setattr(dulwich.pack, "write_pack_from_container", swapped)
    tracemalloc.start()
    try:
        result = b("sync")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.returncode == 30, result.stderr
    assert "over this store's limit" in result.stderr
    assert not loose.exists()  # the swap happened
    assert peak < 40 * 1024 * 1024, f"the sync held {peak} bytes"
    assert head(b) == before


def test_a_pack_entry_inflating_past_the_size_its_header_gives_is_refused_as_it_comes(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # A pack sent as it is (a bundle's): a blob whose header says 1 byte and whose data
    # inflates to 48 MiB. Sized by its header it passes; the check of the pack finds the lie
    # as the data inflates, a chunk at a time (dulwich 1.0 inflated such an entry whole
    # before it compared the sizes).
    _remote, _url, _a, b = cloned_pair(tmp_path, None, "lying", request)
    before = head(b)
    pack = HandPack()
    blob = oid(b"blob", b"x")
    pack.add(3, bytes(BIG), blob, size=1)
    tree = b"100644 big.yaml\0" + blob
    pack.add(2, tree, oid(b"tree", tree))
    commit = (
        b"tree %s\nparent %s\nauthor a <a@a> 1700000000 +0000\n"
        b"committer a <a@a> 1700000000 +0000\n\nlying\n"
        % (oid(b"tree", tree).hex().encode(), before.encode())
    )
    pack.add(1, commit, oid(b"commit", commit))
    made = pack.write(tmp_path)
    bundle = tmp_path / "lying.bundle"
    refs = b"# v2 git bundle\n%s refs/heads/main\n\n" % oid(b"commit", commit).hex().encode()
    bundle.write_bytes(refs + made.read_bytes())
    assert b("remote", "add", "usb", str(bundle)).returncode == 0
    code, stderr, peak_kib = sync_measured(b, "usb")
    assert peak_kib < 40 * 1024, f"gc sync held {peak_kib} KiB, exit {code}: {stderr}"
    assert code == 50, stderr
    assert stderr == (
        f"gc: the remote {bundle} sent a pack that does not read: an object inflates to more "
        "than the 1 bytes its header gives\n"
    )
    assert head(b) == before


def test_a_repack_packing_the_branchs_commit_while_a_sync_looks_for_it_fails_nothing(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # dulwich looks for an object in the packs it lists, then for its loose file: a
    # background repack that packs the loose commit between the two looks (its pack not
    # listed yet, the loose file deleted) made the commit the sync already held look absent,
    # and the sync failed with "did not send the commit its branch names".
    from dulwich.object_store import DiskObjectStore

    from beads.git.maintenance import pack_loose
    from beads.git.repo import GitRepo

    _remote, _url, a, b = cloned_pair(tmp_path, None, "racing", request)
    made_one_commit_each(a, {"raced": ""})
    assert a("sync").returncode == 0 and b("sync").returncode == 0
    ours = head(b).encode()
    git_dir = b.cwd / ".beads" / ".git"
    assert (git_dir / "objects" / ours[:2].decode() / ours[2:].decode()).exists()  # loose
    looks = []
    packed = DiskObjectStore.contains_packed

    def repacked_after_the_look(store: Any, sha: Any) -> bool:
        found = packed(store, sha)
        if sha == ours and not found:
            looks.append(sha)
            # The looks of what to offer, of what to ask for, then the check that the
            # remote's branch (ours: nothing was sent) is held: the repack runs in that one.
            if len(looks) == 3:
                pack_loose(GitRepo(git_dir))
        return found

    monkeypatch.setattr(DiskObjectStore, "contains_packed", repacked_after_the_look)
    result = b("sync")
    assert result.returncode == 0, result.stderr
    assert len(looks) >= 3  # the repack ran between the looks
    assert not (git_dir / "objects" / ours[:2].decode() / ours[2:].decode()).exists()
    assert head(b) == ours.decode()


def slow_local_walk(monkeypatch: pytest.MonkeyPatch, pause: float, stall_at: int = 0) -> None:
    """Each object a local-path fetch sizes (`localfetch.stored_size`) first waits `pause`
    seconds, as the walk of a deep history on a loaded machine does; the `stall_at`-th (if
    any) waits for ever, as a read of a file that never answers would."""
    import time

    from beads.git import localfetch

    sized = localfetch.stored_size
    count = [0]

    def slow(*args: Any) -> Any:
        count[0] += 1
        time.sleep(60 if count[0] == stall_at else pause)
        return sized(*args)

    monkeypatch.setattr(localfetch, "stored_size", slow)


def test_a_local_history_longer_to_walk_than_the_timeout_syncs_while_it_progresses(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A local path's history is walked in this process before anything is sent: a walk
    # far longer than sync.timeout that keeps reading objects is progress, not silence.
    _remote, _url, a, b = cloned_pair(tmp_path, None, "deep", request)
    made = made_one_commit_each(a, {f"deep {n}": "" for n in range(25)})  # ~150 objects
    assert a("sync").returncode == 0
    # The timeout leaves room for a loaded machine's other steps of a sync (no step but the
    # walk is slowed); the walk is the longer by far, and progresses 13 times a timeout.
    assert b("config", "set", "--local", "sync.timeout", "2s").returncode == 0
    monkeypatch.setattr("beads.git.localfetch.WORKING_EVERY", 5)
    slow_local_walk(monkeypatch, 0.03)  # about 4.5 s of walk, 0.15 s between progress
    started = time.monotonic()
    result = b("sync")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started > 2  # the walk outlasted the timeout
    assert head(b) == head(a)
    assert b.json("bead", "show", made[-1])["bead"]["title"] == "deep 24"


def test_a_local_history_whose_walk_stalls_still_times_out(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    _remote, _url, a, b = cloned_pair(tmp_path, None, "stalled", request)
    made_one_commit_each(a, {f"stalled {n}": "" for n in range(5)})
    assert a("sync").returncode == 0
    before = head(b)
    assert b("config", "set", "--local", "sync.timeout", "0.2s").returncode == 0
    slow_local_walk(monkeypatch, 0, stall_at=10)
    result = b("sync")
    assert result.returncode == 50, result.stderr
    assert "timed out: nothing arrived for 0.2s (sync.timeout)" in result.stderr
    assert head(b) == before


def test_a_local_history_with_more_objects_than_a_fetch_may_carry_is_refused_early(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What bounds the walk of a local path's history, which counts as progress: a pack of
    # sync.max_fetch_bytes holds at most so many objects (9 bytes each at the fewest).
    from beads.git import localfetch

    _remote, url, a, b = cloned_pair(tmp_path, None, "many", request)
    made_one_commit_each(a, {f"many {n}": "" for n in range(25)})  # ~150 objects
    assert a("sync").returncode == 0
    before = head(b)
    assert b("config", "set", "--local", "sync.max_fetch_bytes", "1KiB").returncode == 0
    sized = []
    monkeypatch.setattr(localfetch, "stored_size", lambda *args: sized.append(args) or 1)
    result = b("sync")
    assert result.returncode == 30, result.stderr
    assert result.stderr == (
        f"gc: the remote {url} has more than 110 objects to send, more than 1024 bytes can "
        "carry in one fetch (sync.max_fetch_bytes); nothing was merged\n"
    )
    assert len(sized) <= 110 + localfetch.WORKING_EVERY  # read no further
    assert head(b) == before


def test_a_git_config_file_that_does_not_parse_is_named_when_a_sync_fails(
    tmp_path: Path, pair_remote: tuple
) -> None:
    a, _b, _url = pair_remote
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    (xdg / "git").mkdir(parents=True)
    home.mkdir()
    a.env.pop("GIT_CONFIG_GLOBAL", None)  # the files under test are the user's own
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(xdg)}
    make_id(a, "--title", "to push")
    before = head(a)
    for broken in (home / ".gitconfig", xdg / "git" / "config"):
        broken.write_text("[core\n")
        # Real git refuses the file too, and names it.
        told = subprocess.run(["git", "config", "--list"], env={**a.env, **env},
                              capture_output=True, text=True)  # fmt: skip
        assert told.returncode != 0 and str(broken) in told.stderr
        result = a("sync", env=env)
        assert result.returncode == 30, result.stderr
        assert result.stderr.startswith(f"gc: the git config file {broken} cannot be read: ")
        assert len(result.stderr.splitlines()) == 1 and "cannot use remote" not in result.stderr
        assert head(a) == before
        broken.unlink()
    # XDG_CONFIG_HOME naming a file: git finds no config under it and goes on; so does gc.
    (tmp_path / "a-file").write_text("not a directory\n")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "a-file")
    assert subprocess.run(["git", "config", "--list"], env={**a.env, **env},
                          capture_output=True).returncode == 0  # fmt: skip
    result = a("sync", env=env)
    assert result.returncode == 0, result.stderr
    assert a.json("sync", "--status")["status"]["ahead"] == 0


def test_status_of_a_remote_never_reached_says_never_synced(
    tmp_path: Path, pair_remote: tuple
) -> None:
    a, _b, url = pair_remote
    make_id(a, "--title", "not pushed yet")
    other = bare(tmp_path / "other.git")
    assert a("remote", "add", "spare", str(other)).returncode == 0
    spare = a.json("sync", "--status", "spare")["status"]
    assert spare["synced"] is False
    assert (spare["ahead"], spare["behind"], spare["last_sync"], spare["last_error"]) == (
        None, None, None, None,
    )  # fmt: skip
    shown = a("sync", "--status", "spare").stdout
    assert "never synced" in shown and "ahead" not in shown and "last sync: never" in shown
    origin = a.json("sync", "--status", "origin")["status"]
    assert (origin["synced"], origin["ahead"], origin["behind"]) == (True, 1, 0)
    assert origin["last_sync"] is not None
    # Each remote keeps its own outcome: a failure with one is not the other's.
    assert a("remote", "add", "gone", str(tmp_path / "nothing-here")).returncode == 0
    assert a("sync", "gone").returncode == 40
    assert a.json("sync", "--status", "origin")["status"]["last_error"] is None
    gone = a.json("sync", "--status", "gone")["status"]
    assert gone["last_error"] and gone["last_sync"] is None and gone["ahead"] is None
    assert a("sync", "spare").returncode == 0
    spare = a.json("sync", "--status", "spare")["status"]
    assert (spare["synced"], spare["ahead"], spare["behind"]) == (True, 0, 0)
    assert spare["last_sync"] is not None


def test_a_remote_missing_an_object_its_history_names_is_refused_in_words(
    tmp_path: Path, pair_remote: tuple
) -> None:
    remote = tmp_path / "remote.git"  # what machine a made with `gc init` and pushed
    listing = git("ls-tree", "main", cwd=remote) + "\n100644 blob " + "3" * 40 + "\tnotes.yaml\n"
    tree = subprocess.run(["git", "mktree", "--missing"], cwd=remote, input=listing, text=True,
                          capture_output=True, check=True).stdout.strip()  # fmt: skip
    commit = git("-c", "user.name=m", "-c", "user.email=m@x", "commit-tree", tree, "-p", "main",
                 "-m", "damaged", cwd=remote)  # fmt: skip
    git("update-ref", "refs/heads/main", commit, cwd=remote)
    (tmp_path / "c").mkdir()
    cloned = GcRunner(tmp_path / "c")("clone", str(remote))
    assert cloned.returncode == 50
    assert "cannot send object " + "3" * 40 in cloned.stderr and "b'" not in cloned.stderr
    assert not (tmp_path / "c" / ".beads").exists()


@pytest.mark.parametrize("remote_at", ["local", "daemon"])
def test_a_sync_killed_while_storing_what_it_fetched_is_finished_by_the_next(
    tmp_path: Path, remote_at: str, request: pytest.FixtureRequest
) -> None:
    """Killed with half the received objects written, a sync leaves no commit without its
    tree or its parents: the next sync fetches again, and the gate finds nothing missing."""
    daemon_url = request.getfixturevalue("daemon") if remote_at == "daemon" else None
    _remote, _url, a, b = cloned_pair(tmp_path, daemon_url, "storing", request)
    made = [make_id(a, "--title", f"bead {n}") for n in range(6)]
    assert a("sync").returncode == 0
    killed = b.subprocess("sync", env={"GC_FAULT_POINT": "fetch-half-stored"})
    assert killed.returncode == -9
    finished = b("sync")
    assert finished.returncode == 0, finished.stderr
    assert head(b) == head(a) and not quarantines(b)
    assert {bead["id"] for bead in b.json("bead", "list")["beads"]} >= set(made)
    fsck_settled(tmp_path / "b" / ".beads" / ".git")


@pytest.mark.parametrize("cleaner", ["sync", "doctor"])
def test_a_fetch_killed_mid_stream_leaves_the_store_intact_and_its_leftovers_are_removed(
    tmp_path: Path, remote_kind: str | None, request: pytest.FixtureRequest, cleaner: str
) -> None:
    remote, url, a, b = cloned_pair(tmp_path, remote_kind, "killed", request)
    ours = head(b)
    delta_bomb(remote, SPILLING, ours)  # ~12 MB inflated: past what a fetch holds in memory
    before = objects_held(b)
    # kill -9 once the first of them were written to the fetch's quarantine.
    killed = b.subprocess("sync", env={"GC_FAULT_POINT": "fetch-spilled"})
    assert killed.returncode == -9
    [left] = quarantines(b)
    assert any(path.is_file() for path in left.rglob("*"))
    assert objects_held(b) == before and head(b) == ours  # none of it in the store
    live = left.with_name(f"incoming-{os.getpid()}-live")  # a live fetch's (this process)
    live.mkdir()
    if cleaner == "sync":  # refused by the gate once more, and nothing left either time
        again = b("sync")
        assert again.returncode == 30 and "outside the store's layout" in again.stderr
    else:
        report = b.json("doctor")
        found = [(p["kind"], p["path"], p["fixed"]) for p in report["problems"]]
        assert ("stale_file", left.relative_to(b.cwd / ".beads").as_posix(), True) in found
    assert quarantines(b) == [live]  # the live one is never touched
    live.rmdir()
    assert holds_no_more(b, before) and head(b) == ours
    assert b("bead", "create", "--type", "task", "--title", "still usable").returncode == 0


@pytest.mark.parametrize(
    ("removed", "count"), [("", 3), ("pack", 200)], ids=["its-directory", "its-pack-directory"]
)
def test_a_quarantine_removed_under_a_fetch_fails_it_and_lands_nothing(
    tmp_path: Path, removed: str, count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dulwich.objects import Blob

    import beads.git.quarantine as quarantine
    from beads.errors import StorageError
    from beads.store import Store

    monkeypatch.setattr(quarantine, "SPILL_BYTES", 1)  # every batch written to its directory
    store, _ = Store.init(tmp_path)
    first = [Blob.from_string(f"first {n}".encode()) for n in range(3)]  # loose files
    second = [Blob.from_string(f"second {n}".encode()) for n in range(count)]
    with pytest.raises(StorageError), quarantine.receiving(store.git) as incoming:
        incoming.store_objects(first)  # its directory made
        shutil.rmtree(incoming.path / removed)  # removed under it by another process
        incoming.store_objects(second)  # 200: written as a pack
        incoming.admit()
    assert not any(store.git.has_object(blob.id) for blob in first + second)
    store.close()


class History:
    """A git history built in memory (dulwich's objects): trees from nested dicts whose
    leaves are blob texts, commits a distinct second each."""

    def __init__(self) -> None:
        from dulwich.object_store import MemoryObjectStore

        self.store = MemoryObjectStore()
        self.times = iter(range(1_700_000_000, 1_800_000_000))

    def blob(self, text: str) -> bytes:
        from dulwich.objects import Blob

        made = Blob.from_string(text.encode())
        self.store.add_object(made)
        return made.id

    def tree(self, entries: dict[str, Any]) -> bytes:
        from dulwich.objects import Tree

        made = Tree()
        for name, value in entries.items():
            if isinstance(value, dict):
                made.add(name.encode(), 0o040000, self.tree(value))
            else:
                made.add(
                    name.encode(), 0o100644, self.blob(value) if isinstance(value, str) else value
                )
        self.store.add_object(made)
        return made.id

    def commit(self, tree_id: bytes, *parents: bytes) -> bytes:
        from dulwich.objects import Commit

        made = Commit()
        made.tree, made.parents = tree_id, list(parents)
        made.author = made.committer = b"t <t@example.com>"
        made.author_time = made.commit_time = next(self.times)
        made.author_timezone = made.commit_timezone = 0
        made.message = b"m"
        self.store.add_object(made)
        return made.id

    def closure(self, *shas: bytes) -> set[bytes]:
        """Every object the commits or trees `shas` name, themselves included."""
        from dulwich.objects import Commit, Tree

        found: set[bytes] = set()
        stack = list(shas)
        while stack:
            obj = self.store[stack.pop()]
            if obj.id in found:
                continue
            found.add(obj.id)
            if isinstance(obj, Commit):
                stack += [obj.tree, *obj.parents]
            elif isinstance(obj, Tree):
                stack += [entry.sha for entry in obj.iteritems()]
        return found


def test_a_local_fetch_sends_all_the_receiver_lacks_and_reads_no_older_history() -> None:
    """What a local-path remote sends (`localfetch.new_objects`) completes the receiver's
    history: a change, a revert to a blob the receiver holds, a move, a merge and an empty
    commit; and the walk stops at the commit the receiver holds: nothing older is read."""
    from beads.git.localfetch import new_objects

    history = History()
    store, blob, tree, commit, closure = (
        history.store, history.blob, history.tree, history.commit, history.closure,
    )  # fmt: skip

    one, two = blob("one"), blob("two")
    older = commit(tree({"task": {"a.yaml": blob("oldest")}}))
    for n in range(20):  # history the receiver holds below its head
        older = commit(tree({"task": {"a.yaml": blob(f"old {n}")}}), older)
    held = commit(tree({"task": {"a.yaml": one}, "note": {"b.yaml": two}}), older)
    changed = commit(tree({"task": {"a.yaml": blob("three")}, "note": {"b.yaml": two}}), held)
    reverted_and_moved = commit(tree({"task": {"a.yaml": one}, "moved": {"b.yaml": two}}), changed)
    side = commit(
        tree({"task": {"a.yaml": one}, "note": {"b.yaml": two}, "d": {"z": blob("z")}}), held
    )
    empty = commit(store[side].tree, side)
    merged = commit(
        tree({"task": {"a.yaml": one}, "moved": {"b.yaml": two}, "d": {"z": blob("z")}}),
        reverted_and_moved,
        empty,
    )

    read: list[bytes] = []

    class Counting:
        def __getitem__(self, sha: bytes) -> Any:
            read.append(sha)
            return store[sha]

    receiver = closure(held)
    sent, bases = new_objects(Counting(), [merged], lambda sha: sha in receiver)
    ids = {sha for sha, _hint in sent}
    assert closure(merged) <= ids | receiver  # nothing the receiver lacks is left out
    assert {held, older} & ids == set()  # the held history is never sent
    assert bases <= receiver  # a thin pack names only bases the receiver holds
    assert set(read) <= closure(merged) - (closure(older))  # never below the held commit
    assert all(store[sha].type_num == hint[0] for sha, hint in sent)


# A tree: up to three names of "abc", each a blob's text or a tree of the same kind.
TREES = st.recursive(
    st.dictionaries(st.sampled_from("abc"), st.sampled_from(["1", "2", "3"]), max_size=3),
    lambda inner: st.dictionaries(
        st.sampled_from("abc"), st.sampled_from(["1", "2", "3"]) | inner, max_size=3
    ),
    max_leaves=8,
)


@given(st.data())
@pytest.mark.slow
def test_a_local_fetch_completes_any_history_the_receiver_holds_part_of(data: Any) -> None:
    """For any history (merges of up to two parents, reverts, paths that turn from file to
    directory and back, empty commits) and any part of it the receiver holds (with all its
    commits name), what `new_objects` sends completes the wanted commit's history, and the
    bases it offers a thin pack are the receiver's."""
    from beads.git.localfetch import new_objects

    history = History()
    commits: list[bytes] = []
    for _ in range(data.draw(st.integers(1, 10))):
        parents = (
            data.draw(st.lists(st.sampled_from(commits), max_size=2, unique=True))
            if commits
            else []
        )
        commits.append(history.commit(history.tree(data.draw(TREES)), *parents))
    holds = data.draw(st.lists(st.sampled_from(commits), max_size=3))
    receiver = history.closure(*holds)
    want = data.draw(st.sampled_from(commits))
    sent, bases = new_objects(history.store, [want], lambda sha: sha in receiver)
    assert history.closure(want) <= {sha for sha, _hint in sent} | receiver
    assert bases <= receiver


def test_a_git_daemon_refusing_a_repository_is_not_said_to_refuse_credentials(
    tmp_path: Path, daemon: str
) -> None:
    # git:// carries no credentials: the daemon's "access denied or repository not
    # exported" means no such repository there, one not exported, or no push allowed.
    cloned = GcRunner(tmp_path)("clone", f"{daemon}/nope.git", str(tmp_path / "c"))
    assert cloned.returncode == 50
    line = cloned.stderr.strip()
    assert "\n" not in line and "credentials" not in line
    assert line.startswith(f"gc: the git daemon at {daemon}/nope.git refused the request: ")
    assert "repository not exported" in line and "--enable=receive-pack" in line
    assert not (tmp_path / "c").exists()


def test_a_remote_advertising_a_ref_name_with_a_space_adds_no_lines_to_stderr(
    tmp_path: Path, daemon: str
) -> None:
    # A ref file named with a space, written by hand in the remote: git's daemon still
    # advertises it, and dulwich logged "unknown part in pkt-ref: b'ird'" on stderr at each
    # exchange, lines of no `gc:` form before the command's own.
    a = machine(tmp_path, "a")
    assert a("init").returncode == 0
    assert a("remote", "add", "origin", f"{daemon}/shared.git").returncode == 0
    assert a("sync").returncode == 0
    shared = tmp_path / "srv" / "shared.git"
    (shared / "refs" / "heads" / "we ird").write_text(git("rev-parse", "main", cwd=shared))
    cloned = GcRunner(tmp_path)("clone", f"{daemon}/shared.git", str(tmp_path / "b"))
    assert (cloned.returncode, cloned.stderr) == (0, "")
    synced = a("sync")
    assert (synced.returncode, synced.stderr) == (0, "")


def test_a_remote_path_holding_no_repository_is_said_once_in_one_line(tmp_path: Path) -> None:
    # It said "no git repository at X: No git repository was found at X".
    where = tmp_path / "none"
    cloned = GcRunner(tmp_path)("clone", str(where), str(tmp_path / "c"))
    assert (cloned.returncode, cloned.stderr) == (40, f"gc: no git repository at {where}\n")
    a = machine(tmp_path, "a")
    assert a("init").returncode == 0
    assert a("remote", "add", "origin", str(where)).returncode == 0
    synced = a("sync")
    assert (synced.returncode, synced.stderr) == (40, f"gc: no git repository at {where}\n")
