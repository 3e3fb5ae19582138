"""A quick split of a command line into simple commands, for the soft sandbox-boundary gate.

The split is `shlex`'s (at `;`, `&&`, `||`, `|`, `&` and parentheses), with wrappers
(`sudo`, `env`, `nice`, ...) unwrapped and `bash -c`/`eval` strings split in turn. It only
feeds a warning; the strict destructive-op gate reads the real syntax tree
(`gates.shelljudge`).
"""

from __future__ import annotations

import os
import shlex

OPERATORS = frozenset((";", "&&", "||", "|", "&", "|&", ";;", "(", ")", "\n"))
WRAPPERS = frozenset(("sudo", "doas", "env", "nice", "nohup", "time", "command", "exec"))
# Wrapper options that take a value (`sudo -u root`, `env -u NAME`, `nice -n 5`).
WRAPPER_VALUE_OPTIONS = frozenset(("-u", "-g", "-C", "-D", "-n", "-h", "-p", "-r", "-t", "-U"))
SHELLS = frozenset(("bash", "sh", "zsh", "dash", "ksh"))
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
