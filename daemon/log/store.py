"""What the daemon and the commands ask of the log's tables (`tables`), over its `Database`.

One ordered log holds cluster events, ticks and decisions, each with its global sequence number
(`seq`, assigned by the single writer), unique event id, type, partition, the shim's `ts`, the
daemon's receive time and the payload bytes. Beside it: the outbox of decisions to publish, dead
letters, snapshots of the projection, and the position of the NATS consumer (`tracking`), which
is written in the same transaction as the events it covers so a redelivery is recognised.

Written in portable SQLAlchemy Core, for SQLite (tuned with WAL here) and PostgreSQL (asyncpg);
the hot paths run compiled statements through the driver. Driver errors become `StoreError`.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterable
from typing import Any, cast

import anyio
import anyio.lowlevel
import msgspec
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ..records import Batch, DeadLetter, LogRow
from .database import Database, all_rows, first_value, scalar
from .outbox import OutboxTable, waiting_count
from .segments import SegmentsTable, forget_snapshots, id_hash
from .tables import DEAD_LETTERS, LOG, OUTBOX, RETIRED_IDS, SEGMENTS, SNAPSHOT_PARTS, SNAPSHOTS, TRACKING

__all__ = ["Store"]

_SUBMISSIONS = ("app.submitted", "task.submitted", "task.bound")  # the rows that name applications and tasks
_NAMES_PER_QUERY = 500  # names looked for in one query (SQLite parses at most 1,000 nested ORs)
_PACKED = b"PDZ\x01"  # a snapshot stored compressed (zlib) starts so; one from before is stored as it is
_SNAPSHOT_PART = 4 * 2**20  # bytes of a snapshot per row: the driver and SQLite each copy a value whole


class Store:
    """The log of one daemon (its single writer), and what the commands read of it, over its
    `Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.outbox = OutboxTable(db)  # the decisions to publish
        self.archives = db.schema >= "0004"  # false for a log read as it is from before retention (schema 0003): it has none
        self.segments = SegmentsTable(db, archives=self.archives)  # what retention archived and dropped

    @property
    def log_id(self) -> str:
        return self.db.log_id

    @classmethod
    async def open(cls, target: str, *, synchronous: str = "FULL", create: bool = True, stopping: anyio.Event | None = None) -> Store:
        """The log at `target` (see `Database.open`)."""
        store = cls(await Database.open(target, synchronous=synchronous, create=create, stopping=stopping))
        if create:
            store.segments.retired = await store.db.run(first_value, sa.select(sa.exists().select_from(RETIRED_IDS)))
        return store

    async def close(self) -> None:
        await self.db.close()

    # -- writing --

    async def commit(self, batch: Batch) -> None:
        """Write a batch in one transaction."""
        await self.db.write(_write_batch, batch)

    async def save_snapshot(self, seq: int, payload: bytes, created: int, *, boundary: bool = False) -> None:
        """Store a snapshot, compressed (in a worker thread: a backlog of half a million tasks
        made 180 MB snapshots, a fifth of that compressed); keep the newest and every `boundary`
        one (which closes a segment not yet archived)."""
        packed = await anyio.to_thread.run_sync(_pack, payload)
        await self.db.write(_save_snapshot, seq, packed, created, boundary)

    # -- reading --

    async def last_seq(self) -> int:
        """The newest position, in the live log or (when retention left it empty) archived."""
        live = sa.select(sa.func.coalesce(sa.func.max(LOG.c.seq), 0)).scalar_subquery()
        if not self.archives:
            return await self.db.run(scalar, sa.select(live))
        archived = sa.select(sa.func.coalesce(sa.func.max(SEGMENTS.c.last), 0)).scalar_subquery()
        return await self.db.run(scalar, sa.select(sa.func.max(live, archived) if self.db.dialect == "sqlite" else sa.func.greatest(live, archived)))

    async def tracking_positions(self) -> dict[str, int]:
        """Every source's position (`tracking` per source)."""
        rows = await self.db.run(all_rows, sa.select(TRACKING.c.source, TRACKING.c.position))
        return dict(rows)

    async def tracking(self, source: str) -> int:
        return await self.db.run(scalar, sa.select(sa.func.coalesce(sa.func.max(TRACKING.c.position), 0)).where(TRACKING.c.source == source))

    async def known_event_ids(self, event_ids: Iterable[str]) -> dict[str, int]:
        """The log positions of those of `event_ids` that are already in the log, live or
        archived."""
        ids = list(event_ids)
        if not ids:
            return {}
        found = await self.db.run(_positions, LOG.c.event_id, ids)
        if self.segments.retired and len(found) < len(ids):
            hashed = {id_hash(event_id): event_id for event_id in ids if event_id not in found}
            found.update((hashed[key], seq) for key, seq in (await self.db.run(_positions, RETIRED_IDS.c.id_hash, list(hashed))).items())
        return found

    async def latest_snapshot(self, at_most: int | None = None) -> tuple[int, bytes] | None:
        found = await self.db.run(_latest_snapshot, at_most)
        return None if found is None else (found[0], await anyio.to_thread.run_sync(_unpack, found[1]))

    async def snapshot_at(self, seq: int) -> bytes | None:
        """The snapshot at exactly `seq`, if kept."""
        found = await self.latest_snapshot(seq)
        return found[1] if found is not None and found[0] == seq else None

    async def latest_snapshot_seq(self) -> int:
        """The log position of the newest snapshot (0 without one), without reading it."""
        return await self.db.run(scalar, sa.select(sa.func.coalesce(sa.func.max(SNAPSHOTS.c.seq), 0)))

    async def find(self, event_id: str) -> LogRow | None:
        rows = await self.db.run(_select_rows, sa.select(LOG).where(LOG.c.event_id == event_id))
        return rows[0] if rows else None

    async def decisions_about(self, *names: str, limit: int = 50) -> list[LogRow]:
        """The newest `limit` decisions whose payload names any of `names` (as task,
        application, preemptor or victim), newest last."""
        found: dict[int, LogRow] = {}
        for start in range(0, len(names), _NAMES_PER_QUERY):
            mentions = sa.or_(*map(self._mentions, names[start : start + _NAMES_PER_QUERY]))
            query = sa.select(LOG).where(LOG.c.type.like("decision.%"), mentions).order_by(LOG.c.seq.desc()).limit(limit)
            found.update((row.seq, row) for row in await self.db.run(_select_rows, query))
        return [found[seq] for seq in sorted(found)[-limit:]]

    def _mentions(self, name: str) -> sa.ColumnElement:
        """Rows whose payload holds `name` as a JSON string, as the log writes it (quotes,
        backslashes and control characters escaped)."""
        as_stored = msgspec.json.encode(name).decode()
        pattern = as_stored.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return _as_text(LOG.c.payload, self.db.dialect).like(f"%{pattern}%", escape="\\")

    async def submissions_naming(self, name: str, limit: int = 50) -> list[LogRow]:
        """`app.submitted`, `task.submitted` and `task.bound` rows whose payload names `name`
        (an application or a task), oldest first."""
        query = sa.select(LOG).where(LOG.c.type.in_(_SUBMISSIONS), self._mentions(name)).order_by(LOG.c.seq).limit(limit)
        return await self.db.run(_select_rows, query)

    async def latest_submissions(self, limit: int) -> list[LogRow]:
        """The newest `limit` `app.submitted`, `task.submitted` and `task.bound` rows, newest
        first: the names a user probably means."""
        query = sa.select(LOG).where(LOG.c.type.in_(_SUBMISSIONS)).order_by(LOG.c.seq.desc()).limit(limit)
        return await self.db.run(_select_rows, query)

    async def configs_applied(self) -> list[LogRow]:
        """The `config.applied` rows, oldest first: which model each partition ran from when."""
        return await self.db.run(_select_rows, sa.select(LOG).where(LOG.c.type == "config.applied").order_by(LOG.c.seq))

    async def dead_letters(self, limit: int) -> list[DeadLetter]:
        return await self.db.run(_dead_letters, limit)

    async def dead_letters_between(self, after: int, through: int) -> list[DeadLetter]:
        """Dead letters of the messages at stream sequences `after < seq <= through`."""
        return await self.db.run(_dead_letters_between, after, through)

    async def counts(self) -> dict[str, int]:
        return await self.db.run(_counts)

    async def read_log(self, after: int = 0, until: int | None = None, page: int = 20_000) -> AsyncIterator[tuple[int, int, bytes]]:
        """(seq, received, payload) of every log row with `after < seq <= until`, in order."""
        async for rows in self.read_pages(after, until, page):
            for row in rows:
                yield row

    async def read_pages(self, after: int = 0, until: int | None = None, page: int = 20_000) -> AsyncIterator[list[tuple[int, int, bytes]]]:
        """The rows of `read_log`, a page at a time: all that a fold needs, and the hot path of
        replays and restarts (a page is read by the driver alone, and handed over whole, not
        row by row through SQLAlchemy and an async generator). A stop comes in between pages
        (each read is shielded)."""
        position = after
        while True:
            rows = await self.db.run(_page, position, until, page)
            if rows:
                yield rows
            if len(rows) < page:
                return
            position = rows[-1][0]
            await anyio.lowlevel.checkpoint()


def _pack(snapshot: bytes) -> bytes:
    return _PACKED + zlib.compress(snapshot, 1)


def _unpack(stored: bytes) -> bytes:
    return zlib.decompress(memoryview(stored)[len(_PACKED) :]) if stored.startswith(_PACKED) else stored


def _as_text(payload: sa.ColumnElement, dialect: str) -> sa.ColumnElement:
    """A payload's UTF-8 JSON as text (PostgreSQL casts bytea to its hex form instead)."""
    return sa.func.convert_from(payload, "UTF8") if dialect == "postgresql" else sa.cast(payload, sa.Text)


async def _write_batch(conn: AsyncConnection, batch: Batch) -> None:
    if batch.rows:
        rows = [(r.seq, r.event_id, r.type, r.partition, r.ts, r.received, r.stream_seq, r.payload) for r in batch.rows]
        await _insert_many(conn, LOG, ("seq", "event_id", "type", "partition", "ts", "received", "stream_seq", "payload"), rows)
    if batch.outbox:
        await _insert_many(conn, OUTBOX, ("seq", "decision_id", "subject"), [(o.seq, o.decision_id, o.subject) for o in batch.outbox])
    if batch.dead:
        await conn.execute(DEAD_LETTERS.insert(), [d.stored() for d in batch.dead])
    if batch.tracking is not None:
        await _set_tracking(conn, *batch.tracking)


_INSERTS: dict[tuple[str, str, tuple[str, ...]], str] = {}


async def _insert_many(conn: AsyncConnection, table: sa.Table, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Insert `rows`, each a value per one of `columns`, with the driver's own executemany:
    SQLAlchemy's per-row parameter handling cost more than the insert itself on the hot path of
    ingest. The statement is compiled once per database dialect."""
    key = (conn.dialect.name, table.name, columns)
    if key not in _INSERTS:
        _INSERTS[key] = str(table.insert().compile(dialect=conn.dialect, column_keys=list(columns)))
    await conn.exec_driver_sql(_INSERTS[key], rows)


async def _set_tracking(conn: AsyncConnection, source: str, position: int) -> None:
    updated = await conn.execute(TRACKING.update().where(TRACKING.c.source == source).values(position=position))
    if updated.rowcount == 0:
        await conn.execute(TRACKING.insert().values(source=source, position=position))


async def _save_snapshot(conn: AsyncConnection, seq: int, payload: bytes, created: int, boundary: bool) -> None:
    await conn.execute(SNAPSHOTS.delete().where(SNAPSHOTS.c.seq == seq))
    await conn.execute(SNAPSHOT_PARTS.delete().where(SNAPSHOT_PARTS.c.seq == seq))
    await conn.execute(SNAPSHOTS.insert().values(seq=seq, payload=b"", created=created, boundary=boundary))
    view = memoryview(payload)
    for part, start in enumerate(range(0, len(view), _SNAPSHOT_PART)):
        await conn.execute(SNAPSHOT_PARTS.insert().values(seq=seq, part=part, payload=view[start : start + _SNAPSHOT_PART]))
    await forget_snapshots(conn)


_KNOWN: dict[tuple[str, str, int], str] = {}


async def _positions(conn: AsyncConnection, column: sa.Column, keys: list) -> dict:
    """The position of each of `keys` found in `column` (an event id of the log, a retired id's
    hash). Asked for every batch of ingest: the statement for each number of keys is compiled
    once per dialect and run by the driver (SQLAlchemy's expansion of `IN` per call cost more
    than the lookup)."""
    found: dict = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        key = (conn.dialect.name, column.table.name, len(chunk))
        if key not in _KNOWN:
            query = sa.select(column, column.table.c.seq).where(column.in_(chunk))
            _KNOWN[key] = str(query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True}))
        result = await conn.exec_driver_sql(_KNOWN[key], tuple(chunk))
        found.update(cast(list[tuple], result.all()))  # a driver-level statement's rows carry no types
    return found


async def _latest_snapshot(conn: AsyncConnection, at_most: int | None) -> tuple[int, bytes] | None:
    query = sa.select(SNAPSHOTS.c.seq, SNAPSHOTS.c.payload).order_by(SNAPSHOTS.c.seq.desc()).limit(1)
    if at_most is not None:
        query = query.where(SNAPSHOTS.c.seq <= at_most)
    row = (await conn.execute(query)).first()
    if row is None:
        return None
    parts = await conn.execute(sa.select(SNAPSHOT_PARTS.c.payload).where(SNAPSHOT_PARTS.c.seq == row.seq).order_by(SNAPSHOT_PARTS.c.part))
    return row.seq, b"".join([row.payload, *(part for (part,) in parts)])


_PAGES: dict[tuple[str, bool, int], Any] = {}  # compiled statements


async def _page(conn: AsyncConnection, after: int, until: int | None, limit: int) -> list[tuple[int, int, bytes]]:
    """Up to `limit` rows (seq, received, payload) after `after`, at most `until`, in order;
    the statement compiled once per dialect, run by the driver."""
    key = (conn.dialect.name, until is not None, limit)
    if key not in _PAGES:
        query = sa.select(LOG.c.seq, LOG.c.received, LOG.c.payload).where(LOG.c.seq > sa.bindparam("after"))
        if until is not None:
            query = query.where(LOG.c.seq <= sa.bindparam("until"))
        _PAGES[key] = query.order_by(LOG.c.seq).limit(limit).compile(dialect=conn.dialect)
    compiled = _PAGES[key]
    values = compiled.construct_params({"after": after, "until": until})
    parameters = tuple(values[name] for name in compiled.positiontup) if compiled.positional else values
    result = await conn.exec_driver_sql(str(compiled), parameters)
    rows = result.cursor.fetchall()  # the driver's tuples, as fetched: not wrapped in Row objects
    result.close()
    return cast(list[tuple[int, int, bytes]], rows)


async def _select_rows(conn: AsyncConnection, query) -> list[LogRow]:
    return [LogRow(**row._mapping) for row in await conn.execute(query)]


async def _dead_letters(conn: AsyncConnection, limit: int) -> list[DeadLetter]:
    query = sa.select(DEAD_LETTERS).order_by(DEAD_LETTERS.c.id.desc()).limit(limit)
    rows = list(await conn.execute(query))
    # newest last, in the order the messages arrived (a batch stores them by kind of fault)
    rows.sort(key=lambda row: (row.received, row.stream_seq or 0, row.id))
    return [_dead_letter(row) for row in rows]


async def _dead_letters_between(conn: AsyncConnection, after: int, through: int) -> list[DeadLetter]:
    query = sa.select(DEAD_LETTERS).where(DEAD_LETTERS.c.stream_seq > after, DEAD_LETTERS.c.stream_seq <= through).order_by(DEAD_LETTERS.c.id)
    return [_dead_letter(row) for row in await conn.execute(query)]


def _dead_letter(row: sa.Row) -> DeadLetter:
    return DeadLetter(**{key: value for key, value in row._mapping.items() if key != "id"})


async def _counts(conn: AsyncConnection) -> dict[str, int]:
    counts = {}
    for name, table in (("log", LOG), ("dead_letters", DEAD_LETTERS), ("snapshots", SNAPSHOTS)):
        counts[name] = (await conn.execute(sa.select(sa.func.count()).select_from(table))).scalar_one()
    counts["unpublished"] = await waiting_count(conn)
    counts["passed_over"] = (await conn.execute(sa.select(sa.func.count()).select_from(OUTBOX).where(OUTBOX.c.passed_over_at.is_not(None)))).scalar_one()
    return counts
