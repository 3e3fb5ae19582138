"""The `gc` program's entry point.

A few exact argument lists are served without click: Claude Code runs `gc hook run` on every
prompt and every stop, and importing click alone costs about as much as the hook's own work.
Every other command line, and `gc hook run` with any option, goes through the click CLI of
`beads.cli.main`. The table names modules of higher layers as data, never as imports.

Everything runs inside one handler, imports included: Ctrl-C at any moment ends `gc` with
exit 130 and one line, and a reader that went away (`gc bead list | head`) ends it quietly.
This module imports only `sys` before that handler is in place.
"""

from __future__ import annotations

import sys

# exact arguments -> (module, function returning the exit code)
DIRECT: dict[tuple[str, ...], tuple[str, str]] = {
    ("hook", "run"): ("gates.pretool", "main"),
    ("hook", "run", "--event", "PreToolUse"): ("gates.pretool", "main_pretooluse"),
}


def main(program: str = "gc") -> None:
    """Run `gc` (or `inbox`, the other program of `beads.cli.main.PROGRAMS`)."""
    import _signal

    try:
        # The launcher leaves Ctrl-C to the signal's default action until this handler is in.
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        code = _run(program)
    except KeyboardInterrupt:
        code = 130
        _say(f"{program}: interrupted")
    except BrokenPipeError:
        code = 0  # the reader went away: not our error, and nothing left to tell it
    except Exception as exc:
        from beads.errors import is_interruption

        if not is_interruption(exc):  # Ctrl-C wrapped by Python during an import
            raise
        code = 130
        _say(f"{program}: interrupted")
    sys.exit(_finish(code, program))


def _run(program: str) -> int | str | None:
    import importlib

    from beads import files

    files.own_umask = True  # a program of our own: its umask may follow the store's modes
    if sys.argv[1:3] == ["hook", "run"]:
        import os

        from beads.person import HOOK_ENV

        os.environ[HOOK_ENV] = "1"  # what a hook runs is an agent's, never a person's
    direct = DIRECT.get(tuple(sys.argv[1:])) if program == "gc" else None
    if direct is not None:
        module, function = direct
        return getattr(importlib.import_module(module), function)()
    from beads.cli.main import main as click_main

    try:
        click_main(program=program)
    except SystemExit as exc:  # click_main always ends this way, with its exit code
        return exc.code
    return 0


def _finish(code: int | str | None, program: str) -> int | str | None:
    """Flush stdout here, where a closed pipe can still be handled; past this point Python
    would print "Exception ignored ... BrokenPipeError" at exit."""
    if sys.stdout is None:  # started with stdout closed (`gc hook run >&-`)
        return code
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    except KeyboardInterrupt:
        _say(f"{program}: interrupted")
        return 130
    return code


def _silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _say(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    main()
