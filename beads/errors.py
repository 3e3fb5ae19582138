"""One error type per failure kind; each carries its JSON code and its exit code.

The exit codes are the command-line contract of DESIGN.md: 10 nothing matched, 20 conflict,
30 invalid input or state, 40 not found, 50 storage or internal error, 130 interrupted, 143
terminated while waiting.
"""

from __future__ import annotations


class GcError(Exception):
    """Base of every error gc reports to a user (never shown with a traceback)."""

    code = "internal_error"
    exit_code = 50

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, object]:
        """The error as the `"error"` object of a JSON reply."""
        out: dict[str, object] = {"code": self.code, "message": self.message}
        out.update(self.details)
        return out


class NoMatch(GcError):
    """A yes/no question answered "no" (exit 10): a library call raises it (no answer to a
    decision yet); the command line replies `ok: true` with a false `found` instead."""

    code = "no_match"
    exit_code = 10


class Conflict(GcError):
    """Someone else holds what we need: a lock timed out, the ref moved (exit 20)."""

    code = "conflict"
    exit_code = 20


class InvalidInput(GcError):
    """Bad input or a state that forbids the operation (exit 30)."""

    code = "invalid_input"
    exit_code = 30


class NotFound(GcError):
    """An id, a file or the store itself does not exist (exit 40)."""

    code = "not_found"
    exit_code = 40


class NoStore(NotFound):
    """No store where one was looked for (exit 40): at `where`, the directory named, or (None)
    here or above. A program of its own (`inbox`) says it in its own terms."""

    def __init__(self, message: str, where: str | None = None) -> None:
        super().__init__(message)
        self.where = where


class StorageError(GcError):
    """The store on disk is damaged or unreadable (exit 50)."""

    code = "storage_error"
    exit_code = 50


class OutputLost(GcError, OSError):
    """The command's output could not be written (stdout on a full device, an I/O error:
    exit 50). A command writes its reply once its work is done, so what it changed is kept:
    the message says so, where "no space left on device" would read as a failed write. An
    OSError too, as the failed write was: code that handles those handles this one."""

    code = "output_lost"
    exit_code = 50

    def __init__(self, cause: OSError) -> None:
        super().__init__(
            "any change the command made is kept, but its output could not be written: "
            f"{cause.strerror or cause}"
        )
        self.errno, self.strerror = cause.errno, cause.strerror


class Interrupted(GcError):
    """Ctrl-C (exit 130)."""

    code = "interrupted"
    exit_code = 130


class Terminated(GcError):
    """SIGTERM while a command waits (exit 143, the signal's conventional status: 128 + 15)."""

    code = "terminated"
    exit_code = 143


class Termination(BaseException):
    """Raised where SIGTERM ends a command that waits (`beads.waiting.terminable`): like
    KeyboardInterrupt, no `except Exception` stops it on its way out; the program reports it
    as `Terminated`."""


# What a run that exhausts its memory (a `ulimit -v`) says, with exit 50: no traceback, and
# no "internal error" (no fault of gc's).
OUT_OF_MEMORY = "out of memory (the process's memory limit, ulimit -v, may be too low)"


def is_out_of_memory(exc: BaseException) -> bool:
    """True when `exc` says the process ran out of memory: a MemoryError, or a shared library
    (sqlite's) the loader could not map into it, as under a `ulimit -v`."""
    return isinstance(exc, MemoryError) or (
        isinstance(exc, ImportError) and "failed to map segment" in str(exc)
    )


def is_interruption(exc: BaseException) -> bool:
    """True when Ctrl-C is behind `exc`: Python 3.11 wraps a KeyboardInterrupt raised inside
    an import-time hook (`__set_name__`) in a RuntimeError."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def telling_line(stderr: str, limit: int = 300) -> str:
    """The one line of a program's `stderr` that says why it failed, for a one-line
    message: its last `fatal:` line, else its last `error:` line (git's words; git may
    repeat an `error:` for each object it could not read before its `fatal:`), else its
    last line that is not blank; cut at `limit` characters."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for prefix in ("fatal:", "error:"):
        said = [line for line in lines if line.startswith(prefix)]
        if said:
            return said[-1][:limit]
    return lines[-1][:limit] if lines else "(it said nothing)"
