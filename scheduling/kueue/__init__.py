"""The Kueue model (in progress, not registered yet): ClusterQueues lending and borrowing quota
in cohorts, classic and fair-sharing preemption. So far: Kueue's objects read into a
`KueueConfig` (`_objects.py`), the quota tree with what each ClusterQueue has available
(`_tree.py`), and flavor assignment (`_assign.py`). Next: admission in Kueue's order, the
model's state and decisions, then classic and fair-sharing preemption."""

from ._objects import KueueConfig, parse_objects
from ._tree import QuotaTree

__all__ = ["KueueConfig", "QuotaTree", "parse_objects"]
