"""What counts as uncommitted work in a project's git work tree (the `commit-push` and
`dirty-work` gates).

Every change `git status` reports counts, but one: Claude Code's `.claude/settings.json` or
`.claude/settings.local.json` whose only difference from the committed file (or from nothing,
when the file is not committed) is gc's own hook entries, the ones `gc hook install` writes.
Installing the hooks must not make every session end with a warning about the project; any
other edit of those files still counts.
"""

from __future__ import annotations

from beads.process import run_bounded

TYPE_CHECKING = False  # the Stop hook imports this module, and never typing
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

SETTINGS_NAMES = ("settings.json", "settings.local.json")


class NotAWorkTree(Exception):
    """`git status` failed here: no repository, or git cannot read it."""


def uncommitted(cwd: Path, timeout: float) -> int:
    """How many paths of the work tree at `cwd` hold uncommitted work.

    Raises NotAWorkTree when git cannot tell, OSError when git does not run and
    subprocess.TimeoutExpired past `timeout`."""
    entries = _status(cwd, timeout)
    if not any(_is_settings(path) or path.endswith(".claude/") for _code, path in entries):
        return len(entries)
    root: str | None = None
    count = 0
    for code, path in entries:
        if code == "??" and path.endswith(".claude/"):
            # A new `.claude/` folder is listed whole: count its files one by one.
            inner = _status(cwd, timeout, "--untracked-files=all", "--", ":/" + path)
        else:
            inner = [(code, path)]
        for inner_code, inner_path in inner:
            if _is_settings(inner_path) and inner_code in ("??", " M", "M ", "MM", "A ", "AM"):
                if root is None:
                    root = _git(cwd, timeout, "rev-parse", "--show-toplevel").strip()
                if _only_our_hooks(cwd, root, inner_path, inner_code == "??", timeout):
                    continue
            count += 1
    return count


def _status(cwd: Path, timeout: float, *extra: str) -> list[tuple[str, str]]:
    """`git status --porcelain -z` as (two-letter code, path from the repository's root)."""
    out = _git(cwd, timeout, "status", "--porcelain", "-z", *extra)
    fields = out.split("\0")
    entries = []
    at = 0
    while at < len(fields) and fields[at]:
        code, path = fields[at][:2], fields[at][3:]
        entries.append((code, path))
        at += 2 if code[0] in "RC" else 1  # a rename or copy is followed by its old path
    return entries


def _git(cwd: Path, timeout: float, *args: str) -> str:
    code, out, _err = run_bounded(["git", *args], timeout, cwd)
    if code != 0:
        raise NotAWorkTree(" ".join(args))
    return out.decode("utf-8", "surrogateescape")


def _is_settings(path: str) -> bool:
    folder, _slash, name = path.rpartition("/")
    return name in SETTINGS_NAMES and (folder == ".claude" or folder.endswith("/.claude"))


def _only_our_hooks(cwd: Path, root: str, path: str, untracked: bool, timeout: float) -> bool:
    """Whether the work tree's `path` differs from the committed one only by gc's hooks."""
    import json  # lazy: only a project with changed Claude Code settings reads them

    try:
        with open(f"{root}/{path}", encoding="utf-8") as file:
            current = json.loads(file.read() or "{}")
    except (OSError, ValueError):
        return False
    committed: Any = {}
    if not untracked:
        try:
            committed = json.loads(_git(cwd, timeout, "show", f"HEAD:{path}") or "{}")
        except NotAWorkTree:
            committed = {}  # added to the index, never committed
        except ValueError:
            return False
    return _without_our_hooks(current) == _without_our_hooks(committed)


def _without_our_hooks(settings: Any) -> Any:
    """`settings` with gc's hook entries taken out, and the groups, events and `hooks`
    object left empty by that removed, so a file made by `gc hook install` equals none."""
    if not isinstance(settings, dict) or not isinstance(settings.get("hooks"), dict):
        return settings
    hooks = {}
    for event, groups in settings["hooks"].items():
        if not isinstance(groups, list):
            hooks[event] = groups
            continue
        kept = []
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list):
                kept.append(group)
                continue
            others = [entry for entry in entries if not _ours(entry)]
            if others:
                kept.append({**group, "hooks": others})
            elif len(others) == len(entries):
                kept.append(group)  # a group that never held a hook is the user's
        if kept:
            hooks[event] = kept
    rest = {key: value for key, value in settings.items() if key != "hooks"}
    return {**rest, "hooks": hooks} if hooks else rest


def _ours(entry: Any) -> bool:
    """An entry `gc hook install` writes: a command running `gc hook run` (with any path to
    `gc`, and `--event NAME` for PreToolUse), and nothing but type, command and timeout."""
    if not isinstance(entry, dict) or entry.get("type") != "command":
        return False
    if set(entry) - {"type", "command", "timeout"}:
        return False
    command = entry.get("command")
    if not isinstance(command, str):
        return False
    words = command.split()
    if words[-2:] == ["--event", "PreToolUse"]:
        words = words[:-2]
    if len(words) < 3 or words[-2:] != ["hook", "run"]:
        return False
    return words[-3].rsplit("/", 1)[-1] == "gc"
