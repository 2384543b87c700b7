"""The engine: one scheduling cycle of a partition, whatever its model, as log records.

The daemon, `simulate`, `replay` and the benchmarks all run cycles through `run_cycle`: it folds
the tick, lets the partition's model decide, and returns the tick and the decisions numbered as
the log records that follow it. The decisions are already folded, so the state after the cycle
is exactly what folding the stored records gives on a replay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, cast

import msgspec

from preemptd.events import DecisionEvent, Tick
from preemptd.projections import ClusterState, LogRecord

from ._model import Cycle
from ._registry import MODELS, apply

__all__ = ["CycleRecords", "is_daemon_id", "next_wakeup", "run_cycle", "tick_record"]


class CycleRecords(NamedTuple):
    """What a cycle adds to the log: its tick, then its decisions, each a numbered record. A
    cycle that ran out of time says where in its tick (`Tick.out_of_time_after`)."""

    tick: LogRecord
    decided: list[LogRecord]

    @property
    def cut(self) -> bool:
        """The cycle stopped for lack of time: more is to be decided at once."""
        event = self.tick.event
        return isinstance(event, Tick) and event.stopped

    @property
    def records(self) -> list[LogRecord]:
        return [self.tick, *self.decided]

    @property
    def decisions(self) -> list[DecisionEvent]:
        # What `Cycle.emit` recorded: decisions, though a LogRecord's type does not say which event it holds.
        return [cast(DecisionEvent, record.event) for record in self.decided]


def tick_record(state: ClusterState, now: int, partition: str) -> LogRecord:
    """The next log record: a tick of `partition` at `now`, named `<log>:<seq>` like the
    decisions of its cycle (`<log>:<seq>.<n>`)."""
    seq = state.seq + 1
    return LogRecord(seq, now, Tick(id=f"{state.log_id}:{seq}", ts=now, partition=partition))


def is_daemon_id(log_id: str, event_id: str) -> bool:
    """Ids starting with `<log>:` belong to the daemon's own records (ticks and decisions)."""
    return event_id.startswith(f"{log_id}:")


def run_cycle(state: ClusterState, tick: LogRecord, out_of_time: Callable[[], bool] | None = None) -> CycleRecords:
    """Fold `tick` (made by `tick_record`, or read from a log) and run the cycle it starts;
    return the tick and the cycle's decisions, as the log records they are.

    After a cycle that decided nothing, with only ticks folded since, the next would decide
    nothing again, and is passed over, until the moment the model's `next_wakeup` named then
    (a delay running out: YuniKorn's preemption.delay, a quota enforcement's): a backlog that
    cannot move costs nothing until something happens. After a restore the first cycle runs.

    `out_of_time` (the daemon's clock) stops the cycle between its decisions once it says so;
    the tick returned then records where (`Tick.out_of_time_after`), and where the phases it stopped began
    (`Tick.resume`: the next cycle's phases begin after them). A replay stops it there too."""
    before = state.partitions.get(tick.event.partition)
    resume = before.resume if before is not None else {}  # the last tick's, which folding this one replaces
    apply(state, tick)
    partition = state.partitions[tick.event.partition]
    model = MODELS[partition.model]
    cycle = Cycle(state, partition, tick, apply, model.budget, out_of_time, resume)
    kept = partition.kept
    woken = kept.wakeup is not None and tick.event.ts >= kept.wakeup
    if kept.settled_at != partition.changed or woken:
        model.schedule(cycle)
        stopped = cycle.cut is not None or cycle.checks_cut is not None
        settled = not cycle.records and not stopped
        kept.settled_at = partition.changed if settled else -1
        kept.wakeup = model.next_wakeup(partition, cycle.now) if settled else None
        if isinstance(tick.event, Tick) and not tick.event.stopped:  # the daemon's own tick: it says where this cycle stopped
            partition.resume = cycle.resume_next() if stopped else {}
            if stopped:
                tick = LogRecord(tick.seq, tick.received, msgspec.structs.replace(tick.event, out_of_time_after=cycle.cut, resume=partition.resume or None))
        # a tick read from the log: its `resume` is folded already, as the daemon wrote it
    return CycleRecords(tick, cycle.records)


def next_wakeup(state: ClusterState, partition: str, now: int) -> int | None:
    """When a cycle of `partition` could decide differently from one at `now`, if no event
    came in between; None if only an event can change its decisions."""
    p = state.partitions[partition]
    return MODELS[p.model].next_wakeup(p, now)
