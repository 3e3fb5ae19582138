"""Items the stream dropped before this machine's relay received them (seed 001's limits).

The stream keeps messages up to `delivery.nats.max_age` and `delivery.nats.max_msgs`; a relay
that is down longer than that, or behind by more, finds the oldest messages gone. Its
consumer's view cannot say which of the dropped messages were for this machine (a consumer
skips other machines' subjects), so a gap is reported as "up to N" items: the stream
sequences dropped past the last one this relay had considered.

The relay's floor is the highest stream sequence it has considered: every message up to it
was delivered here, or was not for this machine. It rises to the stream's last sequence when
the consumer is caught up (nothing pending, nothing unacknowledged), and to the sequence of
each message delivered; the relay's status file keeps it across restarts. A stream whose
first sequence is above floor + 1 dropped the messages between: that many items at most were
lost here.
"""

from __future__ import annotations


def check(
    floor: int | None, first_seq: int, last_seq: int, caught_up: bool
) -> tuple[int, int, tuple[int, int] | None]:
    """`(new floor, lost, (first, last) sequences lost or None)` from the relay's floor (None
    for a relay that never ran here: it reports nothing) and what the server says of the
    stream (`first_seq`, `last_seq`) and of the consumer (`caught_up`: nothing pending,
    nothing unacknowledged). The consumer's own delivered sequence is no guide: the server
    moves it past messages it dropped."""
    seen = floor or 0
    lost, span = 0, None
    if floor is not None and first_seq > seen + 1:
        lost, span = first_seq - 1 - seen, (seen + 1, first_seq - 1)
    new_floor = max(seen, first_seq - 1, last_seq if caught_up else 0)
    return new_floor, lost, span


def received(floor: int | None, sequences: list[int]) -> int | None:
    """The floor once messages of these stream sequences are delivered here."""
    return max([floor or 0, *sequences]) if sequences else floor


def describe(lost: int, span: tuple[int, int]) -> str:
    """One line for a gap."""
    return (
        f"lost up to {lost} item(s): stream sequences {span[0]}..{span[1]} were dropped by the "
        "stream's limits (delivery.nats.max_age, max_msgs) before this relay received them"
    )
