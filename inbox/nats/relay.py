"""`gc nats relay`: one long-running process per machine between the delivery database and
the stream.

- **Out**: the outbox (inbox/nats/outbox.py) is published in order, with the subject of the
  item's agent or group and the dedup key as `Nats-Msg-Id`; a row is removed once JetStream
  has acknowledged it, so a relay killed in between publishes it again and JetStream drops
  the duplicate within its window. An idle relay sleeps until a writer wakes it through the
  FIFO it listens on, once the rows are committed (inbox/nats/outbox.py); it looks on its own
  every `LOOK_EVERY` seconds too, for rows whose writer died before it could wake it, and
  then makes the FIFO anew if it was removed meanwhile.
- **In**: a durable push consumer per machine (`relay-<machine>`) delivers the items of this
  machine's agents, `inbox.all` and every rig. Items are written to the local delivery
  database in batches (one transaction for whatever arrived meanwhile), through the same
  path as a local push (dedup key, TTL, priority; idle agents nudged), and acknowledged only
  after the commit: a relay killed before the ack gets them again after `ack_wait`, and the
  dedup key makes the second write a no-op. A broadcast becomes a standing group item, as
  inbox/broadcast.py makes one, with copies for this machine's agents of the group.
- The connection is re-made with exponential backoff (0.1 s to 2 s, jittered) whenever it
  drops; SIGTERM or SIGINT stops the relay after it stored and acknowledged what it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
from nats.js import api
from nats.js.errors import NotFoundError

from beads import files
from beads.errors import Conflict, InvalidInput
from beads.records.agents import rig_members
from beads.runtime import runs_long
from inbox.broadcast import copy_for, stand
from inbox.delivery import Delivery
from inbox.items import PRODUCER_TYPES, Item
from inbox.nats import gaps, machines, outbox, subjects, trust
from inbox.nats.settings import Settings, status_path

BATCH = 1000  # items per transaction, and per round of publishing
CONNECT_TIMEOUT = 5.0
LOOK_EVERY = 1.0  # seconds between looks at an empty outbox that no writer woke the relay for
MIN_BACKOFF, MAX_BACKOFF = 0.1, 2.0
STATUS_EVERY = 1.0  # seconds between writes of the status file
CONFIG_EVERY = 5.0  # seconds a read of config.yaml (rigs, nudges) is reused
GAP_EVERY = 2.0  # seconds between looks for messages the stream dropped (gaps.py)


async def ensure_stream(js: Any, settings: Settings, *, update: bool) -> str:
    """Create the stream if it is missing; with `update`, bring an existing one's retention
    and dedup window to the settings. Returns what it did, in words."""
    wanted = {"max_age": settings.max_age, "duplicate_window": settings.dedup_window,
              "max_msgs": settings.max_msgs}  # fmt: skip
    wanted_text = describe(settings.max_age, settings.dedup_window, settings.max_msgs)
    try:
        info = await js.stream_info(settings.stream)
    except NotFoundError:
        await js.add_stream(
            name=settings.stream,
            subjects=[subjects.STREAM_SUBJECTS],
            storage=api.StorageType.FILE,
            retention=api.RetentionPolicy.LIMITS,
            **wanted,
        )
        return f"created stream {settings.stream} ({wanted_text})"
    config = info.config
    if subjects.STREAM_SUBJECTS not in (config.subjects or []):
        raise InvalidInput(
            f"stream {settings.stream} does not take {subjects.STREAM_SUBJECTS} "
            f"(its subjects: {', '.join(config.subjects or [])}); name another with "
            "gc config set delivery.nats.stream NAME"
        )
    differs = {k: v for k, v in wanted.items() if round(getattr(config, k) or 0) != round(v)}
    if not differs:
        return f"stream {settings.stream} is as configured ({wanted_text})"
    if not update:
        return f"stream {settings.stream} differs from the settings (gc nats setup updates it)"
    await js.update_stream(config.evolve(**differs))
    was = describe(config.max_age, config.duplicate_window, config.max_msgs)
    return f"updated stream {settings.stream}: {was} -> {wanted_text}"


def describe(max_age: float | None, window: float | None, max_msgs: int | None = None) -> str:
    spans = f"max age {_span(max_age)}, dedup window {_span(window)}"
    cap = f", max {max_msgs} messages" if max_msgs and max_msgs > 0 else ", no message cap"
    return f"subjects {subjects.STREAM_SUBJECTS}, {spans}{cap}"


def _span(seconds: float | None) -> str:
    if not seconds:
        return "none"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def consumer_config(settings: Settings, ack_wait: float) -> api.ConsumerConfig:
    """This machine's durable push consumer: its agents, `inbox.all`, every rig."""
    return api.ConsumerConfig(
        durable_name=settings.consumer,
        deliver_subject=f"_GC_RELAY.{settings.consumer}",
        filter_subjects=subjects.consumer_filters(settings.names),
        ack_policy=api.AckPolicy.EXPLICIT,
        deliver_policy=api.DeliverPolicy.ALL,  # a new machine gets what the stream still has
        ack_wait=ack_wait,
        max_ack_pending=4 * BATCH,
        # No max_deliver: it stays unlimited. A server can count a delivery back below zero
        # when the relay's connection closes mid-send (nats-server#8511), and against a
        # finite limit that item is then dropped, never delivered (docs/machines.md).
        metadata=machines.metadata(settings),  # whose consumer it is (inbox/nats/machines.py)
    )


async def ensure_consumer(js: Any, settings: Settings, ack_wait: float) -> str:
    """Create this machine's consumer, or update its subjects, ack wait and machine id;
    what it did. Conflict when the consumer belongs to another machine id."""
    config = consumer_config(settings, ack_wait)
    try:
        info = await js.consumer_info(settings.stream, settings.consumer)
    except NotFoundError:
        await js.add_consumer(settings.stream, config)
        return f"created consumer {settings.consumer} (machine id {settings.machine_id})"
    machines.check_owner(settings, info)
    current = info.config
    if (
        sorted(current.filter_subjects or [current.filter_subject or ""])
        == sorted(config.filter_subjects or [])
        and round(current.ack_wait or 0, 3) == round(ack_wait, 3)
        and (current.metadata or {}).get(machines.ID_KEY) == settings.machine_id
    ):
        return f"consumer {settings.consumer} is as configured"
    await js.add_consumer(settings.stream, config)  # the server updates a durable in place
    return f"updated consumer {settings.consumer}"


class Relay:
    """The relay of one store (see the module's docstring)."""

    def __init__(
        self,
        root: Path,
        settings: Settings,
        *,
        ack_wait: float = 30.0,
        log: Callable[[str], None] = print,
    ) -> None:
        self.root = root
        self.settings = settings
        self.ack_wait = ack_wait
        self.log = log
        self.here = frozenset(settings.names)  # every spelling of this machine's agents
        # What this relay receives is for its own agents: never sent out again.
        mine = outbox.Outbox(self.here, outbox.wake_path(root))
        self.delivery = Delivery(root, config=self._config, outbox=mine)
        self._config_at = 0.0
        self._config_value: dict[str, Any] = {}
        self.stopping = asyncio.Event()
        self.outbox_woken = asyncio.Event()  # a writer committed outbox rows (outbox.Wakes)
        self.wakes: outbox.Wakes | None = None  # the FIFO listened on, once running
        self.deaf = False  # no FIFO could be made at the last try (said once in the log)
        self.status: dict[str, Any] = {
            "pid": os.getpid(),
            "machine": settings.machine,
            "consumer": settings.consumer,
            "agents": settings.agents,
            "servers": settings.shown_servers,
            "started_at": time.time(),
            "connected": False,
            "received": 0,
            "published": 0,
            "last_received_at": None,
            "last_published_at": None,
            "last_error": None,
            "machine_id": settings.machine_id,
            # Hints that named no bead, and plain items of a producer's type (trust.py).
            "refused": 0,
            "last_refused": None,
            "server_open": None,  # True: the server asks no credentials of anyone
            # Items the stream dropped before they got here (inbox/nats/gaps.py); the floor
            # carries over from the relay's last run.
            "floor": _last_status(root).get("floor"),
            "lost": 0,
            "last_lost": None,
        }
        self._status_at = 0.0
        self._status_due: asyncio.TimerHandle | None = None  # a throttled write, pending
        self._sync_lock = asyncio.Lock()

    def _config(self) -> dict[str, Any]:
        # config.yaml through the index, re-read every few seconds: a long-running relay
        # sees rigs and nudge commands change.
        now = time.monotonic()
        if now - self._config_at > CONFIG_EVERY:
            self._config_value = self.delivery.reader.config()
            self._config_at = now
        return self._config_value

    # -- the process ----------------------------------------------------------------------

    async def run(self) -> None:
        """Relay until SIGTERM or SIGINT, reconnecting with backoff."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stopping.set)
        backoff = MIN_BACKOFF
        try:
            self.wakes = self._listen()
            while not self.stopping.is_set():
                began = time.monotonic()
                try:
                    await self._session()
                except Conflict as exc:  # another machine's consumer: never take its items
                    self._note_error(exc)
                    raise
                except Exception as exc:  # noqa: BLE001 - any failure: reconnect, say why
                    self._note_error(exc)
                self._set(connected=False)
                if self.stopping.is_set():
                    break
                if time.monotonic() - began > 10:  # it had been up: start over quickly
                    backoff = MIN_BACKOFF
                delay = backoff * random.uniform(0.8, 1.2)
                self.log(f"reconnecting in {delay:.1f}s")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), delay)
                backoff = min(backoff * 2, MAX_BACKOFF)
        finally:
            if self.wakes is not None:
                loop.remove_reader(self.wakes.fd)
                self.wakes.close()
            self._write_status(force=True, stopped=True)
            self.delivery.close()

    def _listen(self) -> outbox.Wakes | None:
        """Listen for writers' wakes (inbox/nats/outbox.py); None, said in the log (once
        until it works again), where no FIFO can be made: the relay then finds new rows at
        its own looks, and tries again at each (`_listen_again_if_replaced`)."""
        try:
            wakes = outbox.Wakes(self.root)
        except OSError as exc:
            if not self.deaf:
                self.log(f"cannot listen for pushes ({exc}): looking every {LOOK_EVERY:g}s instead")
            self.deaf = True
            return None
        self.deaf = False

        def woken() -> None:
            wakes.drain()
            self.outbox_woken.set()

        try:
            asyncio.get_running_loop().add_reader(wakes.fd, woken)
        except OSError as exc:
            wakes.close()
            self.log(f"cannot listen for pushes ({exc}): looking every {LOOK_EVERY:g}s instead")
            return None
        return wakes

    def _listen_again_if_replaced(self) -> None:
        """Make the FIFO anew when it was removed or replaced under the relay (a cleaned
        `.runtime/`), or could not be made last time: pushes would otherwise wake no one and
        wait for the next look."""
        if self.wakes is not None:
            if not self.wakes.replaced():
                return
            asyncio.get_running_loop().remove_reader(self.wakes.fd)
            self.wakes.close()
            self.log("the FIFO pushes wake the relay through was removed: listening on a new one")
        self.wakes = self._listen()

    def _note_error(self, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        self._set(last_error=text)
        self.log(f"relay: {text}")

    async def _session(self) -> None:
        """One connection: publish and receive until it drops or the relay stops."""
        lost = asyncio.Event()

        async def on_error(exc: Exception) -> None:
            self._set(last_error=f"{type(exc).__name__}: {exc}")

        async def on_closed() -> None:
            lost.set()

        connecting = asyncio.ensure_future(
            nats.connect(
                **self.settings.connect_options(),
                name=f"gc-relay-{self.settings.machine}",
                allow_reconnect=False,  # ours, with backoff, resubscribing from the consumer
                max_reconnect_attempts=1,  # 0 would mean "forever" at the start
                reconnect_time_wait=0.05,
                connect_timeout=2,
                error_cb=on_error,
                disconnected_cb=on_closed,
                closed_cb=on_closed,
            )
        )
        stop = asyncio.ensure_future(self.stopping.wait())
        await asyncio.wait([connecting, stop], timeout=CONNECT_TIMEOUT,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        stop.cancel()
        if not connecting.done():  # stopped, or the server does not answer
            connecting.cancel()
            await asyncio.gather(connecting, return_exceptions=True)
            if self.stopping.is_set():
                return
            raise TimeoutError(f"no answer from {','.join(self.settings.shown_servers)}")
        nc = connecting.result()
        try:
            js = nc.jetstream(timeout=5)
            said = await ensure_stream(js, self.settings, update=False)
            said += "; " + await ensure_consumer(js, self.settings, self.ack_wait)
            self.log(f"connected to {nc.connected_url.netloc if nc.connected_url else '?'}: {said}")
            self._set(connected=True, last_error=None)
            await self._check_open()
            arrived: asyncio.Queue[Any] = asyncio.Queue()

            async def on_message(msg: Any) -> None:
                arrived.put_nowait(msg)

            config = consumer_config(self.settings, self.ack_wait)
            sub = await js.subscribe_bind(
                self.settings.stream,
                config,
                self.settings.consumer,
                cb=on_message,
                manual_ack=True,
                pending_msgs_limit=8 * BATCH,
            )
            await self._check_gap(js)
            tasks = [
                asyncio.ensure_future(self._gaps(js)),
                asyncio.ensure_future(self._receive(arrived)),
                asyncio.ensure_future(self._publish(js)),
                asyncio.ensure_future(self._watch(nc, lost)),
                asyncio.ensure_future(self.stopping.wait()),
            ]
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            if self.stopping.is_set() and not lost.is_set():
                # Graceful: no more deliveries; store and acknowledge what arrived.
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
                    await asyncio.sleep(0)
                    await self._take(arrived)
                    await nc.flush(timeout=2)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            if lost.is_set():
                raise ConnectionError("connection to the NATS server lost")
        finally:
            with contextlib.suppress(Exception):
                await nc.close()

    async def _check_open(self) -> None:
        """Say so when the server lets anyone in: a probe connection without credentials."""
        is_open = await server_is_open(self.settings)
        if is_open and self.status["server_open"] is not True:
            self.log(
                f"the NATS server at {','.join(self.settings.shown_servers)} requires no "
                "authentication: anyone who reaches it can publish to this machine's agents "
                "(their items are checked here; see docs/nats.md)"
            )
        self._set(server_open=is_open)

    async def _gaps(self, js: Any) -> None:
        while True:
            await asyncio.sleep(GAP_EVERY)
            await self._check_gap(js)

    async def _check_gap(self, js: Any) -> None:
        """Compare the stream's first sequence with this relay's floor: a gap is reported
        (log, status, `gc nats status`) as items lost (inbox/nats/gaps.py)."""
        try:
            stream = await js.stream_info(self.settings.stream)
            consumer = await js.consumer_info(self.settings.stream, self.settings.consumer)
        except Exception as exc:  # noqa: BLE001 - the next look tries again
            self._set(last_error=f"checking for gaps: {type(exc).__name__}: {exc}")
            return
        caught_up = not consumer.num_pending and not consumer.num_ack_pending
        state = stream.state
        floor, lost, span = gaps.check(
            self.status["floor"], state.first_seq, state.last_seq, caught_up
        )
        changes: dict[str, Any] = {"floor": floor}
        if lost and span is not None:
            line = gaps.describe(lost, span)
            self.log(line)
            self.delivery.note_fault(f"nats relay: {line}")
            changes.update(lost=self.status["lost"] + lost, last_lost=line)
        self._set(**changes)

    async def _watch(self, nc: Any, lost: asyncio.Event) -> None:
        """Return once the connection is gone: its callbacks say so, or (older nats-py, which
        reports a dropped connection only to `error_cb`) its state does."""
        while nc.is_connected and not lost.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), 0.25)
        lost.set()

    # -- in: the consumer -----------------------------------------------------------------

    async def _receive(self, arrived: asyncio.Queue[Any]) -> None:
        while True:
            await self._take(arrived, await arrived.get())

    async def _take(self, arrived: asyncio.Queue[Any], first: Any = None) -> None:
        """Store everything that arrived (one transaction per BATCH), then acknowledge it;
        with hints among it, sync first (trust.py)."""
        messages = [] if first is None else [first]
        while True:
            while not arrived.empty() and len(messages) < BATCH:
                messages.append(arrived.get_nowait())
            if not messages:
                return
            if any(_hinted(msg.data) for msg in messages):
                await self._pull("a hint arrived")
            again = self.store(messages)
            for msg in messages:
                if msg in again:
                    await msg.nak(delay=trust.HINT_RETRY)
                else:
                    await msg.ack()
            self._set(received=self.status["received"] + len(messages),
                      last_received_at=time.time(),
                      floor=gaps.received(self.status["floor"], _sequences(messages)))  # fmt: skip
            messages = []

    def store(self, messages: list[Any]) -> list[Any]:
        """Write the items of `messages` into the delivery database in one transaction:
        plain items as a local push takes them, hints as their beads make them (trust.py).
        Returns the messages to deliver again later (hints whose bead is not here yet)."""
        now = time.time()
        items: list[Item] = []
        groups: list[Item] = []
        hints: dict[tuple[str, str], Any] = {}
        for msg in messages:
            try:
                item = decode(msg.subject, msg.data)
            except InvalidInput as exc:  # acknowledged all the same: it would never parse
                self.delivery.note_fault(f"nats relay: dropped a message on {msg.subject}: {exc}")
                continue
            if item.expired(now):
                continue
            if trust.is_hint(item):
                if item.agent in self.here:
                    hints[(item.agent, item.key)] = msg
                elif item.agent.startswith("@"):
                    self._refuse(f"a {item.type} item {item.key} for the group {item.agent}")
                continue
            try:
                trust.as_relayed(item)
            except InvalidInput as exc:  # a producer's key on a plain item: acknowledged
                self._refuse(f"an item {item.key} on {msg.subject}: {exc}")
                continue
            if item.agent.startswith("@"):
                groups.append(item)
                items += [copy_for(item, agent) for agent in self._members(item.agent)]
            elif item.agent in self.here:
                items.append(item)

        again: list[Any] = []
        derived, refused = self.delivery.rederive(list(hints))
        items += derived
        for refusal in refused:
            msg = hints[(refusal.agent, refusal.key)]
            if _deliveries(msg) < trust.HINT_TRIES:
                again.append(msg)  # the bead may be on its way to the remote
            else:
                self._refuse(f"a hint on {msg.subject}: {refusal}")

        def standing(db: Any) -> None:
            for item in groups:
                stand(db, item)

        if items or groups:
            self.delivery.insert_items(items, then=standing if groups else None)
        return again

    def _refuse(self, what: str) -> None:
        """Count, log and keep the last of what was refused (`gc nats status` shows it)."""
        line = f"refused {what}"
        self.log(line)
        self.delivery.note_fault(f"nats relay: {line}")
        self._set(refused=self.status["refused"] + 1, last_refused=line[:500])

    async def _pull(self, why: str) -> None:
        """Sync the store with its remote (if it has one), within `sync.timeout`; a failure
        is logged, and what is here is used."""
        async with self._sync_lock:
            try:
                error = await asyncio.wait_for(
                    asyncio.to_thread(trust.pull, self.root), trust.sync_timeout(self.root)
                )
            except TimeoutError:
                error = "no answer within sync.timeout"
            if error:
                self.log(f"sync ({why}) failed: {error}")

    def _members(self, group: str) -> list[str]:
        """This machine's agents of a broadcast's group."""
        if group == "@all":
            return list(self.settings.full)
        members = rig_members(group[5:], self._config())
        return [agent for agent in members if agent in self.here]

    # -- out: the outbox ------------------------------------------------------------------

    async def _publish(self, js: Any) -> None:
        db = self.delivery.db
        while True:
            self.outbox_woken.clear()  # before the look: a wake after it is one to act on
            rows = outbox.waiting(db, BATCH)
            if not rows:
                try:  # asleep until a writer wakes it
                    await asyncio.wait_for(self.outbox_woken.wait(), LOOK_EVERY)
                except TimeoutError:
                    self._listen_again_if_replaced()
                continue
            if any(_hinted(row[3]) for row in rows):
                # A hint is only worth its bead on the remote: the receiver fetches it there.
                await self._pull("hints to publish")
            sent = await asyncio.gather(
                *(
                    js.publish(
                        subject := subjects.subject_for(target),
                        item.encode(),
                        headers={"Nats-Msg-Id": subjects.message_id(subject, key)},
                    )
                    for _id, target, key, item in rows
                ),
                return_exceptions=True,
            )
            done = [
                row[0]
                for row, ack in zip(rows, sent, strict=True)
                if not isinstance(ack, BaseException)
            ]
            with self.delivery.write() as tx:
                outbox.remove(tx, done)
            if done:
                self._set(published=self.status["published"] + len(done),
                          last_published_at=time.time())  # fmt: skip
            failed = [ack for ack in sent if isinstance(ack, BaseException)]
            if failed:  # the rows stay: published again once the server answers
                raise failed[0]

    # -- status ---------------------------------------------------------------------------

    def _set(self, **changes: Any) -> None:
        """Change the status; the file follows at once for `connected`, else within
        `STATUS_EVERY` (an idle relay, whose status stays as it is, writes nothing)."""
        if all(self.status.get(key) == value for key, value in changes.items()):
            return
        self.status.update(changes)
        self._write_status(force="connected" in changes)

    def _write_status(self, *, force: bool = False, stopped: bool = False) -> None:
        now = time.monotonic()
        due = self._status_at + STATUS_EVERY - now
        if not force and due > 0:  # written once STATUS_EVERY has passed since the last
            if self._status_due is None:
                self._status_due = asyncio.get_running_loop().call_later(due, self._write_due)
            return
        if self._status_due is not None:
            self._status_due.cancel()
            self._status_due = None
        self._status_at = now
        data = {**self.status, "updated_at": time.time(), "running": not stopped}
        path = status_path(self.root)
        with contextlib.suppress(Exception):  # a status file must never stop the relay
            files.write_atomic(
                str(self.root), str(path), json.dumps(data).encode(), str(path.parent)
            )

    def _write_due(self) -> None:
        self._status_due = None
        self._write_status()


def _sequences(messages: list[Any]) -> list[int]:
    """The stream sequences of delivered messages (those that carry one)."""
    found = []
    for msg in messages:
        with contextlib.suppress(Exception):  # a message with no JetStream metadata
            found.append(int(msg.metadata.sequence.stream))
    return found


def _last_status(root: Path) -> dict[str, Any]:
    """What the relay's last run wrote of itself ({} when none)."""
    try:
        said = json.loads(status_path(root).read_text())
    except (OSError, ValueError):
        return {}
    return said if isinstance(said, dict) else {}


def decode(subject: str, data: bytes) -> Item:
    """The item a message carries, checked; InvalidInput if it is not one, or not for the
    subject it came on (a group item keeps its group, `@all` or `@rig:<rig>`, as agent)."""
    try:
        fields = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):  # nested too deep too
        raise InvalidInput("not JSON") from None
    target = fields.get("agent") if isinstance(fields, dict) else None
    if not isinstance(target, str) or not target:
        raise InvalidInput("an item without an agent")
    try:
        expected = subjects.subject_for(target)
    except ValueError:
        raise InvalidInput("an item without an agent") from None
    if expected != subject:
        raise InvalidInput(f"an item for {target!r} on the subject {subject}")
    group = target.startswith("@")
    item = Item.from_json({**fields, "agent": "relay"} if group else fields)
    if group:
        item.agent = target
    return item


def _hinted(data: bytes | str) -> bool:
    """True when a message (or an outbox row) carries an item of a producer's type."""
    try:
        fields = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):  # `decode` drops it
        return False
    return isinstance(fields, dict) and fields.get("type") in PRODUCER_TYPES


def _deliveries(msg: Any) -> int:
    """How many times JetStream has delivered `msg` (1 the first time)."""
    try:
        return int(msg.metadata.num_delivered)
    except Exception:  # noqa: BLE001 - not a JetStream message: treat as the last try
        return trust.HINT_TRIES


async def server_is_open(settings: Settings) -> bool | None:
    """True when the server takes a connection without credentials; None if unknown."""
    said: list[str] = []

    async def heard(exc: Exception) -> None:  # the probe's errors are its answer
        said.append(str(exc))

    try:
        nc = await asyncio.wait_for(
            nats.connect(**settings.connect_options(anonymous=True), allow_reconnect=False,
                         max_reconnect_attempts=1, connect_timeout=CONNECT_TIMEOUT,
                         error_cb=heard),
            2 * CONNECT_TIMEOUT,
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - refused: it asks for credentials
        text = " ".join([str(exc), *said]).lower()
        return False if any(w in text for w in ("authoriz", "authentic", "tls", "ssl")) else None
    with contextlib.suppress(Exception):
        await nc.close()
    return True


def hold(root: Path) -> int:
    """Take the store's relay lock (one relay per store); Conflict when another has it."""
    path = root / ".runtime" / "nats-relay.lock"
    files.create(str(root), str(path))
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Conflict("a relay is already running for this store (gc nats status)") from None
    return fd


def run(root: Path, settings: Settings, *, ack_wait: float, log: Callable[[str], None]) -> None:
    """Run the relay of the store at `root` until SIGTERM or SIGINT."""
    fd = hold(root)
    runs_long()  # a server: the garbage collector's usual collections back
    try:
        asyncio.run(Relay(root, settings, ack_wait=ack_wait, log=log).run())
    finally:
        os.close(fd)
