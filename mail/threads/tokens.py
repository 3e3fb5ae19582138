"""The lease tokens the command line's claims got, kept per agent under `.runtime/leases/`.

Each `gc thread claim` is a process of its own, so the token its claim returned would be
lost when it exits. It is kept here (`.runtime/leases/<agent>.json`: thread id -> token, one
small file per agent, written whole through a rename under a lock of its own), and a later
`renew`, `update`, `done`, `fail`, `release`, `reply` or `cancel` of that agent without
`--lease-token` passes it on: a claim newer than this machine's last claim for the agent (a
process or machine that took the thread over under the same name) is then a
`lease_conflict`. Machine-local: `.runtime` is never synced.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from beads import files
from beads.errors import Conflict
from beads.records.record import check_agent
from beads.store import Store
from beads.writelock import WriteLock

LEASES_DIR = "leases"
KEEP = 256  # tokens kept per agent, the newest (an agent rarely holds more than a few threads)
LOCK_TIMEOUT = 30.0
LOCK_POLL = 0.005  # seconds between tries while another claim of the agent writes


def token_file(store: Store, agent: str) -> Path:
    """The agent's file (an agent `rig/name` is one file name: `rig%2Fname.json`; agent
    names are checked, `beads.records.record.check_agent`: letters, digits, `.`, `_`, `-`, one
    `/`)."""
    return store.runtime / LEASES_DIR / f"{check_agent(agent).replace('/', '%2F')}.json"


def read_tokens(store: Store, agent: str) -> dict[str, str]:
    """The agent's kept tokens by thread id ({} when none; a damaged file counts as none)."""
    try:
        value = json.loads(token_file(store, agent).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def keep_token(store: Store, agent: str, thread_id: str, token: str | None) -> None:
    """Record the token of the agent's claim of `thread_id` (None: forget it, the lease
    having been given back or finished)."""
    path = token_file(store, agent)
    root = str(store.root)
    files.make_dirs(root, str(path.parent))
    lock = WriteLock(root, f"{path}.lock")
    if not lock.acquire(timeout=LOCK_TIMEOUT, poll=LOCK_POLL):
        raise Conflict(f"another process holds {path}.lock; try again")
    try:
        tokens = read_tokens(store, agent)
        if token is None and thread_id not in tokens:
            return
        tokens.pop(thread_id, None)
        if token is not None:
            tokens[thread_id] = token
        kept = dict(list(tokens.items())[-KEEP:])
        data = json.dumps(kept, sort_keys=False).encode()
        files.write_atomic(root, str(path), data, os.path.join(store.runtime, "tmp"))
    finally:
        lock.release()
