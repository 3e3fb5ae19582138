"""What a program decides once, at its entry point, for the library code beneath it.

A `Runtime` carries the umask policy, the output mode and whether a long rebuild may show its
progress, with the caches that depend on them: the umask the process started with, and,
during a write only (`beads.files.checking`), the directories checked for links and the store
modes found. The `gc` program makes one at its entry point and runs under it
(`using`); code called from there without a handle on it (writing a file, spawning a program,
rebuilding the index) asks `current()`. A library caller sets nothing and gets the safe
defaults of `LIBRARY`: its process umask is never changed, progress only on a terminal.

The program also runs Python's cyclic garbage collector rarely (`collecting_rarely`): a short
command's imports would otherwise trigger dozens of collections that find next to nothing.
A command that runs for long (a server, a wait) calls `runs_long()` to get the usual
collections back.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

OUTPUT_MODES = ("plain", "json")
# The collector's first threshold during a short run: more than the container objects a send
# or a claim keeps (about 27,000, nearly all of them modules' code and classes, never
# garbage), so such a command never collects, while a long command (an index rebuild) still
# does, every this many objects, which bounds what cyclic garbage it can pile up.
SHORT_RUN_THRESHOLD = 100_000


class Runtime:
    """The policies of one run of a program, and its caches.

    A plain class rather than a dataclass: every command pays for importing dataclasses.
    """

    __slots__ = (
        "checked_dirs",
        "collector",
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
        # Directories found real (no link on the way) from the store's directory, and store
        # directory -> (directory mode, file mode): trusted inside a `beads.files.checking`
        # block (a write) alone, None outside one, so a run that lasts for hours looks again
        # at each write as a new command would.
        self.checked_dirs: set[str] | None = None
        self.modes: dict[str, tuple[int, int]] | None = None
        # The garbage collector's thresholds to put back once the run turns out long
        # (`runs_long`), while `collecting_rarely` holds them raised; else None.
        self.collector: tuple[int, int, int] | None = None

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


class collecting_rarely:  # noqa: N801 - used as a function: `with collecting_rarely(rt):`
    """Run a `with` block, `runtime`'s run, with the cyclic garbage collector's first
    threshold raised to `SHORT_RUN_THRESHOLD` (unless it is higher, or 0: collection off);
    the thresholds found are back afterwards, whatever happened, and earlier if the run calls
    `runs_long()`. Whether the collector is enabled is never changed."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._before: tuple[int, int, int] | None = None

    def __enter__(self) -> Runtime:
        import gc

        before = self._before = gc.get_threshold()
        if 0 < before[0] < SHORT_RUN_THRESHOLD:
            gc.set_threshold(SHORT_RUN_THRESHOLD, before[1], before[2])
            self.runtime.collector = before
        return self.runtime

    def __exit__(self, *exc: object) -> None:
        import gc

        if self._before is not None:
            gc.set_threshold(*self._before)
        self.runtime.collector = None


def runs_long() -> None:
    """Declare that the command running will run for long (it serves, it waits): the garbage
    collector collects as often as it did before the program started, as a long run needs.
    Cheap, and a no-op when called again or outside a program (a library's caller)."""
    runtime = _current
    if runtime.collector is not None:
        import gc

        gc.set_threshold(*runtime.collector)
        runtime.collector = None
