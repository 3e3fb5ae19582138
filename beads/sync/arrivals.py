"""What a sync brought in is announced to the layers above, which register how.

`gc sync` (and the background syncer, `sync.auto`) integrates commits from another machine;
the layers above derive what those commits mean for the people here (delivery derives the
items of mail, decisions and gates, and nudges idle sessions, as a local push does). This
layer names none of them: a composition root registers an announcer as the text
`"module:function"` (`function(root)` with the store's `.beads/` directory), which a detached
background syncer gets on its command line and imports there.

An announcer's fault never fails the sync: the commits are in, and the next hook derives the
same items from git.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from beads.errors import GcError

_announcers: list[str] = []


def register(spec: str) -> None:
    """Announce every sync's arrivals to `spec`, `"module:function"` (idempotent)."""
    module, sep, function = spec.partition(":")
    if not (module and sep and function):
        raise ValueError(f"an announcer is 'module:function', not {spec!r}")
    if spec not in _announcers:
        _announcers.append(spec)


def registered() -> list[str]:
    """The announcers registered in this process, in order."""
    return list(_announcers)


def announce(root: Path) -> list[str]:
    """Call every announcer with the store `root` (after a sync moved its branch); returns
    the faults, one line each, also appended to `.runtime/arrivals.log` (never raised)."""
    faults = []
    for spec in _announcers:
        module, _, function = spec.partition(":")
        try:
            getattr(importlib.import_module(module), function)(root)
        except Exception as exc:  # noqa: BLE001 - see the module's docstring
            faults.append(f"{spec}: {type(exc).__name__}: {exc}")
    if faults:
        _log(root, faults)
    return faults


def _log(root: Path, faults: list[str]) -> None:
    import os
    import time

    from beads import files

    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        fd = files.open_file(str(root), str(root / ".runtime" / "arrivals.log"))
        try:
            os.write(fd, "".join(f"{stamp} {line}\n" for line in faults).encode())
        finally:
            os.close(fd)
    except (OSError, GcError):
        pass
