"""What a program decides once, at its entry point, for the library code beneath it.

A `Runtime` carries the umask policy, the output mode and whether a long rebuild may show its
progress, with the per-run caches that depend on them (the directories checked for links, the
store modes found). The `gc` program makes one at its entry point and runs under it
(`using`); code called from there without a handle on it (writing a file, spawning a program,
rebuilding the index) asks `current()`. A library caller sets nothing and gets the safe
defaults of `LIBRARY`: its process umask is never changed, progress only on a terminal.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

OUTPUT_MODES = ("plain", "json")


class Runtime:
    """The policies of one run of a program, and its caches.

    A plain class rather than a dataclass: every command pays for importing dataclasses.
    """

    __slots__ = (
        "checked_dirs",
        "modes",
        "output",
        "own_umask",
        "producers",
        "progress",
        "started_umask",
    )

    def __init__(
        self,
        *,
        own_umask: bool = False,
        output: str = "plain",
        progress: bool = True,
        producers: Callable[[], object] | None = None,
    ) -> None:
        if output not in OUTPUT_MODES:
            raise ValueError(f"output must be one of {OUTPUT_MODES}, not {output!r}")
        # True only in a program of our own: the process umask may follow the store's modes,
        # so what dulwich and sqlite create is covered too (never in someone else's process).
        self.own_umask = own_umask
        self.output = output
        # The program's producer set for delivery (a function making an
        # `inbox.producers.ProducerSet`), handed over so no lookup of installed entry points
        # runs on a command's path; None: delivery looks the installed set up.
        self.producers = producers
        # An index rebuild's progress line on a terminal's stderr (off under --json).
        self.progress = progress and output == "plain"
        # The umask the process started with, once `own_umask` replaced it (-1 before): the
        # programs gc runs (mail scripts, checks, nudges) get it back.
        self.started_umask = -1
        # Directories found real (no link on the way) from the store's directory: trusted
        # for the rest of the run (beads/files.py).
        self.checked_dirs: set[str] = set()
        # Store directory -> (directory mode, file mode) (beads/files.py).
        self.modes: dict[str, tuple[int, int]] = {}

    def set_output(self, mode: str) -> None:
        """Switch the output mode (`--json` is known once the command line is parsed); JSON
        output shows no progress line."""
        if mode not in OUTPUT_MODES:
            raise ValueError(f"output must be one of {OUTPUT_MODES}, not {mode!r}")
        self.output = mode
        if mode == "json":
            self.progress = False


LIBRARY = Runtime()
_current = LIBRARY


def current() -> Runtime:
    """The runtime in force: the program's while it runs under `using`, else `LIBRARY`."""
    return _current


class using:  # noqa: N801 - used as a function: `with using(runtime):`
    """Run the code of a `with` block under `runtime`; the one before is back afterwards,
    whatever happened (a program run in a test's process leaves nothing behind)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._before: Runtime | None = None

    def __enter__(self) -> Runtime:
        global _current
        self._before, _current = _current, self.runtime
        return self.runtime

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        global _current
        if self._before is not None:
            _current = self._before
