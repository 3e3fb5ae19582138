"""Fault-injection points of the write path, for the crash tests.

`GC_FAULT_POINT=<name>` makes the process kill itself with SIGKILL when it reaches that
point, exactly as a crash or `kill -9` would. Unset, a point costs one comparison.
"""

from __future__ import annotations

import os
import signal

POINTS = ("before-objects", "after-objects", "after-ref", "mid-view", "after-view", "after-index")
_ARMED = os.environ.get("GC_FAULT_POINT")


def fault(point: str) -> None:
    """Die here if this point is armed."""
    if _ARMED == point:
        os.kill(os.getpid(), signal.SIGKILL)
