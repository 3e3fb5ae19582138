"""The repository's state where a git rule's answer depends on it (`gates.rules_git`): the
checked-out branch (read from HEAD, no git process), whether tracked files have uncommitted
changes and whether a branch is merged (quick read-only git commands, each asked at most
once per judgement; "cannot tell" when git cannot answer)."""

from __future__ import annotations

import os

from gates.shelljudge import Judge
from gates.shellpaths import ASK, DENY
from gates.shellwords import UNKNOWN

DEFAULT_PROTECTED = ("main", "master")


class GitState:
    """What the repository at `cwd` holds, asked of git at most once per judgement."""

    def __init__(self, j: Judge, cwd: str | None) -> None:
        self.j = j
        self.cwd = cwd
        configured = j.settings.get("protected_branches")
        self.protected = tuple(configured) if isinstance(configured, list) else DEFAULT_PROTECTED

    def branch_name(self, ref: str | None) -> str | None:
        if ref is None or UNKNOWN in ref:
            return None
        if ref in ("HEAD", "@"):
            return self.current()
        return ref.removeprefix("refs/heads/")

    def current(self) -> str | None:
        """The checked-out branch, read from HEAD (no git process)."""
        if self.cwd is None:
            return None
        head = _head_file(self.cwd)
        if head is None:
            return None
        try:
            with open(head, encoding="utf-8", errors="replace") as file:
                text = file.read(512).strip()
        except OSError:
            return None
        return text.removeprefix("ref: refs/heads/") if text.startswith("ref: ") else None

    def would_lose_work(self, what: str, paths: list[str | None] | None = None) -> None:
        if paths is not None and any(p is None or p.startswith("-") for p in paths):
            self.j.note(ASK, f"{what} may throw away work, and the gate cannot name the files")
            return
        limit = ("--", *paths) if paths else ()
        dirty = self._git("status", "--porcelain", "--untracked-files=no", *limit)
        if dirty is None:
            self.j.note(ASK, f"{what} may throw away work, and git cannot tell here")
        elif dirty.strip():
            count = len(dirty.splitlines())
            self.j.note(
                DENY,
                f"{what} throws away {count} uncommitted change(s); commit or stash them first",
            )

    def merged(self, branch: str) -> bool | None:
        code = self._run("merge-base", "--is-ancestor", f"refs/heads/{branch}", "HEAD")
        if code is None:
            return None
        if code == 0:
            return True
        exists = self._run("show-ref", "--verify", "--quiet", f"refs/heads/{branch}")
        return True if exists == 1 else False if exists == 0 else None

    def _git(self, *args: str) -> str | None:
        key = ("out", *args)
        if key not in self.j.git_cache:
            self.j.git_cache[key] = _call(self.cwd, args)[1]
        return self.j.git_cache[key]

    def _run(self, *args: str) -> int | None:
        key = ("code", *args)
        if key not in self.j.git_cache:
            self.j.git_cache[key] = _call(self.cwd, args)[0]
        return self.j.git_cache[key]


def _call(cwd: str | None, args: tuple[str, ...]) -> tuple[int | None, str | None]:
    """Run a quick read-only git command; (None, None) when it cannot tell."""
    if cwd is None:
        return None, None
    import subprocess  # lazy: only state-dependent rules need git

    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, timeout=2, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    out = done.stdout.decode(errors="replace") if done.returncode == 0 else None
    return (done.returncode if done.returncode in (0, 1) else None), out


def _head_file(cwd: str) -> str | None:
    directory = cwd
    while True:
        dot_git = os.path.join(directory, ".git")
        if os.path.isdir(dot_git):
            return os.path.join(dot_git, "HEAD")
        if os.path.isfile(dot_git):  # a linked worktree: `gitdir: PATH`
            try:
                with open(dot_git, encoding="utf-8", errors="replace") as file:
                    line = file.read(4096).strip()
            except OSError:
                return None
            if line.startswith("gitdir: "):
                return os.path.join(directory, line[8:], "HEAD")
            return None
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent
