"""The destructive-op gate's rules, program by program (the shell reading is
`gates.shelljudge`; where paths land, `gates.shellpaths`; git, `gates.rules_git`; `find`
and `fd`, `gates.rules_find`; the wrappers, `gates.rules_wrappers`; shells, interpreters
and SQL clients, `gates.rules_code`).

Each rule gets the judge, the program's base name, its words and its standard input, and
notes a verdict: deny (`DENY`) for what is known destructive, ask (`ASK`) for what it cannot
judge, nothing otherwise. Wrappers that run their arguments (`sudo`, `env`, `timeout`,
`xargs`, `ssh HOST`, ...) hand the command they run back to the judge.
"""

from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase

from gates import options
from gates.rules_code import RULES_CODE, interpreter
from gates.rules_find import RULES_FIND
from gates.rules_more import RULES_MORE, removes_what_it_stores
from gates.rules_wrappers import UNKNOWN_TARGETS, WRAPPERS, judge_wrapper, literal_path
from gates.shelljudge import Judge
from gates.shellnodes import Item, Stdin
from gates.shellpaths import ASK, DENY, guarded, may_be, pattern, removal, write_target
from gates.shellwords import SENTINELS, TILDE, UNKNOWN, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

DEVICE_TOOLS = frozenset(
    (
        "mkfs",
        "mke2fs",
        "mkswap",
        "wipefs",
        "sgdisk",
        "gdisk",
        "shred",
        "fdisk",
        "sfdisk",
        "cfdisk",
        "parted",
        "blkdiscard",
        "mkdosfs",
        "cryptsetup",
        "dropdb",
        "zpool",
        "lvremove",
        "vgremove",
        "pvremove",
    )
)
LISTING = ("-l", "--list", "print", "-V", "--version", "-h", "--help", "status")
# Programs that never run their arguments: an argument such as `rm` is text to them.
INERT = frozenset(
    (
        "echo",
        "printf",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "ack",
        "man",
        "which",
        "type",
        "whatis",
        "apropos",
        "help",
        "info",
        "cat",
        "less",
        "more",
        "head",
        "tail",
        "wc",
        "uniq",
        "cut",
        "tr",
        "jq",
        "yq",
        "sed",
        "git",
        "gc",
        "whereis",
        "command",
        "hash",
        "read",
        "test",
        "[",
        "true",
        "false",
        "apt",
        "apt-get",
        "apt-cache",
        "brew",
        "pip",
        "pip3",
        "npm",
        "yarn",
        "pnpm",
        "cargo",
        "go",
        "dnf",
        "yum",
        "pacman",
        "tldr",
        "file",
        "stat",
        "ls",
        "diff",
        "touch",
        "mkdir",
        "cp",
        "mv",
        "ln",
        "basename",
        "dirname",
        "realpath",
        "pwd",
        "whoami",
        "date",
        "uname",
        "du",
        "df",
        "id",
        "hostname",
        "tree",
        "ps",
    )
)
GC_PROTECTED = (
    "gates",
    "gates.*",
    "mail.provider",
    "agents.*.nudge",
    "store.shared",
    "trust",
    "trust.*",
)


def judge(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    """Judge one command whose program's base name is `program`."""
    rule = RULES.get(program)
    if rule is None and program.startswith("mkfs"):
        rule = _devices
    if rule is None and re.fullmatch(r"python[0-9.]*|pypy[0-9.]*", program):
        rule = interpreter
    if rule is not None:
        rule(j, program, items, stdin, depth)
    elif program in WRAPPERS:
        judge_wrapper(j, program, items, stdin, depth)
    elif program not in INERT:
        _runs_something(j, program, items, stdin, depth)


def _words(items: list[Item]) -> list[str | None]:
    return [item.literal for item in items]


def _runs_something(
    j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int
) -> None:
    """An unknown program whose arguments put a judged program in command position: ask
    when that command would be stopped."""
    for at in range(1, len(items)):
        name = items[at].literal
        if name is None:
            continue
        base = name.rsplit("/", 1)[-1]
        if base in RULES or base in WRAPPERS or base.startswith("mkfs"):
            if j.probe(items[at:], None, depth) > 0:
                j.note(ASK, f"{program} runs `{' '.join(shown(i.word) for i in items[at:])}`")
            return


# -- removals -------------------------------------------------------------------------------


def _rm(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    read = options.read(
        _words(items[1:]),
        "",
        {
            "recursive": False,
            "force": False,
            "interactive": False,
            "one-file-system": False,
            "no-preserve-root": False,
            "preserve-root": False,
            "dir": False,
            "verbose": False,
        },
    )
    recursive = read.has("r", "R", "recursive")
    targets = [items[1 + i] for i in read.positionals]
    if not recursive and program == "rm" and _may_be_flags(items[1:]):
        # `F=-rf; rm $F /`, `rm -r${X}f /`: judged as recursive, at most "ask".
        for target in targets:
            if target.literal is not None and target.literal.startswith("-"):
                continue
            level, reason = removal(target.word, j.cwd, j.tree)
            if level and UNKNOWN not in target.word:
                j.note(ASK, f"its options are held in a variable; recursive, {reason}")
    if not targets:
        if recursive and program == "rm" and UNKNOWN_TARGETS in (i.word for i in items):
            j.note(ASK, "it removes recursively what comes in on its input")
        return
    for target in targets:
        if target.word == UNKNOWN_TARGETS:
            if recursive:
                j.note(ASK, "it removes recursively what comes in on its input")
            continue
        if recursive:
            j.note(*removal(target.word, j.cwd, j.tree))
        else:
            j.note(*write_target(target.word, j.cwd))


def _may_be_flags(items: list[Item]) -> bool:
    """Whether a word whose value is unknown could be options (`$F`, `-r${X}f`, `-$X`)."""
    return any(
        item.literal is None and item.word != UNKNOWN_TARGETS and item.word[:1] in ("-", UNKNOWN)
        for item in items
    )


def _mv(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    read = options.read(_words(items[1:]), "tS", {"target-directory": True, "suffix": True})
    paths = [items[1 + i] for i in read.positionals]
    target = read.values.get("t") or read.values.get("target-directory")
    if target:
        j.note(*write_target(target[-1] + "/x", j.cwd))
    elif paths:
        j.note(*write_target(paths[-1].word, j.cwd))
        if len(paths) > 1:  # into a folder of that name, when it is one
            j.note(*write_target(paths[-1].word.rstrip("/") + "/x", j.cwd))
        paths = paths[:-1]
    if program == "mv":
        for source in paths:
            level, reason = removal(source.word, j.cwd, j.tree)
            if level == DENY:
                j.note(DENY, reason.replace("it removes", "it moves away"))


def _rsync(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    _mv(j, program, items, stdin, depth)
    removes_what_it_stores(j, program, items, stdin, depth)


def _writes_all(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    """`tee`, `touch`, `truncate`, `sed -i`: every file argument is written."""
    words = _words(items[1:])
    if program == "sed" and not any(
        w and (w.startswith("-i") or w.startswith("--in-place")) for w in words
    ):
        return
    read = options.read(
        words,
        "serofdt" if program != "sed" else "ef",
        {"size": True, "reference": True, "expression": True, "file": True, "date": True},
    )
    for index in read.positionals[1 if program == "sed" and not read.has("e") else 0 :]:
        j.note(*write_target(items[1 + index].word, j.cwd))


def _dd(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    for item in items[1:]:
        if item.word.startswith("of="):
            target = item.word[3:]  # bash expands `~` after `=` in such a word
            j.note(*write_target(TILDE + target[1:] if target.startswith("~") else target, j.cwd))


def _chmod(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    read = options.read(_words(items[1:]), "", {"recursive": False, "reference": True})
    skip = 0 if read.has("reference") else 1  # the mode or the owner
    mode = items[1 + read.positionals[0]].literal if read.positionals and skip else None
    for index in read.positionals[1:]:
        found, _why = pattern(items[1 + index].word, j.cwd)
        if found and re.search(r"/\.claude/settings[^/]*\.json$", found):
            j.note(DENY, f"{program} changes Claude Code's settings, where the gates are hooked")
    for index in read.positionals[skip:] if not read.has("R", "recursive") else ():
        # `chmod 000 .git/HEAD`, `chown root .beads/x`: git or the store can no longer read
        # or write it. A mode that leaves its owner reading and writing it (and going into
        # it, for a folder) takes nothing away (`chmod +x .git/hooks/pre-commit`); chgrp
        # leaves the owner as it is.
        word = items[1 + index].word
        found, _why = pattern(word, j.cwd)
        if found is None or program == "chgrp" or not _in_repository_or_store(found):
            continue
        if program == "chmod" and mode is None:  # held in a variable, or `--reference`
            j.note(ASK, f"chmod gives {shown(word)!r}, which git or the store keeps, a mode "
                   "not known here")  # fmt: skip
        elif program != "chmod" or not _keeps_owner_access(mode or "", _folder(found)):
            j.note(DENY, f"{program} changes {shown(word)!r}, which git or the store keeps")
    if not read.has("R", "recursive"):
        return
    for index in read.positionals[skip:]:
        word = items[1 + index].word
        path, _why = pattern(word, j.cwd)
        if path and (path == j.tree or path.startswith(j.tree + "/")) and not guarded(path):
            continue  # modes inside the work tree: its own business (.git's are git's)
        level, reason = removal(word, j.cwd, j.tree)
        if level:
            j.note(DENY, reason.replace("it removes", f"{program} -R changes"))


def _in_repository_or_store(path: str) -> bool:
    """Whether a path (a pattern) can be a repository's `.git`, the store's `.beads` or
    something in them."""
    return any(may_be(n, ".git") or may_be(n, ".beads") for n in path.split("/") if n)


def _folder(path: str) -> bool:
    """Whether a path (a pattern) is, or may be, a folder: one on disk, or one not known."""
    return any(c in path for c in SENTINELS) or os.path.isdir(path)


def _keeps_owner_access(mode: str, folder: bool) -> bool:
    """Whether `chmod MODE` surely leaves the owner reading and writing a file (and going
    into a folder): `644`, `+x`, `go-w`, `u=rwx`; not `000`, `a-r`, `u=g`."""
    needed = "rwx" if folder else "rw"
    if re.fullmatch(r"[0-7]{1,4}", mode):
        owner = int(mode[-3]) if len(mode) >= 3 else 0
        wanted = 7 if folder else 6
        return owner & wanted == wanted
    for clause in mode.split(","):
        found = re.fullmatch(r"([ugoa]*)((?:[-+=][rwxXst]*)+)", clause)
        if found is None:
            return False  # copied permissions (`u=g`), or a mode not read: it may
        if found[1] and not set(found[1]) & set("ua"):
            continue  # group and others alone
        for op, perms in re.findall(r"([-+=])([rwxXst]*)", found[2]):
            named = set(perms.replace("X", "x"))  # `X`: execute, on a folder
            if op == "-" and set(needed) & named or op == "=" and not set(needed) <= named:
                return False
    return True


def _devices(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    if program in ("fdisk", "sfdisk", "parted") and any(i.word in LISTING for i in items[1:]):
        return
    if program == "cryptsetup" and not any(i.word in ("luksFormat", "erase") for i in items):
        return
    j.note(DENY, f"{program} destroys data on a disk or file system")


# -- the working directory, self-protection, git ---------------------------------------------


def _cd(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    args = [i for i in items[1:] if not (i.literal or "x").startswith("-") or i.literal == "-"]
    if not args:
        j.cwd = os.path.expanduser("~")
        return
    if args[0].literal == "-":  # the directory before: not known from the text
        j.cwd = None
        return
    path, _why = pattern(args[0].word, j.cwd)
    j.cwd = path if path is not None and literal_path(path) else None


def _gc(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    """Self-protection: an agent does not approve settings, change the gates or unhook."""
    words: list[str] = []
    skip = False
    for word in _words(items[1:]):
        if skip:
            skip = False
            continue
        if word in ("--beads-dir", "--agent"):
            skip = True
        elif (
            word is None
            or not word.startswith("--beads-dir=")
            and not word.startswith("--agent=")
            and word not in ("--json", "--no-pager", "--debug")
        ):
            words.append(word if word is not None else UNKNOWN)
    positional = [w for w in words if not w.startswith("-")]
    if positional[:1] == ["trust"]:
        j.note(DENY, "an agent does not approve settings (gc trust): a person does")
    elif positional[:1] == ["config"] and len(positional) > 2 and positional[1] in ("set", "unset"):
        key = positional[2]
        if key == UNKNOWN or any(_key_covers(key, p) for p in GC_PROTECTED):
            j.note(DENY, f"an agent does not change {key!r}: it guards the agents themselves")
    elif positional[:2] == ["hook", "install"] and any(w.startswith("--rem") for w in words):
        j.note(DENY, "an agent does not remove the hooks that run its gates")


def _key_covers(key: str, protected: str) -> bool:
    key = key.lower()  # `GATES.disabled` names the same setting
    parts = protected.split(".")
    return (
        any(fnmatchcase(key, ".".join(parts[:n])) for n in range(1, len(parts) + 1))
        or (fnmatchcase(key, protected + ".*") if not protected.endswith("*") else False)
        or fnmatchcase(key, protected)
    )


def _git(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    from gates.rules_git import judge_git

    judge_git(j, items, depth)


RULES: dict[str, Callable] = {
    "rm": _rm,
    "unlink": _rm,
    **RULES_FIND,
    "mv": _mv,
    "cp": _mv,
    "ln": _mv,
    "install": _mv,
    "rsync": _mv,
    "tee": _writes_all,
    "touch": _writes_all,
    "truncate": _writes_all,
    "sed": _writes_all,
    "dd": _dd,
    "chmod": _chmod,
    "chown": _chmod,
    "chgrp": _chmod,
    "cd": _cd,
    "pushd": _cd,
    "git": _git,
    "gc": _gc,
    **{name: _devices for name in DEVICE_TOOLS},
    **RULES_CODE,  # `dropdb` is the SQL clients' rule
}
RULES.update({name: rule for name, rule in RULES_MORE.items() if name not in RULES})
RULES["rsync"] = _rsync
