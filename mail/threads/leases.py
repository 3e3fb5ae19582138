"""Leases of work threads: claim, renew, release.

Claims are decided under the write lock from the thread as git holds it (`Batch.get`), so
two processes never both get a lease; with a remote, a claim stands once the remote accepted
it. A renewal only moves the lease's `expires_at` (no message: it is not an event).
"""

from __future__ import annotations

import os
import time

from beads.errors import GcError, InvalidInput
from beads.records.record import check_agent
from beads.records.times import now_stamp, stamp_at
from beads.store import Store
from inbox.follow import Change
from mail.threads.model import (
    DEFAULT_LEASE_SECONDS,
    HELD,
    TERMINAL,
    Lease,
    LeaseConflict,
    Thread,
    check_seconds,
)
from mail.threads.writing import ThreadWriter


class ThreadLeases(ThreadWriter):
    """The work threads of one store, with their leases.

    The token of each claim made through this object is kept (`own_tokens`, by agent and
    thread): a write of that agent without `lease_token` must match it, so a process whose
    claim another process of the same agent name has since replaced is refused.
    """

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.own_tokens: dict[tuple[str, str], str] = {}

    def remember(self, agent: str, thread_id: str, token: str) -> None:
        """Take `token` as the agent's own claim of `thread_id` (one an earlier process of
        this agent got: the command line keeps them, `mail.threads.tokens`)."""
        self.own_tokens[(agent, thread_id)] = token

    def _token(self, agent: str, thread_id: str, given: str | None) -> str | None:
        """The token a write of `agent` must match: the one given, else its own claim's."""
        if given is not None:
            if not isinstance(given, str):
                raise InvalidInput("a lease token is a string")
            return given
        return self.own_tokens.get((agent, thread_id))

    def claim(
        self, agent: str, thread: str, *, lease_seconds: float = DEFAULT_LEASE_SECONDS
    ) -> Lease:
        """Take the thread's lease: atomic under the write lock, refused (LeaseConflict) while
        another lease is live; an expired one may be taken over."""
        check_agent(agent)
        seconds = check_seconds(lease_seconds)
        with self._writing(thread) as w:
            current = w.thread
            if current.status in TERMINAL:
                raise w.refuse("claim")
            now = now_stamp()
            held = current.lease
            if held is not None and held.live(now):
                raise LeaseConflict(
                    f"thread {current.thread_id} is claimed by {held.agent} until "
                    f"{held.expires_at}",
                    holder=held.agent,
                    expires_at=held.expires_at,
                )
            if current.status == "pending":
                change = {"event": "claimed", "from": "pending", "to": "claimed"}
            elif current.status in HELD:  # a lease that was let expire (or was lost)
                change = {"event": "claimed", "from": current.status, "to": "claimed"}
                if held is not None:
                    change["expired_lease"] = held.to_json()
            else:
                raise w.refuse("claim")
            lease = Lease(agent, os.urandom(8).hex(), now, stamp_at(time.time() + seconds))
            change["lease"] = lease.to_json()
            w.change(
                agent, change, status="claimed", assignee=agent, meta={"lease": lease.to_json()}
            )
            w.describe("claim", agent, f"lease until {lease.expires_at}")
        self._confirm(current.thread_id, lease)
        self.own_tokens[(agent, current.thread_id)] = lease.token
        return lease

    def _confirm(self, thread_id: str, lease: Lease) -> None:
        """With a remote, a claim stands once the remote accepted it: a sync whose merge gave
        the thread to another machine's claim (one the remote accepted first) is a
        LeaseConflict. A sync that fails (the remote unreachable, refused, interrupted) leaves
        the claim unconfirmed: it is released by a follow-up commit before the error goes on,
        marked `confirmed: false`, so no unconfirmed lease outlives the call."""
        from beads.sync.auto import has_remote

        if not has_remote(self.store.root / ".git"):
            return  # one machine: the commit under the write lock is the claim
        from beads.sync.syncing import sync

        try:
            sync(self.store)
        except (GcError, KeyboardInterrupt) as exc:
            withdrawn = self._withdraw(thread_id, lease)
            if isinstance(exc, GcError):
                exc.details["confirmed"] = False
                if withdrawn:
                    exc.message += "; the claim was not confirmed and is released"
            raise
        held = Thread.from_bead(self._thread_bead(thread_id)).lease
        if held is None or held.token != lease.token:
            raise LeaseConflict(
                f"thread {thread_id} was claimed first on another machine"
                + (f" by {held.agent} until {held.expires_at}" if held else ""),
                holder=held.agent if held else None,
                expires_at=held.expires_at if held else None,
            )

    def _withdraw(self, thread_id: str, lease: Lease) -> bool:
        """Release an unconfirmed claim (one commit, an event saying why); False when the
        thread no longer carries that lease (a merge gave it to another claim)."""
        with self._writing(thread_id) as w:
            held = w.thread.lease
            if held is None or held.token != lease.token or w.thread.status not in HELD:
                return False
            change = {
                "event": "released",
                "from": w.thread.status,
                "to": "pending",
                "reason": "unconfirmed",
                "lease": lease.to_json(),
            }
            text = "claim not confirmed by the remote: released"
            w.change(lease.agent, change, status="pending", unset=("lease",), summary=text)
            w.describe("release", lease.agent, text)
        return True

    def renew(
        self,
        agent: str,
        thread: str,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        lease_token: str | None = None,
    ) -> Lease:
        """Move the holder's lease's `expires_at` (no message: a renewal is not an event)."""
        check_agent(agent)
        seconds = check_seconds(lease_seconds)
        with self._writing(thread) as w:
            if w.thread.status not in HELD:
                raise w.refuse("renew")
            held = held_by(w.thread, agent, self._token(agent, w.thread.thread_id, lease_token))
            expired = not held.live(now_stamp())
            lease = Lease(agent, held.token, held.claimed_at, stamp_at(time.time() + seconds))
            bead = w.batch.update(w.thread.thread_id, meta={"lease": lease.to_json()})
            w.changes.append(Change(bead))
            w.describe("renew", agent, f"lease until {lease.expires_at}")
        if expired:
            # A lease that ran out may have been claimed on another machine meanwhile:
            # renewing it is a claim again, and stands only once the remote accepted it.
            self._confirm(w.thread.thread_id, lease)
        return lease

    def release(
        self,
        agent: str,
        thread: str,
        *,
        reason: str | None = None,
        lease_token: str | None = None,
    ) -> Thread:
        """Give the lease back: the thread is pending (claimable) again."""
        check_agent(agent)
        with self._writing(thread) as w:
            if w.thread.status not in HELD:
                raise w.refuse("release")
            held_by(w.thread, agent, self._token(agent, w.thread.thread_id, lease_token))
            change = {"event": "released", "from": w.thread.status, "to": "pending"}
            bead = w.change(agent, change, status="pending", unset=("lease",), summary=reason)
            w.describe("release", agent, reason or "")
        self.own_tokens.pop((agent, w.thread.thread_id), None)
        return Thread.from_bead(bead)


def held_by(thread: Thread, agent: str, token: str | None = None) -> Lease:
    """The lease `agent` holds on `thread` (an expired one nobody took over counts); with
    `token`, only if the thread's lease is that very claim (not a newer one, even of the same
    agent name)."""
    lease = thread.lease
    if lease is None:
        raise LeaseConflict(
            f"thread {thread.thread_id} is not claimed: claim it first", holder=None
        )
    if lease.agent != agent:
        raise LeaseConflict(
            f"thread {thread.thread_id} is claimed by {lease.agent}, not {agent}",
            holder=lease.agent,
            expires_at=lease.expires_at,
        )
    if token is not None and token != lease.token:
        raise LeaseConflict(
            f"thread {thread.thread_id} was claimed again by {lease.agent} at "
            f"{lease.claimed_at} (until {lease.expires_at}): this lease token is not the live "
            "lease's, so its holder no longer holds the thread",
            holder=lease.agent,
            expires_at=lease.expires_at,
        )
    return lease
