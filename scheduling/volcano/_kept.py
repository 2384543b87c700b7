"""What the Volcano model keeps of a partition between sessions and samples, outside
snapshots (`PartitionState.kept`): each part made again from the state when absent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from preemptd.projections import PartitionState

if TYPE_CHECKING:
    from ._backlog import KeptJobs
    from ._config import VolcanoConfig
    from ._queues import Quotas
    from ._shares import Demand

__all__ = ["VolcanoKept", "kept"]


@dataclass
class VolcanoKept:
    """`jobs`: the jobs kept between sessions (dropped at a configuration change); `quotas`:
    the queue rules last found for `state`, the report and the metrics, with what they were
    found from (the configuration, the cluster's capacity, the demands)."""

    jobs: KeptJobs | None = None
    quotas: tuple[VolcanoConfig, dict[str, int], dict[str, Demand], Quotas] | None = None


def kept(p: PartitionState) -> VolcanoKept:
    """The partition's `VolcanoKept`, empty the first time."""
    found = p.kept.model
    if not isinstance(found, VolcanoKept):
        found = p.kept.model = VolcanoKept()
    return found
