"""Between log rows and the pure layers: decode stored rows into records, rebuild the state
from the newest snapshot plus the log after it, and write a simulated history as a log. The
history is the archived segments' (see `archive`) followed by the live log's."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

import anyio

from preemptd.events import decode_log_event
from preemptd.projections import ClusterState, LogRecord, Rejected, SnapshotError
from preemptd.scheduling import apply, restore, snapshot

from ..clock import wall_ms
from ..operations.logs import log
from .archive import SegmentFile, archive_of, records_of
from .store import Store

__all__ = ["fold_log", "load_state", "records", "restored", "save_snapshot"]


async def records(store: Store, after: int = 0, until: int | None = None) -> AsyncIterator[Iterator[LogRecord]]:
    """The log's records after `after`, up to `until`, a page at a time, each decoded as it is
    reached (a page decoded whole kept twenty thousand events alive for the garbage collector
    to go through): first those of the segments retention moved to the archive, then the live
    log's, one history."""
    for segment in await store.segments():
        if segment.dropped is None or segment.last <= after or (until is not None and segment.first > until):
            continue
        async for page in _archived(archive_of(segment.location, store.archives_in), after, until):
            yield records_of(page)
        after = segment.last
    async for rows in store.read_pages(after, until):
        yield (LogRecord(seq, received, decode_log_event(payload)) for seq, received, payload in rows)


async def _archived(url: str, after: int, until: int | None) -> AsyncIterator[list]:
    """A segment file's rows, a page at a time, read and decompressed in a worker thread."""
    segment = await anyio.to_thread.run_sync(SegmentFile, url)
    try:
        pages = segment.rows(after, until)
        while (page := await anyio.to_thread.run_sync(next, pages, None)) is not None:
            yield page
    finally:
        segment.close()


async def load_state(store: Store, until: int | None = None) -> ClusterState:
    """The state as of `until` (default: the end of the log): newest snapshot, then the fold."""
    state = await restored(store, until)
    await fold_log(store, state, until)
    return state


async def restored(store: Store, until: int | None = None) -> ClusterState:
    """The newest snapshot's state (at most at `until`), or an empty state."""
    return await _from_snapshot(store, until) or ClusterState(log_id=store.log_id)


async def fold_log(store: Store, state: ClusterState, until: int | None = None) -> None:
    """Fold the log after `state` into it, up to `until`. Stopped midway, the state is that of
    the last record folded: each record is folded whole between two reads of the log."""
    folded = 0
    async for page in records(store, after=state.seq, until=until):
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


async def _from_snapshot(store: Store, until: int | None) -> ClusterState | None:
    """The newest snapshot's state, or None: with no snapshot, or one this version cannot
    read (then the whole log is folded, which gives the same state, only slower). Archived
    segments each start from a snapshot too: one of those serves a position older than the
    live log's snapshots."""
    snapshot = await store.latest_snapshot(at_most=until)
    starts = [s for s in await store.segments() if s.first > 1 and (until is None or s.first - 1 <= until)]
    if starts and (snapshot is None or starts[-1].first - 1 > snapshot[0]):
        snapshot = await _archived_snapshot(archive_of(starts[-1].location, store.archives_in))
    if snapshot is None:
        return None
    try:
        return restore(snapshot[1])
    except SnapshotError as exc:
        log("snapshot not used; folding the log from the start", logging.WARNING, seq=snapshot[0], reason=str(exc))
        return None


async def _archived_snapshot(url: str) -> tuple[int, bytes] | None:
    def read() -> tuple[int, bytes] | None:
        segment = SegmentFile(url)
        try:
            found = segment.snapshot()
            return None if found is None else (segment.header.first - 1, found)
        finally:
            segment.close()

    return await anyio.to_thread.run_sync(read)
