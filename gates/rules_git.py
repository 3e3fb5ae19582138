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

from gates import options
from gates.gitstate import GitState
from gates.shelljudge import Judge
from gates.shellnodes import Item
from gates.shellpaths import ASK, DENY, pattern
from gates.shellwords import UNKNOWN

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
PUSH_LONGS["dry-run"] = False
PUSH_LONGS.update({"push-option": True, "repo": True, "receive-pack": True, "exec": True})
FORCE = ("f", "force", "force-with-lease", "force-if-includes")


def judge_git(j: Judge, items: list[Item], depth: int) -> None:
    """Judge `git ...` (items[0] is git)."""
    words = [i.literal for i in items[1:]]
    cwd = j.cwd
    git_dir = None
    settings: dict[str, str] = {}  # `-c key=value`
    at = 0
    while at < len(words) and words[at] is not None and words[at].startswith("-"):
        word = words[at]
        name, eq, given = word.partition("=")
        if name in GLOBAL_VALUES:
            if not eq:
                at += 1
                given = words[at] if at < len(words) and words[at] is not None else UNKNOWN
            if name == "-c":
                key, _eq, setting = (given if not eq else word[3:]).partition("=")
                settings[key.lower()] = setting
                _runs_setting(j, key, setting, depth)
            elif name == "-C":
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
    _settings_files(j, sub, rest, args, cwd)
    if sub in ("push", "send-pack"):
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
        if settings.get("clean.requireforce", "true").lower() in ("false", "0", "no", "off"):
            forced += 1  # `-c clean.requireForce=false`: no -f needed
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
    elif sub == "stash" and args[:1] == ["drop"]:
        j.note(ASK, "git stash drop deletes a stash entry")
    elif (
        sub == "worktree"
        and args[:1] == ["remove"]
        and any(
            a is None
            or a in ("-f", "--force")
            or (a.startswith("--f") and "force".startswith(a[2:]))
            for a in args[1:]
        )
    ):
        j.note(ASK, "git worktree remove --force deletes a worktree with its changes")
    elif sub == "switch":
        read = options.read(args, "cC", {"force": False, "discard-changes": False})
        if read.has("f", "force", "discard-changes"):
            state.would_lose_work("git switch --discard-changes")
        _moves_protected(j, state, read, "C", args)
    elif sub == "rm":
        read = options.read(args, "", {"force": False, "recursive": False, "cached": False})
        if not read.has("cached"):
            paths = [args[i] for i in read.positionals]
            if read.has("f", "force"):
                state.would_lose_work("git rm -f", paths)
            if any(p is None or p in (".", "./", ":/", "*") for p in paths):
                j.note(ASK, "git rm removes every tracked file from the work tree")
    elif sub == "read-tree" and "-u" in args and ("--reset" in args or "--reset" in args):
        state.would_lose_work("git read-tree -u --reset")
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
    elif sub == "update-ref" and "-d" not in args:
        refs = [a for a in args if a is None or not a.startswith("-")]
        name = (refs[0] or UNKNOWN).removeprefix("refs/heads/") if refs else ""
        if name in state.protected:
            j.note(DENY, f"git update-ref moves the protected branch {name}")
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


RUNS_PROGRAMS = (
    "alias.*",
    "core.pager",
    "pager.*",
    "core.editor",
    "sequence.editor",
    "core.sshcommand",
    "core.fsmonitor",
    "core.hookspath",
    "diff.external",
    "diff.*.command",
    "merge.*.driver",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "credential.helper",
    "gpg.program",
    "uploadpack.packobjectshook",
)


def _runs_setting(j: Judge, key: str, value: str, depth: int) -> None:
    """A `-c` setting that runs a program: its command judged (an alias's `!` included)."""
    from fnmatch import fnmatchcase

    if not any(fnmatchcase(key.lower(), p) for p in RUNS_PROGRAMS):
        return
    if UNKNOWN in key + value:
        j.note(ASK, f"git -c {key} runs a command the gate cannot read")
        return
    if key.lower().startswith("alias.") and not value.startswith("!"):
        j.nested("git " + value, depth)
    else:
        j.nested(value.removeprefix("!"), depth)


def _settings_files(
    j: Judge, sub: str, rest: list[Item], args: list[str | None], cwd: str | None
) -> None:
    """Self-protection: `git mv`/`rm`/`checkout`/`restore` of Claude Code's settings, and
    `git config` of a setting that runs programs (alias, pager, editor, ssh, fsmonitor)."""
    from fnmatch import fnmatchcase

    if sub in ("mv", "rm", "checkout", "restore"):
        for item in rest:
            found, _why = pattern(item.word, cwd)
            names = (found or "").split("/")
            if any(
                n == ".claude" and fnmatchcase(names[k + 1], "settings*.json")
                for k, n in enumerate(names[:-1])
            ):
                j.note(
                    DENY, f"git {sub} changes Claude Code's settings, where the gates are hooked"
                )
    if sub == "config":
        given = [a for a in args if a is None or not a.startswith("-")]
        key = given[0] if given else None
        if key is None or len(given) < 2:
            return
        kept = (j.level, j.reason)
        j.level, j.reason = 0, ""
        try:
            _runs_setting(j, key, UNKNOWN if given[1] is None else given[1], 0)
            stopped = j.level
        finally:
            j.level, j.reason = kept
        if stopped:  # stored now, run later: the person decides
            j.note(ASK, f"git config {key} sets a command git runs later that the gate stops")


def _moves_protected(
    j: Judge, state: GitState, read: options.Options, flag: str, args: list[str | None]
) -> None:
    """`checkout -B main`, `switch -C main`: a protected branch reset to another commit."""
    for name in read.values.get(flag, []):
        if name in state.protected:
            j.note(DENY, f"it resets the protected branch {name} to another commit")


def _push(j: Judge, state: GitState, args: list[str | None]) -> None:
    read = options.read(args, "o", PUSH_LONGS)
    dry = [v for v in read.values.get("dry-run", [])]
    if read.has("n") or (
        read.has("dry-run") and not any(v.lower() in ("false", "0", "no", "off") for v in dry)
    ):
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
        if branch is not None and any(c in branch for c in "*?["):
            from fnmatch import fnmatchcase

            hit = [p for p in state.protected if fnmatchcase(p, branch)]
            if hit:
                j.note(DENY, f"its wildcard refspec force-pushes the protected branch {hit[0]}")
            continue
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
    if sub == "checkout":
        _moves_protected(j, state, read, "B", args)
    paths = [args[i] for i in read.positionals]
    broad = any(p is None or p in (".", "./", ":/", ":/*", "*", ":(top)") for p in paths)
    if worktree and (broad or forced):
        state.would_lose_work(f"git {sub} {'-f' if forced else '.'}")
    elif worktree:
        # Named files: `checkout [REV] -- FILE` (after `--`), `restore FILE`.
        if sub == "checkout":
            cut = args.index("--") if "--" in args else None
            named = [args[i] for i in read.positionals if cut is not None and i > cut]
        else:
            named = paths
        if named:
            state.would_lose_work(f"git {sub} of {', '.join(p or '?' for p in named[:3])}", named)


def _branch(j: Judge, state: GitState, args: list[str | None]) -> None:
    read = options.read(
        args, "", {"delete": False, "force": False, "remotes": False, "move": False, "copy": False}
    )
    names = [args[i] for i in read.positionals]
    moving = read.has("M", "C") or read.has("m", "move", "c", "copy") and read.has("f", "force")
    if (moving and names[-1:] and names[-1] in state.protected) or (
        read.has("f", "force")
        and not read.has("d", "D", "delete", "m", "M", "move", "c", "C")
        and names[:1]
        and names[0] in state.protected
    ):
        j.note(DENY, f"git branch overwrites the protected branch {names[-1 if moving else 0]}")
        return
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
