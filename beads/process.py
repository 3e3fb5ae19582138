"""Running a user's program: never through a shell, bounded in time, children included."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path


def run_bounded(
    argv: list[str], timeout: float, cwd: Path | None = None
) -> tuple[int, bytes, bytes]:
    """Run `argv` with empty stdin; returns `(exit code, stdout, stderr)`.

    The program gets a process group of its own, so past `timeout` it is killed with every
    child it started (which would otherwise hold the pipes open) and TimeoutExpired is raised.
    OSError (missing, not executable) propagates for the caller to word.
    """
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return process.returncode, out, err
