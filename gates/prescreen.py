"""A pre-screen for the destructive-op gate: the plainest commands, answered without the
parser (loading tree-sitter costs more than the rest of a PreToolUse hook).

`undecided(command)` is True only for commands the full reading (`gates.shelljudge`) would
also leave without a decision: simple commands joined by `&&`, `||`, `;`, `|` or `&`, each
a program that never removes, writes or runs anything whatever its arguments (`ls`,
`cat`, `grep`, `pytest`, `git status`, ...), with no shell syntax beyond plain words and
quotes holding no expansion, and no word naming a program the rules judge. Anything else
goes to the parser. tests/test_hooks_session_gates.py checks the promise over the corpus and over
fuzzed commands.
"""

from __future__ import annotations

import re

MAX_LENGTH = 2000
PLAIN = re.compile(r"[A-Za-z0-9 \t_./:@%+,=&|;'\"-]*")
TOKENS = re.compile(r"""\s*(?:(&&|\|\||[;&|])|((?:[^\s"'&|;]+|"[^"]*"|'[^']*')+))""")
# Programs that remove, write or run nothing whatever their arguments.
INERT = frozenset(
    (
        "ls",
        "pwd",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "echo",
        "printf",
        "which",
        "whoami",
        "date",
        "uname",
        "true",
        "false",
        "diff",
        "stat",
        "file",
        "du",
        "df",
        "uniq",
        "cut",
        "tr",
        "jq",
        "basename",
        "dirname",
        "realpath",
        "id",
        "hostname",
        "man",
        "type",
        "tree",
        "cd",
        "ps",
    )
)
# Programs with no rule of their own: inert unless an argument names a judged program.
PLAIN_TOOLS = frozenset(
    (
        "pytest",
        "ruff",
        "mypy",
        "pyright",
        "black",
        "isort",
        "flake8",
        "tox",
        "nox",
        "npm",
        "npx",
        "yarn",
        "pnpm",
        "cargo",
        "go",
        "make",
        "cmake",
        "gradle",
        "mvn",
        "uv",
        "pip",
        "pip3",
        "poetry",
        "tsc",
        "eslint",
        "prettier",
        "jest",
        "vitest",
        "rustc",
        "gcc",
        "clang",
    )
)
GIT_READS = frozenset(
    (
        "status",
        "log",
        "diff",
        "show",
        "add",
        "commit",
        "fetch",
        "pull",
        "blame",
        "rev-parse",
        "ls-files",
        "describe",
        "shortlog",
        "grep",
        "remote",
        "tag",
        "merge-base",
        "rev-list",
        "cat-file",
        "ls-tree",
        "whatchanged",
        "cherry",
        "version",
    )
)
GC_READS = frozenset(("mail", "bead", "thread", "inbox", "decision", "session", "status"))
# Names the full reading treats as programs with rules, or as wrappers that run their
# arguments (tests check this covers gates.rules.RULES and gates.rules.WRAPPERS): a plain
# tool given one of these as an argument goes to the parser.
RISKY = frozenset(
    (
        "rm",
        "unlink",
        "find",
        "fd",
        "fdfind",
        "mv",
        "cp",
        "ln",
        "install",
        "rsync",
        "tee",
        "touch",
        "truncate",
        "sed",
        "dd",
        "chmod",
        "chown",
        "chgrp",
        "eval",
        "alias",
        "trap",
        "cd",
        "pushd",
        "git",
        "gc",
        "perl",
        "ruby",
        "node",
        "nodejs",
        "php",
        "deno",
        "bun",
        "awk",
        "gawk",
        "mawk",
        "sh",
        "bash",
        "zsh",
        "dash",
        "ksh",
        "mksh",
        "ash",
        "fish",
        "yash",
        "rbash",
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
        "sudo",
        "doas",
        "env",
        "nice",
        "nohup",
        "time",
        "command",
        "builtin",
        "exec",
        "coproc",
        "timeout",
        "setsid",
        "ionice",
        "stdbuf",
        "flock",
        "busybox",
        "chroot",
        "unshare",
        "watch",
        "xargs",
        "parallel",
        "script",
        "su",
        "sg",
        "newgrp",
        "ssh",
        "docker",
        "podman",
        "kubectl",
        "taskset",
        "nsenter",
        "strace",
        "ltrace",
        "fakeroot",
        "firejail",
        "caffeinate",
        "chrt",
        "numactl",
        "source",
        ".",
        "tar",
        "bsdtar",
        "gtar",
        "zip",
        "7z",
        "7za",
        "7zr",
        "wget",
        "curl",
        "sort",
        "shuf",
        "ssh-keygen",
        "unzip",
        "gzip",
        "bzip2",
        "xz",
        "zstd",
        "patch",
        "sponge",
        "ex",
        "at",
        "batch",
        "crontab",
        "tmux",
        "screen",
        "redis-cli",
        "mongo",
        "mongosh",
        "rimraf",
        "gh",
        "lua",
        "Rscript",
    )
)


def undecided(command: str) -> bool:
    """True when the command surely gets no decision (False: read it in full)."""
    if len(command) > MAX_LENGTH or not PLAIN.fullmatch(command):
        return False
    words: list[str] = []
    at = 0
    while at < len(command):
        found = TOKENS.match(command, at)
        if found is None or found.end() == at:
            return command[at:].strip() == ""
        at = found.end()
        if found[1]:
            if not _plain(words):
                return False
            words = []
        else:
            words.append(found[2])
    return _plain(words)


def _plain(words: list[str]) -> bool:
    if not words:
        return True
    program = words[0]
    if program in INERT:
        return True
    args = [w.strip("'\"").rsplit("/", 1)[-1] for w in words[1:]]
    if program == "git":
        return bool(args) and words[1] in GIT_READS
    if program == "gc":
        return bool(args) and words[1] in GC_READS
    if re.fullmatch(r"python3?", program):
        return words[1:2] == ["-m"]  # a module: no code on the command line
    if program in PLAIN_TOOLS:
        return not any(a in RISKY or a.startswith(("mkfs", "python", "pypy")) for a in args)
    return False
