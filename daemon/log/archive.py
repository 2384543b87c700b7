"""The archive: where the segments retention closes go (`segments`), as files, and how they
are read back.

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
import os
import tempfile
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import IO, Any

import anyio
import anyio.to_thread
import fsspec  # type: ignore[import-untyped]
import msgspec
from fsspec.implementations.local import LocalFileSystem  # type: ignore[import-untyped]

from preemptd.events import decode_log_event
from preemptd.projections import LogRecord

from ..errors import StoreError
from ..records import LogRow

__all__ = ["Archive", "SegmentFile", "archive_of", "event_ids", "records_of", "rows_of", "write_segment"]

_FORMAT = {"preemptd": "segment", "version": 1}
_LEVEL = 6  # gzip's default: at the daemon's pace, a few percent of a core


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


def _encoded_page(page: list[LogRow]) -> bytes:
    return _encoder.encode_lines([_Line(r.seq, r.event_id, r.type, r.partition, r.ts, r.received, r.stream_seq, msgspec.Raw(r.payload)) for r in page])


async def write_segment(archive: Archive, name: str, header: dict[str, Any], snapshot: bytes | None, pages: AsyncIterator[list[LogRow]]) -> None:
    """Write the segment file `name` to `archive`: its header (`_Header`, without the format's
    own keys), the snapshot it starts from (at `header["snapshot"]`), its rows a page at a time,
    compressed in a worker thread so that the daemon's cycles go on meanwhile."""
    async with archive.writer(name) as out:
        zipped = gzip.GzipFile(fileobj=out, mode="wb", compresslevel=_LEVEL, mtime=0)
        await anyio.to_thread.run_sync(zipped.write, _encoder.encode({**_FORMAT, **header}) + b"\n")
        if snapshot is not None:
            line = _encoder.encode({"snapshot": header["snapshot"], "format": "msgpack", "base64": base64.b64encode(snapshot).decode()}) + b"\n"
            await anyio.to_thread.run_sync(zipped.write, line)
        async for page in pages:
            await anyio.to_thread.run_sync(zipped.write, _encoded_page(page))
        await anyio.to_thread.run_sync(zipped.close)


def event_ids(url: str, log_id: str) -> list[tuple[str, int]]:
    """The (event id, position) of a segment's events from shims (the daemon's own ids are
    reserved: shims cannot send them)."""
    segment = SegmentFile(url)
    try:
        return [(row.event_id, row.seq) for page in segment.rows() for row in page if not row.event_id.startswith(log_id + ":")]
    finally:
        segment.close()
