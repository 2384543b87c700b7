"""The actors of `preemptd run`: anyio tasks connected by memory object streams.

    consume ──deliveries──┐
                           ├──> act (the single writer) ──wake──> publish (outbox)
    heartbeat ──beats─────┘

- consume: fetches cluster events from the durable JetStream consumer.
- heartbeat: wakes `act` every 10 ms, so that cycles come when they are due (`scheduling.Pacer`:
  soon after events, every `tick` while deciding, every `idle-tick` or at a delay's end when not).
- observe: measures consumer lag, the outbox and the gauges once a second (`metrics`).
- act: turns each delivery into log records and dead letters (`ingest`), commits them with the
  consumer's position in one transaction and only then acknowledges them; runs due cycles and
  commits each tick with its decisions and their outbox rows; takes snapshots, one of which
  now and then closes a segment of the log.
- publish: sends unpublished decisions (`outbox`).
- archive: writes closed segments to the archive and drops from the live log what retention
  lets go (`log.archive`).

A stop cancels the task group; a batch being committed finishes first (shielded).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import anyio.to_thread
from anyio.abc import ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream

from preemptd.events import DecisionEvent, Preempted, type_of
from preemptd.projections import ClusterState
from preemptd.scheduling import Cadence, Pacer, run_cycle, tick_record

from . import ingest
from .bus import Bus
from .clock import monotonic_ms, wall_ms
from .config_follow import ConfigFollower
from .errors import BusError, StoreError
from .log.database import SAY_WAITING_EVERY
from .log.history import History, load_state, save_snapshot
from .log.outbox import Outbox, publish_rejections
from .log.segments import Archivist
from .log.store import Store
from .operations.behind import Behind, longest_waiting
from .operations.logs import log
from .operations.metrics import Health, Metrics, reading
from .queries import Queries
from .records import Batch, Inbound, LogRow, outbox_rows, to_row
from .settings import Settings

__all__ = ["Daemon", "Heartbeat", "Observed", "snapshot_due"]


_HEARTBEAT = 0.01  # seconds; also the shortest gap between two cycles of a partition


_SNAPSHOT_SECONDS = 30  # the longest a growing log goes without a snapshot


_OBSERVE_SECONDS = 1.0  # how often lag, outbox and the gauges are measured
_QUERIES_SAID_EVERY = 60.0  # how often the log says what queries came (if any did)


class Heartbeat:
    """What the heartbeat sends `act`: time has passed."""


Delivery = list[Inbound] | Heartbeat


@dataclass
class Observed:
    """What the daemon shows of itself: metrics when asked for, and what `/readyz` checks."""

    metrics: Metrics | None = None
    health: Health = field(default_factory=Health)


class Daemon:
    """The actors of one daemon, around the one in-memory state they share through `act`."""

    def __init__(
        self, settings: Settings, store: Store, bus: Bus, state: ClusterState, source: str, observed: Observed | None = None, asked: Bus | None = None
    ) -> None:
        self.settings, self.store, self.bus, self.state = settings, store, bus, state
        self.asked = asked or bus  # the connection queries come on: one of their own, so that a flood of them holds up nothing else
        self.observed = observed or Observed()
        self.source = source  # the cluster stream, as the log names its position in it
        self.pacer = Pacer(Cadence(tick=settings.tick, idle_tick=settings.idle_tick, min_gap=int(_HEARTBEAT * 1000)))
        self.behind = Behind()  # whether a partition's backlog grows, said in the log and the gauges
        self.outbox = Outbox(store.outbox, bus.publisher)
        self.last_snapshot = 0  # the newest snapshot's position, read in `run`
        self.last_snapshot_at = monotonic_ms()  # or the start
        self.last_tick_ts = max((p.last_tick for p in state.partitions.values()), default=0)
        self.tracking = 0
        self.consistent = True  # false while the state holds events not yet committed
        self.segment = OpenSegment()
        self.archivist = Archivist(store, settings.retention) if settings.retention.archive is not None else None
        self.queries = Queries(
            lambda: self.state, tick=settings.tick, partitions=settings.partitions, metrics=self.observed.metrics, max_payload=self.asked.publisher.max_payload
        )

    async def run(self, ready: Callable[[], None] = lambda: None) -> None:
        """Run until cancelled (a signal); `ready` is called once the actors start."""
        self.tracking = await self.store.tracking(self.source)
        self.last_snapshot = await self.store.latest_snapshot_seq()  # counted across restarts, or a daemon that keeps crashing never snapshots
        self.segment = await OpenSegment.of(self.store)
        deliveries_tx, deliveries_rx = anyio.create_memory_object_stream[Delivery](4)
        try:
            async with anyio.create_task_group() as tg:
                ready()
                tg.start_soon(self._consume, deliveries_tx.clone())
                tg.start_soon(self._heartbeat, deliveries_tx)
                tg.start_soon(self._act, deliveries_rx)
                tg.start_soon(self.outbox.run)
                tg.start_soon(self._observe)
                if self.archivist is not None:
                    tg.start_soon(self.archivist.run)
                if self.settings.config is not None:
                    follower = ConfigFollower(self.settings.config, self.settings.partitions, self.state, self.bus, self.store, self.observed.metrics)
                    tg.start_soon(follower.run)
                tg.start_soon(functools.partial(self.asked.serve, self.queries.subjects, self.queries.screen, others=(self.bus,)))
        finally:
            with anyio.move_on_after(30, shield=True):
                await self._snapshot(reason="shutdown")

    # -- consume and heartbeat --

    async def _consume(self, tx: ObjectSendStream[Delivery]) -> None:
        async with tx:
            failures = 0
            while True:
                try:
                    messages = await self.bus.consumer.fetch(self.settings.batch, timeout=0.5)
                    failures = 0
                except BusError as exc:
                    failures += 1
                    if failures in (1, 10) or failures % 100 == 0:
                        log("waiting for NATS", logging.WARNING, error=str(exc), attempts=failures)
                    await anyio.sleep(min(0.1 * failures, 2.0))
                    continue
                if messages:
                    await tx.send(messages)

    async def _heartbeat(self, tx: ObjectSendStream[Delivery]) -> None:
        async with tx:
            while True:
                await anyio.sleep(_HEARTBEAT)
                try:
                    await tx.send(Heartbeat())
                except anyio.BrokenResourceError:  # the act loop ended (its error says why)
                    return

    async def _observe(self) -> None:
        """Measure what `/readyz` and the gauges show, once a second, and say so when the log
        has not answered for a while (a lock held elsewhere, a frozen disk), or when a
        partition's backlog grows (`Behind`)."""
        health, metrics = self.observed.health, self.observed.metrics
        said = 0.0
        queries_said = time.monotonic()
        while True:
            if time.monotonic() - queries_said >= _QUERIES_SAID_EVERY:
                queries_said = time.monotonic()
                self.queries.tell()
            for name, partition in list(self.state.partitions.items()):
                told = self.behind.observe(name, monotonic_ms(), partition.pending_count)
                if told is not None:
                    behind = told[0].startswith("behind")
                    log(told[0], logging.WARNING if behind else logging.INFO, **told[1], **({"waiting": longest_waiting(partition)} if behind else {}))
            busy = min(self.store.db.busy.values(), default=None)  # the oldest transaction still running
            if busy is not None and time.monotonic() - busy >= SAY_WAITING_EVERY and time.monotonic() - said >= SAY_WAITING_EVERY:
                said = time.monotonic()
                log("the log has not answered for a while: a lock held elsewhere, or a frozen disk?", logging.WARNING, seconds=round(time.monotonic() - busy))
            health.connected = self.bus.connected
            try:
                health.lag = await self.bus.consumer.lag()
            except BusError:
                health.lag = None
            if metrics is not None:
                waiting: int | None
                used: int | None
                try:
                    waiting, used = await self.store.outbox.waiting_decisions(), await self.store.segments.used_bytes()
                except StoreError:  # the log's trouble shows where the daemon writes it; the gauges wait
                    waiting, used = metrics.now.waiting_decisions, metrics.now.log_bytes
                age = (monotonic_ms() - self.last_snapshot_at) / 1000
                metrics.now = reading(self.state, lag=health.lag, waiting_decisions=waiting, snapshot_age=age, log_bytes=used, growth=dict(self.behind.growth))
            await anyio.sleep(_OBSERVE_SECONDS)

    # -- act --

    async def _act(self, rx: MemoryObjectReceiveStream[Delivery]) -> None:
        async with rx:
            async for delivery in rx:
                await self._take(delivery)
                for partition in self.pacer.due(self.state, monotonic_ms()):
                    await self._cycle(partition)
                    await self._take_waiting(rx)
                if self._snapshot_due():
                    await self._snapshot(reason="periodic")

    async def _take_waiting(self, rx: MemoryObjectReceiveStream[Delivery]) -> None:
        """Read what arrived during a cycle before the next partition's cycle: only that, or a
        steady flow of events would keep the cycles from ever running."""
        waiting = rx.statistics()
        for _ in range(waiting.current_buffer_used + waiting.tasks_waiting_send):
            try:
                await self._take(rx.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                return

    async def _take(self, delivery: Delivery) -> None:
        if not isinstance(delivery, Heartbeat):
            await self._ingest(delivery)

    async def _ingest(self, messages: list[Inbound]) -> None:
        """Commit the messages that continue the log's position without a gap, then ack them."""
        position = ingest.Position(self.tracking, self.bus.consumer.generation, self.bus.consumer.resumed_at, filtered=self.bus.consumer.partitions is not None)
        delivery = ingest.continuing(messages, position)
        if delivery.gone is not None:
            log("messages gone from the stream before they were read", logging.WARNING, first=delivery.gone[0], missing=delivery.gone[1])
        if delivery.fresh:
            await self._commit(delivery.fresh, redelivered=len(delivery.redelivered))
        elif delivery.redelivered:  # only messages already committed: ack them so they stop coming
            await self._ack(max(delivery.redelivered, key=lambda m: m.stream_seq))
        if delivery.resume is not None:
            where = "after this batch" if delivery.fresh else "from the committed position"
            log(f"gap in delivery; reading again {where}", logging.WARNING, position=delivery.resume)
            self.bus.consumer.resume_from(delivery.resume)

    async def _commit(self, fresh: list[Inbound], redelivered: int) -> None:
        decoded = ingest.decode(fresh, wall_ms())
        readings = await anyio.to_thread.run_sync(ingest.read_configurations, decoded) if decoded.configures else {}
        with anyio.CancelScope(shield=True):
            self.consistent = False
            ingested = ingest.fold(decoded, await self.store.known_event_ids(decoded.ids), self.state, self.settings.max_partitions, readings)
            last = ingested.stopped or fresh[-1]
            await self.store.commit(Batch(rows=ingested.rows, dead=ingested.dead, tracking=(self.source, last.stream_seq)))
            self.segment.grew(ingested.rows)
            if self.observed.metrics is not None:
                self.observed.metrics.ingested(ingested.rows, ingested.dead)
            if ingested.stopped is not None:
                await self._rebuild(ingested.dead[-1].reason)
            self.consistent = True
            self.tracking = last.stream_seq
        # Notices before the ack: a shim that sees its event acknowledged finds its notice.
        await publish_rejections(self.bus.publisher, ingested.dead)
        await self._ack(last)
        if ingested.stopped is not None:
            self.bus.consumer.resume_from(last.stream_seq + 1)  # the messages after it come again, to a sound state
        for partition in ingested.touched:
            self.pacer.touched(partition)
        _report(ingested, redelivered)

    async def _rebuild(self, reason: str) -> None:
        """Fold the state again from the log, after an error of ours left it in doubt."""
        log("rebuilding the state from the log after an error of preemptd's", logging.ERROR, reason=reason)
        self.state = await load_state(History(self.store))

    async def _ack(self, message: Inbound) -> None:
        try:
            await self.bus.consumer.ack_through(message)
        except BusError as exc:  # the batch is committed; a redelivery will be recognised
            log("ack failed; the batch will be redelivered and skipped", logging.WARNING, error=str(exc))

    async def _cycle(self, partition: str) -> None:
        started = monotonic_ms()  # when this cycle's tick is stamped: its wake-up is counted from here
        self.last_tick_ts = ts = max(wall_ms(), self.last_tick_ts)  # ticks never go back in the log
        with anyio.CancelScope(shield=True):
            self.consistent = False
            deciding = time.perf_counter()
            deadline = deciding + self.settings.cycle_time / 1000
            cycle = run_cycle(self.state, tick_record(self.state, ts, partition), lambda: time.perf_counter() > deadline)
            took_ms = round((time.perf_counter() - deciding) * 1000, 1)
            rows = [to_row(r) for r in cycle.records]
            await self.store.commit(Batch(rows=rows, outbox=outbox_rows(cycle.decided)))
            self.segment.grew(rows)
            self.consistent = True
        if self.observed.metrics is not None:
            self.observed.metrics.cycle(self.state, partition, cycle.decisions, took_ms / 1000)
        if cycle.decided:
            self.outbox.wake()
        self.pacer.ran(self.state, partition, started, took=monotonic_ms() - started, decisions=len(cycle.decided), cut=cycle.cut)
        _log_cycle(partition, cycle.tick.seq, cycle.decisions, pending=self.state.partitions[partition].pending_count, took_ms=took_ms)

    def _snapshot_due(self) -> bool:
        return snapshot_due(self.state.seq - self.last_snapshot, monotonic_ms() - self.last_snapshot_at, self.settings.snapshot_every)

    async def _snapshot(self, *, reason: str) -> None:
        if not self.consistent or self.state.seq == self.last_snapshot:
            return
        self.last_snapshot, self.last_snapshot_at = self.state.seq, monotonic_ms()
        boundary = self.settings.retention.closes_segment(self.segment.grown, wall_ms() - (self.segment.began or wall_ms()))
        try:
            size = await save_snapshot(self.store, self.state, boundary=boundary)
        except StoreError as exc:  # the log out of reach, or no longer this daemon's (a lost lease): said, not a bug
            log("snapshot not taken: the log holds everything, the next start folds a little more", logging.WARNING, error=str(exc), seq=self.state.seq)
            return
        except Exception as exc:  # the log holds everything: a snapshot only saves time at start
            log("snapshot failed; the daemon goes on (please report it)", logging.ERROR, error=f"{type(exc).__name__}: {exc}", seq=self.state.seq)
            return
        log("snapshot", reason=reason, seq=self.state.seq, bytes=size, **({"closes_segment": True} if boundary else {}))
        if boundary:
            self.segment = OpenSegment()
            if self.archivist is not None:
                self.archivist.wake()


@dataclass
class OpenSegment:
    """The segment the log writes to: its record payload bytes, and when its first record was
    received (None: none yet). Retention closes it at a snapshot (`Retention.closes_segment`)."""

    grown: int = 0
    began: int | None = None

    @classmethod
    async def of(cls, store: Store) -> OpenSegment:
        """The open segment of a log, at start: after the newest boundary snapshot."""
        boundaries, segments = await store.segments.boundaries(), await store.segments.all()
        start = max(boundaries[-1] if boundaries else 0, segments[-1].last if segments else 0)
        return cls(await store.segments.payload_bytes(start), await store.segments.first_received_after(start))

    def grew(self, rows: list[LogRow]) -> None:
        if rows and self.began is None:
            self.began = rows[0].received
        self.grown += sum(len(row.payload) for row in rows)


def snapshot_due(grown: int, elapsed_ms: int, every: int) -> bool:
    """A snapshot is due every `every` records, and `_SNAPSHOT_SECONDS` after the last one
    while the log grows (`grown` records since it): a restart after a crash folds at most that."""
    return grown >= every or (grown > 0 and elapsed_ms >= _SNAPSHOT_SECONDS * 1000)


def _report(ingested: ingest.Ingested, redelivered: int) -> None:
    for partition, warning in ingested.warnings:
        log("config warning", logging.WARNING, partition=partition, warning=warning)
    for partition, event_id, runs, changes in ingested.configured:
        log("config applied", partition=partition, id=event_id, runs=runs, changed="; ".join(changes) or "nothing preemptd state shows")
    fields = dict(events=len(ingested.rows), dead_letters=len(ingested.dead), redelivered=redelivered)
    if ingested.rows:
        fields.update(first_seq=ingested.rows[0].seq, last_seq=ingested.rows[-1].seq)
    log("batch", **fields)
    for dead in ingested.dead[:5]:
        log("rejected", logging.WARNING, subject=dead.subject, event_id=dead.event_id, reason=dead.reason)
    if len(ingested.dead) > 5:
        log("rejected (more in dead letters)", logging.WARNING, count=len(ingested.dead) - 5)


def _log_cycle(partition: str, seq: int, decisions: list[DecisionEvent], *, pending: int, took_ms: float) -> None:
    counts: dict[str, int] = {}
    for decision in decisions:
        kind = type_of(decision).removeprefix("decision.")
        counts[kind] = counts.get(kind, 0) + 1
    level = logging.INFO if decisions else logging.DEBUG
    log("cycle", level, partition=partition, seq=seq, decisions=len(decisions), **counts, pending=pending, took_ms=took_ms)
    for decision in decisions:
        if isinstance(decision, Preempted):
            victims = ",".join(v.task for v in decision.victims)
            log("preempted", id=decision.id, preemptor=decision.preemptor, node=decision.node, victims=victims)
