"""A log opened to read (its archived segments where the daemon wrote them, or where they are
now), and its state at a point, for the commands that ask a log rather than the daemon."""

from __future__ import annotations

from typing import TYPE_CHECKING

from preemptd.projections import ClusterState
from preemptd.scheduling import apply

from ..errors import UsageError

if TYPE_CHECKING:
    from ..log.history import History

__all__ = ["reading", "state_at"]


async def reading(target: str, archive: str | None = None) -> History:
    """The history of a log opened to read, its archived segments where the daemon wrote them,
    or in `archive` (moved since)."""
    from ..log.history import History
    from ..log.store import Store

    return History(await Store.open(target, create=False), archive)


async def state_at(db: str, at: str | None, archive: str | None = None) -> tuple[ClusterState, int]:
    """The state of the log `db` at `at` (a log position or a time; default: its end), and the
    time a question asked of it is asked at (that time, else the last record's); archived
    segments are read where the daemon wrote them, or in `archive`."""
    from ..log.history import load_state
    from .page import window

    bounds = window(None, at)
    history = await reading(db, archive)
    try:
        if bounds.until is None:
            last = await history.store.last_seq()
            if bounds.last is not None and bounds.last > last:
                raise UsageError(f"--at {at} is past the end of the log (seq {last})")
            state = await load_state(history, until=bounds.last)
            return state, max((p.last_tick for p in state.partitions.values()), default=0)
        state = ClusterState(log_id=history.log_id)
        async for page in history.records():
            for record in page:
                if record.received > bounds.until:
                    return state, bounds.until
                apply(state, record)
        return state, bounds.until
    finally:
        await history.close()
