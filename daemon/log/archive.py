"""Retention and the archive: a log that lives for months.

The live log is cut into segments at snapshots. A segment closes at the first snapshot after it
holds `Retention.segment_bytes` of records or spans `Retention.segment_span`; the `Archivist`
then writes it to the archive as one file, and deletes it from the live log once it is older
than the policy's age, or while the live log is larger than its size, oldest first. Readers
(`replay`, `report`, `explain`, `state --at`) read the archive's segments and the live log as
one history (`history.records`, `history.restored`, `Searched`).

A segment's file is gzip-compressed JSON lines, named `<log id>-<first>-<last>.jsonl.gz`:

    {"preemptd": "segment", "version": 1, "log_id": ..., "first": ..., "last": ..., "records": ...,
     "bytes": ..., "first_received": ..., "last_received": ..., "partitions": [...], "snapshot": SEQ or null}
    {"snapshot": SEQ, "format": "msgpack", "base64": "..."}          (when the segment has one)
    {"seq": ..., "event_id": ..., "type": ..., "partition": ..., "ts": ..., "received": ...,
     "stream_seq": ..., "payload": {the event or decision, as in the log}}
    ...

JSON lines because every record already is JSON (the payload is copied as it is stored, not
decoded and encoded again), replay reads records in order one at a time, and `zcat | jq` reads
them with no preemptd at hand; gzip because every tool and Python's standard library read it,
and JSON that repeats its keys shrinks to about a tenth. Parquet would serve column scans,
which nothing here does, at the cost of a large dependency. The snapshot the segment starts
from (the state at `first - 1`) is in the file, so that one segment is enough to start from.

Files are written whole or not at all: in a directory, to a hidden partial file, flushed and
renamed; at an object-store URL (`s3://`, `gs://`, ... through fsspec and its plugin for the
store), uploaded once complete, which such stores make visible whole.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import gzip
import logging
import os
import tempfile
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import IO

import anyio
import anyio.to_thread
import fsspec  # type: ignore[import-untyped]
import msgspec
from fsspec.implementations.local import LocalFileSystem  # type: ignore[import-untyped]

from preemptd.events import decode_log_event
from preemptd.projections import LogRecord

from ..clock import wall_ms
from ..errors import StoreError
from ..operations.logs import log
from ..records import CLUSTER_STREAM, DECISION_STREAM, REJECTED_STREAM, LogRow, Segment
from .store import Store

__all__ = ["DAY", "GiB", "Archive", "Archivist", "Retention", "Searched", "SegmentFile", "archive_of"]

DAY = 24 * 3600 * 1000  # ms
GiB = 2**30
_FORMAT = {"preemptd": "segment", "version": 1}
_DEDUPLICATION = 600.0  # seconds: the decision stream's de-duplication window
_LEVEL = 6  # gzip's default: at the daemon's pace, a few percent of a core


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


class _Line(msgspec.Struct, array_like=False):
    seq: int
    event_id: str
    type: str
    partition: str
    ts: int
    received: int
    stream_seq: int | None
    payload: msgspec.Raw


class _Header(msgspec.Struct):
    preemptd: str
    version: int
    log_id: str
    first: int
    last: int
    records: int
    bytes: int
    first_received: int
    last_received: int
    partitions: list[str]
    snapshot: int | None


class _Snapshot(msgspec.Struct):
    snapshot: int
    format: str
    base64: str


_encoder = msgspec.json.Encoder()
_line = msgspec.json.Decoder(_Line)
_header = msgspec.json.Decoder(_Header)
_snapshot = msgspec.json.Decoder(_Snapshot)


class Archive:
    """Where segments go: a directory or an fsspec URL."""

    def __init__(self, location: str) -> None:
        self.location = location
        try:
            self.fs, self.root = fsspec.core.url_to_fs(location)
        except (ImportError, ValueError) as exc:  # an object store without its plugin (s3fs, gcsfs), an unknown scheme
            raise StoreError(f"cannot use the archive {location}: {exc}") from None
        self.local = isinstance(self.fs, LocalFileSystem)

    def url(self, name: str) -> str:
        path = f"{self.root.rstrip('/')}/{name}"
        return os.path.abspath(path) if self.local else self.fs.unstrip_protocol(path)

    @contextlib.asynccontextmanager
    async def writer(self, name: str) -> AsyncIterator[IO[bytes]]:
        """A file to write `name` to: made whole at the end of the block, or left out if it
        raises. Its URL is then `url(name)`."""
        if self.local:
            await anyio.to_thread.run_sync(functools.partial(os.makedirs, self.root, exist_ok=True))
            final, partial = os.path.join(self.root, name), os.path.join(self.root, f".{name}.partial")
            out = await anyio.to_thread.run_sync(open, partial, "wb")
            try:
                yield out
                await anyio.to_thread.run_sync(_settle, out, partial, final)
            finally:
                out.close()
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(partial)
            return
        with tempfile.NamedTemporaryFile() as spool:
            yield spool
            spool.flush()
            await anyio.to_thread.run_sync(self.fs.put_file, spool.name, f"{self.root.rstrip('/')}/{name}")


def _settle(out: IO[bytes], partial: str, final: str) -> None:
    """Make a written file durable under its final name: flushed, renamed, the rename flushed."""
    out.flush()
    os.fsync(out.fileno())
    os.replace(partial, final)
    directory = os.open(os.path.dirname(final), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def archive_of(location: str, override: str | None) -> str:
    """Where a segment's file is: as recorded, or under `override` (an archive moved elsewhere)."""
    return location if override is None else f"{override.rstrip('/')}/{location.rstrip('/').rsplit('/', 1)[-1]}"


class SegmentFile:
    """A segment's file, read: its header, the snapshot it starts from, its records in order."""

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self._raw = fsspec.open(url, "rb").open()
        except (OSError, ImportError, ValueError) as exc:
            raise StoreError(f"cannot read the archived segment {url}: {exc} (give the archive's place with --archive)") from None
        self._lines = gzip.GzipFile(fileobj=self._raw, mode="rb")
        try:
            self.header = _header.decode(self._next())
        except msgspec.DecodeError as exc:
            raise StoreError(f"{url} is not a preemptd segment: {exc}") from None
        self._snapshot_read = self.header.snapshot is None

    def _next(self) -> bytes:
        try:
            line = self._lines.readline()
        except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise self.damaged(exc) from None
        return line

    def damaged(self, exc: Exception) -> StoreError:
        """One line naming the file, whatever is wrong inside it."""
        return StoreError(f"the archived segment {self.url} is damaged: {type(exc).__name__}: {exc} (restore it from a copy)")

    def snapshot(self) -> bytes | None:
        """The snapshot the segment starts from (read once, before the records)."""
        if self._snapshot_read:
            return None
        self._snapshot_read = True
        try:
            return base64.b64decode(_snapshot.decode(self._next()).base64)
        except (msgspec.DecodeError, ValueError) as exc:
            raise self.damaged(exc) from None

    def rows(self, after: int = 0, until: int | None = None, page: int = 20_000) -> Iterator[list[_Line]]:
        """Its records with `after < seq <= until`, a page at a time."""
        if not self._snapshot_read:
            self._next()  # the snapshot, not asked for
            self._snapshot_read = True
        out: list[_Line] = []
        seen = 0
        while line := self._next():
            try:
                row = _line.decode(line)
            except msgspec.DecodeError as exc:
                raise self.damaged(exc) from None
            seen += 1
            if until is not None and row.seq > until:
                break
            if row.seq > after:
                out.append(row)
                if len(out) >= page:
                    yield out
                    out = []
        else:
            if seen != self.header.records:
                raise StoreError(f"the archived segment {self.url} holds {seen} records, not the {self.header.records} its header says: it is damaged")
        if out:
            yield out

    def close(self) -> None:
        self._lines.close()
        self._raw.close()


def records_of(rows: list[_Line]) -> Iterator[LogRecord]:
    """A page's records, each decoded as it is reached (as the live log's pages are)."""
    return (LogRecord(row.seq, row.received, decode_log_event(bytes(row.payload))) for row in rows)


def rows_of(rows: list[_Line]) -> list[LogRow]:
    return [LogRow(r.seq, r.event_id, r.type, r.partition, r.ts, r.received, bytes(r.payload), r.stream_seq) for r in rows]


def _encoded_page(page: list[tuple]) -> bytes:
    return _encoder.encode_lines(
        [
            _Line(seq, event_id, kind, partition, ts, received, stream_seq, msgspec.Raw(payload))
            for seq, event_id, kind, partition, ts, received, stream_seq, payload in page
        ]
    )


class Archivist:
    """Writes closed segments to the archive and drops from the live log what the policy lets
    go; woken after a snapshot that closes a segment, and once a minute for the age bound."""

    def __init__(self, store: Store, retention: Retention) -> None:
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
        segments = await self.store.segments()
        start = segments[-1].last if segments else 0
        for boundary in await self.store.boundaries():
            if boundary > start:
                await self._write(start, boundary)
                start = boundary

    async def _write(self, start: int, last: int) -> None:
        """Write the segment `start < seq <= last`, read from the live log a page at a time and
        compressed in a worker thread, so the daemon's cycles go on meanwhile."""
        summary = await self.store.summary(start + 1, last)
        snapshot = (await self.store.snapshot_at(start)) if start else None
        if start and snapshot is None:
            log("the snapshot a segment starts from is missing: its file starts from the previous segment's end", logging.WARNING, seq=start)
        header = {
            **_FORMAT,
            "log_id": self.store.log_id,
            "first": start + 1,
            "last": last,
            **vars(summary),
            "snapshot": start if snapshot is not None else None,
        }
        name = f"{self.store.log_id}-{start + 1:012d}-{last:012d}.jsonl.gz"
        async with self.archive.writer(name) as out:
            zipped = gzip.GzipFile(fileobj=out, mode="wb", compresslevel=_LEVEL, mtime=0)
            await anyio.to_thread.run_sync(zipped.write, _encoder.encode(header) + b"\n")
            if snapshot is not None:
                line = _encoder.encode({"snapshot": start, "format": "msgpack", "base64": base64.b64encode(snapshot).decode()}) + b"\n"
                await anyio.to_thread.run_sync(zipped.write, line)
            async for page in self.store.rows(start + 1, last):
                await anyio.to_thread.run_sync(zipped.write, _encoded_page(page))
            await anyio.to_thread.run_sync(zipped.close)
        segment = Segment(start + 1, last, summary.records, summary.bytes, summary.first_received, summary.last_received, self.archive.url(name), wall_ms())
        await self.store.archived(segment, start)
        log("segment archived", first=segment.first, last=last, records=segment.records, bytes=segment.bytes, file=segment.location)

    async def drop_expired(self, now: int) -> None:
        """Delete from the live log the archived segments the policy lets go, oldest first; not
        one with a decision still waiting to be published."""
        segments = await self.store.segments()
        dropped = [segment for segment in segments if segment.dropped is not None]
        first_live = await self.store.first_live_seq()
        if dropped and first_live is not None and first_live <= dropped[-1].last:  # a drop a stop cut short
            await self.store.drop(dropped[-1], dropped[-1].dropped or now)
        used = await self.store.used_bytes()
        waiting = await self.store.outbox.oldest_waiting()
        for segment in segments:
            if segment.dropped is not None:
                continue
            if segment.last_received >= now - self.retention.age and used <= self.retention.bytes:
                return
            if waiting is not None and waiting <= segment.last:
                log("a segment stays in the live log until its decisions are published", first=segment.first, last=segment.last, waiting=waiting)
                return
            await self.store.drop(segment, now)
            await self.store.checkpoint()
            used = await self.store.used_bytes()
            log(
                "segment dropped from the live log", first=segment.first, last=segment.last, records=segment.records, used_bytes=used, archived=segment.location
            )

    async def keep_archived_ids(self) -> None:
        """Keep the event ids of the segments that left the live log before their ids were kept
        (a log from before schema 0005, a drop cut short), read back from their files."""
        through = await self.store.ids_retired_through()
        for segment in await self.store.segments():
            if segment.dropped is not None and segment.last > through:
                ids = await anyio.to_thread.run_sync(_event_ids, segment.location, self.store.log_id)
                await self.store.retire(ids, segment.first, segment.last)
                log("the event ids of an archived segment are kept", first=segment.first, last=segment.last, ids=len(ids), file=segment.location)


def _event_ids(url: str, log_id: str) -> list[tuple[str, int]]:
    """The (event id, position) of a segment's events from shims (the daemon's own ids are
    reserved: shims cannot send them)."""
    segment = SegmentFile(url)
    try:
        return [(row.event_id, row.seq) for page in segment.rows() for row in page if not row.event_id.startswith(log_id + ":")]
    finally:
        segment.close()


class Searched:
    """The questions `explain` asks of a log, asked of its live rows and its archived ones."""

    def __init__(self, store: Store, archived: list[Segment], override: str | None) -> None:
        self.store, self.log_id = store, store.log_id
        self._files = [archive_of(segment.location, override) for segment in archived]
        self._archived_through = archived[-1].last if archived else 0  # rows a cut-short drop left live are read from the archive

    def _live(self, rows: list[LogRow]) -> list[LogRow]:
        return [row for row in rows if row.seq > self._archived_through]

    def _archived(self, keep: Callable[[_Line], bool]) -> list[LogRow]:
        found: list[LogRow] = []
        for url in self._files:
            segment = SegmentFile(url)
            try:
                for page in segment.rows():
                    found.extend(rows_of([row for row in page if keep(row)]))
            finally:
                segment.close()
        return found

    async def find(self, event_id: str) -> LogRow | None:
        live = await self.store.find(event_id)
        if live is not None and live.seq > self._archived_through:
            return live
        return next(iter(self._archived(lambda row: row.event_id == event_id)), None)

    async def configs_applied(self) -> list[LogRow]:
        return self._archived(lambda row: row.type == "config.applied") + self._live(await self.store.configs_applied())

    async def decisions_about(self, *names: str, limit: int = 50) -> list[LogRow]:
        live = self._live(await self.store.decisions_about(*names, limit=limit))
        if len(live) >= limit or not self._files:
            return live
        wanted = [msgspec.json.encode(name) for name in names]
        older = self._archived(lambda row: row.type.startswith("decision.") and any(w in bytes(row.payload) for w in wanted))
        return (older + live)[-limit:]

    async def submissions_naming(self, name: str, limit: int = 50) -> list[LogRow]:
        wanted = msgspec.json.encode(name)
        older = (
            self._archived(lambda row: row.type in ("app.submitted", "task.submitted", "task.bound") and wanted in bytes(row.payload)) if self._files else []
        )
        return (older + self._live(await self.store.submissions_naming(name, limit)))[:limit]

    async def latest_submissions(self, limit: int) -> list[LogRow]:
        live = self._live(await self.store.latest_submissions(limit))
        if len(live) >= limit or not self._files:
            return live
        older = self._archived(lambda row: row.type in ("app.submitted", "task.submitted", "task.bound"))
        return (live + older[::-1])[:limit]
