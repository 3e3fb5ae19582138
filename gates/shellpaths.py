"""Which paths the destructive-op gate protects, and how a shell word names a path.

A removal (`rm -r`, `find -delete`, a recursive `chmod`) is judged by where its target can
land: on `/`, a top-level or system directory, the home directory or one of its direct
children, the work tree or one of its parents, or inside `.git`, `.beads` or `.claude`:
deny; somewhere else outside the work tree: ask; inside the work tree (and in the temporary
directory, when the word names it literally): no decision. A write (`>`, `tee`, `cp`, ...)
is judged by `write_target`: shell start-up files, `~/.ssh`, devices, a repository's
`.git`, the store `.beads/`, Claude Code's settings and the approvals folder are denied.
"""

from __future__ import annotations

import os
from fnmatch import fnmatchcase

from gates.shellwords import BRACKET, QUESTION, STAR, TILDE, UNKNOWN, shown

NONE, ASK, DENY = 0, 1, 2
SYSTEM_DIRS = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/root",
    "/sbin",
    "/sys",
    "/usr",
    "/var",
    "/home",
    "/snap",
)
TEMP_DIRS = ("/tmp", "/var/tmp")
PATH_MAX = 4096  # no file system takes a longer path
REMOVAL_GUARDED = (".git", ".beads", ".claude")
STARTUP_FILES = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".config/fish/config.fish",
    ".inputrc",
    ".xprofile",
    ".xinitrc",
    ".pam_environment",
)
# Read by every login or interactive shell on the machine.
SYSTEM_STARTUP_FILES = (
    "/etc/profile",
    "/etc/profile.d/*",
    "/etc/bash.bashrc",
    "/etc/bashrc",
    "/etc/environment",
    "/etc/zshrc",
    "/etc/zsh/zshrc",
    "/etc/zsh/zshenv",
)
HARMLESS_DEVICES = (
    "/dev/null",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/zero",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
    "/dev/full",
)
ANY_CHILD = "\x05any"  # a name no pattern matches by its letters: only a wildcard does

Verdict = tuple  # (level, reason)


def trust_dirs() -> tuple[str, ...]:
    """The approvals folder `gc trust` uses here, and the default one (both guarded)."""
    from beads.settings.approvals import trust_dir

    default = os.path.join(home(), ".local", "share", "gc-beads", "trust")
    return tuple(dict.fromkeys((os.path.realpath(trust_dir()), default)))


def home() -> str:
    return os.path.expanduser("~")


def pattern(word: str, cwd: str | None) -> tuple[str | None, str]:
    """The absolute path pattern a word names (None: it cannot be placed), and why not."""
    if word.startswith(UNKNOWN):
        return None, f"its target {shown(word)!r} is a variable or substitution"
    if len(word) > PATH_MAX:  # matching it against patterns would cost per character
        return None, f"its target is longer than any path ({PATH_MAX} characters)"
    if word.startswith(TILDE):
        rest = word[1:]
        if rest and not rest.startswith("/"):
            return None, f"its target {shown(word)!r} is another user's home"
        word = home() + rest
    if not word.startswith("/"):
        if cwd is None:
            return None, f"its target {shown(word)!r} is relative to a directory unknown here"
        word = os.path.join(cwd, word)
    cut = min(
        (word.find(s) for s in (UNKNOWN, STAR, QUESTION, BRACKET) if s in word), default=len(word)
    )
    head, tail = word[:cut], word[cut:]
    folder, _, name = head.rpartition("/")
    folder = os.path.realpath(folder or "/") if _safe_realpath(folder) else folder
    full = os.path.normpath(folder + "/" + name + tail) if folder != "/" else "/" + name + tail
    return os.path.normpath(full), ""


def _safe_realpath(folder: str) -> bool:
    return bool(folder) and len(folder) < PATH_MAX


def _glob(path: str) -> str:
    """An fnmatch pattern for the path (an unknown expansion matches anything)."""
    return path.translate(
        {ord(UNKNOWN): "*", ord(STAR): "*", ord(QUESTION): "?", ord(BRACKET): "["}
    )


def _names(path: str) -> list[str]:
    """The components, globs kept as patterns, unknown expansions matching nothing special."""
    return [
        part.translate({ord(STAR): "*", ord(QUESTION): "?", ord(BRACKET): "["})
        for part in path.split("/")
        if part
    ]


def may_be(name: str, dotname: str) -> bool:
    """Whether a path component (a pattern) can be `dotname`: a shell glob matches a leading
    dot only when the dot is written."""
    return name == dotname or (name.startswith(".") and fnmatchcase(dotname, name))


def removal(word: str, cwd: str | None, tree: str) -> Verdict:
    """The verdict on removing (or recursively changing) what `word` names. A literal empty
    word names no file (`rm ''` fails: "cannot remove ''"); an unset variable is not one: its
    word is unknown, not empty."""
    if word == "":
        return NONE, ""
    path, why = pattern(word, cwd)
    if path is None:
        return ASK, why
    glob = _glob(path)
    here = home()

    def hits(candidate: str) -> bool:
        return fnmatchcase(candidate, glob)

    guarded = [n for n in _names(path) if any(may_be(n, g) for g in REMOVAL_GUARDED)]
    if guarded:
        return DENY, f"it removes {shown(word)!r}, a {guarded[0].replace(STAR, '*')} directory"
    if hits("/") or path.count("/") == 1 and path != "/":
        return DENY, f"it removes {shown(word)!r}, a top-level directory"
    parents = [tree]
    while parents[-1] not in ("/", ""):
        parents.append(os.path.dirname(parents[-1]))
    if any(hits(p) for p in parents):
        return DENY, f"it removes {shown(word)!r}, which holds the work tree {tree}"
    if hits(here) or hits(here + "/" + ANY_CHILD) or os.path.dirname(path) == here:
        return DENY, f"it removes {shown(word)!r}: the home directory or a folder of it"
    if path != "/" and here.startswith(path.rstrip("/") + "/"):
        return DENY, f"it removes {shown(word)!r}, which holds the home directory"
    if any(hits(t) or hits(t + "/" + ANY_CHILD) for t in trust_dirs()):
        return DENY, f"it removes {shown(word)!r}, the approvals of gc trust"
    if path.startswith(tree + "/"):
        if hits(tree + "/" + ANY_CHILD):
            return ASK, f"it removes {shown(word)!r}: everything in the work tree"
        return NONE, ""
    literal_temp = word.startswith(TEMP_DIRS) or _in_tmpdir(word) or _literal_below(word, cwd)
    if literal_temp and any(path.startswith(t + "/") for t in _temp_dirs()):
        return NONE, ""
    if path.startswith(here + "/"):  # deeper than a folder of home (a cache, a checkout)
        return ASK, f"it removes {shown(word)!r}, outside the work tree {tree}"
    system = [d for d in SYSTEM_DIRS if path == d or path.startswith(d + "/")]
    if system and not any(path.startswith(t + "/") for t in TEMP_DIRS):
        return DENY, f"it removes {shown(word)!r}, under the system directory {system[0]}"
    return ASK, f"it removes {shown(word)!r}, outside the work tree {tree}"


def _temp_dirs() -> list[str]:
    extra = os.environ.get("TMPDIR")
    return [*TEMP_DIRS, *([os.path.normpath(extra)] if extra else [])]


def _literal_below(word: str, cwd: str | None) -> bool:
    """A relative word, all literal and never climbing, from a directory the text fixed
    (`cd /tmp && rm -rf scratch`)."""
    return (
        cwd is not None
        and not word.startswith(("/", TILDE))
        and not any(c in word for c in (UNKNOWN, STAR, QUESTION, BRACKET))
        and ".." not in word.split("/")
    )


def guarded(path: str) -> bool:
    """Whether a path (a pattern) can name `.git`, `.beads` or `.claude` on its way."""
    return any(may_be(n, g) for n in _names(path) for g in REMOVAL_GUARDED)


def _in_tmpdir(word: str) -> bool:
    extra = os.environ.get("TMPDIR")
    return bool(extra) and word.startswith(os.path.normpath(extra) + "/")


def write_target(word: str, cwd: str | None) -> Verdict:
    """The verdict on writing (creating, truncating, replacing) the file `word` names: deny
    for the protected files, else no decision (an unknown target included)."""
    path, _why = pattern(word, cwd)
    if path is None:
        return NONE, ""
    return protected_file(path, shown(word))


def protected_file(path: str, shown_as: str, *, file_tool: bool = False) -> Verdict:
    """Whether a write to the absolute path (a pattern) touches what the gate protects.
    `file_tool`: the Write/Edit rules, where `.git/hooks` and start-up files are "ask"."""
    names = _names(path)
    glob = _glob(path)
    here = home()
    if (
        path.startswith("/dev/")
        and path not in HARMLESS_DEVICES
        and not path.startswith("/dev/fd/")
    ):
        return DENY, f"it writes to the device {shown_as}"
    if any(may_be(n, ".beads") for n in names):
        return DENY, f"it writes into the store's .beads/ ({shown_as}); use gc commands"
    if any(_under(glob, folder) for folder in trust_dirs()):
        return DENY, f"it writes to the approvals of gc trust ({shown_as})"
    for index, name in enumerate(names[:-1]):
        if may_be(name, ".claude") and fnmatchcase(names[index + 1], "settings*.json"):
            return DENY, f"it writes Claude Code's settings {shown_as}, where the gates are hooked"
    for index, name in enumerate(names[:-1]):
        if may_be(name, ".git"):
            inner = names[index + 1]
            if fnmatchcase("hooks", inner):
                return (ASK if file_tool else DENY), f"it writes a git hook ({shown_as})"
            return DENY, f"it writes inside a repository's .git ({shown_as})"
    if _under(glob, os.path.join(here, ".ssh")):
        return (ASK if file_tool else DENY), f"it writes to ~/.ssh ({shown_as})"
    if any(fnmatchcase(os.path.join(here, f), glob) for f in STARTUP_FILES) or any(
        fnmatchcase(f, glob) for f in SYSTEM_STARTUP_FILES
    ):
        return (ASK if file_tool else DENY), f"it writes the shell start-up file {shown_as}"
    return NONE, ""


def _under(glob: str, folder: str) -> bool:
    return (
        fnmatchcase(folder, glob)
        or fnmatchcase(folder + "/" + ANY_CHILD, glob)
        or (glob.startswith(folder + "/"))
    )
