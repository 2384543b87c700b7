"""The Volcano model (in progress, not registered yet): queues sharing by weight or deserved
capacity, jobs that start whole (gang), and preemption at three levels: reclaim across queues,
preempt between jobs of a queue and between tasks of a job.

- `_objects`: Volcano's Queue objects and scheduler configuration read into one `VolcanoConfig`.
- `_jobs`: applications seen as jobs (gang size, starving) and tasks (task priority,
  preemptable, BestEffort, the pod slot).
- `_nodes`: nodes (idle, releasing, pipelined, pod slots) and statements committed or discarded.
- `_allocate`: allocate for one job, gang-aware.
- `_order`: the orders of queues, jobs and tasks, and of victims (the reverse).
- `_votes`: the plugins' votes on victims (gang, priority, proportion, conformance), tier by tier.
- `_victims`: making room for one preemptor on the first node that can, evicting only until it fits.
- `_shares`: what each queue deserves (proportion's water-filling, capacity's deserved) and its share.
"""

from __future__ import annotations

from ._objects import VolcanoConfig, parse_objects

__all__ = ["VolcanoConfig", "parse_objects"]
