"""A log's one history (`History`): the segments retention moved to the archive, then the live
log. What folds read (its records, decoded a page at a time; the state rebuilt from the newest
snapshot plus the records after it) and what `explain` asks (a decision by id, the
configurations, the decisions and submissions naming something) come from the same place.
Archived files are read and decompressed in worker threads, never on the event loop."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator

import anyio
import anyio.to_thread
import msgspec

from preemptd.events import decode_log_event
from preemptd.projections import ClusterState, LogRecord, Rejected, SnapshotError
from preemptd.scheduling import apply, restore, snapshot

from ..clock import wall_ms
from ..operations.logs import log
from ..records import LogRow, Segment
from .archive import SegmentFile, archive_of, records_of, rows_of
from .store import Store

__all__ = ["History", "fold_log", "load_state", "restored", "save_snapshot"]

_SUBMISSIONS = ("app.submitted", "task.submitted", "task.bound")  # the rows that name applications and tasks


class History:
    """The history of the log of `store`, its archived segments read where the daemon wrote
    them, or under `archive` (moved since)."""

    def __init__(self, store: Store, archive: str | None = None) -> None:
        self.store, self.archive = store, archive

    @property
    def log_id(self) -> str:
        return self.store.log_id

    async def close(self) -> None:
        await self.store.close()

    async def _dropped(self) -> list[Segment]:
        """The segments that left the live log, oldest first."""
        return [segment for segment in await self.store.segments.all() if segment.dropped is not None]

    def _file(self, segment: Segment) -> str:
        return archive_of(segment.location, self.archive)

    # -- for folds --

    async def records(self, after: int = 0, until: int | None = None) -> AsyncIterator[Iterator[LogRecord]]:
        """The records after `after`, up to `until`, a page at a time, each decoded as it is
        reached (a page decoded whole kept twenty thousand events alive for the garbage
        collector to go through)."""
        for segment in await self._dropped():
            if segment.last <= after or (until is not None and segment.first > until):
                continue
            async for page in _pages(self._file(segment), after, until):
                yield records_of(page)
            after = segment.last
        async for rows in self.store.read_pages(after, until):
            yield (LogRecord(seq, received, decode_log_event(payload)) for seq, received, payload in rows)

    async def newest_snapshot(self, until: int | None = None) -> tuple[int, bytes] | None:
        """The newest snapshot at or before `until`: the live log's, or the one an archived
        segment starts from when that one is newer (it serves a position older than the live
        log's snapshots)."""
        found = await self.store.latest_snapshot(at_most=until)
        starts = [s for s in await self.store.segments.all() if s.first > 1 and (until is None or s.first - 1 <= until)]
        if starts and (found is None or starts[-1].first - 1 > found[0]):
            found = await anyio.to_thread.run_sync(_starting_snapshot, self._file(starts[-1]))
        return found

    # -- for explain --

    async def find(self, event_id: str) -> LogRow | None:
        live = await self.store.find(event_id)
        if live is not None and live.seq > await self._archived_through():
            return live
        return next(iter(await self._scan(lambda row: row.event_id == event_id)), None)

    async def configs_applied(self) -> list[LogRow]:
        """The `config.applied` rows, oldest first."""
        return await self._scan(lambda row: row.type == "config.applied") + await self._live(await self.store.configs_applied())

    async def decisions_about(self, *names: str, limit: int = 50) -> list[LogRow]:
        """The newest `limit` decisions naming any of `names`, newest last."""
        live = await self._live(await self.store.decisions_about(*names, limit=limit))
        if len(live) >= limit:
            return live
        wanted = [msgspec.json.encode(name) for name in names]
        older = await self._scan(lambda row: row.type.startswith("decision.") and any(w in bytes(row.payload) for w in wanted))
        return (older + live)[-limit:]

    async def submissions_naming(self, name: str, limit: int = 50) -> list[LogRow]:
        """The submissions naming `name` (an application or a task), oldest first."""
        wanted = msgspec.json.encode(name)
        older = await self._scan(lambda row: row.type in _SUBMISSIONS and wanted in bytes(row.payload))
        return (older + await self._live(await self.store.submissions_naming(name, limit)))[:limit]

    async def latest_submissions(self, limit: int) -> list[LogRow]:
        """The newest `limit` submissions, newest first: the names a user probably means."""
        live = await self._live(await self.store.latest_submissions(limit))
        if len(live) >= limit:
            return live
        older = await self._scan(lambda row: row.type in _SUBMISSIONS)
        return (live + older[::-1])[:limit]

    async def _archived_through(self) -> int:
        """The last position archived and dropped (rows a drop cut short left live are read from the archive)."""
        dropped = await self._dropped()
        return dropped[-1].last if dropped else 0

    async def _live(self, rows: list[LogRow]) -> list[LogRow]:
        through = await self._archived_through()
        return [row for row in rows if row.seq > through]

    async def _scan(self, keep: Callable) -> list[LogRow]:
        """The archived rows `keep` takes, oldest first, read in a worker thread."""
        files = [self._file(segment) for segment in await self._dropped()]
        return await anyio.to_thread.run_sync(_kept_rows, files, keep) if files else []


async def load_state(history: History, until: int | None = None) -> ClusterState:
    """The state as of `until` (default: the end of the log): newest snapshot, then the fold."""
    state = await restored(history, until)
    await fold_log(history, state, until)
    return state


async def restored(history: History, until: int | None = None) -> ClusterState:
    """The newest snapshot's state (at most at `until`), or an empty state: with no snapshot, or
    one this version cannot read (then the whole log is folded, which gives the same state,
    only slower)."""
    found = await history.newest_snapshot(until)
    if found is not None:
        try:
            return restore(found[1])
        except SnapshotError as exc:
            log("snapshot not used; folding the log from the start", logging.WARNING, seq=found[0], reason=str(exc))
    return ClusterState(log_id=history.log_id)


async def fold_log(history: History, state: ClusterState, until: int | None = None) -> None:
    """Fold the log after `state` into it, up to `until`. Stopped midway, the state is that of
    the last record folded: each record is folded whole between two reads of the log."""
    folded = 0
    async for page in history.records(after=state.seq, until=until):
        for record in page:
            try:
                apply(state, record)
            except Rejected as exc:  # a log written by another version may not fold the same
                log("stored record no longer applies", logging.WARNING, seq=record.seq, reason=exc.reason)
                state.seq = record.seq
            folded += 1
            if folded % 200_000 == 0:
                log("rebuilding state", seq=record.seq, folded=folded)


async def save_snapshot(store: Store, state: ClusterState, *, boundary: bool = False) -> int:
    """Store a snapshot of `state` at its position (one that closes a segment: `boundary`);
    returns its size in bytes."""
    payload = await anyio.to_thread.run_sync(snapshot, state)
    await store.save_snapshot(state.seq, payload, wall_ms(), boundary=boundary)
    return len(payload)


async def _pages(url: str, after: int, until: int | None) -> AsyncIterator[list]:
    """A segment file's rows, a page at a time, read and decompressed in a worker thread."""
    segment = await anyio.to_thread.run_sync(SegmentFile, url)
    try:
        pages = segment.rows(after, until)
        while (page := await anyio.to_thread.run_sync(next, pages, None)) is not None:
            yield page
    finally:
        segment.close()


def _kept_rows(files: list[str], keep: Callable) -> list[LogRow]:
    """The rows of the segment `files` that `keep` takes, in order (in a worker thread)."""
    found: list[LogRow] = []
    for url in files:
        segment = SegmentFile(url)
        try:
            for page in segment.rows():
                found.extend(rows_of([row for row in page if keep(row)]))
        finally:
            segment.close()
    return found


def _starting_snapshot(url: str) -> tuple[int, bytes] | None:
    """The snapshot an archived segment starts from, with its position (in a worker thread)."""
    segment = SegmentFile(url)
    try:
        found = segment.snapshot()
        return None if found is None else (segment.header.first - 1, found)
    finally:
        segment.close()
