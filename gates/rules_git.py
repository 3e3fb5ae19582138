"""The destructive-op gate's git rules: options read as git reads them (clusters, long
options and abbreviations, repeats), and the repository's state where the answer depends on
it (uncommitted work, the current branch, whether a branch is merged).

- `push` with force (`-f`, `--force*`, `+ref`), `--delete`/`:ref`: deny when a destination
  is a protected branch (`gates.destructive.protected_branches`, default main and master;
  `HEAD` and `@` are the current branch, so is no refspec); `--mirror` and `--prune`: deny;
- `reset --hard`, `checkout -f`, `checkout`/`restore` of `.` or `:/`: deny when tracked
  files have uncommitted changes (ask when git cannot tell);
- `clean` with `-x`/`-X` or force given twice: deny;
- `branch -D`: deny for a protected branch, ask for one not merged into HEAD;
- `stash clear`, `reflog expire`/`delete`, `gc --prune=now`, `prune`, `update-ref -d`,
  `filter-branch`, `filter-repo`: ask (`update-ref -d` of a protected branch: deny);
- `config` on the store's own repository (`.beads/.git/config`): deny.
"""

from __future__ import annotations

import os

from gates import options
from gates.shelljudge import Item, Judge
from gates.shellpaths import ASK, DENY, pattern
from gates.shellwords import UNKNOWN

DEFAULT_PROTECTED = ("main", "master")
GLOBAL_VALUES = (
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--exec-path",
    "--config-env",
    "--super-prefix",
)
PUSH_LONGS = {
    name: False
    for name in (
        "force",
        "force-with-lease",
        "force-if-includes",
        "mirror",
        "delete",
        "prune",
        "all",
        "branches",
        "tags",
        "follow-tags",
        "dry-run",
        "set-upstream",
        "verbose",
        "quiet",
        "progress",
        "no-verify",
        "verify",
        "atomic",
        "porcelain",
        "thin",
        "no-thin",
        "ipv4",
        "ipv6",
        "signed",
        "no-force-with-lease",
        "recurse-submodules",
    )
}
PUSH_LONGS.update({"push-option": True, "repo": True, "receive-pack": True, "exec": True})
FORCE = ("f", "force", "force-with-lease", "force-if-includes")


def judge_git(j: Judge, items: list[Item], depth: int) -> None:
    """Judge `git ...` (items[0] is git)."""
    words = [i.literal for i in items[1:]]
    cwd = j.cwd
    git_dir = None
    at = 0
    while at < len(words) and words[at] is not None and words[at].startswith("-"):
        word = words[at]
        name, eq, given = word.partition("=")
        if name in GLOBAL_VALUES:
            if not eq:
                at += 1
                given = words[at] if at < len(words) and words[at] is not None else UNKNOWN
            if name == "-C":
                found, _why = pattern(given, cwd)
                cwd = found if found is not None and UNKNOWN not in given else None
            elif name == "--git-dir":
                git_dir, _why = pattern(given, cwd)
        at += 1
    if at >= len(words):
        return
    sub = words[at]
    rest = items[1 + at + 1 :]
    args = [i.literal for i in rest]
    state = GitState(j, cwd)
    if sub == "push":
        _push(j, state, args)
    elif sub == "reset":
        read = options.read(
            args,
            "",
            {n: False for n in ("hard", "soft", "mixed", "merge", "keep", "quiet", "patch")},
        )
        if read.has("hard"):
            state.would_lose_work("git reset --hard")
    elif sub in ("checkout", "restore"):
        _discard(j, state, sub, args)
    elif sub == "clean":
        read = options.read(
            args,
            "e",
            {
                "force": False,
                "dry-run": False,
                "quiet": False,
                "interactive": False,
                "exclude": True,
            },
        )
        forced = read.count("f", "force")
        if read.has("n", "dry-run") or not forced:
            return
        if read.has("x", "X"):
            j.note(
                DENY,
                "git clean -x deletes ignored files too (the store .beads/ among "
                "them), which git cannot bring back",
            )
        elif forced > 1:
            j.note(DENY, "git clean with force given twice deletes nested repositories")
    elif sub == "branch":
        _branch(j, state, args)
    elif sub == "stash" and args[:1] == ["clear"]:
        j.note(ASK, "git stash clear drops every stash entry")
    elif sub == "reflog" and args[:1] and args[0] in ("expire", "delete"):
        j.note(ASK, f"git reflog {args[0]} forgets how to bring lost commits back")
    elif sub == "gc" and any(
        (a or "").split("=", 1)[-1] in ("now", "all")
        for a in args
        if (a or "").startswith("--prune=")
    ):
        j.note(ASK, "git gc --prune deletes unreachable commits now")
    elif sub == "prune":
        j.note(ASK, "git prune deletes unreachable commits")
    elif sub == "update-ref" and "-d" in args:
        refs = [a for a in args if a is None or not a.startswith("-")]
        names = [(r or UNKNOWN).removeprefix("refs/heads/") for r in refs[:1]]
        if any(n in state.protected for n in names):
            j.note(DENY, f"git update-ref -d deletes the protected branch {names[0]}")
        else:
            j.note(ASK, "git update-ref -d deletes a ref without checking it is merged")
    elif sub in ("filter-branch", "filter-repo"):
        j.note(ASK, f"git {sub} rewrites history")
    elif sub == "config":
        _config(j, cwd, git_dir, args)


def _push(j: Judge, state: GitState, args: list[str | None]) -> None:
    read = options.read(args, "o", PUSH_LONGS)
    if read.has("n", "dry-run"):
        return
    positionals = [args[i] for i in read.positionals]
    refspecs = positionals[1:]
    forced = read.has(*FORCE)
    if read.has("mirror"):
        j.note(DENY, "git push --mirror overwrites and deletes every branch of the remote")
        return
    if read.has("prune"):
        j.note(DENY, "git push --prune deletes remote branches, protected ones included")
        return
    if read.has("all", "branches") and forced:
        j.note(DENY, "git push --all with force overwrites every branch, protected ones too")
        return
    deleting = read.has("d", "delete")
    targets: list[tuple[str | None, bool]] = []  # (destination, destructive)
    for spec in refspecs:
        if spec is None:
            targets.append((None, True))
            continue
        plus = spec.startswith("+")
        source, colon, destination = spec.lstrip("+").partition(":")
        if colon and not source:
            targets.append((destination, True))  # `:main` deletes main
        else:
            targets.append((destination if colon else source, forced or plus or deleting))
    if not refspecs and (forced or deleting):
        targets.append(("HEAD", True))
    for destination, destructive in targets:
        if not destructive:
            continue
        branch = state.branch_name(destination)
        if branch is None:
            j.note(ASK, "it force-pushes or deletes a branch the gate cannot name")
        elif branch in state.protected:
            j.note(DENY, f"it force-pushes or deletes the protected branch {branch}")


def _discard(j: Judge, state: GitState, sub: str, args: list[str | None]) -> None:
    if sub == "checkout":
        read = options.read(
            args,
            "bB",
            {
                "force": False,
                "orphan": True,
                "ours": False,
                "theirs": False,
                "merge": False,
                "patch": False,
            },
        )
        worktree = True
        forced = read.has("f", "force")
    else:
        read = options.read(
            args,
            "s",
            {
                "source": True,
                "staged": False,
                "worktree": False,
                "patch": False,
                "ours": False,
                "theirs": False,
            },
        )
        worktree = read.has("W", "worktree") or not read.has("S", "staged")
        forced = False
    if read.has("p", "patch"):
        return
    paths = [args[i] for i in read.positionals]
    broad = any(p is None or p in (".", "./", ":/", ":/*", "*", ":(top)") for p in paths)
    if worktree and (broad or forced):
        state.would_lose_work(f"git {sub} {'-f' if forced else '.'}")


def _branch(j: Judge, state: GitState, args: list[str | None]) -> None:
    read = options.read(args, "", {"delete": False, "force": False, "remotes": False})
    force_delete = read.has("D") or read.has("d", "delete") and read.has("f", "force")
    if not force_delete or read.has("r", "remotes"):
        return
    for index in read.positionals:
        name = args[index]
        if name is None:
            j.note(ASK, "git branch -D deletes a branch the gate cannot name")
        elif name in state.protected:
            j.note(DENY, f"git branch -D deletes the protected branch {name}")
        else:
            merged = state.merged(name)
            if merged is False:
                j.note(ASK, f"git branch -D {name} deletes commits merged nowhere")
            elif merged is None:
                j.note(ASK, f"git branch -D {name}: the gate cannot tell whether it is merged")


def _config(j: Judge, cwd: str | None, git_dir: str | None, args: list[str | None]) -> None:
    read = options.read(
        args,
        "f",
        {"file": True, "global": False, "system": False, "local": False, "worktree": False},
    )
    files = [pattern(f, cwd)[0] for f in read.values.get("f", []) + read.values.get("file", [])]
    places = files or ([git_dir] if git_dir else [cwd])
    for place in places:
        if place is not None and "/.beads/" in place + "/":
            j.note(DENY, "an agent does not change the store's git config (.beads/.git/config)")


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

    def would_lose_work(self, what: str) -> None:
        dirty = self._git("status", "--porcelain", "--untracked-files=no")
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
