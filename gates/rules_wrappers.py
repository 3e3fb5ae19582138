"""The destructive-op gate's wrappers: programs that run the command they are given
(`sudo`, `env`, `timeout`, `nohup`, `su -c`, `sg GROUP -c`, `xargs`, `parallel`, `watch`,
`ssh HOST CMD`, `docker exec`, ...).

`judge_wrapper` reads a wrapper's own options (`WRAPPERS` says which take a value and how
many words come before the command) and hands the command it runs back to the judge, with
the directory it runs in (`CHDIR_OPTIONS`) and, for `xargs` and `parallel`, the arguments
they add (`UNKNOWN_TARGETS`); `find ... | xargs CMD` is judged besides as `find ... -exec
CMD {} +` (`fd ... | xargs CMD` as `fd ... -X CMD`). The other programs' rules are
`gates.rules`.
"""

from __future__ import annotations

from gates import options
from gates.fdreach import VALUES, exec_start
from gates.findexpr import ONE_VALUE, PRINTS_INTO, RUNS, STDOUT_FILES, options_end
from gates.parallelargs import (
    PARALLEL_NUMBERS,
    PARALLEL_STRINGS,
    SOURCES,
    canonical,
    commands,
    numbered,
)
from gates.shelljudge import Judge
from gates.shellnodes import UNKNOWN_TARGETS, Item, Stdin
from gates.shellpaths import pattern

# The `-exec` of `find ... -exec CMD ;` made of `find ... | parallel CMD`: `gates.rules_find`
# puts in parallel's replacement strings, not `{}` alone (an object, so no word written in a
# command is taken for it).
PARALLEL_EXEC = Item("-exec")


def literal_path(path: str) -> bool:
    """Whether `path` is one a directory change can be followed to (no control characters)."""
    return not any(c < " " for c in path)


def _words(items: list[Item]) -> list[str | None]:
    return [item.literal for item in items]


def judge_wrapper(
    j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int
) -> None:
    """Judge a wrapper's command (`program` is a key of `WRAPPERS`): the command it runs,
    its `-c` string, or what it runs elsewhere (`ssh HOST CMD`, `docker exec`)."""
    if program in ("sg", "newgrp"):
        _new_group(j, program, items, stdin, depth)
        return
    spec = WRAPPERS[program]
    words = _words(items[1:])
    short_values, longs, skip = spec
    read = options.read(words, short_values, longs, stop_at_first_positional=program != "su")
    for command_flag in ("c", "command", "S", "split-string"):
        if command_flag in read.values and program in ("su", "script", "flock", "env"):
            for text in read.values[command_flag]:
                j.nested(text if program != "env" else text, depth)
            if program != "env":
                return
    rest_at = [1 + i for i in read.positionals]
    if program in ("sudo", "doas") and read.has("e", "edit"):
        return
    rest = items[rest_at[0] :] if rest_at else []
    if not rest and (program in ("sudo", "doas") and read.has("s", "shell", "i", "login")):
        j.fed(program, stdin, depth)
        return
    while rest and program == "env" and "=" in (rest[0].literal or "=") and rest[0].literal:
        rest = rest[1:]
    rest = rest[skip:]
    if program in ("ionice", "taskset") and read.has("p", "pid"):
        return
    if program in ("command", "type") and read.has("v", "V"):
        return
    if program == "watch" and not read.has("x", "exec"):
        if rest:
            j.nested(" ".join(i.script() for i in rest), depth)
        return
    if program in ("ssh", "docker", "podman", "kubectl"):
        _remote(j, program, rest, depth)
        return
    own = words[: rest_at[0] - 1] if rest_at else words  # the wrapper's own options
    if program == "xargs":
        given = _arg_file(items, own) if read.has("a", "arg-file") else stdin
        _runs_on_found(j, _xargs_marker(read, own), rest, given, depth)
        rest = _xargs_args(read, rest, own)
    runs = [rest]
    if program == "parallel":
        marker = (read.values.get("I") or ["{}"])[-1]
        cut = next((k for k, i in enumerate(rest) if i.literal in SOURCES), None)
        given = _arg_file(items, own) if read.has("a", "arg-file") else stdin
        if cut is not None:  # `:::: <(find ...)` alone: the lines find prints
            read_from = rest[cut + 1 :]
            alone = rest[cut].literal == "::::" and len(read_from) == 1
            node = read_from[0].node if alone else None
            fed = node is not None and node.type == "process_substitution"
            given = Stdin(None, "pipe", node) if fed else None
        if given is not None:  # the arguments are the lines of its input
            lines = canonical(rest[:cut], marker)
            strings = (*PARALLEL_STRINGS, *PARALLEL_NUMBERS)
            marked = any(s in i.word for i in lines for s in strings)
            _runs_on_found(j, "{}" if marked else None, lines, given, depth, True)
        runs = commands(
            rest, marker, (read.values.get("C") or read.values.get("colsep") or [None])[-1]
        )
    kept = j.cwd
    for flag in CHDIR_OPTIONS.get(program, ()):  # `env -C /`: the command runs there
        for given in read.values.get(flag, []):
            path = pattern(given, j.cwd)[0] if given else None  # "": a value unknown here
            j.cwd = path if path is not None and literal_path(path) else None
    try:
        for run in runs:
            j.argv(run, stdin if program not in ("xargs", "parallel") else None, depth)
    finally:
        j.cwd = kept


def _new_group(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    """`sg [-] GROUP [-c] COMMAND`, `newgrp [-c COMMAND] [GROUP [COMMAND]]`: the command,
    one word, runs through a shell (`/bin/sh -c`), as `su -c`'s does; with none, the shell
    reads standard input."""
    rest = items[1:]
    if rest and rest[0].literal == "-":  # a login environment
        rest = rest[1:]
    commands: list[Item] = []
    positionals: list[Item] = []
    at = 0
    while at < len(rest):
        if rest[at].literal == "-c" and at + 1 < len(rest):
            commands.append(rest[at + 1])
            at += 2
        else:
            positionals.append(rest[at])
            at += 1
    commands += positionals[1:2]  # GROUP COMMAND
    for command in commands:
        j.nested(command.script(), depth)
    if not commands:
        j.fed(program, stdin, depth)


# The wrappers' options naming the directory their command runs in.
CHDIR_OPTIONS = {"env": ("C", "chdir"), "sudo": ("D", "chdir")}


def _xargs_marker(read: options.Options, own: list[str | None]) -> str | None:
    """xargs's replace string: `-I R`, `--replace=R`, `-iR`; `{}` for `--replace` and
    `-i` without one (None: the input is added at the end)."""
    marker = (read.values.get("I") or read.values.get("replace") or [None])[-1]
    attached = [w[2:] for w in own if w and w.startswith("-i") and len(w) > 2]
    if marker is None and attached:
        marker = attached[-1]
    if marker is None and read.has("replace", "i"):
        marker = "{}"
    return marker


def _xargs_args(read: options.Options, rest: list[Item], own: list[str | None]) -> list[Item]:
    marker = _xargs_marker(read, own)
    if marker:
        return [Item(UNKNOWN_TARGETS) if i.literal == marker else i for i in rest]
    return [*rest, Item(UNKNOWN_TARGETS)]


def _runs_on_found(
    j: Judge,
    marker: str | None,
    rest: list[Item],
    stdin: Stdin | None,
    depth: int,
    parallel: bool = False,
) -> None:
    r"""`find ... | xargs CMD`: CMD runs on what find prints, judged as `find ... -exec CMD
    {} +` is (`-print0 | xargs -0` too; with a replace string `marker`, `-I R`, as `-exec
    CMD ... {} ... \;`, R put in as `{}`); `fd ... | xargs CMD` as `fd ... -X CMD` (`-x`).
    `parallel CMD` alike (its other replacement strings, `{.}`, `{/}`, `{//}`, `{/.}`, put
    in as fd puts in its own; `{#}` and `{%}` as a number). The input read as an unknown
    argument is judged besides (`_xargs_args`)."""
    if not rest:
        return  # no command (`echo`)
    source = j.source_items(stdin)
    if source is None:
        return
    run = [_marked(item, marker) for item in rest] if marker else rest
    if parallel:
        run = [numbered(item) for item in run]
    command = _found_then_run(source, run, one_each=bool(marker), parallel=parallel)
    if command is not None:
        j.argv(command, None, depth)


def _arg_file(items: list[Item], own: list[str | None]) -> Stdin | None:
    """What `xargs -a FILE` reads, when FILE is a process substitution (`-a <(find ...)`):
    that command's output (None: a file, which the gate cannot see)."""
    for at, word in enumerate(own[:-1]):
        cluster = word is not None and word[:1] == "-" and word[1:2] not in ("-", "")
        if word in ("-a", "--arg-file") or cluster and word.endswith("a"):  # `-ra FILE`
            given = items[1 + at + 1]
            if given.node is not None and given.node.type == "process_substitution":
                return Stdin(None, "pipe", given.node)
    return None


def _marked(item: Item, marker: str) -> Item:
    """`item` with xargs's replace string `marker` written as find's `{}`."""
    if marker not in item.word:
        return item
    return Item(item.word.replace(marker, "{}"), None, item.script().replace(marker, "{}"))


def _found_then_run(
    source: list[Item], run: list[Item], one_each: bool, parallel: bool = False
) -> list[Item] | None:
    """The command `source` (`find`, `fd`) would be if it ran `run` on each path it prints
    (`one_each`) or on them all at once: None when it is neither, or prints something else
    (`-printf`, `-ls`, what `-exec` runs; fd's `-l`, `--format`, `-x`). For `parallel`,
    find's `-exec` is `PARALLEL_EXEC` (fd puts in the same replacement strings itself)."""
    program = (source[0].literal or "").rsplit("/", 1)[-1]
    words = [item.literal for item in source]
    if program in ("fd", "fdfind"):
        if any(w is None or _fd_prints_other(w) for w in words[1:]):
            return None
        return [source[0], Item("-x" if one_each else "-X"), *run, Item(";"), *source[1:]]
    if program != "find":
        return None
    at = 1 + options_end(words[1:])
    while at < len(words) and not (words[at] or "x").startswith(("-", "(", "!", ")")):
        at += 1  # the roots
    source = _stdout_prints(source, at)
    words = [item.literal for item in source]
    tail = [
        PARALLEL_EXEC if parallel else Item("-exec"),
        *run,
        *([] if one_each else [Item("{}")]),
        Item(";" if one_each else "+"),
    ]
    prints: dict[int, int] = {}  # where find prints the paths it finds: the words it takes
    acts = False  # an action that keeps find from printing each match itself
    k = at
    while k < len(words):
        word = words[k]
        if word is None:
            return None
        if word in RUNS:
            end = next((e for e in range(k + 1, len(words)) if words[e] in (";", "+")), len(words))
            acts, k = True, end + 1
            continue
        if word in ("-print", "-print0"):
            prints[k] = 1
        elif word == "-printf" and _prints_path(words[k + 1] if k + 1 < len(words) else ""):
            prints[k] = 2
        elif word in ("-printf", "-fprintf", "-ls", "-fls", "-fprint", "-fprint0", "-delete"):
            acts = True
        k += 3 if word == "-fprintf" else 2 if word in ONE_VALUE or word.startswith("-newer") else 1
    if prints:
        out: list[Item] = []
        k = 0
        while k < len(source):
            out += tail if k in prints else [source[k]]
            k += prints.get(k, 1)
        return out
    if acts:
        return None
    if any(w in ("-o", "-or", ",") for w in words[at:]):  # find prints what passes them all
        return [*source[:at], Item("("), *source[at:], Item(")"), *tail]
    return [*source, *tail]


def _stdout_prints(source: list[Item], at: int) -> list[Item]:
    """find's words `source` (its tests from `at`) with each action printing into a file
    that is its standard output (`-fprint /dev/stdout`, `-fprintf /dev/fd/1 FORMAT`) written
    as the action printing there (`-print`, `-printf FORMAT`)."""
    words = [item.literal for item in source]
    out, k = source[:at], at
    while k < len(words):
        word = words[k] or ""
        if word in RUNS:
            end = next((e for e in range(k + 1, len(words)) if words[e] in (";", "+")), len(words))
            out += source[k : end + 1]
            k = end + 1
            continue
        size = (
            3 if word == "-fprintf" else 2 if word in ONE_VALUE or word.startswith("-newer") else 1
        )
        if word in PRINTS_INTO and k + 1 < len(words) and words[k + 1] in STDOUT_FILES:
            out += [Item(PRINTS_INTO[word]), *source[k + 2 : k + size]]
        else:
            out += source[k : k + size]
        k += size
    return out


def _prints_path(given: str | None) -> bool:
    """Whether find's `-printf` format prints the path found (`%p`, `%P`; one not known
    may)."""
    return given is None or "%p" in given or "%P" in given


def _fd_prints_other(word: str) -> bool:
    """Whether fd's word makes it print other than the paths it finds, or run a command."""
    if exec_start(word) is not None or word in ("--list-details", "--format"):
        return True
    if word.startswith("--format=") or not word.startswith("-") or word.startswith("--"):
        return word.startswith("--format=")
    for letter in word[1:]:
        if letter == "l":
            return True
        if letter in VALUES:
            return False  # the rest of the word is that option's value
    return False


def _remote(j: Judge, program: str, rest: list[Item], depth: int) -> None:
    """`ssh HOST CMD`, `docker exec CONTAINER CMD`, `kubectl exec POD -- CMD`: the command
    runs elsewhere, so relative paths are unknown there."""
    if program != "ssh":
        if not rest or rest[0].literal != "exec":
            return
        read = options.read(
            _words(rest[1:]),
            "euwc",
            {
                "env": True,
                "user": True,
                "workdir": True,
                "env-file": True,
                "detach-keys": True,
                "container": True,
                "namespace": True,
            },
            stop_at_first_positional=True,
        )
        after = [rest[1 + i] for i in read.positionals]
        rest = after[1:] if after else []
        if rest and rest[0].literal == "--":
            rest = rest[1:]
        kept = j.cwd
        j.cwd = None
        try:
            j.argv(rest, None, depth + 1)
        finally:
            j.cwd = kept
        return
    if len(rest) > 1:
        j.nested(" ".join(i.script() for i in rest[1:]), depth, cwd=None)


# name -> (short options taking a value, long options, positionals before the command)
WRAPPERS: dict[str, tuple[str, dict[str, bool], int]] = {
    "sudo": (
        "ugCDhprtUT",
        {
            "user": True,
            "group": True,
            "chdir": True,
            "host": True,
            "prompt": True,
            "role": True,
            "type": True,
            "other-user": True,
            "close-from": True,
            "command-timeout": True,
            "edit": False,
        },
        0,
    ),
    "doas": ("uC", {}, 0),
    "env": (
        "uCS",
        {
            "unset": True,
            "chdir": True,
            "split-string": True,
            "ignore-environment": False,
            "null": False,
        },
        0,
    ),
    "nice": ("n", {"adjustment": True}, 0),
    "nohup": ("", {}, 0),
    "time": ("fo", {"format": True, "output": True}, 0),
    "command": ("", {}, 0),
    "builtin": ("", {}, 0),
    "exec": ("a", {}, 0),
    "coproc": ("", {}, 0),
    "timeout": ("sk", {"signal": True, "kill-after": True}, 1),
    "setsid": ("", {}, 0),
    "ionice": ("cnpPu", {"class": True, "classdata": True, "pid": True}, 0),
    "stdbuf": ("ioe", {"input": True, "output": True, "error": True}, 0),
    "flock": ("wEc", {"timeout": True, "conflict-exit-code": True, "command": True}, 1),
    "busybox": ("", {}, 0),
    "chroot": ("", {"userspec": True, "groups": True}, 1),
    "unshare": ("SGRwt", {"setuid": True, "setgid": True, "root": True, "wd": True}, 0),
    "watch": ("ndqg", {"interval": True}, 0),
    "xargs": (
        "IadELnPsL",
        {
            "replace": False,  # `--replace=R`; alone, `{}`
            "arg-file": True,
            "delimiter": True,
            "max-args": True,
            "max-procs": True,
            "max-chars": True,
            "max-lines": True,
            "eof": True,
        },
        0,
    ),
    "parallel": ("jSIaC", {"jobs": True, "sshlogin": True, "arg-file": True, "colsep": True}, 0),
    "script": ("cEIOTB", {"command": True, "log-out": True, "log-in": True}, 0),
    "su": ("cgGs", {"command": True, "group": True, "shell": True}, 1),
    "sg": ("c", {}, 1),  # read by `_new_group`
    "newgrp": ("c", {}, 1),
    "ssh": ("bBcDEeFIiJLlmOoPpQRSWw", {}, 0),
    "docker": ("", {}, 0),
    "podman": ("", {}, 0),
    "kubectl": ("", {}, 0),
    "taskset": ("", {"cpu-list": False}, 1),
    "nsenter": ("tSGrw", {"target": True}, 0),
    "strace": ("oepsuEIbPX", {}, 0),
    "ltrace": ("oepsuEn", {}, 0),
    "fakeroot": ("", {}, 0),
    "firejail": ("", {}, 0),
    "caffeinate": ("tw", {}, 0),
    "chrt": ("T", {}, 1),
    "numactl": ("CNmip", {}, 0),
}
