"""The `git` program, where it is installed, reading the store's repository in bulk.

`git ls-tree` and `git cat-file --batch` read a commit's files about five times as fast as a
tree walk through dulwich in Python; every caller falls back to `GitRepo` when git is
missing (`GitUnavailable`). git runs with this repository's own settings only: no variable
of the caller's git and no global or system config may point it elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from beads.git.objects import DamagedObject, damaged, hashes_to, loose_ids

_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
# Each function imports subprocess itself: a command that never runs git (a send) skips it.


# Once running, git reads a commit's files several times faster than dulwich does in
# Python, but starting it costs about what dulwich spends on a dozen or two files: a store
# of fewer objects than this (a new one, above all) is read through dulwich.
WORTH_STARTING_AT = 100


class GitUnavailable(Exception):
    """The `git` program is not installed, or failed to read the store's objects."""


def worth_starting(git_dir: Path) -> bool:
    """Whether the store holds enough objects (packed and loose: WORTH_STARTING_AT) for the
    git program to read its files sooner than dulwich."""
    from beads.git.maintenance import packs_of

    held = sum(pack.count for pack in packs_of(git_dir))
    if held < WORTH_STARTING_AT:
        for _ in loose_ids(str(git_dir / "objects")):
            held += 1
            if held >= WORTH_STARTING_AT:
                break
    return held >= WORTH_STARTING_AT


def git_command(git_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The argv start and environment that run git on the repository, or GitUnavailable."""
    import os
    import shutil

    program = shutil.which("git")
    if program is None:
        raise GitUnavailable("no git program")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, LC_ALL="C")
    return [program, f"--git-dir={git_dir}"], env


def list_files(git_dir: Path, commit: bytes) -> dict[str, bytes]:
    """Every regular file of `commit` (no symbolic link, no gitlink), path -> blob id, as
    `git ls-tree` lists them; GitUnavailable when git is missing or fails."""
    import subprocess

    base, env = git_command(git_dir)
    try:
        listed = subprocess.run(
            [*base, "ls-tree", "-r", "-z", "--full-tree", commit.decode()],
            capture_output=True, stdin=subprocess.DEVNULL, env=env, check=True,
        ).stdout  # fmt: skip
        found = {}
        for entry in listed.split(b"\0")[:-1]:
            info, _, path = entry.partition(b"\t")
            mode, kind, sha = info.split(b" ")
            if kind == b"blob" and mode.startswith(b"100"):
                found[path.decode()] = sha
    except (OSError, subprocess.CalledProcessError, ValueError, UnicodeError) as exc:
        raise GitUnavailable(f"git ls-tree: {exc}") from None
    return found


def file_contents(git_dir: Path, commit: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """Every file of `commit` as `(path, blob sha, content)`, read by the `git` program: a
    tree walk and a blob read through dulwich, in Python, cost several times what `git
    ls-tree` and `git cat-file --batch` do. Raises GitUnavailable (before yielding anything, when
    git is missing) so the caller can read through dulwich instead; streaming, a few pipe
    buffers of files at a time."""
    import subprocess
    import threading
    from collections import deque

    base, env = git_command(git_dir)
    listing = subprocess.Popen(
        [*base, "ls-tree", "-r", "-z", "--full-tree", commit.decode()],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    reader = subprocess.Popen(
        [*base, "cat-file", "--batch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert listing.stdout is not None and reader.stdin is not None and reader.stdout is not None
    paths: deque[tuple[str, bytes]] = deque()
    fed = [True]

    def feed() -> None:
        # ls-tree's entries go to cat-file's input as they come; their paths wait in order.
        pending = b""
        try:
            with reader.stdin:  # type: ignore[union-attr]
                while chunk := listing.stdout.read1(65536):  # type: ignore[union-attr]
                    entries = (pending + chunk).split(b"\0")
                    pending = entries.pop()
                    shas = []
                    for entry in entries:
                        info, _, path = entry.partition(b"\t")
                        mode, kind, sha = info.split(b" ")
                        if kind == b"blob" and mode.startswith(b"100"):  # no links
                            paths.append((path.decode(), sha))
                            shas.append(sha)
                    if shas:
                        reader.stdin.write(b"\n".join(shas) + b"\n")  # type: ignore[union-attr]
                        reader.stdin.flush()  # type: ignore[union-attr]
        except (OSError, ValueError, UnicodeError):
            fed[0] = False

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    out = reader.stdout
    started = False
    try:
        while True:
            header = out.readline()
            if not header:
                break
            sha, kind, size = header.split()
            path, wanted = paths.popleft()
            if sha != wanted:
                raise GitUnavailable(f"git cat-file: {header!r}")
            content = out.read(int(size) + 1)[:-1]
            # git reads an object without checking it against its name: one whose file holds
            # another object's bytes (a power cut) would be filed as a wrong bead.
            if kind not in _TYPES or not hashes_to(sha, _TYPES[kind], content):
                raise damaged(sha, path)
            if kind != b"blob":
                raise damaged(sha, path)  # hashes right, yet the tree calls it a file
            started = True
            yield path, sha, content
        feeder.join()
        if listing.wait() != 0 or reader.wait() != 0 or not fed[0] or paths:
            if started:
                raise DamagedObject(
                    "git could not read all the files of the commit (a damaged object)"
                )
            raise GitUnavailable("git ls-tree or cat-file failed")
    except ValueError:
        raise GitUnavailable("git cat-file: unexpected output") from None
    finally:
        for process in (listing, reader):
            if process.poll() is None:
                process.kill()
            process.wait()
        out.close()
        listing.stdout.close()


class CatFile:
    """Objects read through one `git cat-file --batch` process, by name: in a hook git runs,
    the repository (and the objects it keeps in quarantine) is the one git's environment
    names. An object store for `beads.sync.treegate`: `get_raw(name)`."""

    def __init__(self) -> None:
        import subprocess

        self.process = subprocess.Popen(
            ["git", "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def get_raw(self, name: bytes) -> tuple[int, bytes]:
        """The type number and bytes of object `name`; KeyError when git has none."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(name + b"\n")
        self.process.stdin.flush()
        header = self.process.stdout.readline().split()
        if len(header) != 3 or header[1] not in _TYPES:
            raise KeyError(name)
        data = self.process.stdout.read(int(header[2]) + 1)[:-1]
        return _TYPES[header[1]], data

    def close(self) -> None:
        """End the git process."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()


def new_commits(new: bytes) -> list[bytes]:
    """The commits `new` brings that no ref reaches yet (`git rev-list NEW --not --all`), in
    the repository git's environment names (a hook's)."""
    import subprocess

    return subprocess.run(
        ["git", "rev-list", new.decode(), "--not", "--all"], capture_output=True, check=True
    ).stdout.split()
