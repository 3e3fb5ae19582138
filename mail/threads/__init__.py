"""Work threads (seed 002): claimable threads with leases, kinds, artifacts, an event cursor,
`watch` and `wait-reply`, on the bead store. `Threads(store)` is the API; `gc thread` and the
`inbox` command are a thin layer over it (`mail.threads.cli`, `mail.threads.inboxcli`)."""

from mail.threads.api import Threads
from mail.threads.model import (
    InvalidTransition,
    Lease,
    LeaseConflict,
    Thread,
    ThreadMessage,
    Wake,
)

__all__ = [
    "InvalidTransition",
    "Lease",
    "LeaseConflict",
    "Thread",
    "ThreadMessage",
    "Threads",
    "Wake",
]
