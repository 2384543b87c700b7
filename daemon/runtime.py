"""`preemptd run`: the daemon as anyio tasks connected by memory object streams.

    consume ──deliveries──┐
                           ├──> act (the single writer) ──wake──> publish (outbox)
    heartbeat ──beats─────┘

- consume: fetches cluster events from the durable JetStream consumer.
- heartbeat: wakes `act` every 10 ms, so that cycles come when they are due (`scheduling.Pacer`:
  soon after events, every `tick` while deciding, every `idle-tick` or at a delay's end when not).
- observe: measures consumer lag, the outbox and the gauges once a second (`metrics`).
- act: turns each delivery into log records and dead letters (`ingest`), commits them with the
  consumer's position in one transaction and only then acknowledges them; runs due cycles and
  commits each tick with its decisions and their outbox rows; takes snapshots.
- publish: sends unpublished decisions (`outbox`).

SIGINT and SIGTERM cancel the task group; a batch being committed finishes first (shielded).
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream

from preemptd.events import DecisionEvent
from preemptd.projections import ClusterState
from preemptd.scheduling import Cadence, Pacer, run_cycle, tick_record

from . import ingest
from .clock import monotonic_ms, wall_ms
from .config_file import apply_config_file
from .embedded import EmbeddedNats, keep_running
from .entry import early_stops
from .errors import BusError, StoreError, UsageError
from .history import fold_log, load_state, outbox_rows, restored, save_snapshot, to_row
from .lock import single_writer
from .logs import log
from .metrics import Health, Metrics, MetricsServer, reading
from .nats_source import CONSUMER, Bus, Inbound, NatsAccess, reachable, redacted
from .outbox import Publisher, publish_rejections, publish_unacknowledged_rejections
from .position import start_position
from .store import LEASE_SECONDS, SAY_WAITING_EVERY, Batch, Store, WriterLease, database_url, shown_url

__all__ = ["Heartbeat", "Observed", "Settings", "run", "snapshot_due"]

_HEARTBEAT = 0.01  # seconds; also the shortest gap between two cycles of a partition
_SNAPSHOT_SECONDS = 30  # the longest a growing log goes without a snapshot
_OBSERVE_SECONDS = 1.0  # how often lag, outbox and the gauges are measured
_LEASE_CHECK_SECONDS = 1.0  # how often a PostgreSQL log's writer checks that its lease holds


@dataclass(frozen=True)
class Settings:
    state_dir: Path
    db: str
    nats_url: str | None = None
    nats_port: int = 0
    nats_access: NatsAccess = NatsAccess()
    config: Path | None = None
    tick: int = 1000  # ms
    idle_tick: int = 30_000  # ms
    batch: int = 1000
    snapshot_every: int = 100_000
    synchronous: str = "FULL"
    metrics_addr: tuple[str, int] | None = None  # where to serve metrics, /healthz and /readyz
    max_partitions: int = ingest.MAX_PARTITIONS
    lease_expiry: int = int(LEASE_SECONDS * 1000)  # ms a PostgreSQL log's writer may be silent before a standby ends its session
    partitions: tuple[str, ...] | None = None  # the partitions this daemon reads; None: every one


class Heartbeat:
    """What the heartbeat sends `act`: time has passed."""


Delivery = list[Inbound] | Heartbeat


async def run(settings: Settings) -> None:
    """Run the daemon until SIGINT or SIGTERM. The signals are handled from the first moment,
    so that a stop during start-up still stops the embedded server and closes the log."""
    async with anyio.create_task_group() as tg:
        await tg.start(_stop_on_signal, tg.cancel_scope)
        if not tg.cancel_scope.cancel_called:  # a stop before the start leaves nothing behind
            if settings.nats_url:  # and so does a NATS server that is not there
                await reachable(settings.nats_url, timeout=5.0)
            try:
                settings.state_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"cannot create the state directory {settings.state_dir}: {exc.strerror}") from None
            with _observed(settings) as observed:
                async with _sole_writer(settings, observed.health) as lease, anyio.create_task_group() as writing:
                    if lease is not None:
                        writing.start_soon(_keep, lease)
                    await _run(settings, observed, lease)
                    writing.cancel_scope.cancel()
        tg.cancel_scope.cancel()


@asynccontextmanager
async def _sole_writer(settings: Settings, health: Health) -> AsyncIterator[WriterLease | None]:
    """Be the log's only writer: a lock file beside a SQLite log (a second daemon is refused),
    the writer's lease of a PostgreSQL log (a second daemon waits for it: a standby)."""
    url = database_url(settings.db)
    if not url.startswith("postgresql"):
        with single_writer(url, settings.state_dir):
            yield None
        return

    def waiting(holder: str) -> None:
        health.standby = holder
        log("standby: another daemon writes this log; waiting for its lease", holder=holder, db=shown_url(settings.db))

    lease = await WriterLease.wait(settings.db, waiting, expiry=settings.lease_expiry / 1000)
    if health.standby is not None:
        log("the lease is ours: taking over as the log's writer", db=shown_url(settings.db))
    health.standby = None
    try:
        yield lease
    finally:
        await lease.release()


async def _keep(lease: WriterLease) -> None:
    """Stop the daemon when its lease is lost: a standby may be writing the log already."""
    while True:
        await anyio.sleep(_LEASE_CHECK_SECONDS)
        try:
            await lease.check()
        except StoreError as exc:
            log("stopping: the writer's lease is lost", logging.ERROR, error=str(exc))
            raise


@dataclass
class Observed:
    """What the daemon shows of itself: metrics when asked for, and what `/readyz` checks."""

    metrics: Metrics | None = None
    health: Health = field(default_factory=Health)


@contextmanager
def _observed(settings: Settings) -> Iterator[Observed]:
    if settings.metrics_addr is None:
        yield Observed()
        return
    observed = Observed(Metrics())
    with MetricsServer(settings.metrics_addr, observed.metrics, observed.health) as server:
        log("serving metrics", url=f"{server.url}/metrics", health=f"{server.url}/healthz", ready=f"{server.url}/readyz")
        yield observed


async def _stop_on_signal(scope: anyio.CancelScope, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        # received while the command was starting: stop now
        signum = early_stops[0] if early_stops else await anext(aiter(signals))
    for again in (signal.SIGINT, signal.SIGTERM):  # the receiver gave SIGINT back to KeyboardInterrupt
        signal.signal(again, _stopping_already)
    log("stopping", signal=signal.Signals(signum).name)
    Store.stopping = True  # a shielded write waiting for a locked log gives up
    scope.cancel()


def _stopping_already(signum: int, frame: object) -> None:
    """A second Ctrl-C while the daemon stops: said, not raised into the stop (a traceback,
    and a log or nats-server left half-closed). Written straight to stderr: a signal handler
    must not take the logging lock the interrupted code may hold."""
    os.write(2, f"preemptd: stopping already ({signal.Signals(signum).name} again): the log is closed and nats-server stopped in a moment\n".encode())


async def _run(settings: Settings, observed: Observed, lease: WriterLease | None = None) -> None:
    store = await Store.open(settings.db, synchronous=settings.synchronous)
    store.lease_pid = lease.pid if lease is not None else None
    state = None
    try:
        started = time.monotonic()
        state = await _rebuilt(store)
        observed.health.rebuilt = True
        gc.freeze()  # what the state holds now lives as long as the daemon: later collections skip it
        log("state rebuilt", log_id=store.log_id, seq=state.seq, partitions=len(state.partitions), seconds=round(time.monotonic() - started, 3))
        with _nats(settings) as (url, embedded):
            bus = await Bus.connect(url, access=settings.nats_access)
            try:
                await bus.ensure_streams()
                source, position = await start_position(store, bus, settings.partitions)
                await publish_unacknowledged_rejections(store, bus, f"{CONSUMER}-{store.log_id}", position)
                await bus.subscribe_cluster(position + 1, f"{CONSUMER}-{store.log_id}", settings.partitions)
                daemon = Daemon(settings, store, bus, state, source, observed)
                if settings.config is not None:
                    for partition in await apply_config_file(settings.config, wall_ms(), state, store):
                        daemon.pacer.touched(partition)
                async with anyio.create_task_group() as tg:
                    if embedded is not None:
                        tg.start_soon(keep_running, embedded)
                    await daemon.run(ready=lambda: _announce(settings, url))
                    tg.cancel_scope.cancel()
            finally:
                with anyio.move_on_after(5, shield=True):
                    await bus.close()
    finally:
        await store.close()
        log("stopped", seq=state.seq if state else None)


async def _rebuilt(store: Store) -> ClusterState:
    """The state at the end of the log. A stop while the log is folded keeps what was folded in
    a snapshot, so that the next start goes on from there."""
    state = await restored(store)
    since = state.seq
    try:
        await fold_log(store, state)
    except anyio.get_cancelled_exc_class():
        if state.seq > since:
            with anyio.move_on_after(30, shield=True):
                log("snapshot", reason="stopped during start-up", seq=state.seq, bytes=await save_snapshot(store, state))
        raise
    return state


@contextmanager
def _nats(settings: Settings) -> Iterator[tuple[str, EmbeddedNats | None]]:
    """The NATS URL, and the embedded server when the daemon runs its own."""
    if settings.nats_url:
        yield settings.nats_url, None
        return
    with EmbeddedNats(settings.state_dir / "nats", port=settings.nats_port) as server:
        yield server.url, server


def _announce(settings: Settings, url: str) -> None:
    url = redacted(url)  # shims and `tail` bring their own credentials
    (settings.state_dir / "nats.url").write_text(url + "\n")
    embedded = "embedded nats-server" if not settings.nats_url else "external NATS"
    print(f"preemptd: listening on {url} ({embedded}); shims publish on preemptd.cluster.<partition>.<kind>", flush=True)
    log("listening", url=url, nats=embedded, db=shown_url(settings.db))


class Daemon:
    """The actors of one daemon, around the one in-memory state they share through `act`."""

    def __init__(self, settings: Settings, store: Store, bus: Bus, state: ClusterState, source: str, observed: Observed | None = None) -> None:
        self.settings, self.store, self.bus, self.state = settings, store, bus, state
        self.observed = observed or Observed()
        self.source = source  # the cluster stream, as the log names its position in it
        self.pacer = Pacer(Cadence(tick=settings.tick, idle_tick=settings.idle_tick, min_gap=int(_HEARTBEAT * 1000)))
        self.publisher = Publisher(store, bus)
        self.last_snapshot = 0  # the newest snapshot's position, read in `run`
        self.last_snapshot_at = monotonic_ms()  # or the start
        self.last_tick_ts = max((p.last_tick for p in state.partitions.values()), default=0)
        self.tracking = 0
        self.consistent = True  # false while the state holds events not yet committed

    async def run(self, ready: Callable[[], None] = lambda: None) -> None:
        """Run until cancelled (a signal); `ready` is called once the actors start."""
        self.tracking = await self.store.tracking(self.source)
        self.last_snapshot = await self.store.latest_snapshot_seq()  # counted across restarts, or a daemon that keeps crashing never snapshots
        deliveries_tx, deliveries_rx = anyio.create_memory_object_stream[Delivery](4)
        try:
            async with anyio.create_task_group() as tg:
                ready()
                tg.start_soon(self._consume, deliveries_tx.clone())
                tg.start_soon(self._heartbeat, deliveries_tx)
                tg.start_soon(self._act, deliveries_rx)
                tg.start_soon(self.publisher.run)
                tg.start_soon(self._observe)
        finally:
            with anyio.move_on_after(30, shield=True):
                await self._snapshot(reason="shutdown")

    # -- consume and heartbeat --

    async def _consume(self, tx: ObjectSendStream[Delivery]) -> None:
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
        has not answered for a while (a lock held elsewhere, a frozen disk)."""
        health, metrics = self.observed.health, self.observed.metrics
        said = 0.0
        while True:
            busy = min(self.store.busy.values(), default=None)  # the oldest transaction still running
            if busy is not None and time.monotonic() - busy >= SAY_WAITING_EVERY and time.monotonic() - said >= SAY_WAITING_EVERY:
                said = time.monotonic()
                log("the log has not answered for a while: a lock held elsewhere, or a frozen disk?", logging.WARNING, seconds=round(time.monotonic() - busy))
            health.connected = self.bus.connected
            try:
                health.lag = await self.bus.consumer_lag()
            except BusError:
                health.lag = None
            if metrics is not None:
                try:
                    waiting = await self.store.waiting_decisions()
                except StoreError:  # the log's trouble shows where the daemon writes it; the gauge waits
                    waiting = metrics.now.waiting_decisions
                age = (monotonic_ms() - self.last_snapshot_at) / 1000
                metrics.now = reading(self.state, lag=health.lag, waiting_decisions=waiting, snapshot_age=age)
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
        position = ingest.Position(self.tracking, self.bus.generation, self.bus.resumed_at, filtered=self.bus.partitions is not None)
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
            self.bus.resume_from(delivery.resume)

    async def _commit(self, fresh: list[Inbound], redelivered: int) -> None:
        with anyio.CancelScope(shield=True):
            self.consistent = False
            decoded = ingest.decode(fresh, wall_ms())
            ingested = ingest.fold(decoded, await self.store.known_event_ids(decoded.ids), self.state, self.settings.max_partitions)
            last = ingested.stopped or fresh[-1]
            await self.store.commit(Batch(rows=ingested.rows, dead=ingested.dead, tracking=(self.source, last.stream_seq)))
            if self.observed.metrics is not None:
                self.observed.metrics.ingested(ingested.rows, ingested.dead)
            if ingested.stopped is not None:
                await self._rebuild(ingested.dead[-1].reason)
            self.consistent = True
            self.tracking = last.stream_seq
        # Notices before the ack: a shim that sees its event acknowledged finds its notice.
        await publish_rejections(self.bus, ingested.dead)
        await self._ack(last)
        if ingested.stopped is not None:
            self.bus.resume_from(last.stream_seq + 1)  # the messages after it come again, to a sound state
        for partition in ingested.touched:
            self.pacer.touched(partition)
        _report(ingested, redelivered)

    async def _rebuild(self, reason: str) -> None:
        """Fold the state again from the log, after an error of ours left it in doubt."""
        log("rebuilding the state from the log after an error of preemptd's", logging.ERROR, reason=reason)
        self.state = await load_state(self.store)

    async def _ack(self, message: Inbound) -> None:
        try:
            await self.bus.ack_through(message)
        except BusError as exc:  # the batch is committed; a redelivery will be recognised
            log("ack failed; the batch will be redelivered and skipped", logging.WARNING, error=str(exc))

    async def _cycle(self, partition: str) -> None:
        started = monotonic_ms()  # when this cycle's tick is stamped: its wake-up is counted from here
        self.last_tick_ts = ts = max(wall_ms(), self.last_tick_ts)  # ticks never go back in the log
        with anyio.CancelScope(shield=True):
            self.consistent = False
            deciding = time.perf_counter()
            cycle = run_cycle(self.state, tick_record(self.state, ts, partition))
            took_ms = round((time.perf_counter() - deciding) * 1000, 1)
            await self.store.commit(Batch(rows=[to_row(r) for r in cycle.records], outbox=outbox_rows(cycle.decided)))
            self.consistent = True
        if self.observed.metrics is not None:
            self.observed.metrics.cycle(self.state, partition, cycle.decisions, took_ms / 1000)
        if cycle.decided:
            self.publisher.wake()
        self.pacer.ran(self.state, partition, started, took=monotonic_ms() - started, decisions=len(cycle.decided))
        _log_cycle(partition, cycle.tick.seq, cycle.decisions, pending=self.state.partitions[partition].pending_count, took_ms=took_ms)

    def _snapshot_due(self) -> bool:
        return snapshot_due(self.state.seq - self.last_snapshot, monotonic_ms() - self.last_snapshot_at, self.settings.snapshot_every)

    async def _snapshot(self, *, reason: str) -> None:
        if not self.consistent or self.state.seq == self.last_snapshot:
            return
        self.last_snapshot, self.last_snapshot_at = self.state.seq, monotonic_ms()
        try:
            size = await save_snapshot(self.store, self.state)
        except Exception as exc:  # the log holds everything: a snapshot only saves time at start
            log("snapshot failed; the daemon goes on (please report it)", logging.ERROR, error=f"{type(exc).__name__}: {exc}", seq=self.state.seq)
            return
        log("snapshot", reason=reason, seq=self.state.seq, bytes=size)


def snapshot_due(grown: int, elapsed_ms: int, every: int) -> bool:
    """A snapshot is due every `every` records, and `_SNAPSHOT_SECONDS` after the last one
    while the log grows (`grown` records since it): a restart after a crash folds at most that."""
    return grown >= every or (grown > 0 and elapsed_ms >= _SNAPSHOT_SECONDS * 1000)


def _report(ingested: ingest.Ingested, redelivered: int) -> None:
    for partition, warning in ingested.warnings:
        log("config warning", logging.WARNING, partition=partition, warning=warning)
    for partition, event_id, runs in ingested.configured:
        log("config applied", partition=partition, id=event_id, runs=runs)
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
        kind = decision.__struct_config__.tag.removeprefix("decision.")
        counts[kind] = counts.get(kind, 0) + 1
    level = logging.INFO if decisions else logging.DEBUG
    log("cycle", level, partition=partition, seq=seq, decisions=len(decisions), **counts, pending=pending, took_ms=took_ms)
    for decision in decisions:
        if decision.__struct_config__.tag == "decision.preempted":
            victims = ",".join(v.task for v in decision.victims)
            log("preempted", id=decision.id, preemptor=decision.preemptor, node=decision.node, victims=victims)
