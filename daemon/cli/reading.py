"""A log opened to read (its archived segments where the daemon wrote them, or where they are
now), and its state at a point, for the commands that ask a log rather than the daemon."""

from __future__ import annotations

from typing import TYPE_CHECKING

from preemptd.projections import ClusterState
from preemptd.scheduling import apply

from ..errors import UsageError

if TYPE_CHECKING:
    from ..log.store import Store

__all__ = ["reading", "state_at"]


async def reading(target: str, archive: str | None = None) -> Store:
    """A log opened to read, with its archived segments where the daemon wrote them, or in
    `archive` (moved since)."""
    from ..log.store import Store

    store = await Store.open(target, create=False)
    store.archives_in = archive
    return store


async def state_at(db: str, at: str | None, archive: str | None = None) -> tuple[ClusterState, int]:
    """The state of the log `db` at `at` (a log position or a time; default: its end), and the
    time a question asked of it is asked at (that time, else the last record's); archived
    segments are read where the daemon wrote them, or in `archive`."""
    from ..log.history import load_state, records
    from .page import window

    bounds = window(None, at)
    store = await reading(db, archive)
    try:
        if bounds.until is None:
            if bounds.last is not None and bounds.last > await store.last_seq():
                raise UsageError(f"--at {at} is past the end of the log (seq {await store.last_seq()})")
            state = await load_state(store, until=bounds.last)
            return state, max((p.last_tick for p in state.partitions.values()), default=0)
        state = ClusterState(log_id=store.log_id)
        async for page in records(store):
            for record in page:
                if record.received > bounds.until:
                    return state, bounds.until
                apply(state, record)
        return state, bounds.until
    finally:
        await store.close()
