"""The engine: one scheduling cycle of a partition, whatever its model.

`run_cycle` is called right after a tick is folded. The partition's model decides through
`Cycle.emit` (see `_cycle`), which folds each decision at once, so the state after the cycle is
exactly what folding the stored decisions gives on a replay.
"""

from __future__ import annotations

from collections.abc import Callable

from events import Decision
from projections import ClusterState, LogRecord
from scheduling import _yunikorn
from scheduling._cycle import Cycle

__all__ = ["MODELS", "Model", "run_cycle"]

Model = Callable[[Cycle], None]

#: The scheduling model of each `config.applied` `model` value.
MODELS: dict[str, Model] = {"yunikorn": _yunikorn.schedule}


def run_cycle(state: ClusterState, tick: LogRecord) -> list[Decision]:
    """Run the cycle that `tick` (already folded into `state`) starts; return its decisions.

    The decisions are folded as they are made and take the log positions right after the tick.
    """
    partition = state.partitions[tick.event.partition]
    cycle = Cycle(state, partition, tick)
    MODELS[partition.model](cycle)
    return cycle.decisions
