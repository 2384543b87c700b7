"""`preemptd run`: start the daemon's parts in order and stop them in reverse. Signals are
handled from the first moment; the log's single writer is ensured (a lock file for SQLite, the
writer's lease for PostgreSQL); the state is rebuilt from the log; NATS is reached (or the
embedded server started), the streams made and the consumer placed where the log left off; then
the actors run (`actors`) until a stop, which finishes the batch being committed first.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import anyio.to_thread

from preemptd.projections import ClusterState
from preemptd.scheduling import TrialRefused

from .actors import Daemon, Observed
from .bus import Bus, EmbeddedNats, keep_running, reachable, redacted
from .clock import wall_ms
from .config_file import apply_config_file, check_config_file
from .early import early_stops
from .errors import BusError, LogConflict, StoreError, UsageError, first_leaf
from .log.database import database_url, shown_url, url_without_secrets
from .log.history import History, fold_log, restored, save_snapshot
from .log.lease import WriterLease
from .log.lock import single_writer
from .log.outbox import publish_unacknowledged_rejections
from .log.store import Store
from .operations.logs import log
from .operations.metrics import Health, Metrics, MetricsServer
from .position import start_position
from .queries import STANDBY_DELAY, answer_json, query_subjects
from .records import CONSUMER
from .settings import LOG_FILE, Settings

__all__ = ["Settings", "run"]

_LEASE_CHECK_SECONDS = 1.0  # how often a PostgreSQL log's writer checks that its lease holds
_CONFLICTS_TAKEN = 3  # how many times a daemon reads the log again after another writer's row


async def run(settings: Settings) -> None:
    """Run the daemon until SIGINT or SIGTERM. The signals are handled from the first moment,
    so that a stop during start-up still stops the embedded server and closes the log."""
    stopping = anyio.Event()  # a shielded write waiting for a locked log gives up once it is set
    async with anyio.create_task_group() as tg:
        await tg.start(_stop_on_signal, tg.cancel_scope, stopping)
        if settings.config is not None and not tg.cancel_scope.cancel_called:  # a bad file is said before anything starts
            await anyio.to_thread.run_sync(check_config_file, settings.config, settings.partitions, abandon_on_cancel=True)
        if not tg.cancel_scope.cancel_called:  # a stop before the start leaves nothing behind
            if settings.nats_url:  # and so does a NATS server that is not there
                await reachable(settings.nats_url, timeout=5.0)
            try:
                settings.state_dir.mkdir(parents=True, exist_ok=True)
                _record_the_log(settings)
            except OSError as exc:
                raise UsageError(f"cannot create the state directory {settings.state_dir}: {exc.strerror}") from None
            with _observed(settings) as observed:
                async with _sole_writer(settings, observed.health) as lease, anyio.create_task_group() as writing:
                    if lease is not None:
                        writing.start_soon(_keep, lease)
                    await _run_again_on_conflict(settings, observed, lease, stopping)
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

    async with anyio.create_task_group() as standing_by:
        if settings.nats_url:  # a standby shares the writer's NATS: it tells who asks where to go
            standing_by.start_soon(_answer_as_standby, settings, health)
        lease = await WriterLease.wait(settings.db, waiting, expiry=settings.lease_expiry / 1000)
        standing_by.cancel_scope.cancel()
    if health.standby is not None:
        log("the lease is ours: taking over as the log's writer", db=shown_url(settings.db))
    health.standby = None
    try:
        yield lease
    finally:
        await lease.release()


async def _answer_as_standby(settings: Settings, health: Health) -> None:
    """While the lease is another's, queries (`preemptd try`) are answered "not the writer",
    after `STANDBY_DELAY`: a plain request takes the first reply, which is then the writer's."""
    assert settings.nats_url is not None
    try:
        bus = await Bus.connect(settings.nats_url, access=settings.nats_access)
    except BusError as exc:
        log("standby: not answering queries", logging.WARNING, error=str(exc))
        return

    async def not_the_writer(subject: str, body: bytes, reply: str | None) -> bytes | None:
        if reply is None:
            return None
        await anyio.sleep(STANDBY_DELAY)
        writer = health.standby or "the daemon holding the writer's lease"
        return answer_json(TrialRefused(f"not the writer: this daemon is a standby of the log; ask the writer ({writer}), which answers on the same subject"))

    try:
        await bus.serve(query_subjects(settings.partitions), not_the_writer)
    finally:
        with anyio.move_on_after(5, shield=True):
            await bus.close()


async def _keep(lease: WriterLease) -> None:
    """Stop the daemon when its lease is lost: a standby may be writing the log already."""
    while True:
        await anyio.sleep(_LEASE_CHECK_SECONDS)
        try:
            await lease.check()
        except StoreError as exc:
            log("stopping: the writer's lease is lost", logging.ERROR, error=str(exc))
            raise


@contextmanager
def _observed(settings: Settings) -> Iterator[Observed]:
    if settings.metrics_addr is None:
        yield Observed()
        return
    observed = Observed(metrics := Metrics())
    with MetricsServer(settings.metrics_addr, metrics, observed.health) as server:
        log("serving metrics", url=f"{server.url}/metrics", health=f"{server.url}/healthz", ready=f"{server.url}/readyz")
        yield observed


async def _stop_on_signal(scope: anyio.CancelScope, stopping: anyio.Event, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
    try:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            # received while the command was starting: stop now
            signum = early_stops[0] if early_stops else await anext(aiter(signals))
    except KeyboardInterrupt:  # a second Ctrl-C in the moment the receiver gives SIGINT back to Python
        _stopping_already(signal.SIGINT, None)
    for again in (signal.SIGINT, signal.SIGTERM):  # the receiver gave SIGINT back to KeyboardInterrupt
        signal.signal(again, _stopping_already)
    log("stopping", signal=signal.Signals(signum).name)
    stopping.set()
    scope.cancel()


def _stopping_already(signum: int, frame: object) -> None:
    """A second Ctrl-C while the daemon stops: said, not raised into the stop (a traceback,
    and a log or nats-server left half-closed). Written straight to stderr: a signal handler
    must not take the logging lock the interrupted code may hold."""
    os.write(2, f"preemptd: stopping already ({signal.Signals(signum).name} again): the log is closed and nats-server stopped in a moment\n".encode())


async def _run_again_on_conflict(settings: Settings, observed: Observed, lease: WriterLease | None, stopping: anyio.Event) -> None:
    """`_run`, started again from the log when a write meets a row another writer wrote (a
    previous writer's write that landed late): the state is rebuilt with it, and what this
    daemon did not commit is delivered again. Not for ever: a log written beside it all the
    time is another daemon's, and stops it."""
    for met in range(_CONFLICTS_TAKEN + 1):
        try:
            await _run(settings, observed, lease, stopping)
            return
        except* LogConflict as group:
            if met == _CONFLICTS_TAKEN:
                raise
            conflict = first_leaf(group)
        log("a write met a row another writer wrote: reading the log again", logging.WARNING, error=str(conflict))


async def _run(settings: Settings, observed: Observed, lease: WriterLease | None, stopping: anyio.Event) -> None:
    store = await Store.open(settings.db, synchronous=settings.synchronous, stopping=stopping)
    store.db.fence = lease.fence if lease is not None else None
    state = None
    try:
        started = time.monotonic()
        state = await _rebuilt(store)
        observed.health.rebuilt = True
        gc.freeze()  # what the state holds now lives as long as the daemon: later collections skip it
        log("state rebuilt", log_id=store.log_id, seq=state.seq, partitions=len(state.partitions), seconds=round(time.monotonic() - started, 3))
        with _nats(settings) as (url, embedded):
            bus = await Bus.connect(url, access=settings.nats_access)
            asked: Bus | None = None
            try:
                await bus.streams.ensure(settings.retention.stream_limits())
                source, position = await start_position(store, bus, settings.partitions)
                await publish_unacknowledged_rejections(store.dead_letters_between, bus, f"{CONSUMER}-{store.log_id}", position)
                await bus.consumer.subscribe(position + 1, f"{CONSUMER}-{store.log_id}", settings.partitions)
                asked = await Bus.connect(url, access=settings.nats_access, name="preemptd-queries")
                daemon = Daemon(settings, store, bus, state, source, observed, asked)
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
                    if asked is not None:
                        await asked.close()
    finally:
        await store.close()
        log("stopped", seq=state.seq if state else None)


async def _rebuilt(store: Store) -> ClusterState:
    """The state at the end of the log. A stop while the log is folded keeps what was folded in
    a snapshot, so that the next start goes on from there."""
    state = await restored(History(store))
    since = state.seq
    try:
        await fold_log(History(store), state)
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


def _record_the_log(settings: Settings) -> None:
    """Say in the state directory where the log is (`LOG_FILE`), without secrets, so that
    `state`, `tail`, `explain`, `replay` with `--state-dir` find it whatever its backend; a log
    in the directory itself is found there anyway (and a copied directory finds its copy)."""
    recorded = settings.state_dir / LOG_FILE
    where = url_without_secrets(settings.db)
    if where is None or where == url_without_secrets(str(settings.state_dir / "preemptd.db")):
        recorded.unlink(missing_ok=True)
    else:
        recorded.write_text(where + "\n")


def _announce(settings: Settings, url: str) -> None:
    url = redacted(url)  # shims and `tail` bring their own credentials
    (settings.state_dir / "nats.url").write_text(url + "\n")
    embedded = "embedded nats-server" if not settings.nats_url else "external NATS"
    print(f"preemptd: listening on {url} ({embedded}); shims publish on preemptd.cluster.<partition>.<kind>", flush=True)
    log("listening", url=url, nats=embedded, db=shown_url(settings.db))
