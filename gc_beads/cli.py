"""The `gc` command: one click group whose sub-groups live with their layer.

Sub-groups are imported only when invoked (and `gc --help` imports none of them), so each
command pays only for what it uses (`gc_beads.commands` names them by module path). Before
a command runs, the program registers every layer's settings.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import Any

import click

from beads.cli.arguments import check_arguments
from beads.cli.common import (
    Settings,
    global_options,
    one_line,
    prepare_command,
    settings,
)
from beads.errors import (
    OUT_OF_MEMORY,
    GcError,
    Interrupted,
    InvalidInput,
    StorageError,
    Terminated,
    Termination,
    is_interruption,
    is_out_of_memory,
)
from beads.records.record import shown
from beads.runtime import LIBRARY, Runtime, current, using
from gc_beads.commands import COMMANDS, PROGRAMS


class LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that subcommand runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        prepare_program()
        module, attribute, _help = COMMANDS[cmd_name]
        return prepare_command(getattr(importlib.import_module(module), attribute))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@global_options
@click.version_option("0.1.0", prog_name="gc-beads")
def cli() -> None:
    """gc-beads: a git-backed bead store with file-based messaging for AI agents.

    Exit codes: 0 ok, 10 a yes/no command's "no", 20 conflict, 30 invalid input,
    40 not found, 50 storage or internal error, 130 interrupted, 143 terminated while
    waiting.
    """


def prepare_program() -> None:
    """What every command of the program needs before it runs: every layer's settings
    registered, a sync's arrivals announced to the agents here, and every layer's check
    run by `gc doctor`. Imports no producer and no command (delivery gets the producer set
    from the run's runtime, `gc_beads.entry`)."""
    from gc_beads import settings
    from gc_beads.health import register_checks
    from gc_beads.producers import register_arrivals

    settings.load()
    register_arrivals()
    register_checks()


def main(argv: list[str] | None = None, program: str = "gc") -> None:
    """Run `gc` (or another of PROGRAMS), mapping every failure to one stderr line and its
    exit code; under the entry point's runtime, or one of its own when called directly."""
    runtime = current()
    if runtime is LIBRARY:  # called directly (tests, other programs): the program's set too
        from gc_beads.producers import default_producers

        runtime = Runtime(producers=default_producers)
    with using(runtime):
        _main(argv, program)


def _main(argv: list[str] | None, program: str) -> None:
    args = sys.argv[1:] if argv is None else argv
    instruction = os.environ.get("_GC_COMPLETE")
    if instruction:  # the shell asks for completions (README: Shell completion)
        from click.shell_completion import shell_complete

        sys.exit(shell_complete(cli, {}, "gc", "_GC_COMPLETE", instruction))
    ctx_settings = None
    sys.unraisablehook = _quiet_unraisable
    from beads.city import forget_chosen

    forget_chosen()  # a `--city` of an earlier command run in this process is not this one's
    try:
        args = check_arguments(args)
        root = cli
        if program in PROGRAMS:
            prepare_program()
            module, attribute = PROGRAMS[program]
            root = getattr(importlib.import_module(module), attribute)
        obj = Settings(current())
        with root.make_context(program, list(args), obj=obj) as ctx:
            ctx_settings = settings(ctx)
            root.invoke(ctx)
        sys.exit(0)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:  # Ctrl-C or end of input at one of click's prompts
        _fail(Interrupted("interrupted"), args, ctx_settings, program=program)
    except click.ClickException as exc:
        if _missing_subcommand(exc):  # `gc mail` alone: say so, then the group's help
            error, help_text = InvalidInput("missing subcommand"), exc.ctx.get_help()
            _fail(error, args, ctx_settings, program=program, detail=help_text)
        _fail(InvalidInput(exc.format_message()), args, ctx_settings, program=program)
    except GcError as exc:
        _fail(exc, args, ctx_settings, program=program)
    except KeyboardInterrupt:
        _fail(Interrupted("interrupted"), args, ctx_settings, program=program)
    except Termination:  # SIGTERM while the command waited (beads.waiting.terminable)
        _fail(Terminated("terminated"), args, ctx_settings, program=program)
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (`gc bead list | head`): not our error
        sys.exit(0)
    except Exception as exc:  # a fault of ours: one line, unless --debug asks for the trace
        if is_interruption(exc):
            _fail(Interrupted("interrupted"), args, ctx_settings, program=program)
        if (ctx_settings and ctx_settings.debug) or "--debug" in args:
            raise
        if is_out_of_memory(exc):  # a memory limit (ulimit -v) reached: no fault of ours either
            error: GcError = GcError(OUT_OF_MEMORY)
        else:
            # A full disk, a store this user may not write or a locale that cannot name a
            # file is no fault of ours: say which.
            error = (
                _storage_error(exc)
                or _locale_error(exc)
                or GcError(f"internal error: {type(exc).__name__}: {exc}")
            )
        _fail(error, args, ctx_settings, program=program)


def _missing_subcommand(exc: click.ClickException) -> bool:
    """Whether `exc` is click's complaint that a group was given no subcommand."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return True
    ctx = getattr(exc, "ctx", None)
    return (
        isinstance(exc, click.UsageError)
        and isinstance(getattr(ctx, "command", None), click.Group)
        and exc.message == "Missing command."
    )


def _storage_error(exc: Exception) -> StorageError | None:
    """The storage error an OS or sqlite error is (None for any other exception)."""
    import errno

    sqlite3 = sys.modules.get("sqlite3")  # loaded if the error can be one of its own
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return StorageError(f"no space left on device{where}")
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return StorageError(f"store is read-only: {exc.strerror}{where}")
        return StorageError(f"{exc.strerror or exc}{where}")
    if sqlite3 is not None and isinstance(exc, sqlite3.Error):
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        # SHMSIZE: the shared-memory file of a WAL database could not grow (a full disk).
        full = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_IOERR_SHMSIZE
        if code == sqlite3.SQLITE_FULL or full:
            return StorageError("no space left on device (the index could not be written)")
        if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_CANTOPEN):
            return StorageError(f"store is read-only: the index cannot be written ({exc})")
        return StorageError(f"index error: {exc}")
    return None


def _locale_error(exc: Exception) -> InvalidInput | None:
    """The refusal of text the locale's encoding cannot carry to the system (a file name, a
    program's argument: `LC_ALL=C` without Python's UTF-8 mode is ASCII), or None. Output
    never fails so (`gc_beads.output`), and arguments are text in any locale
    (`check_arguments`): this is text gc hands on, a stored `exec:` program's path, say."""
    import codecs

    if not isinstance(exc, UnicodeEncodeError):
        return None
    system = codecs.lookup(sys.getfilesystemencoding()).name
    if system == "utf-8" or codecs.lookup(exc.encoding).name != system:
        return None
    return InvalidInput(
        f"{shown(exc.object)} cannot be handed to the system in this locale's encoding "
        f"({system}): use a UTF-8 locale (LC_ALL=C.UTF-8)"
    )


def _quiet_unraisable(unraisable: Any) -> None:
    # After a failed write (a full disk), finalizers of half-written files fail to close them
    # again as the error unwinds (dulwich's GitFile): that error is reported once, or was
    # harmless (derived data after a commit), never as an "Exception ignored" traceback.
    if not isinstance(unraisable.exc_value, OSError):
        sys.__unraisablehook__(unraisable)


def _fail(
    error: GcError,
    args: Any,
    options: Any,
    exit_code: int | None = None,
    program: str = "gc",
    detail: str | None = None,
) -> None:
    """Report `error`: its JSON object on stdout under --json, one line on stderr, then
    `detail` (a group's help) as lines of its own on stderr, and exit."""
    as_json = (options.json if options is not None else False) or "--json" in args
    # A stream that cannot be written (a reader gone, a full device) loses its text, never
    # the exit code: that is how a caller tells a refusal from a success.
    with contextlib.suppress(OSError, ValueError):
        if as_json:
            import json

            click.echo(json.dumps({"ok": False, "error": error.to_json()}))
    with contextlib.suppress(OSError, ValueError):
        click.echo(f"{program}: {one_line(error.message)}", err=True)
        if detail and not as_json:
            click.echo(detail, err=True)
    sys.exit(error.exit_code if exit_code is None else exit_code)


if __name__ == "__main__":
    main()
