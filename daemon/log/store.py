"""The log's tables and what the daemon and the commands ask of them.

One ordered log holds cluster events, ticks and decisions, each with its global sequence number
(`seq`, assigned by the single writer), unique event id, type, partition, the shim's `ts`, the
daemon's receive time and the payload bytes. Beside it: the outbox of decisions to publish, dead
letters, snapshots of the projection, and the position of the NATS consumer (`tracking`), which
is written in the same transaction as the events it covers so a redelivery is recognised.

Written in portable SQLAlchemy Core, for SQLite (tuned with WAL here) and PostgreSQL (asyncpg);
the hot paths run compiled statements through the driver. Driver errors become `StoreError`.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.lowlevel
import msgspec
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from preemptd import migrations

from ..errors import LogConflict, StoreError
from ..operations.logs import log
from ..records import Batch, DeadLetter, LogRow, OutboxRow, Segment
from .database import SAY_WAITING_EVERY, database_url, engine_options, failure, locked, read_only_url, scalar, shown_url, sqlite_exists, tune_sqlite
from .lease import fenced

__all__ = ["Store"]

_metadata = sa.MetaData()
_meta = sa.Table("meta", _metadata, sa.Column("key", sa.String(64), primary_key=True), sa.Column("value", sa.Text))
_log = sa.Table(
    "log",
    _metadata,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("event_id", sa.String(256)),
    sa.Column("type", sa.String(64)),
    sa.Column("partition", sa.String(64)),
    sa.Column("ts", sa.BigInteger),
    sa.Column("received", sa.BigInteger),
    sa.Column("stream_seq", sa.BigInteger),
    sa.Column("payload", sa.LargeBinary),
)
_outbox = sa.Table(
    "outbox",
    _metadata,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("decision_id", sa.String(256)),
    sa.Column("subject", sa.String(256)),
    sa.Column("published_at", sa.BigInteger),
    sa.Column("attempts", sa.Integer),
    sa.Column("passed_over_at", sa.BigInteger),
    sa.Column("problem", sa.Text),
)
_SUBMISSIONS = ("app.submitted", "task.submitted", "task.bound")  # the rows that name applications and tasks
_NAMES_PER_QUERY = 500  # names looked for in one query (SQLite parses at most 1,000 nested ORs)
_WAITING = sa.and_(_outbox.c.published_at.is_(None), _outbox.c.passed_over_at.is_(None))  # what the index outbox_unpublished finds
_dead = sa.Table(
    "dead_letters",
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("received", sa.BigInteger),
    sa.Column("subject", sa.String(256)),
    sa.Column("stream_seq", sa.BigInteger),
    sa.Column("partition", sa.String(64)),
    sa.Column("event_type", sa.String(64)),
    sa.Column("event_id", sa.String(256)),
    sa.Column("reason", sa.Text),
    sa.Column("raw", sa.LargeBinary),
)
_snapshots = sa.Table(
    "snapshots",
    _metadata,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("created", sa.BigInteger),
    sa.Column("payload", sa.LargeBinary),
    sa.Column("boundary", sa.Boolean, server_default=sa.false()),  # closes a segment: kept until that segment is archived
)
_KEEP_SNAPSHOTS = 1  # the newest, besides boundaries: a start needs no other (`state --at` starts from a segment's)
_PACKED = b"PDZ\x01"  # a snapshot stored compressed (zlib) starts so; one from before is stored as it is
_segments = sa.Table(
    "segments",
    _metadata,
    sa.Column("first", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("last", sa.BigInteger),
    sa.Column("records", sa.BigInteger),
    sa.Column("bytes", sa.BigInteger),
    sa.Column("first_received", sa.BigInteger),
    sa.Column("last_received", sa.BigInteger),
    sa.Column("location", sa.Text),
    sa.Column("archived", sa.BigInteger),
    sa.Column("dropped", sa.BigInteger),
)
#: The ids of the events of segments that left the live log: a 64-bit hash each, with its
#: position. Two ids share a hash by a chance of n in 2**64 (n ids kept): nil at a billion.
_retired_ids = sa.Table("retired_ids", _metadata, sa.Column("id_hash", sa.BigInteger, primary_key=True, autoincrement=False), sa.Column("seq", sa.BigInteger))
_RETIRED_THROUGH = "ids_retired_through"  # meta: every archived id at or before this position is in `retired_ids`
_DROP_CHUNK = 20_000  # log rows deleted per transaction: the writer's commits wait no longer than that
_snapshot_parts = sa.Table(
    "snapshot_parts",
    _metadata,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("part", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("payload", sa.LargeBinary),
)
_SNAPSHOT_PART = 4 * 2**20  # bytes of a snapshot per row: the driver and SQLite each copy a value whole
_tracking = sa.Table(
    "tracking",
    _metadata,
    sa.Column("source", sa.String(256), primary_key=True),
    sa.Column("position", sa.BigInteger),
)


def _upgrade(connection: sa.Connection, target: str) -> None:
    if _check_schema(connection, target, writable=True) != migrations.HEAD:
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(migrations.LOCATION))
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def _check_schema(connection: sa.Connection, target: str, *, writable: bool) -> str | None:
    """The log's schema revision (None for an empty database). Refuses a database this version
    cannot use: another application's, a newer preemptd's, or (read-only) one that needs `db
    upgrade` first."""
    tables = sa.inspect(connection).get_table_names()
    current = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() if "alembic_version" in tables else None
    if current is None:
        foreign = [name for name in tables if name != "alembic_version"]
        if foreign or not writable:
            raise StoreError(f"{target} is not a preemptd log" + (f" (it has tables {', '.join(sorted(foreign)[:5])})" if foreign else ""))
        return None
    head = migrations.HEAD
    if current not in migrations.REVISIONS:
        raise StoreError(f"the log at {target} was written by a newer preemptd (schema {current}; this version knows up to {head}): upgrade preemptd")
    if current < migrations.READABLE and not writable:
        raise StoreError(f"the log at {target} has an older schema ({current}): run `preemptd db upgrade --db {target}`")
    return current


class Store:
    """The log database of one daemon (the single writer)."""

    stopping = False  # set when the daemon stops: a wait for a locked log ends

    def __init__(self, engine: AsyncEngine, log_id: str, target: str) -> None:
        self._engine = engine
        self.log_id = log_id
        self._target = target
        self.lease_pid: int | None = None  # a PostgreSQL log's writer: the backend that holds its lease (see `WriterLease`)
        self.busy: dict[object, float] = {}  # when each running transaction began (time.monotonic())
        self.archives_in: str | None = None  # where readers find archived segments, when moved from where they were written
        self.archives = True  # false for a log read as it is from before retention (schema 0003): it has none
        self.retired = False  # whether any event id left the live log (`retired_ids`): only then is it asked

    @classmethod
    async def open(cls, target: str, *, synchronous: str = "FULL", create: bool = True) -> Store:
        """Open the log at `target`, a file path or a SQLAlchemy URL: created and migrated if
        `create`, else opened read-only as it is (the commands that only read a log)."""
        url = database_url(target)
        target = shown_url(target)  # as errors name it
        if url.startswith("sqlite") and not create:
            if not sqlite_exists(url):
                raise StoreError(f"no preemptd log at {target}: run `preemptd run` or `preemptd simulate --db` first")
            url = read_only_url(url)
        try:
            engine = create_async_engine(url, **engine_options(url, writing=create))
        except ValueError as exc:  # a port that is not a number
            raise StoreError(f"cannot use the database URL {target}: {exc}") from None
        except (SQLAlchemyError, ImportError) as exc:
            raise StoreError(f"cannot use the database URL {target}: {exc} (preemptd needs an async driver, e.g. sqlite+aiosqlite:///FILE)") from None
        if url.startswith("sqlite") and create:
            tune_sqlite(engine, synchronous)
        try:
            with anyio.CancelScope(shield=True):  # as every transaction: see `_run`
                async with engine.begin() as conn:
                    if create:
                        await conn.run_sync(_upgrade, target)
                        schema = migrations.HEAD
                    else:
                        found: str | None = await conn.run_sync(_check_schema, target, writable=False)
                        schema = found or migrations.HEAD
                    log_id = await _ensure_log_id(conn, create=create)
        except StoreError:
            await engine.dispose()
            raise
        except (SQLAlchemyError, OSError) as exc:  # OSError: a server that is not there
            await engine.dispose()
            raise failure(exc, target, "cannot open the log at") from None
        store = cls(engine, log_id, target)
        store.archives = schema >= "0004"
        if create:
            store.retired = await store._run(_first, sa.select(sa.exists().select_from(_retired_ids)))
        return store

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):  # closing runs on a stop signal too
            await self._engine.dispose()

    async def _run(self, work, *args):
        """One transaction. Shielded: a cancelled transaction would leave SQLAlchemy closing
        its connection in a task of its own, which outlives the event loop and holds up the
        program's exit (a stop during start-up hung so). A SQLite log locked by another process
        is waited for (saying so every few seconds), not a failure: nothing is acknowledged
        until it is written; a stop (`Store.stopping`) ends the wait. `busy` holds when each
        running transaction began, for a watchdog."""
        said = 0.0
        while True:
            try:
                with anyio.CancelScope(shield=True):
                    token = object()
                    self.busy[token] = time.monotonic()
                    try:
                        async with self._engine.begin() as conn:
                            return await work(conn, *args)
                    finally:
                        del self.busy[token]
            except IntegrityError as exc:
                raise LogConflict(f"the log at {self._target} holds a row this daemon did not write ({str(exc.orig).splitlines()[0]})") from exc
            except (SQLAlchemyError, OSError) as exc:
                if not locked(exc):
                    raise failure(exc, self._target, "log database error at") from exc
            if Store.stopping:  # the daemon's writes are shielded from its cancellation: the wait ends here
                raise StoreError(
                    f"stopping while another process holds the lock of the log at {self._target}: nothing more was written, and what was not is read "
                    "again at the next start"
                )
            if time.monotonic() - said >= SAY_WAITING_EVERY:
                said = time.monotonic()
                log("waiting for the log: another process holds its lock", logging.WARNING, db=self._target)
            await anyio.sleep(0.2)  # a stop signal ends the wait

    # -- writing --

    async def _write(self, work, *args):
        """One writing transaction, fenced by the writer's lease when there is one: a writer that
        lost it (a standby ended its session) writes nothing more, even before it notices."""
        if self.lease_pid is None:
            return await self._run(work, *args)
        return await self._run(fenced, work, self.lease_pid, *args)

    async def commit(self, batch: Batch) -> None:
        """Write a batch in one transaction."""
        await self._write(_write_batch, batch)

    async def mark_published(self, runs: Sequence[tuple[int, int]], at: int) -> None:
        """Mark published the unpublished outbox rows of each run (first and last position,
        inclusive): one statement per run, where a list of a thousand positions cost more to
        build than to run."""
        if runs:
            await self._write(_mark_published, list(runs), at)

    async def prune_published(self, before: int) -> int:
        """Delete the outbox rows published before `before` (ms): the stream holds those
        decisions, and NATS would drop a repeat of them only within its de-duplication window;
        the log keeps every decision. Rows passed over stay, for the operator. How many went."""
        return await self._write(_prune_published, before)

    async def refused(self, problems: dict[int, str], at: int, *, pass_over_after: int) -> list[int]:
        """Record that NATS refused these decisions (by log position, with why); those refused
        `pass_over_after` times are passed over: they stay in the log and are not sent again.
        Returns the positions passed over now."""
        return await self._write(_refused, problems, at, pass_over_after) if problems else []

    async def save_snapshot(self, seq: int, payload: bytes, created: int, *, boundary: bool = False) -> None:
        """Store a snapshot, compressed (in a worker thread: a backlog of half a million tasks
        made 180 MB snapshots, a fifth of that compressed); keep the newest and every `boundary`
        one (which closes a segment not yet archived)."""
        packed = await anyio.to_thread.run_sync(_pack, payload)
        await self._write(_save_snapshot, seq, packed, created, boundary)

    async def archived(self, segment: Segment, starting_snapshot: int) -> None:
        """Record `segment` as written to the archive; the boundary snapshot it starts from is
        then no longer needed here (the segment's file carries it)."""
        await self._write(_archived, segment, starting_snapshot)

    async def drop(self, segment: Segment, at: int) -> None:
        """Delete an archived segment's rows from the live log, with their outbox rows
        (published, or passed over: the archive keeps those decisions). Marked dropped first, so
        that readers take it from the archive from then on, even if a stop comes between two of
        the chunks it is deleted in (the next `drop` finishes it); a chunk per transaction, so
        the daemon's commits never wait long. A decision waiting to be published is the
        caller's to check (`oldest_waiting`): its row must stay."""
        await self._write(_mark_dropped, segment.first, at)
        first = await self.first_live_seq() or segment.last + 1  # what an earlier drop did not finish
        for start in range(first, segment.last + 1, _DROP_CHUNK):
            await self._write(_drop_rows, start, min(segment.last, start + _DROP_CHUNK - 1), self.log_id)
            self.retired = True
            await anyio.lowlevel.checkpoint()
        await self._write(_advance_retired, segment.first, segment.last)

    async def retire(self, ids: list[tuple[str, int]], first: int, last: int) -> None:
        """Keep the event ids (with their positions) of the archived segment `first..last`,
        read back from its file: a segment dropped before ids were kept."""
        await self._write(_retire_and_advance, ids, first, last)
        self.retired = True

    async def ids_retired_through(self) -> int:
        """Every archived event id at or before this position is kept (`retired_ids`)."""
        return int(await self._run(_first, sa.select(_meta.c.value).where(_meta.c.key == _RETIRED_THROUGH)) or 0)

    async def checkpoint(self) -> None:
        """SQLite: copy the write-ahead log into the database and cut it back to nothing, once
        retention dropped a segment (a WAL with readers always on it is never restarted by the
        automatic checkpoints, and grew to 280 MB in an hour's soak). Writers wait meanwhile;
        readers in the way make it a partial checkpoint, not an error. PostgreSQL: nothing."""
        if self._engine.dialect.name == "sqlite":
            await self._run(_checkpoint)

    async def first_live_seq(self) -> int | None:
        """The oldest position still in the live log."""
        return await self._run(_first, sa.select(sa.func.min(_log.c.seq)))

    # -- reading --

    async def last_seq(self) -> int:
        """The newest position, in the live log or (when retention left it empty) archived."""
        live = sa.select(sa.func.coalesce(sa.func.max(_log.c.seq), 0)).scalar_subquery()
        if not self.archives:
            return await self._run(scalar, sa.select(live))
        archived = sa.select(sa.func.coalesce(sa.func.max(_segments.c.last), 0)).scalar_subquery()
        return await self._run(scalar, sa.select(sa.func.max(live, archived) if self._engine.dialect.name == "sqlite" else sa.func.greatest(live, archived)))

    async def tracking_positions(self) -> dict[str, int]:
        """Every source's position (`tracking` per source)."""
        rows = await self._run(_all, sa.select(_tracking.c.source, _tracking.c.position))
        return dict(rows)

    async def tracking(self, source: str) -> int:
        return await self._run(scalar, sa.select(sa.func.coalesce(sa.func.max(_tracking.c.position), 0)).where(_tracking.c.source == source))

    async def known_event_ids(self, event_ids: Iterable[str]) -> dict[str, int]:
        """The log positions of those of `event_ids` that are already in the log, live or
        archived."""
        ids = list(event_ids)
        if not ids:
            return {}
        found = await self._run(_positions, _log.c.event_id, ids)
        if self.retired and len(found) < len(ids):
            hashed = {id_hash(event_id): event_id for event_id in ids if event_id not in found}
            found.update((hashed[key], seq) for key, seq in (await self._run(_positions, _retired_ids.c.id_hash, list(hashed))).items())
        return found

    async def unpublished(self, limit: int) -> list[OutboxRow]:
        return await self._run(_unpublished, limit)

    async def latest_snapshot(self, at_most: int | None = None) -> tuple[int, bytes] | None:
        found = await self._run(_latest_snapshot, at_most)
        return None if found is None else (found[0], await anyio.to_thread.run_sync(_unpack, found[1]))

    async def boundaries(self) -> list[int]:
        """The positions of the boundary snapshots, oldest first."""
        return [seq for (seq,) in await self._run(_all, sa.select(_snapshots.c.seq).where(_snapshots.c.boundary).order_by(_snapshots.c.seq))]

    async def segments(self) -> list[Segment]:
        """Every archived segment, oldest first."""
        if not self.archives:
            return []
        return [Segment(*row) for row in await self._run(_all, sa.select(_segments).order_by(_segments.c.first))]

    async def rows(self, first: int, last: int, page: int = 20_000) -> AsyncIterator[list[tuple]]:
        """The whole rows (seq, event_id, type, partition, ts, received, stream_seq, payload) with
        `first <= seq <= last`, a page at a time: what a segment's file holds."""
        position = first - 1
        while position < last:
            query = sa.select(_log.c.seq, _log.c.event_id, _log.c.type, _log.c.partition, _log.c.ts, _log.c.received, _log.c.stream_seq, _log.c.payload)
            query = query.where(_log.c.seq > position, _log.c.seq <= last).order_by(_log.c.seq).limit(page)
            rows = await self._run(_all, query)
            if not rows:
                return
            yield rows
            position = rows[-1][0]

    async def summary(self, first: int, last: int) -> Summary:
        """What a segment's header says of the rows `first <= seq <= last`."""
        return await self._run(_summary, first, last)

    async def snapshot_at(self, seq: int) -> bytes | None:
        """The snapshot at exactly `seq`, if kept."""
        found = await self.latest_snapshot(seq)
        return found[1] if found is not None and found[0] == seq else None

    async def first_received_after(self, seq: int) -> int | None:
        """When the first row after `seq` was received (the open segment's start)."""
        return await self._run(_first, sa.select(_log.c.received).where(_log.c.seq > seq).order_by(_log.c.seq).limit(1))

    async def payload_bytes(self, after: int) -> int:
        """The payload bytes of the log rows after `after` (the open segment's, at start)."""
        return await self._run(scalar, sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(_log.c.payload)), 0)).where(_log.c.seq > after))

    async def oldest_waiting(self) -> int | None:
        """The position of the oldest decision waiting to be published, if any."""
        return await self._run(_first, sa.select(sa.func.min(_outbox.c.seq)).where(_WAITING))

    async def used_bytes(self) -> int:
        """What the live log takes on disk, without the space it frees for reuse: SQLite's pages
        in use, or PostgreSQL's tables with their indexes."""
        return await self._run(_used_bytes)

    async def latest_snapshot_seq(self) -> int:
        """The log position of the newest snapshot (0 without one), without reading it."""
        return await self._run(scalar, sa.select(sa.func.coalesce(sa.func.max(_snapshots.c.seq), 0)))

    async def find(self, event_id: str) -> LogRow | None:
        rows = await self._run(_select_rows, sa.select(_log).where(_log.c.event_id == event_id))
        return rows[0] if rows else None

    async def decisions_about(self, *names: str, limit: int = 50) -> list[LogRow]:
        """The newest `limit` decisions whose payload names any of `names` (as task,
        application, preemptor or victim), newest last."""
        found: dict[int, LogRow] = {}
        for start in range(0, len(names), _NAMES_PER_QUERY):
            mentions = sa.or_(*map(self._mentions, names[start : start + _NAMES_PER_QUERY]))
            query = sa.select(_log).where(_log.c.type.like("decision.%"), mentions).order_by(_log.c.seq.desc()).limit(limit)
            found.update((row.seq, row) for row in await self._run(_select_rows, query))
        return [found[seq] for seq in sorted(found)[-limit:]]

    def _mentions(self, name: str) -> sa.ColumnElement:
        """Rows whose payload holds `name` as a JSON string, as the log writes it (quotes,
        backslashes and control characters escaped)."""
        as_stored = msgspec.json.encode(name).decode()
        pattern = as_stored.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return _as_text(_log.c.payload, self._engine.dialect.name).like(f"%{pattern}%", escape="\\")

    async def submissions_naming(self, name: str, limit: int = 50) -> list[LogRow]:
        """`app.submitted`, `task.submitted` and `task.bound` rows whose payload names `name`
        (an application or a task), oldest first."""
        query = sa.select(_log).where(_log.c.type.in_(_SUBMISSIONS), self._mentions(name)).order_by(_log.c.seq).limit(limit)
        return await self._run(_select_rows, query)

    async def latest_submissions(self, limit: int) -> list[LogRow]:
        """The newest `limit` `app.submitted`, `task.submitted` and `task.bound` rows, newest
        first: the names a user probably means."""
        query = sa.select(_log).where(_log.c.type.in_(_SUBMISSIONS)).order_by(_log.c.seq.desc()).limit(limit)
        return await self._run(_select_rows, query)

    async def configs_applied(self) -> list[LogRow]:
        """The `config.applied` rows, oldest first: which model each partition ran from when."""
        return await self._run(_select_rows, sa.select(_log).where(_log.c.type == "config.applied").order_by(_log.c.seq))

    async def dead_letters(self, limit: int) -> list[DeadLetter]:
        return await self._run(_dead_letters, limit)

    async def dead_letters_between(self, after: int, through: int) -> list[DeadLetter]:
        """Dead letters of the messages at stream sequences `after < seq <= through`."""
        return await self._run(_dead_letters_between, after, through)

    async def counts(self) -> dict[str, int]:
        return await self._run(_counts)

    async def waiting_decisions(self) -> int:
        """How many decisions wait to be published (counted in the index `outbox_unpublished`)."""
        return await self._run(_waiting_decisions)

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
            rows = await self._run(_page, position, until, page)
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


async def _ensure_log_id(conn: AsyncConnection, *, create: bool = True) -> str:
    """Each log gets a random name once; decision ids carry it, so two logs never collide."""
    existing = (await conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "log_id"))).scalar()
    if existing or not create:
        return existing or "?"
    log_id = uuid.uuid4().hex[:8]
    await conn.execute(_meta.insert().values(key="log_id", value=log_id))
    return log_id


async def _first(conn: AsyncConnection, query) -> Any:
    """The first column of the first row, or None without rows."""
    return (await conn.execute(query)).scalar()


async def _all(conn: AsyncConnection, query) -> list[tuple]:
    return [tuple(row) for row in (await conn.execute(query)).all()]


async def _write_batch(conn: AsyncConnection, batch: Batch) -> None:
    if batch.rows:
        rows = [(r.seq, r.event_id, r.type, r.partition, r.ts, r.received, r.stream_seq, r.payload) for r in batch.rows]
        await _insert_many(conn, _log, ("seq", "event_id", "type", "partition", "ts", "received", "stream_seq", "payload"), rows)
    if batch.outbox:
        await _insert_many(conn, _outbox, ("seq", "decision_id", "subject"), [(o.seq, o.decision_id, o.subject) for o in batch.outbox])
    if batch.dead:
        await conn.execute(_dead.insert(), [d.stored() for d in batch.dead])
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
    updated = await conn.execute(_tracking.update().where(_tracking.c.source == source).values(position=position))
    if updated.rowcount == 0:
        await conn.execute(_tracking.insert().values(source=source, position=position))


async def _mark_published(conn: AsyncConnection, runs: list[tuple[int, int]], at: int) -> None:
    waiting = sa.and_(_outbox.c.published_at.is_(None), _outbox.c.passed_over_at.is_(None))
    for first, last in runs:
        await conn.execute(_outbox.update().where(_outbox.c.seq.between(first, last), waiting).values(published_at=at))


async def _prune_published(conn: AsyncConnection, before: int) -> int:
    pruned = await conn.execute(_outbox.delete().where(_outbox.c.published_at < before))
    return int(pruned.rowcount or 0)


async def _save_snapshot(conn: AsyncConnection, seq: int, payload: bytes, created: int, boundary: bool) -> None:
    await conn.execute(_snapshots.delete().where(_snapshots.c.seq == seq))
    await conn.execute(_snapshot_parts.delete().where(_snapshot_parts.c.seq == seq))
    await conn.execute(_snapshots.insert().values(seq=seq, payload=b"", created=created, boundary=boundary))
    view = memoryview(payload)
    for part, start in enumerate(range(0, len(view), _SNAPSHOT_PART)):
        await conn.execute(_snapshot_parts.insert().values(seq=seq, part=part, payload=view[start : start + _SNAPSHOT_PART]))
    await _forget_snapshots(conn)


async def _forget_snapshots(conn: AsyncConnection) -> None:
    """Delete the snapshots neither among the newest nor a boundary."""
    newest = sa.select(_snapshots.c.seq).order_by(_snapshots.c.seq.desc()).limit(_KEEP_SNAPSHOTS).scalar_subquery()
    kept = sa.select(_snapshots.c.seq).where(sa.or_(_snapshots.c.seq.in_(newest), _snapshots.c.boundary)).scalar_subquery()
    await conn.execute(_snapshots.delete().where(_snapshots.c.seq.not_in(kept)))
    await conn.execute(_snapshot_parts.delete().where(_snapshot_parts.c.seq.not_in(sa.select(_snapshots.c.seq).scalar_subquery())))


async def _archived(conn: AsyncConnection, segment: Segment, starting_snapshot: int) -> None:
    await conn.execute(_segments.insert().values(**vars(segment)))
    await conn.execute(_snapshots.update().where(_snapshots.c.seq == starting_snapshot).values(boundary=False))
    await _forget_snapshots(conn)


async def _drop_rows(conn: AsyncConnection, first: int, last: int, log_id: str) -> None:
    """The log rows, and their outbox rows published or passed over (the caller keeps a segment
    with a decision waiting to be published live); the ids of their events are kept (the
    daemon's own need not be: shims may not use them)."""
    shims = sa.select(_log.c.event_id, _log.c.seq).where(_log.c.seq.between(first, last), sa.not_(_log.c.event_id.startswith(log_id + ":")))
    await _retire(conn, [(event_id, seq) for event_id, seq in await conn.execute(shims)])
    await conn.execute(_outbox.delete().where(_outbox.c.seq.between(first, last), sa.not_(_WAITING)))
    await conn.execute(_log.delete().where(_log.c.seq.between(first, last)))


async def _checkpoint(conn: AsyncConnection) -> None:
    await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


async def _mark_dropped(conn: AsyncConnection, first: int, at: int) -> None:
    await conn.execute(_segments.update().where(_segments.c.first == first).values(dropped=at))


@dataclass(frozen=True)
class Summary:
    records: int
    bytes: int
    first_received: int
    last_received: int
    partitions: list[str]


async def _summary(conn: AsyncConnection, first: int, last: int) -> Summary:
    within = _log.c.seq.between(first, last)
    counted = sa.select(
        sa.func.count(), sa.func.coalesce(sa.func.sum(sa.func.length(_log.c.payload)), 0), sa.func.min(_log.c.received), sa.func.max(_log.c.received)
    ).where(within)
    records, size, first_received, last_received = (await conn.execute(counted)).one()
    partitions = [name for (name,) in await conn.execute(sa.select(_log.c.partition).where(within).distinct().order_by(_log.c.partition))]
    return Summary(records, size, first_received or 0, last_received or 0, partitions)


async def _used_bytes(conn: AsyncConnection) -> int:
    if conn.dialect.name == "sqlite":
        pages = (await conn.exec_driver_sql("PRAGMA page_count")).scalar_one() - (await conn.exec_driver_sql("PRAGMA freelist_count")).scalar_one()
        return int(pages * (await conn.exec_driver_sql("PRAGMA page_size")).scalar_one())
    sizes = " + ".join(f"pg_total_relation_size('{table.name}')" for table in _metadata.sorted_tables)
    return int((await conn.exec_driver_sql(f"SELECT {sizes}")).scalar_one())


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


_RETIRE: dict[str, str] = {}


def id_hash(event_id: str) -> int:
    """An event id as `retired_ids` keeps it: 64 bits of its BLAKE2b hash, signed (a BIGINT)."""
    return int.from_bytes(hashlib.blake2b(event_id.encode(), digest_size=8).digest(), "big", signed=True)


async def _retire(conn: AsyncConnection, ids: list[tuple[str, int]]) -> None:
    """Keep these (event id, position): their rows leave the live log. An id kept already (a
    drop cut short and done again) is passed over."""
    if ids:
        if conn.dialect.name not in _RETIRE:
            _RETIRE[conn.dialect.name] = str(_retired_ids.insert().compile(dialect=conn.dialect, column_keys=["id_hash", "seq"])) + " ON CONFLICT DO NOTHING"
        await conn.exec_driver_sql(_RETIRE[conn.dialect.name], [(id_hash(event_id), seq) for event_id, seq in ids])


async def _advance_retired(conn: AsyncConnection, first: int, last: int) -> None:
    """Segment `first..last` has its ids kept: the mark moves on if it follows on from it."""
    through = int((await conn.execute(sa.select(_meta.c.value).where(_meta.c.key == _RETIRED_THROUGH))).scalar() or 0)
    if first - 1 <= through < last:
        if (await conn.execute(_meta.update().where(_meta.c.key == _RETIRED_THROUGH).values(value=str(last)))).rowcount == 0:
            await conn.execute(_meta.insert().values(key=_RETIRED_THROUGH, value=str(last)))


async def _retire_and_advance(conn: AsyncConnection, ids: list[tuple[str, int]], first: int, last: int) -> None:
    await _retire(conn, ids)
    await _advance_retired(conn, first, last)


async def _unpublished(conn: AsyncConnection, limit: int) -> list[OutboxRow]:
    query = (
        sa.select(_outbox.c.seq, _outbox.c.decision_id, _outbox.c.subject, _log.c.payload)
        .join(_log, _log.c.seq == _outbox.c.seq)
        .where(_WAITING)
        .order_by(_outbox.c.seq)
        .limit(limit)
    )
    return [OutboxRow(*row) for row in await conn.execute(query)]


async def _refused(conn: AsyncConnection, problems: dict[int, str], at: int, pass_over_after: int) -> list[int]:
    for seq, problem in problems.items():
        await conn.execute(_outbox.update().where(_outbox.c.seq == seq).values(attempts=_outbox.c.attempts + 1, problem=problem))
    tried_enough = sa.and_(_outbox.c.seq.in_(list(problems)), _outbox.c.attempts >= pass_over_after)
    passed = [seq for (seq,) in await conn.execute(sa.select(_outbox.c.seq).where(tried_enough).order_by(_outbox.c.seq))]
    await conn.execute(_outbox.update().where(tried_enough).values(passed_over_at=at))
    return passed


async def _latest_snapshot(conn: AsyncConnection, at_most: int | None) -> tuple[int, bytes] | None:
    query = sa.select(_snapshots.c.seq, _snapshots.c.payload).order_by(_snapshots.c.seq.desc()).limit(1)
    if at_most is not None:
        query = query.where(_snapshots.c.seq <= at_most)
    row = (await conn.execute(query)).first()
    if row is None:
        return None
    parts = await conn.execute(sa.select(_snapshot_parts.c.payload).where(_snapshot_parts.c.seq == row.seq).order_by(_snapshot_parts.c.part))
    return row.seq, b"".join([row.payload, *(part for (part,) in parts)])


_PAGES: dict[tuple[str, bool, int], Any] = {}  # compiled statements


async def _page(conn: AsyncConnection, after: int, until: int | None, limit: int) -> list[tuple[int, int, bytes]]:
    """Up to `limit` rows (seq, received, payload) after `after`, at most `until`, in order;
    the statement compiled once per dialect, run by the driver."""
    key = (conn.dialect.name, until is not None, limit)
    if key not in _PAGES:
        query = sa.select(_log.c.seq, _log.c.received, _log.c.payload).where(_log.c.seq > sa.bindparam("after"))
        if until is not None:
            query = query.where(_log.c.seq <= sa.bindparam("until"))
        _PAGES[key] = query.order_by(_log.c.seq).limit(limit).compile(dialect=conn.dialect)
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
    query = sa.select(_dead).order_by(_dead.c.id.desc()).limit(limit)
    rows = list(await conn.execute(query))
    # newest last, in the order the messages arrived (a batch stores them by kind of fault)
    rows.sort(key=lambda row: (row.received, row.stream_seq or 0, row.id))
    return [_dead_letter(row) for row in rows]


async def _dead_letters_between(conn: AsyncConnection, after: int, through: int) -> list[DeadLetter]:
    query = sa.select(_dead).where(_dead.c.stream_seq > after, _dead.c.stream_seq <= through).order_by(_dead.c.id)
    return [_dead_letter(row) for row in await conn.execute(query)]


def _dead_letter(row: sa.Row) -> DeadLetter:
    return DeadLetter(**{key: value for key, value in row._mapping.items() if key != "id"})


async def _counts(conn: AsyncConnection) -> dict[str, int]:
    counts = {}
    for name, table in (("log", _log), ("dead_letters", _dead), ("snapshots", _snapshots)):
        counts[name] = (await conn.execute(sa.select(sa.func.count()).select_from(table))).scalar_one()
    counts["unpublished"] = await _waiting_decisions(conn)
    counts["passed_over"] = (await conn.execute(sa.select(sa.func.count()).select_from(_outbox).where(_outbox.c.passed_over_at.is_not(None)))).scalar_one()
    return counts


async def _waiting_decisions(conn: AsyncConnection) -> int:
    return (await conn.execute(sa.select(sa.func.count()).select_from(_outbox).where(_WAITING))).scalar_one()
