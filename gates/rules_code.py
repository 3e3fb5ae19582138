"""The destructive-op gate's rules for programs that run code they are given: shells
(`sh -c`, a script on standard input), `eval`, `alias` and `trap` bodies, interpreters'
one-liners (`python -c`, `perl -e`, `node -e`, ...), `awk` programs and SQL clients (`psql
-c`, `mysql -e`, `dropdb`). A shell's script is parsed and judged in turn
(`gates.shelljudge`); other code is matched against what removes files, runs programs or
writes where the gates keep their state ("ask"), SQL against what drops or truncates data
("deny"). The other programs' rules are `gates.rules`.
"""

from __future__ import annotations

import re

from gates.rules_more import substituted
from gates.shelljudge import Judge
from gates.shellnodes import Item, Stdin
from gates.shellpaths import ASK, DENY, write_target
from gates.shellwords import UNKNOWN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

SHELLS = frozenset(("sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "yash", "rbash"))
SQL_CLIENTS = frozenset(
    (
        "psql",
        "mysql",
        "mariadb",
        "sqlite3",
        "sqlcmd",
        "duckdb",
        "clickhouse-client",
        "cockroach",
        "snowsql",
        "bq",
    )
)
INTERPRETERS = {
    "python": re.compile(
        r"rmtree|os\.(system|remove|unlink|rmdir|removedirs|popen|exec|spawn"
        r"|kill|truncate)|subprocess|\.unlink\(|\.rmdir\(|pty\.spawn|__import__"
        r"|shutil\.(move|rmtree)|\beval\(|\bexec\("
    ),
    "perl": re.compile(
        r"rmtree|remove_tree|unlink|rmdir|\bsystem\b|\bexec\b|`|qx|open\s*\(?[^,]*,"
        r"\s*['\"]?\||truncate"
    ),
    "node": re.compile(
        r"rmSync|rmdirSync|unlinkSync|\brm\(|rmdir\(|unlink\(|child_process|remove(Sync)?\(|"
        r"Deno\.(run|Command)|"
        r"execSync|spawn|\bexec\(|truncate"
    ),
    "ruby": re.compile(
        r"rm_rf|rm_r\b|\brm\b|FileUtils|File\.delete|unlink|\bsystem\b|\bexec\b|"
        r"`|%x|spawn|Open3|truncate"
    ),
    "awk": re.compile(r"system\s*\(|\|\s*\"|\"\s*\||\|&"),
    "lua": re.compile(r"os\.(execute|remove|rename)|io\.popen|io\.open"),
    "Rscript": re.compile(r"unlink|file\.remove|system2?\s*\(|shell\s*\("),
    "php": re.compile(r"unlink|rmdir|\bsystem\b|\bexec\b|shell_exec|passthru|popen|proc_open|`"),
}
# A one-liner naming what the gate protects and opening something to write.
PROTECTED_IN_CODE = re.compile(
    r"\.claude/|\.beads\b|\.git/|\.ssh/|\.(bash|zsh)rc|\.profile|/etc/|/dev/[sh]d|gc-beads/trust"
)
WRITES_IN_CODE = re.compile(
    r"open\s*\([^)]*,\s*['\"][^'\"]*[wax+]|write_(text|bytes)|writeFile|\bcopy|\bmove|rename"
    r"|symlink|truncate|chmod|unlink|remove|\brm|>\s*['\"]|dump\("
)
SQL_DESTRUCTIVE = re.compile(
    r"\bDROP\s+(TABLE|DATABASE|SCHEMA|VIEW|INDEX|USER|ROLE|COLLECTION|KEYSPACE|OWNED|TABLESPACE)\b"
    r"|\bTRUNCATE\b"
)


def _shell(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    words = _words(items[1:])
    command_string = False
    at = 0
    while at < len(words):
        word = words[at]
        if word is None or not word.startswith(("-", "+")) or word in ("-", "--"):
            if word == "--":
                at += 1
            break
        if word in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file", "-C"):
            at += 1
        elif not word.startswith("--") and "c" in word[1:]:
            command_string = True
        at += 1
    rest = items[1 + at :]
    if command_string:
        if rest:
            j.nested(rest[0].script(), depth, positionals=_positionals(rest))
        return
    if rest and substituted(rest[0]):
        j.note(ASK, f"{program} runs a script made by a substitution the gate cannot read")
        return
    if rest and rest[0].literal in ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"):
        rest = []
    if rest and not (rest[0].literal or "").startswith("-"):
        return  # a script file: out of any gate's sight (docs/gates.md)
    _fed(j, program, stdin, depth, "shell")


# A script that may change its positional parameters (`shift`, `set -- ...`, `getopts`) or
# give a function its own (`f() { ... }`): its `$1` is not known from the command line.
MOVES_POSITIONALS = re.compile(
    r"\b(shift|getopts|function)\b|\(\s*\)"
    r"|\bset\b(?:\s+(?:[-+]o\s+\w+|[-+][A-Za-z]+))*\s+(?:--|[^-+\s;&|)])"
)


def _positionals(rest: list[Item]) -> list[str] | None:
    """The positional parameters of the script `sh -c SCRIPT ARG0 ARG1 ...` runs
    (`rest`: SCRIPT and the words after it): ARG0, ARG1, ... as words, when the script's
    text is all written out and does not change them; else None (not known)."""
    script = rest[0].literal
    if len(rest) < 2 or script is None or MOVES_POSITIONALS.search(script):
        return None
    return [item.word for item in rest[1:]]


def _fed(j: Judge, program: str, stdin: Stdin | None, depth: int, kind: str) -> None:
    """A shell, interpreter or database client reading its script from standard input."""
    read = {"sql": _sql_text, "code": _code}.get(kind)
    j.fed(program, stdin, depth, None if read is None else lambda text: read(j, program, text))


def _eval(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    if len(items) > 1:
        j.nested(" ".join(item.script() for item in items[1:]), depth)


def _alias(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    for item in items[1:]:
        name, eq, body = item.script().partition("=")
        if eq:
            j.nested(body, depth)


def _trap(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    if len(items) > 2 and not (items[1].literal or "").startswith("-"):
        j.nested(items[1].script(), depth)


def interpreter(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    """An interpreter (`python3.12`, `perl`, `node`, ...): its one-liner (`-c`, `-e`, `eval`)
    judged as code, what `perl -i`/`ruby -i` edit as writes, a script on standard input as
    code it reads."""
    words = _words(items[1:])
    flag = {"perl": "eE", "ruby": "e", "node": "ep", "nodejs": "ep", "php": "r", "lua": "e",
            "Rscript": "e"}.get(program, "c")  # fmt: skip
    if program == "deno" and words[:1] == ["eval"] and len(items) > 2:
        _code(j, program, items[2].script())
        return
    if program in ("perl", "ruby") and any(re.match(r"-[pnlaw0]*i", w or "") for w in words):
        code_at = next((k for k, w in enumerate(words) if w and re.match(r"-\w*[eE]$", w)), -1)
        for k in range(code_at + 2 if code_at >= 0 else 0, len(words)):
            if not (words[k] or "x").startswith("-"):
                j.note(*write_target(items[1 + k].word, j.cwd))
    for at, word in enumerate(words):
        if word is None:
            break
        if word.startswith(("-M", "-m", "-I", "-x")) and len(word) > 2 and program == "perl":
            continue  # `-MFile::Path=remove_tree`: a module, its letters are no flags
        if word in ("--eval", "--print") or (
            word.startswith("-") and not word.startswith("--") and set(word[1:]) & set(flag)
        ):
            if at + 1 < len(items):
                _code(j, program, items[1 + at + 1].script())
            return
        if word == "-" or not word.startswith("-"):
            if word == "-":
                _fed(j, program, stdin, depth, "code")
            return
        if word in ("-m", "-W", "-X", "-I", "-M", "-r", "--require", "-x"):
            if program.startswith(("python", "pypy")) and word == "-m":
                return  # a module: its code is not on the command line
    if not any(w is not None and not w.startswith("-") for w in words):
        _fed(j, program, stdin, depth, "code")


def _awk(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    words = _words(items[1:])
    inplace = any(
        w in ("-i", "--include") and k + 1 < len(words) and words[k + 1] == "inplace"
        for k, w in enumerate(words)
    ) or any(w in ("-iinplace", "--include=inplace") for w in words)
    at = 0
    while at < len(words) and (words[at] or "x").startswith("-"):
        if words[at] in ("-f", "--file"):
            return  # a program file: out of any gate's sight
        at += 2 if words[at] in ("-F", "-v", "--assign", "--field-separator") else 1
    if at < len(items) - 1:
        _code(j, "awk", items[1 + at].script())
        if inplace:  # gawk's in-place edit: each file after the program is rewritten
            for k in range(at + 1, len(words)):
                if not (words[k] or "x").startswith("-"):
                    j.note(*write_target(items[1 + k].word, j.cwd))


def _code(j: Judge, program: str, code: str) -> None:
    family = "python" if program.startswith(("python", "pypy")) else program
    family = "node" if family in ("nodejs", "deno", "bun") else family
    check = INTERPRETERS.get(family)
    if check is not None and check.search(code):
        j.note(ASK, f"its {family} code removes files or runs programs")
    if PROTECTED_IN_CODE.search(code) and WRITES_IN_CODE.search(code):
        j.note(ASK, f"its {family} code writes where the gates or git keep their state")


def _sql(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    words = _words(items[1:])
    if program == "dropdb":
        j.note(DENY, "dropdb drops a database")
        return
    for word in words:
        if word in ("-f", "--file", "-init", "-i", "--init") or (word or "").startswith("--file="):
            j.note(ASK, f"{program} runs SQL from a file, which the gate cannot read")
    pieces = [_sql_piece(i.word.replace(UNKNOWN, " ")) for i in items[1:]]
    for piece in pieces:  # each `-c` on its own: a WHERE in another does not count
        _sql_text(j, program, piece)
    _sql_text(j, program, " ".join(pieces))
    _fed(j, program, stdin, depth, "sql")


def _sql_piece(word: str) -> str:
    """The SQL a client's argument may carry: an option's value (`--command=...`, `-c'...'`,
    `-e"..."`, any abbreviation), else the word itself."""
    if word.startswith("--"):
        return word.partition("=")[2]
    if word.startswith("-"):
        return word[2:]
    return word


def _sql_text(j: Judge, program: str, text: str) -> None:
    # String literals and quoted identifiers hold no keywords (`WHERE name = 'DROP TABLE'`).
    text = re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\$\$.*?\$\$", " x ", text, flags=re.S)
    plain = re.sub(r"/\*.*?\*/|--[^\n]*|#[^\n]*", " ", text, flags=re.S).upper()
    plain = re.sub(r"\s+", " ", plain)
    if SQL_DESTRUCTIVE.search(plain):
        j.note(DENY, f"{program} is given SQL that drops or truncates data")
    if "\\I " in plain or ".READ " in plain or "SOURCE " in plain:
        j.note(ASK, f"{program} is told to run SQL from a file, which the gate cannot read")
    for statement in plain.split(";"):
        if re.search(r"\bDELETE\s+FROM\b", statement) and not re.search(r"\bWHERE\b", statement):
            j.note(DENY, f"{program} is given a DELETE without WHERE")


def _words(items: list[Item]) -> list[str | None]:
    return [item.literal for item in items]


RULES_CODE: dict[str, Callable] = {
    "eval": _eval,
    "alias": _alias,
    "trap": _trap,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "perl": interpreter,
    "lua": interpreter,
    "Rscript": interpreter,
    "ruby": interpreter,
    "node": interpreter,
    "nodejs": interpreter,
    "php": interpreter,
    "deno": interpreter,
    "bun": interpreter,
    **{name: _shell for name in SHELLS},
    **{name: _sql for name in SQL_CLIENTS},
    "dropdb": _sql,
}
