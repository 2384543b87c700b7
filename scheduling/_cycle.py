"""The cycle context a model decides through.

`Cycle.emit` stamps a decision with its id and log position and folds it into the state at
once, so the model always sees the effect of its own earlier decisions in the same cycle.
"""

from __future__ import annotations

from typing import Any

from preemptd.events import Decision, Tick
from preemptd.projections import ClusterState, LogRecord, PartitionState, apply

__all__ = ["Cycle", "decision_id", "is_daemon_id", "tick_record"]


def decision_id(log_id: str, cycle: int, index: int) -> str:
    """Decisions are named by the log, the tick that ran their cycle and their rank in it."""
    return f"{log_id}:{cycle}.{index}"


def tick_record(state: ClusterState, now: int, partition: str) -> LogRecord:
    """The next log record: a tick of `partition` at `now`, named `<log>:<seq>` like the
    decisions of its cycle (`<log>:<seq>.<n>`)."""
    seq = state.seq + 1
    return LogRecord(seq, now, Tick(id=f"{state.log_id}:{seq}", ts=now, partition=partition))


def is_daemon_id(log_id: str, event_id: str) -> bool:
    """Ids starting with `<log>:` belong to the daemon's own records (ticks and decisions)."""
    return event_id.startswith(f"{log_id}:")


class Cycle:
    """What a model sees during one cycle: the partition, the time, and a way to decide."""

    def __init__(self, state: ClusterState, partition: PartitionState, tick: LogRecord) -> None:
        self.state = state
        self.partition = partition
        self.now: int = tick.event.ts
        self.seq: int = tick.seq
        self.decisions: list[Decision] = []

    def emit(self, kind: type[Decision], **fields: Any) -> Decision:
        """Make a decision of type `kind`, fold it into the state and record it."""
        index = len(self.decisions)
        decision = kind(
            id=decision_id(self.state.log_id, self.seq, index),
            ts=self.now,
            partition=self.partition.name,
            cycle=self.seq,
            **fields,
        )
        apply(self.state, LogRecord(self.seq + 1 + index, self.now, decision))
        self.decisions.append(decision)
        return decision
