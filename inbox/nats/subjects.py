"""Subject names of the stream (seed 001): `inbox.agent.<name>`, `inbox.rig.<rig>`,
`inbox.all`, and message ids.

A name becomes one subject token: every character but letters, digits, `_` and `-` is written
as `%XX` (its UTF-8 bytes), so `.`, `/`, `*` and `>` in a name never split a subject into more
tokens nor make it a wildcard (`myrig/witness` is `inbox.agent.myrig%2Fwitness`).
"""

from __future__ import annotations

import re

PREFIX = "inbox"
ALL = f"{PREFIX}.all"
ALL_RIGS = f"{PREFIX}.rig.>"
STREAM_SUBJECTS = f"{PREFIX}.>"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def token(name: str) -> str:
    """`name` as one subject token (see the module's docstring)."""
    if not name:
        raise ValueError("an empty name makes no subject token")
    return _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), name)


def agent_subject(agent: str) -> str:
    return f"{PREFIX}.agent.{token(agent)}"


def rig_subject(rig: str) -> str:
    return f"{PREFIX}.rig.{token(rig)}"


def subject_for(target: str) -> str:
    """The subject of an item's row: an agent's, or a broadcast's group (`@all`, `@rig:R`)."""
    if target == "@all":
        return ALL
    if target.startswith("@rig:"):
        return rig_subject(target[5:])
    return agent_subject(target)


def message_id(subject: str, key: str) -> str:
    """The `Nats-Msg-Id` of an item: unique per subject and dedup key, as the items table is
    per agent and key (JetStream drops a second publish of it within the dedup window)."""
    return f"{subject}:{token(key)}"


def consumer_filters(agents: list[str]) -> list[str]:
    """What a machine's consumer receives: its agents' subjects, `inbox.all`, and every rig
    (which rigs an agent is in is config.yaml's to say at the time of the item)."""
    return sorted({agent_subject(a) for a in agents}) + [ALL, ALL_RIGS]
