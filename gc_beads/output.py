"""The standard streams of one run of a program (`gc_beads.entry`).

Two guarantees, for every command at once:

- Writing never fails on the terminal's encoding. Stored text may hold any character, and a
  legacy locale (`PYTHONIOENCODING=latin-1`, `LANG=fr_FR.ISO-8859-1`) cannot encode most of
  them: such characters are written as backslash escapes (`\\u6f22`) on stdout and stderr.
  (JSON replies escape every non-ASCII character anyway.) An ASCII stdout (the C locale
  without UTF-8 mode) is written as UTF-8, as click writes its own output there.
- A failed write to stdout (a full device, an I/O error) raises `beads.errors.OutputLost`,
  so the error says the output was lost, not that the command's change failed. A reader that
  went away (a closed pipe) stays a BrokenPipeError: the program ends quietly.
"""

from __future__ import annotations

import codecs
import io
import os
import sys

from beads.errors import OutputLost

ESCAPED = "backslashreplace"
# Streams whose underlying stream could not be detached from: kept, so that their finalizer
# never closes a stream the process still uses.
_KEPT: list[io.TextIOWrapper] = []


class Output(io.TextIOWrapper):
    """stdout during a run: characters the encoding lacks escaped, a failed write raised as
    OutputLost. After a failure the descriptor is pointed at /dev/null, so what is still
    buffered drains nowhere and the run's later writes (an error object, the final flush)
    neither fail again nor say so twice; code that handles the failure itself (a hook's
    reply, handed out again at the next event) decides what it means."""

    def write(self, text: str) -> int:
        if text == "":  # nothing to write (click probes a stream so): no system call either
            return 0
        try:
            return super().write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._lose(exc) from exc

    def flush(self) -> None:
        try:
            super().flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._lose(exc) from exc

    def _lose(self, exc: OSError) -> OutputLost:
        silence(self)
        return OutputLost(exc)


class Streams:
    """The streams a run replaced or changed, to put back when it ends (a run in a caller's
    process leaves its streams as they were)."""

    def __init__(self) -> None:
        self.stdout: io.TextIOWrapper | None = None
        self.output: Output | None = None
        self.stderr: io.TextIOWrapper | None = None
        self.stderr_errors = ""

    def install(self) -> None:
        """Put an `Output` over stdout's buffer and make stderr escape what it cannot encode.
        A stream that is not a text stream over a buffer (closed, or a caller's own object)
        is left alone."""
        stdout = sys.stdout
        if isinstance(stdout, io.TextIOWrapper) and not isinstance(stdout, Output):
            try:
                stdout.flush()
                encoding = stdout.encoding
                if codecs.lookup(encoding).name == "ascii":
                    encoding = "utf-8"
                output = Output(
                    stdout.buffer,
                    encoding=encoding,
                    errors=ESCAPED,
                    line_buffering=stdout.line_buffering,
                    write_through=stdout.write_through,
                )
            except (OSError, ValueError, LookupError):
                output = None  # an unusable stdout: left as it is
            if output is not None:
                self.stdout, self.output, sys.stdout = stdout, output, output
        stderr = sys.stderr
        if isinstance(stderr, io.TextIOWrapper) and stderr.errors != ESCAPED:
            try:
                errors = stderr.errors
                stderr.reconfigure(errors=ESCAPED)
                self.stderr, self.stderr_errors = stderr, errors
            except (OSError, ValueError):
                pass  # a closed stderr: nothing will be written to it

    def restore(self) -> None:
        """Put the streams back (call after the run's last write: `entry._finish`)."""
        if self.output is not None:
            sys.stdout = self.stdout
            try:
                self.output.detach()  # flushes; the buffer stays open for the stream put back
            except (OSError, ValueError):
                _KEPT.append(self.output)
            self.output = None
        if self.stderr is not None:
            try:
                self.stderr.reconfigure(errors=self.stderr_errors)
            except (OSError, ValueError):
                pass  # closed by the run (a reader gone): nothing to put back
            self.stderr = None


def silence(stream: object) -> None:
    """Point `stream`'s descriptor at /dev/null: what it still holds, and anything written
    later, goes nowhere instead of failing again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(devnull, stream.fileno())  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError):
        pass
    finally:
        os.close(devnull)
