#!/usr/bin/env python
"""Peak memory of `gc sync` against a hostile remote: a small pack holding one huge blob.

Run from the project root (needs `git`):

    python bench/bench_hostile_fetch.py              # a 100 MiB blob, local path and git daemon
    python bench/bench_hostile_fetch.py --mib 500

A store is pushed to a bare remote; with real git, a person then commits a file of N MiB of
zeros (it packs to a few hundred KB) at a bead's place and pushes it. A clone of the store
then runs `gc sync` as a process of its own; the figure is that process's peak RSS
(`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss` once it is the only child waited for),
with its exit code and time. The goal: the sync is refused (exit 30, the object is over
4 x store.max_body_bytes + 64 KiB), nothing is merged, and its peak RSS is under 100 MiB.

Two more local-path remotes hide the blob where a header alone does not show it: in an
alternate (`objects/info/alternates` naming another repository's objects, where the blob is),
and as a loose file whose header says 1 byte (the goal there: exit 50, damage).

Everything happens in a temporary directory that is removed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

GC = str(Path(sys.executable).parent / "gc")
GOAL_KIB = 100 * 1024


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def gc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    return subprocess.run([GC, *args], cwd=cwd, env=env, capture_output=True, text=True)


def measured_sync(cwd: Path) -> tuple[int, str, float, int]:
    """`gc sync` in `cwd`, run in a child process that starts it and reports how it went:
    its exit code, stderr, seconds, and peak RSS in KiB (the only child that child waits
    for, so RUSAGE_CHILDREN is the sync's own)."""
    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "seconds = time.perf_counter() - t\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(done.returncode, seconds, peak)\n"
        "sys.stderr.write(done.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    done = subprocess.run(
        [sys.executable, "-c", probe, GC, "sync"], cwd=cwd, env=env, capture_output=True,
        text=True,
    )  # fmt: skip
    code, seconds, peak = done.stdout.split()
    return int(code), done.stderr.strip(), float(seconds), int(peak)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_daemon(base: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    process = subprocess.Popen(
        ["git", "daemon", "--export-all", "--reuseaddr", f"--base-path={base}",
         "--listen=127.0.0.1", f"--port={port}", str(base)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, port
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("git daemon did not start") from None
            time.sleep(0.05)


def zeros(where: Path, mib: int) -> Path:
    """A file of `mib` MiB of zeros (made once)."""
    path = where / "zeros"
    if not path.exists():
        with path.open("wb") as handle:
            handle.truncate(mib * 1024 * 1024)
    return path


def hide_in_alternate(where: Path, hostile: Path, mib: int) -> str:
    """The blob in another repository, which `hostile`'s objects name as their alternate."""
    other = where / "other.git"
    if not other.exists():
        git("init", "-q", "--bare", str(other))
    blob = git("hash-object", "-w", str(zeros(where, mib)), cwd=other)
    alternates = hostile.with_suffix(".git") / "objects" / "info" / "alternates"
    alternates.write_text(f"{other / 'objects'}\n")
    return blob


def hide_in_lying_loose(where: Path, hostile: Path, mib: int) -> str:
    """The blob as a loose file of `hostile` whose header says 1 byte, under that blob's id."""
    blob = hashlib.sha1(b"blob 1\0x").hexdigest()
    loose = hostile.with_suffix(".git") / "objects" / blob[:2] / blob[2:]
    loose.parent.mkdir(exist_ok=True)
    loose.write_bytes(zlib.compress(b"blob 1\0" + bytes(mib * 1024 * 1024), 1))
    return blob


def commit_naming(where: Path, remote: Path, blob: str) -> None:
    """Move `remote`'s main to a commit holding `blob` at a bead's place (git reads none of
    it: plumbing on a temporary index)."""
    names = git("ls-tree", "-r", "--name-only", "main", cwd=remote).split()
    place = next(name for name in names if name != "config.yaml")
    env = {**os.environ, "GIT_INDEX_FILE": str(where / "index")}
    for step in (["read-tree", "main"],
                 ["update-index", "--add", "--cacheinfo", f"100644,{blob},{place}"]):  # fmt: skip
        subprocess.run(["git", *step], cwd=remote, env=env, check=True, capture_output=True)
    tree = subprocess.run(["git", "write-tree", "--missing-ok"], cwd=remote, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    commit = git("-c", "user.name=p", "-c", "user.email=p@x", "commit-tree", tree, "-p", "main",
                 "-m", "hidden", cwd=remote)  # fmt: skip
    git("update-ref", "refs/heads/main", commit, cwd=remote)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=100, help="the blob's size (default 100)")
    args = parser.parse_args()
    where = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    daemon = None
    failed = False
    try:
        remote = where / "srv" / "shared.git"
        remote.parent.mkdir()
        git("init", "-q", "--bare", "-b", "main", str(remote))
        a = where / "a"
        a.mkdir()
        gc("init", cwd=a)
        gc("remote", "add", "origin", str(remote), cwd=a)
        gc("bead", "create", "--type", "task", "--title", "the victim", cwd=a)
        gc("sync", cwd=a)
        shutil.copytree(remote, where / "pristine.git")  # for the remotes that hide the blob
        daemon, port = start_daemon(remote.parent)
        sides = {"local path": str(remote), "git daemon": f"git://127.0.0.1:{port}/shared.git"}
        for kind, url in sides.items():  # the clones, made before the remote turns hostile
            (where / kind.replace(" ", "-")).mkdir()
            gc("clone", url, cwd=where / kind.replace(" ", "-"))
        work = where / "work"
        git("clone", "-q", str(remote), str(work))
        target = next(p for p in work.rglob("*.yaml") if p.name != "config.yaml")
        with target.open("wb") as handle:
            handle.truncate(args.mib * 1024 * 1024)
        git("add", "-A", cwd=work)
        git("-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qm", "big", cwd=work)
        git("push", "-q", "origin", "main", cwd=work)
        packed = sum(p.stat().st_size for p in (remote / "objects").rglob("*") if p.is_file())
        print(f"remote: {packed / 1024:.0f} KB on disk, holding a {args.mib} MiB blob")
        for kind in sides:
            side = where / kind.replace(" ", "-")
            before = git("-C", str(side / ".beads" / ".git"), "rev-parse", "main")
            code, stderr, seconds, peak = measured_sync(side)
            after = git("-C", str(side / ".beads" / ".git"), "rev-parse", "main")
            ok = code == 30 and before == after and peak < GOAL_KIB
            failed |= not ok
            verdict = "PASS" if ok else "FAIL"
            print(f"{kind}: exit {code} in {seconds:.2f} s, peak RSS {peak / 1024:.1f} MiB "
                  f"(goal: exit 30, nothing merged, < 100 MiB): {verdict}")  # fmt: skip
            print(f"  {stderr}")
        pristine = where / "pristine.git"
        for kind, hide, goal in (
            ("local path, blob in an alternate", hide_in_alternate, 30),
            ("local path, loose file saying 1 byte", hide_in_lying_loose, 50),
        ):
            hostile = where / kind.split(", ")[1].replace(" ", "-")
            shutil.copytree(pristine, hostile.with_suffix(".git"))
            side = hostile.with_name(hostile.name + "-side")
            side.mkdir()
            gc("clone", str(hostile.with_suffix(".git")), cwd=side)
            commit_naming(where, hostile.with_suffix(".git"), hide(where, hostile, args.mib))
            before = git("-C", str(side / ".beads" / ".git"), "rev-parse", "main")
            code, stderr, seconds, peak = measured_sync(side)
            after = git("-C", str(side / ".beads" / ".git"), "rev-parse", "main")
            ok = code == goal and before == after and peak < GOAL_KIB
            failed |= not ok
            verdict = "PASS" if ok else "FAIL"
            print(f"{kind}: exit {code} in {seconds:.2f} s, peak RSS {peak / 1024:.1f} MiB "
                  f"(goal: exit {goal}, nothing merged, < 100 MiB): {verdict}")  # fmt: skip
            print(f"  {stderr}")
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait(timeout=10)
        shutil.rmtree(where, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
