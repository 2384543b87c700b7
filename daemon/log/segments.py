"""Retention: a log that lives for months.

The live log is cut into segments at snapshots. A segment closes at the first snapshot after it
holds `Retention.segment_bytes` of records or spans `Retention.segment_span`; the `Archivist`
then writes it to the archive as one file (`archive`), and deletes it from the live log once
it is older than the policy's age, or while the live log is larger than its size, oldest first.
What was archived and dropped, the boundaries of the segments still live and the ids of the
events that left are kept in the log's tables (`SegmentsTable`). Readers (`replay`, `report`,
`explain`, `state --at`) read the archive's segments and the live log as one history
(`history.History`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import anyio
import anyio.lowlevel
import anyio.to_thread
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ..clock import wall_ms
from ..errors import StoreError
from ..operations.logs import log
from ..records import CLUSTER_STREAM, DECISION_STREAM, REJECTED_STREAM, LogRow, Segment
from .archive import Archive, event_ids, write_segment
from .database import Database, all_rows, first_value, scalar
from .outbox import WAITING, OutboxTable
from .tables import LOG, META, METADATA, OUTBOX, RETIRED_IDS, SEGMENTS, SNAPSHOT_PARTS, SNAPSHOTS

__all__ = ["DAY", "GiB", "Archivist", "Retention", "SegmentsTable", "Summary", "forget_snapshots", "id_hash"]

DAY = 24 * 3600 * 1000  # ms
GiB = 2**30
_DEDUPLICATION = 600.0  # seconds: the decision stream's de-duplication window


@dataclass(frozen=True)
class Retention:
    """How much history the live log keeps, and where what leaves it goes.

    `archive`: a directory or a URL (None: retention is off, the live log keeps everything).
    `age` (ms) and `bytes` (the live log's size on disk): a segment leaves the live log once its
    last record is older than `age`, or while the live log is larger than `bytes`, oldest first.
    A segment spans an eighth of `age`, or holds about a twelfth of `bytes` on disk, so the live
    log keeps between 7/8 of `age` and all of it."""

    archive: str | None
    age: int = 7 * DAY
    bytes: int = 8 * GiB

    @property
    def segment_bytes(self) -> int:
        """Record payload bytes that close a segment: the log's database takes about twice its
        records' payload bytes (the other columns and the indexes; bench/soak.py)."""
        return self.bytes // 24

    @property
    def segment_span(self) -> int:
        return self.age // 8

    def closes_segment(self, grown: int, span: int) -> bool:
        """Whether a snapshot after `grown` payload bytes and `span` ms of records since the
        open segment began closes it."""
        return self.archive is not None and grown > 0 and (grown >= self.segment_bytes or span >= self.segment_span)

    def stream_limits(self) -> dict[str, tuple[float, int]]:
        """The streams' (max age in seconds, max bytes; -1: none), from the policy: no stream
        holds more history than the live log. With retention off, a week and no byte limit."""
        if self.archive is None:
            return {name: (7 * DAY / 1000, -1) for name in (CLUSTER_STREAM, DECISION_STREAM, REJECTED_STREAM)}
        age = max(self.age / 1000, _DEDUPLICATION)  # NATS refuses an age below a stream's de-duplication window
        return {CLUSTER_STREAM: (age, self.bytes // 2), DECISION_STREAM: (age, self.bytes // 2), REJECTED_STREAM: (age, self.bytes // 16)}


class SegmentsTable:
    """The segments of the log: the boundaries of those still live (snapshots that close one),
    those archived and dropped, and the ids of the events that left the live log (asked only
    once one did: `retired`)."""

    def __init__(self, db: Database, *, archives: bool = True) -> None:
        self.db = db
        self.archives = archives  # false for a log read as it is from before retention (schema 0003): it has none
        self.retired = False  # whether any event id left the live log (`retired_ids`)

    async def archived(self, segment: Segment, starting_snapshot: int) -> None:
        """Record `segment` as written to the archive; the boundary snapshot it starts from is
        then no longer needed here (the segment's file carries it)."""
        await self.db.write(_archived, segment, starting_snapshot)

    async def drop(self, segment: Segment, at: int) -> None:
        """Delete an archived segment's rows from the live log, with their outbox rows
        (published, or passed over: the archive keeps those decisions). Marked dropped first, so
        that readers take it from the archive from then on, even if a stop comes between two of
        the chunks it is deleted in (the next `drop` finishes it); a chunk per transaction, so
        the daemon's commits never wait long. A decision waiting to be published is the
        caller's to check (`oldest_waiting`): its row must stay."""
        await self.db.write(_mark_dropped, segment.first, at)
        first = await self.first_live_seq() or segment.last + 1  # what an earlier drop did not finish
        for start in range(first, segment.last + 1, _DROP_CHUNK):
            await self.db.write(_drop_rows, start, min(segment.last, start + _DROP_CHUNK - 1), self.db.log_id)
            self.retired = True
            await anyio.lowlevel.checkpoint()
        await self.db.write(_advance_retired, segment.first, segment.last)

    async def retire(self, ids: list[tuple[str, int]], first: int, last: int) -> None:
        """Keep the event ids (with their positions) of the archived segment `first..last`,
        read back from its file: a segment dropped before ids were kept."""
        await self.db.write(_retire_and_advance, ids, first, last)
        self.retired = True

    async def ids_retired_through(self) -> int:
        """Every archived event id at or before this position is kept (`retired_ids`)."""
        return int(await self.db.run(first_value, sa.select(META.c.value).where(META.c.key == _RETIRED_THROUGH)) or 0)

    async def checkpoint(self) -> None:
        """SQLite: copy the write-ahead log into the database and cut it back to nothing, once
        retention dropped a segment (a WAL with readers always on it is never restarted by the
        automatic checkpoints, and grew to 280 MB in an hour's soak). Writers wait meanwhile;
        readers in the way make it a partial checkpoint, not an error. PostgreSQL: nothing."""
        if self.db.dialect == "sqlite":
            await self.db.run(_checkpoint)

    async def first_live_seq(self) -> int | None:
        """The oldest position still in the live log."""
        return await self.db.run(first_value, sa.select(sa.func.min(LOG.c.seq)))

    async def boundaries(self) -> list[int]:
        """The positions of the boundary snapshots, oldest first."""
        return [seq for (seq,) in await self.db.run(all_rows, sa.select(SNAPSHOTS.c.seq).where(SNAPSHOTS.c.boundary).order_by(SNAPSHOTS.c.seq))]

    async def all(self) -> list[Segment]:
        """Every archived segment, oldest first."""
        if not self.archives:
            return []
        return [Segment(*row) for row in await self.db.run(all_rows, sa.select(SEGMENTS).order_by(SEGMENTS.c.first))]

    async def rows(self, first: int, last: int, page: int = 20_000) -> AsyncIterator[list[LogRow]]:
        """The rows with `first <= seq <= last`, a page at a time: what a segment's file holds."""
        position = first - 1
        while position < last:
            query = sa.select(LOG.c.seq, LOG.c.event_id, LOG.c.type, LOG.c.partition, LOG.c.ts, LOG.c.received, LOG.c.stream_seq, LOG.c.payload)
            query = query.where(LOG.c.seq > position, LOG.c.seq <= last).order_by(LOG.c.seq).limit(page)
            rows = [
                LogRow(seq, event_id, kind, partition, ts, received, payload, stream_seq)
                for seq, event_id, kind, partition, ts, received, stream_seq, payload in await self.db.run(all_rows, query)
            ]
            if not rows:
                return
            yield rows
            position = rows[-1].seq

    async def summary(self, first: int, last: int) -> Summary:
        """What a segment's header says of the rows `first <= seq <= last`."""
        return await self.db.run(_summary, first, last)

    async def first_received_after(self, seq: int) -> int | None:
        """When the first row after `seq` was received (the open segment's start)."""
        return await self.db.run(first_value, sa.select(LOG.c.received).where(LOG.c.seq > seq).order_by(LOG.c.seq).limit(1))

    async def payload_bytes(self, after: int) -> int:
        """The payload bytes of the log rows after `after` (the open segment's, at start)."""
        return await self.db.run(scalar, sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(LOG.c.payload)), 0)).where(LOG.c.seq > after))

    async def used_bytes(self) -> int:
        """What the live log takes on disk, without the space it frees for reuse: SQLite's pages
        in use, or PostgreSQL's tables with their indexes."""
        return await self.db.run(_used_bytes)


class _Log(Protocol):
    """What the `Archivist` asks of the log (a `store.Store`)."""

    segments: SegmentsTable
    outbox: OutboxTable

    @property
    def log_id(self) -> str: ...

    async def snapshot_at(self, seq: int) -> bytes | None: ...


class Archivist:
    """Writes closed segments to the archive and drops from the live log what the policy lets
    go; woken after a snapshot that closes a segment, and once a minute for the age bound."""

    def __init__(self, store: _Log, retention: Retention) -> None:
        assert retention.archive is not None
        self.store, self.retention = store, retention
        self.archive = Archive(retention.archive)
        self._woken = anyio.Event()

    def wake(self) -> None:
        self._woken.set()

    async def run(self) -> None:
        while True:
            try:
                await self.archive_closed()
                await self.drop_expired(wall_ms())
                await self.keep_archived_ids()
            except StoreError as exc:  # the live log keeps everything meanwhile
                log("archiving waits", logging.WARNING, error=str(exc))
            except Exception as exc:  # an archive out of reach (a full disk, an object store's own errors) never stops the daemon
                log("archiving waits", logging.WARNING, error=f"cannot write to the archive {self.archive.location}: {type(exc).__name__}: {exc}")
            with anyio.move_on_after(60):
                await self._woken.wait()
            self._woken = anyio.Event()

    async def archive_closed(self) -> None:
        """Write each closed segment not yet archived, oldest first."""
        segments = await self.store.segments.all()
        start = segments[-1].last if segments else 0
        for boundary in await self.store.segments.boundaries():
            if boundary > start:
                await self._write(start, boundary)
                start = boundary

    async def _write(self, start: int, last: int) -> None:
        """Write the segment `start < seq <= last`, read from the live log a page at a time and
        compressed in a worker thread, so the daemon's cycles go on meanwhile."""
        summary = await self.store.segments.summary(start + 1, last)
        snapshot = (await self.store.snapshot_at(start)) if start else None
        if start and snapshot is None:
            log("the snapshot a segment starts from is missing: its file starts from the previous segment's end", logging.WARNING, seq=start)
        header = {"log_id": self.store.log_id, "first": start + 1, "last": last, **vars(summary), "snapshot": start if snapshot is not None else None}
        name = f"{self.store.log_id}-{start + 1:012d}-{last:012d}.jsonl.gz"
        await write_segment(self.archive, name, header, snapshot, self.store.segments.rows(start + 1, last))
        segment = Segment(start + 1, last, summary.records, summary.bytes, summary.first_received, summary.last_received, self.archive.url(name), wall_ms())
        await self.store.segments.archived(segment, start)
        log("segment archived", first=segment.first, last=last, records=segment.records, bytes=segment.bytes, file=segment.location)

    async def drop_expired(self, now: int) -> None:
        """Delete from the live log the archived segments the policy lets go, oldest first; not
        one with a decision still waiting to be published."""
        segments = await self.store.segments.all()
        dropped = [segment for segment in segments if segment.dropped is not None]
        first_live = await self.store.segments.first_live_seq()
        if dropped and first_live is not None and first_live <= dropped[-1].last:  # a drop a stop cut short
            await self.store.segments.drop(dropped[-1], dropped[-1].dropped or now)
        used = await self.store.segments.used_bytes()
        waiting = await self.store.outbox.oldest_waiting()
        for segment in segments:
            if segment.dropped is not None:
                continue
            if segment.last_received >= now - self.retention.age and used <= self.retention.bytes:
                return
            if waiting is not None and waiting <= segment.last:
                log("a segment stays in the live log until its decisions are published", first=segment.first, last=segment.last, waiting=waiting)
                return
            await self.store.segments.drop(segment, now)
            await self.store.segments.checkpoint()
            used = await self.store.segments.used_bytes()
            log(
                "segment dropped from the live log", first=segment.first, last=segment.last, records=segment.records, used_bytes=used, archived=segment.location
            )

    async def keep_archived_ids(self) -> None:
        """Keep the event ids of the segments that left the live log before their ids were kept
        (a log from before schema 0005, a drop cut short), read back from their files."""
        through = await self.store.segments.ids_retired_through()
        for segment in await self.store.segments.all():
            if segment.dropped is not None and segment.last > through:
                ids = await anyio.to_thread.run_sync(event_ids, segment.location, self.store.log_id)
                await self.store.segments.retire(ids, segment.first, segment.last)
                log("the event ids of an archived segment are kept", first=segment.first, last=segment.last, ids=len(ids), file=segment.location)


_KEEP_SNAPSHOTS = 1  # the newest, besides boundaries: a start needs no other (`state --at` starts from a segment's)


_RETIRED_THROUGH = "ids_retired_through"  # meta: every archived id at or before this position is in `retired_ids`


_DROP_CHUNK = 20_000  # log rows deleted per transaction: the writer's commits wait no longer than that


async def forget_snapshots(conn: AsyncConnection) -> None:
    """Delete the snapshots neither among the newest nor a boundary."""
    newest = sa.select(SNAPSHOTS.c.seq).order_by(SNAPSHOTS.c.seq.desc()).limit(_KEEP_SNAPSHOTS).scalar_subquery()
    kept = sa.select(SNAPSHOTS.c.seq).where(sa.or_(SNAPSHOTS.c.seq.in_(newest), SNAPSHOTS.c.boundary)).scalar_subquery()
    await conn.execute(SNAPSHOTS.delete().where(SNAPSHOTS.c.seq.not_in(kept)))
    await conn.execute(SNAPSHOT_PARTS.delete().where(SNAPSHOT_PARTS.c.seq.not_in(sa.select(SNAPSHOTS.c.seq).scalar_subquery())))


async def _archived(conn: AsyncConnection, segment: Segment, starting_snapshot: int) -> None:
    await conn.execute(SEGMENTS.insert().values(**vars(segment)))
    await conn.execute(SNAPSHOTS.update().where(SNAPSHOTS.c.seq == starting_snapshot).values(boundary=False))
    await forget_snapshots(conn)


async def _drop_rows(conn: AsyncConnection, first: int, last: int, log_id: str) -> None:
    """The log rows, and their outbox rows published or passed over (the caller keeps a segment
    with a decision waiting to be published live); the ids of their events are kept (the
    daemon's own need not be: shims may not use them)."""
    shims = sa.select(LOG.c.event_id, LOG.c.seq).where(LOG.c.seq.between(first, last), sa.not_(LOG.c.event_id.startswith(log_id + ":")))
    await _retire(conn, [(event_id, seq) for event_id, seq in await conn.execute(shims)])
    await conn.execute(OUTBOX.delete().where(OUTBOX.c.seq.between(first, last), sa.not_(WAITING)))
    await conn.execute(LOG.delete().where(LOG.c.seq.between(first, last)))


async def _checkpoint(conn: AsyncConnection) -> None:
    await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


async def _mark_dropped(conn: AsyncConnection, first: int, at: int) -> None:
    await conn.execute(SEGMENTS.update().where(SEGMENTS.c.first == first).values(dropped=at))


@dataclass(frozen=True)
class Summary:
    records: int
    bytes: int
    first_received: int
    last_received: int
    partitions: list[str]


async def _summary(conn: AsyncConnection, first: int, last: int) -> Summary:
    within = LOG.c.seq.between(first, last)
    counted = sa.select(
        sa.func.count(), sa.func.coalesce(sa.func.sum(sa.func.length(LOG.c.payload)), 0), sa.func.min(LOG.c.received), sa.func.max(LOG.c.received)
    ).where(within)
    records, size, first_received, last_received = (await conn.execute(counted)).one()
    partitions = [name for (name,) in await conn.execute(sa.select(LOG.c.partition).where(within).distinct().order_by(LOG.c.partition))]
    return Summary(records, size, first_received or 0, last_received or 0, partitions)


async def _used_bytes(conn: AsyncConnection) -> int:
    if conn.dialect.name == "sqlite":
        pages = (await conn.exec_driver_sql("PRAGMA page_count")).scalar_one() - (await conn.exec_driver_sql("PRAGMA freelist_count")).scalar_one()
        return int(pages * (await conn.exec_driver_sql("PRAGMA page_size")).scalar_one())
    sizes = " + ".join(f"pg_total_relation_size('{table.name}')" for table in METADATA.sorted_tables)
    return int((await conn.exec_driver_sql(f"SELECT {sizes}")).scalar_one())


_RETIRE: dict[str, str] = {}


def id_hash(event_id: str) -> int:
    """An event id as `retired_ids` keeps it: 64 bits of its BLAKE2b hash, signed (a BIGINT)."""
    return int.from_bytes(hashlib.blake2b(event_id.encode(), digest_size=8).digest(), "big", signed=True)


async def _retire(conn: AsyncConnection, ids: list[tuple[str, int]]) -> None:
    """Keep these (event id, position): their rows leave the live log. An id kept already (a
    drop cut short and done again) is passed over."""
    if ids:
        if conn.dialect.name not in _RETIRE:
            _RETIRE[conn.dialect.name] = str(RETIRED_IDS.insert().compile(dialect=conn.dialect, column_keys=["id_hash", "seq"])) + " ON CONFLICT DO NOTHING"
        await conn.exec_driver_sql(_RETIRE[conn.dialect.name], [(id_hash(event_id), seq) for event_id, seq in ids])


async def _advance_retired(conn: AsyncConnection, first: int, last: int) -> None:
    """Segment `first..last` has its ids kept: the mark moves on if it follows on from it."""
    through = int((await conn.execute(sa.select(META.c.value).where(META.c.key == _RETIRED_THROUGH))).scalar() or 0)
    if first - 1 <= through < last:
        if (await conn.execute(META.update().where(META.c.key == _RETIRED_THROUGH).values(value=str(last)))).rowcount == 0:
            await conn.execute(META.insert().values(key=_RETIRED_THROUGH, value=str(last)))


async def _retire_and_advance(conn: AsyncConnection, ids: list[tuple[str, int]], first: int, last: int) -> None:
    await _retire(conn, ids)
    await _advance_retired(conn, first, last)
