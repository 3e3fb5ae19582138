"""More of the destructive-op gate's rules: programs that remove what they archive or sync,
programs that write a file named by an option, schedulers and terminals that run a command
later, and database shells (the registry is `gates.rules.RULES`).

Each rule has the signature of `gates.rules`: the judge, the program's base name, its words
and its standard input.
"""

from __future__ import annotations

import re

from gates import options
from gates.shelljudge import Judge
from gates.shellnodes import Item, Stdin
from gates.shellpaths import ASK, DENY, removal, write_target
from gates.shellwords import TILDE, UNKNOWN

CRON_FIELDS = 5  # minute hour day month weekday, before the command
NOSQL_DESTRUCTIVE = re.compile(
    r"dropDatabase|\.drop\s*\(|deleteMany\s*\(\s*\{\s*\}\s*\)|\bFLUSHALL\b|\bFLUSHDB\b", re.I
)


def _words(items: list[Item]) -> list[str | None]:
    return [item.literal for item in items]


def _home_after_equals(value: str) -> str:
    """`of=~/x`: bash expands a tilde after `=` in a word shaped like an assignment."""
    return TILDE + value[1:] if value.startswith("~") else value


def removes_what_it_stores(
    j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int
) -> None:
    """`rsync --delete*` (the destination's extra files), `tar --remove-files`, `zip -m`,
    `7z -sdel` (the files stored): judged as removals."""
    words = _words(items[1:])
    given = [w for w in words if w is not None]
    if program == "rsync":
        if not any(w.startswith(("--del", "--remove-source")) for w in given):
            return
        paths = [i for i, w in zip(items[1:], words, strict=True) if not (w or "x").startswith("-")]
        removed = paths[-1:] if any(w.startswith("--del") for w in given) else []
        if any(w.startswith("--remove-source") for w in given):
            removed += paths[:-1]
    elif program in ("tar", "bsdtar", "gtar"):
        if not any(w.startswith("--rem") for w in given):
            return
        removed = _tar_operands(items)
    elif program == "zip":
        moves = any(
            w == "--move" or (w.startswith("-") and not w.startswith("--") and "m" in w)
            for w in given
        )
        if not moves:
            return
        removed = [i for i in items[1:] if not (i.literal or "x").startswith("-")][1:]
    else:  # 7z, 7za, 7zr
        if "-sdel" not in given:
            return
        removed = [i for i in items[1:] if not (i.literal or "x").startswith("-")][2:]
    for item in removed:
        level, reason = removal(item.word, j.cwd, j.tree)
        j.note(level, reason.replace("it removes", f"{program} removes"))


def _tar_operands(items: list[Item]) -> list[Item]:
    """The files a `tar` command names (not the archive of `-f`, not the folder of `-C`)."""
    operands = []
    skip = False
    for at, item in enumerate(items[1:]):
        word = item.literal
        if skip:
            skip = False
            continue
        if word in ("-f", "--file", "-C", "--directory", "-T", "--files-from", "-X"):
            skip = True
        elif word is not None and word.startswith("-"):
            cluster = word[1:] if not word.startswith("--") else ""
            skip = cluster.endswith(("f", "C", "T", "X"))
        elif at == 0 and word is not None and re.fullmatch(r"[A-Za-z]+", word):
            skip = word.endswith("f")  # old style: `tar czf ARCHIVE FILES`
        else:
            operands.append(item)
    return operands


# program -> (short options naming the file written, long options naming it)
OUTPUT_OPTIONS = {
    "wget": ("O", ("output-document",)),
    "curl": ("o", ("output",)),
    "sort": ("o", ("output",)),
    "shuf": ("o", ("output",)),
    "ssh-keygen": ("f", ()),
    "tar": ("C", ("directory",)),
    "unzip": ("d", ()),
}


def writes_an_option(
    j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int
) -> None:
    """A program writing the file (or into the folder) one of its options names."""
    if program in ("tar", "bsdtar", "gtar"):
        removes_what_it_stores(j, "tar", items, stdin, depth)
    shorts, longs = OUTPUT_OPTIONS["tar" if program in ("bsdtar", "gtar") else program]
    into = program in ("tar", "bsdtar", "gtar", "unzip")
    words = _words(items[1:])
    for at, word in enumerate(words):
        if word is None or not word.startswith("-"):
            continue
        value = None
        if word.startswith("--"):
            name, eq, given = word[2:].partition("=")
            if any(long.startswith(name) for long in longs) and name:
                value = given if eq else (items[2 + at].word if at + 1 < len(words) else None)
        elif word[1:2] in shorts:
            value = word[2:] or (items[2 + at].word if at + 1 < len(words) else None)
        if value:
            target = _home_after_equals(value) + ("/x" if into else "")
            j.note(*write_target(target, j.cwd))


def writes_its_files(
    j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int
) -> None:
    """Programs that replace or rewrite each file they are given (`gzip`, `patch`, `sponge`,
    `perl -i`, `ex`)."""
    words = _words(items[1:])
    for item, word in zip(items[1:], words, strict=True):
        if word is not None and word.startswith(("-", "+")):
            continue
        j.note(*write_target(item.word, j.cwd))


def runs_later(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    """`at`/`batch` (a script on standard input), `crontab` (a table on standard input),
    `tmux new`/`send-keys`, `screen` (a command in their arguments)."""
    words = _words(items[1:])
    if program in ("at", "batch"):
        if any(w in ("-l", "-r", "-d", "-c") for w in words):
            return
        if any(w == "-f" for w in words):
            j.note(ASK, f"{program} runs a script file later, which the gate cannot read")
            return
        _stdin_script(j, program, stdin, depth)
    elif program == "crontab":
        if any(w in ("-l", "-r", "-e") for w in words) or any(
            w and not w.startswith("-") for w in words
        ):
            return  # a listing, a removal, an editor, or a file: nothing read here
        if stdin is None or stdin.text is None:
            if stdin is not None:
                j.note(ASK, "crontab installs a table from input the gate cannot see")
            return
        for line in stdin.text.splitlines():
            fields = line.split(None, CRON_FIELDS)
            if line.strip().startswith("#") or len(fields) <= CRON_FIELDS:
                continue
            j.nested(fields[CRON_FIELDS], depth)
    elif program == "tmux":
        verbs = ("new", "new-session", "new-window", "neww", "send-keys", "send", "split-window")
        verb = next((w for w in words if w in verbs), None)
        if verb is None:
            return
        after = words[words.index(verb) + 1 :]
        rest = items[1 + words.index(verb) + 1 :]
        read = options.read(after, "cnstFxyeTlp", {}, stop_at_first_positional=True)
        text = [rest[i].script() for i in read.positionals if rest[i].literal != "Enter"]
        if text:
            j.nested(" ".join(text), depth)
    elif program == "screen":
        rest = [i for i in items[1:] if not (i.literal or "x").startswith("-")]
        if rest:
            j.argv(rest, None, depth)


def _stdin_script(j: Judge, program: str, stdin: Stdin | None, depth: int) -> None:
    if stdin is None:
        return
    if stdin.text is None:
        j.note(ASK, f"{program} runs what it reads from input the gate cannot see")
    else:
        j.nested(stdin.text, depth)


def source(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    """`source FILE` / `. FILE`: a file is out of sight, but a substitution or standard input
    (`source <(curl ...)`, `. /dev/stdin <<< ...`) is what it runs."""
    if len(items) < 2:
        return
    target = items[1]
    if substituted(target):
        j.note(ASK, f"{program} runs a script made by a substitution the gate cannot read")
    elif target.literal in ("/dev/stdin", "-", "/proc/self/fd/0", "/dev/fd/0"):
        _stdin_script(j, program, stdin, depth)


def substituted(item: Item) -> bool:
    """Whether the word is a process or command substitution (`<(curl ...)`)."""
    node = item.node
    return node is not None and node.type in ("process_substitution", "command_substitution")


def nosql(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    """`redis-cli FLUSHALL`, `mongo --eval 'db.dropDatabase()'` and the like: deny."""
    text = " ".join(i.word.replace(UNKNOWN, " ") for i in items[1:])
    if stdin is not None and stdin.text:
        text += " " + stdin.text
    if NOSQL_DESTRUCTIVE.search(text):
        j.note(DENY, f"{program} is told to drop or flush data")
    elif stdin is not None and stdin.text is None:
        j.note(ASK, f"{program} runs what it reads from input the gate cannot see")


def rimraf(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    """`rimraf PATH` (npm's `rm -rf`): a recursive removal of each path."""
    for item in items[1:]:
        if not (item.literal or "x").startswith("-"):
            # Node's `path.resolve('')` is the current directory: read as `.`.
            j.note(*removal(item.word or ".", j.cwd, j.tree))


def github(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    """`gh repo delete` (a repository and its whole history, on GitHub): deny, as `dropdb`;
    `gh api -X DELETE ...` (whatever the path names, gone there): ask."""
    words = [item.literal for item in items[1:]]
    if words[:2] == ["repo", "delete"]:
        j.note(DENY, "gh repo delete deletes a GitHub repository and its history")
    elif words[:1] == ["api"]:
        read = options.read(words[1:], GH_API_SHORT_VALUES, GH_API_LONGS)
        methods = [*read.values.get("X", []), *read.values.get("method", [])]
        if any(method.upper() == "DELETE" or not method for method in methods):
            j.note(ASK, "gh api sends a DELETE (or a method unknown here) to GitHub")


# `gh api`'s options that take a value, so that a value is never read as a method.
GH_API_SHORT_VALUES = "XHfFpqt"
GH_API_LONGS = {
    "method": True,
    "header": True,
    "raw-field": True,
    "field": True,
    "preview": True,
    "jq": True,
    "template": True,
    "input": True,
    "cache": True,
    "hostname": True,
}


RULES_MORE = {
    "rsync": removes_what_it_stores,
    "tar": writes_an_option,
    "bsdtar": writes_an_option,
    "gtar": writes_an_option,
    "zip": removes_what_it_stores,
    "7z": removes_what_it_stores,
    "7za": removes_what_it_stores,
    "7zr": removes_what_it_stores,
    "wget": writes_an_option,
    "curl": writes_an_option,
    "sort": writes_an_option,
    "shuf": writes_an_option,
    "ssh-keygen": writes_an_option,
    "unzip": writes_an_option,
    "gzip": writes_its_files,
    "bzip2": writes_its_files,
    "xz": writes_its_files,
    "zstd": writes_its_files,
    "patch": writes_its_files,
    "sponge": writes_its_files,
    "ex": writes_its_files,
    "at": runs_later,
    "batch": runs_later,
    "crontab": runs_later,
    "tmux": runs_later,
    "screen": runs_later,
    "source": source,
    ".": source,
    "redis-cli": nosql,
    "mongo": nosql,
    "mongosh": nosql,
    "rimraf": rimraf,
    "gh": github,
}
