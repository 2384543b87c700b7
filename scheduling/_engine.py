"""The engine: one scheduling cycle of a partition, whatever its model.

`run_cycle` is called right after a tick is folded. The partition's model decides through
`Cycle.emit` (see `_cycle`), which folds each decision at once, so the state after the cycle is
exactly what folding the stored decisions gives on a replay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from preemptd.events import Decision
from preemptd.projections import ClusterState, LogRecord, PartitionState

from . import _yunikorn
from ._cycle import Cycle

__all__ = ["MODELS", "Model", "next_wakeup", "run_cycle"]


class Model(NamedTuple):
    """What a scheduling model provides: its cycle, and the next time its decisions could
    change with nothing happening in between (a delay running out), or None."""

    schedule: Callable[[Cycle], None]
    next_wakeup: Callable[[PartitionState, int], int | None]


#: The scheduling model of each `config.applied` `model` value.
MODELS: dict[str, Model] = {"yunikorn": Model(_yunikorn.schedule, _yunikorn.next_wakeup)}


def next_wakeup(state: ClusterState, partition: str, now: int) -> int | None:
    """When a cycle of `partition` could decide differently from one at `now`, if no event
    came in between; None if only an event can change its decisions."""
    p = state.partitions[partition]
    return MODELS[p.model].next_wakeup(p, now)


def run_cycle(state: ClusterState, tick: LogRecord) -> list[Decision]:
    """Run the cycle that `tick` (already folded into `state`) starts; return its decisions.

    The decisions are folded as they are made and take the log positions right after the tick.
    """
    partition = state.partitions[tick.event.partition]
    cycle = Cycle(state, partition, tick)
    MODELS[partition.model].schedule(cycle)
    return cycle.decisions
