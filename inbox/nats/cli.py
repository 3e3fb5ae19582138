"""`gc nats setup|relay|status`: real-time delivery across machines (the `nats` extra)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click

from beads.cli.common import emit, global_options, stamped
from beads.errors import GcError, InvalidInput, StorageError
from beads.records.times import parse_duration
from inbox.cli import open_delivery
from inbox.nats import machines, outbox
from inbox.nats.settings import Settings, status_path

CONNECT_TIMEOUT = 5.0


@click.group("nats")
def nats_group() -> None:
    """Real-time delivery across machines over NATS JetStream.

    This machine's settings (never synced): gc config set --local delivery.nats.url
    nats://HOST:4222, delivery.nats.agents (the agents living here), delivery.nats.machine,
    and credentials (delivery.nats.creds, .token, .tls_ca, .tls_cert, .tls_key).
    """


def _client() -> Any:
    """The NATS client module; a clear error when the extra is not installed."""
    try:
        import nats
    except ImportError:
        raise InvalidInput(
            "the NATS client is not installed: pip install 'gc-beads[nats]'"
        ) from None
    return nats


def _connected(config: Settings, work: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run `work(jetstream)` on a connection to this machine's server (StorageError when
    it cannot be reached)."""
    nats = _client()

    async def session() -> Any:
        try:
            nc = await asyncio.wait_for(
                nats.connect(
                    **config.connect_options(),
                    allow_reconnect=False,
                    max_reconnect_attempts=1,  # 0 would mean "forever" at the start
                    reconnect_time_wait=0.05,
                    connect_timeout=CONNECT_TIMEOUT,
                    error_cb=_quiet,
                ),
                CONNECT_TIMEOUT,
            )
        except Exception as exc:  # noqa: BLE001 - nats-py raises many kinds: say which
            where = ",".join(config.shown_servers)
            raise StorageError(f"cannot reach NATS at {where}: {_why(exc)}") from None
        try:
            return await work(nc.jetstream(timeout=CONNECT_TIMEOUT))
        finally:
            await nc.close()

    return asyncio.run(session())


async def _quiet(exc: Exception) -> None:
    """nats-py's errors are reported by the command that meets them."""


def _why(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


@nats_group.command()
@click.option("--ack-wait", default="30s", show_default=True, help="Redelivery after this.")
@click.option("--prune", is_flag=True, help="Remove the consumers no machine uses "
              "(gc nats status lists them).")  # fmt: skip
@global_options
def setup(ack_wait: str, prune: bool) -> None:
    """Create or check the stream (retention by age, dedup window) and this machine's
    consumer (with its machine id), and say what was done."""
    _client()
    from inbox.nats.relay import ensure_consumer, ensure_stream

    delivery = open_delivery()
    config = Settings(delivery.root, delivery.store_config())

    async def work(js: Any) -> list[str]:
        done = [await ensure_stream(js, config, update=True)]
        done.append(await ensure_consumer(js, config, parse_duration(ack_wait)))
        if prune:
            for consumer in await _stale(js, config):
                await js.delete_consumer(config.stream, consumer["name"])
                done.append(f"removed consumer {consumer['name']}: {consumer['why']}")
        return done

    said = _connected(config, work)
    agents = ", ".join(config.agents) or "none (broadcasts only)"
    said.append(f"agents of this machine ({config.machine}): {agents}")
    emit({"stream": config.stream, "consumer": config.consumer, "done": said}, "\n".join(said))


@nats_group.command()
@click.option("--agents", help="The agents of this machine, comma-separated "
              "(default: delivery.nats.agents).")  # fmt: skip
@click.option("--ack-wait", default="30s", show_default=True,
              help="A message not acknowledged this long is delivered again.")  # fmt: skip
@global_options
def relay(agents: str | None, ack_wait: str) -> None:
    """Run this machine's relay until SIGTERM: publish the outbox, store what arrives for
    this machine's agents, nudge idle ones."""
    _client()
    from beads.settings.localconfig import LOCAL_KEYS
    from inbox.nats.relay import run

    delivery = open_delivery()
    names = LOCAL_KEYS["delivery.nats.agents"](agents) if agents is not None else None
    config = Settings(delivery.root, delivery.store_config(), names)
    wait = parse_duration(ack_wait)
    if wait < 0.1:
        raise InvalidInput("--ack-wait must be at least 0.1s")
    root = delivery.root
    delivery.close()  # the relay opens its own, for the life of the process
    run(root, config, ack_wait=wait, log=lambda line: click.echo(f"gc nats: {line}", err=True))


@nats_group.command()
@global_options
def status() -> None:
    """The stream, this machine's consumer and its lag, the outbox, the relay's last
    activity."""
    delivery = open_delivery()
    config = Settings(delivery.root, delivery.store_config())
    local = {"outbox": outbox.count(delivery.db), "relay": _relay(delivery.root)}
    lines = [f"outbox: {local['outbox']} waiting", _relay_line(local["relay"])]

    async def work(js: Any) -> dict[str, Any]:
        from nats.js.errors import NotFoundError

        from inbox.nats.relay import server_is_open

        out: dict[str, Any] = {"stream": None, "consumer": None, "stale": []}
        out["server_open"] = await server_is_open(config)
        try:
            info = await js.stream_info(config.stream)
        except NotFoundError:
            return out
        out["stale"] = await _stale(js, config)
        state = info.state
        out["stream"] = {"name": config.stream, "messages": state.messages,
                         "bytes": state.bytes, "first_seq": state.first_seq,
                         "last_seq": state.last_seq, "max_age": info.config.max_age,
                         "dedup_window": info.config.duplicate_window,
                         "max_msgs": info.config.max_msgs}  # fmt: skip
        try:
            consumer = await js.consumer_info(config.stream, config.consumer)
        except NotFoundError:
            return out
        out["consumer"] = {"name": config.consumer, "lag": consumer.num_pending,
                           "unacknowledged": consumer.num_ack_pending,
                           "redelivered": consumer.num_redelivered,
                           "filters": consumer.config.filter_subjects,
                           "machine_id": (consumer.config.metadata or {}).get(
                               machines.ID_KEY)}  # fmt: skip
        return out

    error: GcError | None = None
    try:
        server = _connected(config, work)
    except StorageError as exc:
        server, error = {"stream": None, "consumer": None, "stale": []}, exc
    stream, consumer = server["stream"], server["consumer"]
    if error is None:
        lines.insert(0, f"stream {config.stream}: " + (
            f"{stream['messages']} messages, last sequence {stream['last_seq']}"
            if stream else "missing (gc nats setup creates it)"))  # fmt: skip
        lines.insert(1, f"consumer {config.consumer}: " + (
            f"lag {consumer['lag']}, {consumer['unacknowledged']} unacknowledged"
            if consumer else "missing (gc nats setup or the relay creates it)"))  # fmt: skip
        if server.get("server_open"):
            lines.append("server: requires no authentication (anyone who reaches it can "
                         "publish; see docs/nats.md)")  # fmt: skip
        for stale in server["stale"]:
            lines.append(f"stale consumer {stale['name']}: {stale['why']} "
                         "(gc nats setup --prune removes it)")  # fmt: skip
    lines.append(f"machine {config.machine}, id {config.machine_id}")
    payload = {"servers": config.shown_servers, "reachable": error is None,
               "machine": config.machine, "machine_id": config.machine_id,
               **server, **local}  # fmt: skip
    emit(payload, "\n".join(lines), error=error)
    if error is not None:
        click.get_current_context().exit(error.exit_code)


async def _stale(js: Any, config: Settings) -> list[dict[str, Any]]:
    """The stream's relay consumers no machine uses (inbox/nats/machines.py)."""
    stream = await js.stream_info(config.stream)
    return machines.stale(config, await js.consumers_info(config.stream), stream.config.max_age)


def _relay(root: Path) -> dict[str, Any] | None:
    """What the relay last said of itself (None if none ever ran), with `running` checked
    against its process."""
    try:
        said = json.loads(status_path(root).read_text())
    except (OSError, ValueError):
        return None
    if said.get("running"):
        try:
            os.kill(int(said["pid"]), 0)
        except (OSError, ValueError, KeyError):
            said["running"] = False
    return stamped(said, "started_at", "updated_at", "last_received_at", "last_published_at")


def _relay_line(relay: dict[str, Any] | None) -> str:
    if relay is None:
        return "relay: never ran here (gc nats relay)"
    state = "running" if relay.get("running") else "stopped"
    if relay.get("running"):
        state += ", connected" if relay.get("connected") else ", not connected"
    published = f"{relay.get('published')} published, last {relay.get('last_published_at') or '-'}"
    received = f"{relay.get('received')} received, last {relay.get('last_received_at') or '-'}"
    text = (
        f"relay {relay.get('consumer')} ({state}, pid {relay.get('pid')}): {published}; {received}"
    )
    if relay.get("lost"):  # the stream dropped items before they got here (gaps.py)
        text += f"; LOST up to {relay['lost']} item(s), last: {relay.get('last_lost')}"
    if relay.get("refused"):
        text += f"; {relay['refused']} refused, last: {relay.get('last_refused')}"
    if relay.get("last_error"):
        text += f"; last error: {relay['last_error']}"
    return text
