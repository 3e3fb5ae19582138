"""Real-time delivery across machines over NATS JetStream (the seeds' first tier; optional).

A push for an agent of another machine is written to the local delivery database as always,
and to its `outbox` table in the same transaction (inbox/nats/outbox.py: no network, no NATS
client). `gc nats relay`, one long-running process per machine (inbox/nats/relay.py),
publishes the outbox to the stream with the dedup key as the message id, and writes what its
durable consumer receives for this machine's agents into the local delivery database,
acknowledging only after the commit. Subject names: inbox/nats/subjects.py. Commands:
inbox/nats/cli.py (`gc nats setup|relay|status`).

Only relay.py and cli.py's commands import the client (`nats-py`, the `nats` extra): pushes
and hooks never do, and without `delivery.nats.url` nothing here runs at all.
"""
