"""The `destructive-op` gate's analysis: which shell commands an agent must not run unasked.

The command is split with `shlex` into simple commands (at `;`, `&&`, `||`, `|`, `&` and
parentheses); each is unwrapped (`sudo`, `env`, `nice`, `nohup`, `time`, `command`, `exec`,
leading `NAME=value` assignments; `bash -c`/`sh -c`/`eval` strings are split in turn) and its
real program and arguments judged by the rules below. Quoted text is an argument, never a
command: `echo "rm -rf /"` is harmless.

Rules (README, "Session gates"):
- `rm -r` (`-rf`, `-R`, `--recursive`) of `/`, `~`, `$HOME`, a `.git` directory, the work tree
  itself, or any path outside the work tree (the hook's `cwd`);
- `git push` with `--force`/`-f`/`--force-with-lease`/`--mirror` or a `+refspec`, to a branch
  of `gates.destructive.protected_branches` (default main, master; with no refspec, the
  current branch; `--all` and `--mirror` count as all branches);
- `git reset --hard` while the work tree has uncommitted changes to tracked files;
- `git clean` with `-f` and `-x`/`-X` (ignored files too: `-fdx`);
- `DROP TABLE`/`DROP DATABASE`/`DROP SCHEMA` given to an SQL client, and `dropdb`;
- `mkfs` (any `mkfs.*`), `dd` with `of=/dev/...` (but /dev/null, /dev/stdout, /dev/stderr).

`gates.destructive.patterns` adds rules and `gates.destructive.allow` exempts commands, both as
lists of command patterns: a pattern's first word is the program and its other words must each
match some argument, in any order (`fnmatch` wildcards), e.g. `git push --mirror` or
`rm -r* /srv/cache/*`. Judging needs git only for `git reset --hard` and for a force push
without a refspec.
"""

from __future__ import annotations

import os
import shlex

TYPE_CHECKING = False  # importing typing costs a hook ~7 ms
if TYPE_CHECKING:
    from typing import Any

OPERATORS = frozenset((";", "&&", "||", "|", "&", "|&", ";;", "(", ")", "\n"))
WRAPPERS = frozenset(("sudo", "doas", "env", "nice", "nohup", "time", "command", "exec"))
# Wrapper options that take a value (`sudo -u root`, `env -u NAME`, `nice -n 5`).
WRAPPER_VALUE_OPTIONS = frozenset(("-u", "-g", "-C", "-D", "-n", "-h", "-p", "-r", "-t", "-U"))
SHELLS = frozenset(("bash", "sh", "zsh", "dash", "ksh"))
SQL_CLIENTS = frozenset(
    ("psql", "mysql", "mariadb", "sqlite3", "sqlcmd", "duckdb", "clickhouse-client", "cockroach")
)
DROP_PATTERN = r"\bdrop\s+(table|database|schema)\b"  # compiled only for an SQL client
HARMLESS_DEVICES = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/zero")
DEFAULT_PROTECTED = ("main", "master")
MAX_DEPTH = 4  # `bash -c "bash -c ..."` nesting we follow


def simple_commands(command: str, depth: int = 0) -> list[list[str]]:
    """The simple commands of a shell command line, each as its unwrapped argv."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = ""  # a `#` inside a word is not a comment start for our purpose
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: judge the words as they stand
        tokens = command.split()
    commands: list[list[str]] = []
    current: list[str] = []
    for token in [*tokens, ";"]:
        if token in OPERATORS:
            if current:
                commands += _unwrap(current, depth)
            current = []
        else:
            current.append(token)
    return commands


def _unwrap(argv: list[str], depth: int) -> list[list[str]]:
    while argv:
        program = os.path.basename(argv[0])
        if "=" in argv[0] and not argv[0].startswith("="):  # NAME=value before the program
            argv = argv[1:]
        elif program in WRAPPERS:
            argv = argv[1:]
            while argv and (argv[0].startswith("-") or "=" in argv[0]):
                takes_value = argv[0] in WRAPPER_VALUE_OPTIONS and program != "env"
                argv = argv[2:] if takes_value or argv[0] == "-u" else argv[1:]
        elif program in SHELLS and "-c" in argv[1:] and depth < MAX_DEPTH:
            at = argv.index("-c")
            inner = argv[at + 1] if at + 1 < len(argv) else ""
            return simple_commands(inner, depth + 1)
        elif program == "eval" and depth < MAX_DEPTH:
            return simple_commands(" ".join(argv[1:]), depth + 1)
        else:
            return [argv]
    return []


def matches(pattern: str, argv: list[str]) -> bool:
    """Whether `argv` fits a command pattern (first word the program, the others each some
    argument, in any order)."""
    from fnmatch import fnmatchcase  # lazy: only configured patterns need it

    try:
        words = shlex.split(pattern)
    except ValueError:
        words = pattern.split()
    if not words or not argv or not fnmatchcase(os.path.basename(argv[0]), words[0]):
        return False
    return all(any(fnmatchcase(arg, word) for arg in argv[1:]) for word in words[1:])


def destructive_reason(
    command: str, cwd: str, settings: dict[str, Any] | None = None
) -> str | None:
    """Why `command`, run in `cwd`, is refused (None when it is not): the first destructive
    simple command found, with what to do instead."""
    settings = settings or {}
    allow = [p for p in settings.get("allow") or () if isinstance(p, str)]
    extra = [p for p in settings.get("patterns") or () if isinstance(p, str)]
    protected = settings.get("protected_branches") or DEFAULT_PROTECTED
    for argv in simple_commands(command):
        if any(matches(pattern, argv) for pattern in allow):
            continue
        reason = _judge(argv, cwd, protected)
        if reason is None:
            reason = next(
                (f"it matches gates.destructive.patterns entry {p!r}"
                 for p in extra if matches(p, argv)),
                None,
            )  # fmt: skip
        if reason is not None:
            shown = " ".join(argv)
            shown = shown if len(shown) <= 120 else shown[:117] + "..."
            return (
                f"gc destructive-op refused `{shown}`: {reason}. Do it another way, or ask the "
                "human to run it (or to add it to gates.destructive.allow)."
            )
    return None


def _judge(argv: list[str], cwd: str, protected: Any) -> str | None:
    program = os.path.basename(argv[0])
    args = argv[1:]
    if program == "rm":
        return _rm(args, cwd)
    if program == "git":
        return _git(args, cwd, protected)
    if program.startswith("mkfs"):
        return "it makes a file system, erasing the device"
    if program == "dd":
        targets = [a[3:] for a in args if a.startswith("of=/dev/")]
        if any(t not in HARMLESS_DEVICES for t in targets):
            return "it writes straight to a device"
    if program == "dropdb":
        return "it drops a database"
    if program in SQL_CLIENTS:
        import re

        if any(re.search(DROP_PATTERN, a, re.IGNORECASE) for a in args):
            return "it drops a table or database"
    return None


def _rm(args: list[str], cwd: str) -> str | None:
    recursive, targets, options_done = False, [], False
    for arg in args:
        if options_done or not arg.startswith("-") or arg == "-":
            targets.append(arg)
        elif arg == "--":
            options_done = True
        elif arg == "--recursive" or (not arg.startswith("--") and set(arg[1:]) & {"r", "R"}):
            recursive = True
    if not recursive:
        return None
    home = os.path.expanduser("~")
    tree = os.path.realpath(cwd)
    for target in targets:
        if target.startswith(("$HOME", "${HOME}")):
            target = home + target.split("}", 1)[-1] if "{" in target else home + target[5:]
        elif "$" in target:
            continue  # a variable we cannot know: judged by the patterns only
        path = os.path.realpath(os.path.join(tree, os.path.expanduser(target)))
        parts = path.rstrip("/").split("/")
        if path in ("/", home) or target in ("~", "~/", "/*"):
            return f"it removes {target!r} recursively"
        if ".git" in parts or target.rstrip("/").endswith(".git"):
            return "it removes a .git directory (the repository's history)"
        if path == tree:
            return "it removes the whole work tree"
        if not path.startswith(tree + "/"):
            return f"it removes {target!r}, outside the work tree {tree}"
    return None


def _git(args: list[str], cwd: str, protected: Any) -> str | None:
    while args and args[0].startswith("-"):  # global options: `-C dir`, `-c key=value`
        args = args[2:] if args[0] in ("-C", "-c") else args[1:]
    if not args:
        return None
    sub, rest = args[0], args[1:]
    flags = [a for a in rest if a.startswith("-")]
    short = "".join(a[1:] for a in flags if not a.startswith("--"))
    if sub == "push":
        refspecs = [a for a in rest if not a.startswith("-")][1:]  # after the remote
        force = (
            "f" in short
            or any(a.split("=")[0] in ("--force", "--force-with-lease", "--mirror") for a in flags)
            or any(r.startswith("+") for r in refspecs)
        )
        if not force:
            return None
        if "--all" in flags or "--mirror" in flags:
            return "it force-pushes every branch, protected ones included"
        names = [r.lstrip("+").split(":")[-1].removeprefix("refs/heads/") for r in refspecs]
        if not names:
            names = [_git_out(["symbolic-ref", "--short", "HEAD"], cwd).strip()]
        hit = [n for n in names if n in protected]
        return f"it force-pushes the protected branch {hit[0]}" if hit else None
    if sub == "reset" and "--hard" in flags:
        changed = _git_out(["status", "--porcelain", "--untracked-files=no"], cwd)
        if changed.strip():
            count = len(changed.splitlines())
            return f"it throws away {count} uncommitted change(s); commit or stash them first"
    if sub == "clean" and "f" in short and ("x" in short or "X" in short):
        return "it deletes untracked and ignored files (-fdx), which git cannot bring back"
    return None


def _git_out(args: list[str], cwd: str) -> str:
    """Output of a quick git command in `cwd` ('' when it fails: nothing to judge by)."""
    import subprocess  # lazy: only a reset --hard or a bare force push needs git

    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.decode(errors="replace") if done.returncode == 0 else ""
