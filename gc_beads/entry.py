"""The `gc` and `inbox` programs' entry points: `script` and `inbox_script` for a process of
their own (`[project.scripts]` in pyproject.toml), `main` for a run in a caller's process.

The run's `beads.runtime.Runtime` is made here: a program of our own, whose umask may follow
the store's modes. A few exact argument lists are served without click
(`gc_beads.commands.DIRECT`: `gc hook run`, which Claude Code runs on every prompt and every
stop); every other command line goes through the click root of `gc_beads.cli`.

Everything runs inside one handler, imports included: Ctrl-C at any moment once `main` runs
ends `gc` with exit 130 and one line, and a reader that went away (`gc bead list | head`) ends
it quietly; running out of memory is one line too. The run writes through
`gc_beads.output`'s streams: never failing on the terminal's encoding, and saying so when
its output is lost. This module imports only `sys` before that handler is in place. (Before
`main`, the script pip writes imports `re`, `sys` and this module: a Ctrl-C there is
Python's own, out of gc's reach, and ends the process as an interrupted Python program does.)
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # nothing imported before the handler is in place
if TYPE_CHECKING:
    from gc_beads.output import Streams


def main(program: str = "gc") -> None:
    """Run `gc` (or another program of `gc_beads.commands.PROGRAMS`) with `sys.argv`."""
    _main(program, own_process=False)


def _main(program: str, *, own_process: bool) -> None:
    streams = None
    try:
        import _signal

        # Python's own handler may have been replaced (a test's process): Ctrl-C is ours now.
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        from gc_beads.output import Streams

        streams = Streams()
        streams.install()  # no write fails on the terminal's encoding; a lost output says so
        code = _run(program, own_process)
    except KeyboardInterrupt:
        code = 130
        _say(f"{program}: interrupted")
    except BrokenPipeError:
        code = 0  # the reader went away: not our error, and nothing left to tell it
    except Exception as exc:
        from beads.errors import OUT_OF_MEMORY, GcError, is_interruption, is_out_of_memory

        if is_out_of_memory(exc):  # before click's handler runs (its imports): one line too
            code = GcError.exit_code
            _say(f"{program}: {OUT_OF_MEMORY}")
        elif is_interruption(exc):  # Ctrl-C wrapped by Python during an import
            code = 130
            _say(f"{program}: interrupted")
        else:
            raise
    code = _finish(code, program, streams)
    sys.exit(code)


def inbox() -> None:
    """Run `inbox`: work threads (seed 002), `gc thread` as a program of its own."""
    main("inbox")


def script() -> None:
    """Run `gc` as the process's whole work (the console script): `main`, ending with no
    garbage collection over what the process's end frees anyway (`_run`)."""
    _main("gc", own_process=True)


def inbox_script() -> None:
    """Run `inbox` as the process's whole work (the console script), as `script` runs `gc`."""
    _main("inbox", own_process=True)


def _run(program: str, own_process: bool) -> int | str | None:
    from beads.runtime import Runtime, collecting_rarely, using
    from gc_beads.producers import default_producers

    # A program of our own: its umask may follow the store's modes; delivery derives with the
    # program's producers. The runtime is this run's alone (its caches too); the one before
    # is back when the run ends, and so are the garbage collector's thresholds (a command
    # that runs for long puts them back itself: `beads.runtime.runs_long`).
    runtime = Runtime(own_umask=True, producers=default_producers)
    with using(runtime), collecting_rarely(runtime):
        try:
            return _run_command(program)
        finally:
            if own_process:
                # Python's exit collects garbage over every object the run made (about a
                # tenth of a short command's CPU), only to free memory the process's end
                # frees anyway: frozen, they are left out of those collections (and of the
                # one the thresholds put back would start). Objects still go as their last
                # reference does; stdout and stderr are flushed as always. Never done in a
                # caller's process (`main`).
                import gc

                gc.freeze()


def _run_command(program: str) -> int | str | None:
    import importlib

    from gc_beads.commands import DIRECT

    if sys.argv[1:3] == ["hook", "run"]:
        import os

        from beads.settings.person import HOOK_ENV

        os.environ[HOOK_ENV] = "1"  # what a hook runs is an agent's, never a person's
    direct = DIRECT.get(tuple(sys.argv[1:])) if program == "gc" else None
    if direct is not None:
        module, function = direct
        # Before an event that drains (a tool call needs nothing of it).
        return getattr(importlib.import_module(module), function)(prepare=_prepare_hook)
    from gc_beads.cli import main as click_main

    try:
        click_main(program=program)
    except SystemExit as exc:  # click_main always ends this way, with its exit code
        return exc.code
    return 0


def _prepare_hook() -> None:
    from gc_beads.producers import register_arrivals

    register_arrivals()  # a sync the hook starts (`sync.auto`) announces what it brings


def _finish(code: int | str | None, program: str, streams: Streams | None) -> int | str | None:
    """Flush stdout here, where a failed write can still be handled (past this point Python
    would print "Exception ignored ... BrokenPipeError" at exit), then put the streams back."""
    try:
        return _flushed(code, program)
    finally:
        if streams is not None:
            streams.restore()


def _flushed(code: int | str | None, program: str) -> int | str | None:
    if sys.stdout is None:  # started with stdout closed (`gc hook run >&-`)
        return code
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    except OSError as exc:  # a full device, an I/O error: the output is lost, and we say so
        _silence_stdout()
        from beads.errors import OutputLost

        error = exc if isinstance(exc, OutputLost) else OutputLost(exc)
        _say(f"{program}: {error.message}")
        return code if code not in (0, None) else error.exit_code
    except KeyboardInterrupt:
        _say(f"{program}: interrupted")
        return 130
    return code


def _silence_stdout() -> None:
    from gc_beads.output import silence

    silence(sys.stdout)


def _say(line: str) -> None:
    # Best effort: a stderr that cannot be written (closed, a full device, no memory left to
    # write with) loses the line, never the exit code.
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError, MemoryError):
        pass


if __name__ == "__main__":
    script()
