"""`preemptd run`: the daemon as anyio tasks connected by memory object streams.

    consume ──batches──┐
                        ├──> act (the single writer) ──wake──> publish
    tick ────ticks─────┘

- consume: fetches cluster events from the durable JetStream consumer.
- tick: a heartbeat; cycles run every `tick` per partition with pending tasks, and soon after
  new events (at most every 100 ms).
- act: decodes and folds each batch, sends bad input to dead letters, commits the batch with the
  consumer position in one transaction, and only then acknowledges it; runs cycles and commits
  each tick with its decisions and their outbox rows; takes snapshots.
- publish: publishes unpublished decisions (at start too) with `Nats-Msg-Id` = decision id.

SIGINT and SIGTERM cancel the task group; a batch being committed finishes first (shielded).
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import msgspec
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from preemptd.events import (
    ConfigApplied,
    ConfigError,
    Decision,
    DecodeError,
    decode_cluster_event,
)
from preemptd.projections import ClusterState, LogRecord, Rejected, snapshot
from preemptd.scheduling import DEFAULT_MODEL, apply, is_daemon_id, model_named, next_wakeup, run_cycle, tick_record

from .embedded import EmbeddedNats
from .errors import BusError, EmbeddedNatsError, UsageError
from .history import load_state, outbox_rows, to_row
from .logs import log
from .nats_source import (
    CLUSTER_STREAM,
    CONSUMER,
    Bus,
    Inbound,
    Outbound,
    rejected_subject,
)
from .store import Batch, DeadLetter, OutboxRow, Store, database_url

__all__ = ["Settings", "run"]

_TICK = "tick"
_HEARTBEAT = 0.1  # seconds; also the shortest gap between two cycles of a partition
_LEGACY_TRACKING = f"{CLUSTER_STREAM}/{CONSUMER}"  # the position's name before streams were told apart
_PUBLISH_GRACE = 15.0  # seconds a batch of decisions in flight may hold up a stop


@dataclass(frozen=True)
class Settings:
    state_dir: Path
    db: str
    nats_url: str | None = None
    nats_port: int = 0
    config: Path | None = None
    tick: float = 1.0
    idle_tick: float = 30.0
    batch: int = 1000
    snapshot_every: int = 100_000
    synchronous: str = "FULL"


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def run(settings: Settings) -> None:
    """Run the daemon until SIGINT or SIGTERM. The signals are handled from the first moment,
    so that a stop during start-up still stops the embedded server and closes the log."""
    try:
        settings.state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the state directory {settings.state_dir}: {exc.strerror}") from None
    with _single_writer(settings):
        async with anyio.create_task_group() as tg:
            await tg.start(_stop_on_signal, tg.cancel_scope)
            await _run(settings)
            tg.cancel_scope.cancel()


async def _stop_on_signal(scope: anyio.CancelScope, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            log("stopping", signal=signal.Signals(signum).name)
            scope.cancel()
            return


@contextmanager
def _single_writer(settings: Settings) -> Iterator[None]:
    """One daemon per log: a second one would reuse log positions and steal the consumer."""
    lock_path = _lock_path(settings)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "?"
            raise UsageError(f"another preemptd (pid {holder}) is writing this log; its lock is {lock_path}") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        yield


def _lock_path(settings: Settings) -> Path:
    url = database_url(settings.db)
    if url.startswith("sqlite") and ":memory:" not in url:
        database = Path(url.split(":///", 1)[1])
        return database.with_name(database.name + ".lock")
    return settings.state_dir / "daemon.lock"


async def _run(settings: Settings) -> None:
    store = await Store.open(settings.db, synchronous=settings.synchronous)
    state = None
    try:
        started = time.monotonic()
        state = await load_state(store)
        log("state rebuilt", log_id=store.log_id, seq=state.seq, partitions=len(state.partitions), seconds=round(time.monotonic() - started, 3))
        with _nats(settings) as (url, embedded):
            bus = await Bus.connect(url)
            try:
                await bus.ensure_streams()
                source, position = await _start_position(store, bus)
                await bus.subscribe_cluster(position + 1, f"{CONSUMER}-{store.log_id}")
                daemon = Daemon(settings, store, bus, state, source)
                await daemon.apply_config_file()
                async with anyio.create_task_group() as tg:
                    if embedded is not None:
                        tg.start_soon(_keep_running, embedded)
                    await daemon.run(ready=lambda: _announce(settings, url))
                    tg.cancel_scope.cancel()
            finally:
                with anyio.move_on_after(5, shield=True):
                    await bus.close()
    finally:
        await store.close()
        log("stopped", seq=state.seq if state else None)


async def _start_position(store: Store, bus: Bus) -> tuple[str, int]:
    """The cluster stream's name in the log (`source`) and how far this log has read it.

    Positions are kept per stream instance, so that a daemon moved to another NATS, or whose
    stream was recreated, reads that stream from its start, and finds its place again when it
    comes back, instead of applying one stream's position to another."""
    created, end = await bus.cluster_stream()
    source = f"{CLUSTER_STREAM}@{created}"
    positions = await store.tracking_positions()
    if source in positions:
        position = positions[source]
    elif set(positions) == {_LEGACY_TRACKING} and positions[_LEGACY_TRACKING] <= end:
        position = positions[_LEGACY_TRACKING]  # a log from before positions were per stream
        await bus.remove_consumer(CONSUMER)  # and its consumer, named before consumers were per log
    else:
        position = 0
        if positions:
            log("this log has not read this cluster stream before (another NATS, or a recreated stream): reading it from its start", logging.WARNING, stream_created=created, stream_end=end)
    if source not in positions:
        await store.commit(Batch(tracking=(source, position)))
    others = await bus.other_consumers(f"{CONSUMER}-{store.log_id}")
    if others:
        log(
            "other preemptd logs consume the cluster stream of this NATS: each daemon will publish its own decisions "
            "(the consumer of a log no longer used can be removed: nats consumer rm PREEMPTD_CLUSTER <name>)",
            logging.WARNING,
            consumers=",".join(others),
        )
    return source, position


@contextmanager
def _nats(settings: Settings) -> Iterator[tuple[str, EmbeddedNats | None]]:
    """The NATS URL, and the embedded server when the daemon runs its own."""
    if settings.nats_url:
        yield settings.nats_url, None
        return
    with EmbeddedNats(settings.state_dir / "nats", port=settings.nats_port) as server:
        yield server.url, server


async def _keep_running(server: EmbeddedNats) -> None:
    """Start the embedded server again, on the same port and data, if it exits under us; the
    client reconnects to it as after any outage."""
    failures = 0
    while True:
        await anyio.sleep(1.0)
        code = server.exit_code()
        if code is None:
            failures = 0
            continue
        if not failures:
            log("the embedded nats-server exited; starting it again", logging.ERROR, exit_code=code, port=server.port)
        try:
            await anyio.to_thread.run_sync(server.start)
        except (EmbeddedNatsError, OSError) as exc:
            failures += 1
            if failures in (1, 10) or failures % 60 == 0:
                log("the embedded nats-server did not start again; retrying every second", logging.ERROR, error=str(exc), attempts=failures)


def _announce(settings: Settings, url: str) -> None:
    (settings.state_dir / "nats.url").write_text(url + "\n")
    embedded = "embedded nats-server" if not settings.nats_url else "external NATS"
    print(f"preemptd: listening on {url} ({embedded}); shims publish on preemptd.cluster.<partition>.<kind>", flush=True)
    log("listening", url=url, nats=embedded, db=settings.db)


@dataclass
class _Partition:
    last_cycle: float = 0.0  # monotonic
    dirty: bool = False  # events since the last cycle
    idle: bool = False  # the last cycle decided nothing
    wakeup: int | None = None  # wall-clock ms when a delay runs out, after an idle cycle
    took: float = 0.0  # seconds the last cycle took


class Daemon:
    """The actors of one daemon, around the one in-memory state they share through `act`."""

    def __init__(self, settings: Settings, store: Store, bus: Bus, state: ClusterState, source: str) -> None:
        self.settings, self.store, self.bus, self.state = settings, store, bus, state
        self.source = source  # the cluster stream, as the log names its position in it
        self.partitions: dict[str, _Partition] = {name: _Partition(dirty=True) for name in state.partitions}
        self.last_snapshot = 0  # the newest snapshot's position, read in `run`
        self.last_tick_ts = max((p.last_tick for p in state.partitions.values()), default=0)
        self.tracking = 0
        self.wake_publisher = anyio.Event()
        self.consistent = True  # false while the state holds events not yet committed

    async def run(self, ready: Callable[[], None] = lambda: None) -> None:
        """Run until cancelled (a signal); `ready` is called once the actors start."""
        self.tracking = await self.store.tracking(self.source)
        self.last_snapshot = await self.store.latest_snapshot_seq()  # counted across restarts, or a daemon that keeps crashing never snapshots
        inbound_tx, inbound_rx = anyio.create_memory_object_stream[object](4)
        try:
            async with anyio.create_task_group() as tg:
                ready()
                tg.start_soon(self._consume, inbound_tx.clone())
                tg.start_soon(self._tick, inbound_tx)
                tg.start_soon(self._act, inbound_rx)
                tg.start_soon(self._publish)
        finally:
            with anyio.move_on_after(30, shield=True):
                await self._snapshot(reason="shutdown")

    # -- consume and tick --

    async def _consume(self, tx: ObjectSendStream[object]) -> None:
        async with tx:
            failures = 0
            while True:
                try:
                    messages = await self.bus.fetch(self.settings.batch, timeout=0.5)
                    failures = 0
                except BusError as exc:
                    failures += 1
                    if failures in (1, 10) or failures % 100 == 0:
                        log("waiting for NATS", logging.WARNING, error=str(exc), attempts=failures)
                    await anyio.sleep(min(0.1 * failures, 2.0))
                    continue
                if messages:
                    await tx.send(messages)

    async def _tick(self, tx: ObjectSendStream[object]) -> None:
        async with tx:
            while True:
                await anyio.sleep(_HEARTBEAT)
                await tx.send(_TICK)

    # -- act --

    async def _act(self, rx: ObjectReceiveStream[object]) -> None:
        async with rx:
            async for item in rx:
                if isinstance(item, list):
                    await self._ingest(item)
                await self._run_due_cycles()
                if self.state.seq - self.last_snapshot >= self.settings.snapshot_every:
                    await self._snapshot(reason="periodic")

    async def _ingest(self, messages: list[Inbound]) -> None:
        """Commit the messages that continue the log's position without a gap, then ack them."""
        current = [m for m in messages if m.generation == self.bus.generation]
        fresh, resume = self._continuing(current)
        if fresh:
            await self._commit_messages(fresh, redelivered=sum(m.stream_seq <= self.tracking for m in current))
        elif current:  # only redeliveries of committed messages: ack them so they stop coming
            await self._ack(max(current, key=lambda m: m.stream_seq))
        if resume is not None:
            self.bus.resume_from(resume)

    async def _commit_messages(self, fresh: list[Inbound], redelivered: int) -> None:
        received = wall_ms()
        with anyio.CancelScope(shield=True):
            self.consistent = False
            batch = Batch(tracking=(self.source, fresh[-1].stream_seq))
            decoded = self._decode(fresh, received, batch)
            known = await self.store.known_event_ids(event.id for _, event in decoded)
            self._fold(decoded, known, received, batch)
            await self.store.commit(batch)
            self.consistent = True
            self.tracking = fresh[-1].stream_seq
            await self._ack(fresh[-1])
        self._report(batch, redelivered)
        await self._publish_rejections(batch.dead)

    def _continuing(self, messages: list[Inbound]) -> tuple[list[Inbound], int | None]:
        """The messages that follow the committed position in stream order, and where the
        consumer must resume if there is a gap (a fetch lost in a reconnect). Older messages are
        redeliveries. A sequence still missing right after resuming exactly there is gone from
        the stream (expired or deleted): it is reported and skipped."""
        by_seq = {m.stream_seq: m for m in messages if m.stream_seq > self.tracking}
        if not by_seq:
            return [], None
        expected = self.tracking + 1
        if expected not in by_seq:
            if self.bus.resumed_at != expected:
                log("gap in delivery; reading again from the committed position", logging.WARNING, position=expected)
                return [], expected
            log("messages gone from the stream before they were read", logging.WARNING, first=expected, missing=min(by_seq) - expected)
            expected = min(by_seq)
        fresh = []
        while expected in by_seq:
            fresh.append(by_seq[expected])
            expected += 1
        if len(fresh) < len(by_seq):
            log("gap in delivery; reading again after this batch", logging.WARNING, position=expected)
            return fresh, expected
        return fresh, None

    def _decode(self, messages: list[Inbound], received: int, batch: Batch) -> list[tuple[Inbound, object]]:
        decoded = []
        for message in messages:
            try:
                event = decode_cluster_event(message.data)
            except DecodeError as exc:
                batch.dead.append(_dead(message, received, exc.reason, event_type=exc.event_type, event_id=exc.event_id))
                continue
            subject_partition = _subject_partition(message.subject)
            if subject_partition != event.partition:
                reason = f"published on {message.subject} but the event's partition is {event.partition!r}: publish on preemptd.cluster.{event.partition}.<kind>"
                batch.dead.append(_dead(message, received, reason, event))
                continue
            decoded.append((message, event))
        return decoded

    def _fold(self, decoded: list[tuple[Inbound, object]], known: dict[str, int], received: int, batch: Batch) -> None:
        seen: dict[str, int] = {}
        for message, event in decoded:
            if is_daemon_id(self.state.log_id, event.id):
                reason = f"event ids starting with {self.state.log_id + ':'!r} are reserved for the daemon's ticks and decisions; choose another id"
                batch.dead.append(_dead(message, received, reason, event))
                continue
            first = known.get(event.id) or seen.get(event.id)
            if first is not None:
                batch.dead.append(_dead(message, received, f"duplicate id {event.id!r}: already in the log at seq {first}; ids must be unique per event", event))
                continue
            record = LogRecord(self.state.seq + 1, received, event)
            try:
                warnings = apply(self.state, record)
            except Rejected as exc:
                batch.dead.append(_dead(message, received, exc.reason, event))
                continue
            for warning in warnings:
                log("config warning", logging.WARNING, partition=event.partition, warning=warning)
            seen[event.id] = record.seq
            batch.rows.append(to_row(record, payload=message.data, stream_seq=message.stream_seq))
            self.partitions.setdefault(event.partition, _Partition()).dirty = True

    async def _ack(self, message: Inbound) -> None:
        try:
            await self.bus.ack_through(message)
        except BusError as exc:  # the batch is committed; a redelivery will be recognised
            log("ack failed; the batch will be redelivered and skipped", logging.WARNING, error=str(exc))

    def _report(self, batch: Batch, redelivered: int) -> None:
        fields = dict(events=len(batch.rows), dead_letters=len(batch.dead), redelivered=redelivered)
        if batch.rows:
            fields.update(first_seq=batch.rows[0].seq, last_seq=batch.rows[-1].seq)
        log("batch", **fields)
        for dead in batch.dead[:5]:
            log("rejected", logging.WARNING, subject=dead.subject, event_id=dead.event_id, reason=dead.reason)
        if len(batch.dead) > 5:
            log("rejected (more in dead letters)", logging.WARNING, count=len(batch.dead) - 5)

    async def _publish_rejections(self, dead: list[DeadLetter]) -> None:
        notices = [Outbound(rejected_subject(d.partition or "unknown"), _notice(d)) for d in dead]
        try:
            await self.bus.publish(notices)
        except BusError as exc:
            log("could not publish rejection notices (they are in dead letters)", logging.WARNING, error=str(exc))

    async def _run_due_cycles(self) -> None:
        now = time.monotonic()
        for name, partition in sorted(self.partitions.items()):
            if not self.state.partitions[name].pending_count:
                partition.dirty = False
                continue
            if self._due(partition, now - partition.last_cycle):
                partition.last_cycle, partition.dirty = now, False
                started = time.monotonic()
                decisions = await self._cycle(name)
                partition.took = time.monotonic() - started
                partition.idle = not decisions
                partition.wakeup = next_wakeup(self.state, name, self.last_tick_ts) if partition.idle else None

    def _due(self, partition: _Partition, elapsed: float) -> bool:
        """After events: at once (at most every heartbeat, and no more than half the time in
        cycles, so that a long backlog leaves room to ingest). While decisions are being made:
        every tick. When the last cycle decided nothing and nothing happened since, a cycle
        could only decide again once a delay runs out: then, or every idle tick."""
        if partition.dirty:
            return elapsed >= max(_HEARTBEAT, 2 * partition.took)
        if not partition.idle:
            return elapsed >= self.settings.tick
        delay_over = partition.wakeup is not None and wall_ms() >= partition.wakeup
        return delay_over or elapsed >= self.settings.idle_tick

    async def _cycle(self, partition: str) -> list[Decision]:
        ts = max(wall_ms(), self.last_tick_ts)
        self.last_tick_ts = ts
        with anyio.CancelScope(shield=True):
            self.consistent = False
            started = time.perf_counter()
            records = run_cycle(self.state, tick_record(self.state, ts, partition))
            took_ms = round((time.perf_counter() - started) * 1000, 1)
            tick, decisions = records[0], [record.event for record in records[1:]]
            await self.store.commit(Batch(rows=[to_row(r) for r in records], outbox=outbox_rows(records)))
            self.consistent = True
        if decisions:
            self.wake_publisher.set()
        _log_cycle(partition, tick.seq, decisions, pending=self.state.partitions[partition].pending_count, took_ms=took_ms)
        return decisions

    async def _snapshot(self, *, reason: str) -> None:
        if not self.consistent or self.state.seq == self.last_snapshot:
            return
        payload = await anyio.to_thread.run_sync(snapshot, self.state)
        await self.store.save_snapshot(self.state.seq, payload, wall_ms())
        self.last_snapshot = self.state.seq
        log("snapshot", reason=reason, seq=self.state.seq, bytes=len(payload))

    # -- publish --

    async def _publish(self) -> None:
        failures = 0
        while True:
            rows = await self.store.unpublished(1000)
            if not rows:
                with anyio.move_on_after(1.0):
                    await self.wake_publisher.wait()
                self.wake_publisher = anyio.Event()
                continue
            error = await self._publish_batch(rows)
            if error is not None:
                failures += 1
                if failures in (1, 10) or failures % 100 == 0:
                    log("decisions wait for NATS", logging.WARNING, error=error, unpublished=len(rows))
                await anyio.sleep(min(0.1 * failures, 2.0))
                continue
            failures = 0

    async def _publish_batch(self, rows: list[OutboxRow]) -> str | None:
        """Publish decisions and mark them published, or say why not. A stop waits for the batch
        in flight: decisions on the stream but unmarked in the outbox would be sent again after
        a restart, perhaps after JetStream's de-duplication window."""
        with anyio.move_on_after(_PUBLISH_GRACE, shield=True):
            try:
                await self.bus.publish([Outbound(r.subject, r.payload, r.decision_id) for r in rows])
            except BusError as exc:
                return str(exc)
            await self.store.mark_published([r.seq for r in rows], wall_ms())
            return None
        return f"no answer from NATS within {_PUBLISH_GRACE:.0f}s"

    # -- configuration file --

    async def apply_config_file(self) -> None:
        """Append a `config.applied` per partition of `--config` whose settings differ."""
        if self.settings.config is None:
            return
        for event in config_events(self.settings.config, wall_ms()):
            current = self.state.partitions.get(event.partition)
            model = model_named(event.model)
            if current is not None and current.model == model.name:
                parsed, applied = (model.parse_config(doc, event.partition) for doc in (event.config, current.document))
                if parsed.same_as(applied):
                    continue
            record = LogRecord(self.state.seq + 1, event.ts, event)
            try:
                for warning in apply(self.state, record):
                    log("config warning", logging.WARNING, partition=event.partition, warning=warning)
            except Rejected as exc:
                reason = exc.reason.removeprefix("configuration refused, the previous one stays: ")
                raise UsageError(f"{self.settings.config} refused, the daemon does not start: {reason}") from None
            await self.store.commit(Batch(rows=[to_row(record)]))
            self.partitions.setdefault(event.partition, _Partition()).dirty = True
            log("config applied", partition=event.partition, file=str(self.settings.config), seq=record.seq)


def config_events(path: Path, now: int) -> list[ConfigApplied]:
    """One `config.applied` per partition a configuration file sets up: `{model, config}`, or
    the default model's configuration alone."""
    try:
        document = msgspec.yaml.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError) as exc:
        raise UsageError(f"cannot read the configuration {path}: {' '.join(str(exc).split())}") from None
    if not isinstance(document, dict):
        raise UsageError(f"{path}: expected a configuration document ({DEFAULT_MODEL}'s, or {{model, config}})")
    name, config = (document.get("model"), document.get("config")) if "model" in document else (DEFAULT_MODEL, document)
    try:
        model = model_named(name)
    except ConfigError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if not isinstance(config, dict):
        raise UsageError(f"{path}: with `model`, the file needs a `config` object (the {model.name} model's configuration)")
    events = []
    for partition in model.partitions(config):
        try:
            model.parse_config(config, partition)
        except ConfigError as exc:
            raise UsageError(f"{path}: partition {partition}: {exc}") from None
        events.append(ConfigApplied(id=f"config-file-{partition}-{now}", ts=now, partition=partition, model=model.name, config=config))
    return events


def _subject_partition(subject: str) -> str | None:
    parts = subject.split(".")
    return parts[2] if len(parts) >= 3 else None


def _dead(message: Inbound, received: int, reason: str, event: object = None, *, event_type: str | None = None, event_id: str | None = None) -> DeadLetter:
    return DeadLetter(
        received=received,
        subject=message.subject,
        reason=reason,
        raw=message.data,
        stream_seq=message.stream_seq,
        partition=getattr(event, "partition", None) or _subject_partition(message.subject),
        event_type=event.__struct_config__.tag if event is not None else event_type,
        event_id=getattr(event, "id", event_id),
    )


def _notice(dead: DeadLetter) -> bytes:
    return msgspec.json.encode(
        {
            "subject": dead.subject,
            "stream_seq": dead.stream_seq,
            "event_type": dead.event_type,
            "event_id": dead.event_id,
            "reason": dead.reason,
            "received": dead.received,
            "raw": dead.raw.decode(errors="replace")[:4096],
        }
    )


def _log_cycle(partition: str, seq: int, decisions: list[Decision], *, pending: int, took_ms: float) -> None:
    counts: dict[str, int] = {}
    for decision in decisions:
        kind = decision.__struct_config__.tag.removeprefix("decision.")
        counts[kind] = counts.get(kind, 0) + 1
    level = logging.INFO if decisions else logging.DEBUG
    log("cycle", level, partition=partition, seq=seq, decisions=len(decisions), **counts, pending=pending, took_ms=took_ms)
    for decision in decisions:
        if decision.__struct_config__.tag == "decision.preempted":
            victims = ",".join(v.task for v in decision.victims)
            log("preempted", id=decision.id, preemptor=decision.preemptor, node=decision.node, victims=victims)
