"""What the Kueue model keeps of a partition between cycles and samples, outside snapshots
(`PartitionState.kept`): each part made again from the state when absent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from preemptd.projections import PartitionState

if TYPE_CHECKING:
    from ._views import Settled, Totals
    from ._workloads import KeptWorkloads

__all__ = ["KueueKept", "kept"]


@dataclass
class KueueKept:
    """`workloads`: the workloads kept between cycles, the waiting ones in groups with how
    the last cycle found them (dropped at a configuration change); for `state`, the report and
    the metrics, `totals` (what the ClusterQueues' workloads hold and ask) and `views` (what
    they read of the configuration)."""

    workloads: KeptWorkloads | None = None
    totals: Totals | None = None
    views: Settled | None = None


def kept(p: PartitionState) -> KueueKept:
    """The partition's `KueueKept`, empty the first time."""
    found = p.kept.model
    if not isinstance(found, KueueKept):
        found = p.kept.model = KueueKept()
    return found
