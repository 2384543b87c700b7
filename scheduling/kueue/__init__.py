"""The Kueue model: ClusterQueues lending and borrowing quota in (nested) cohorts, workloads
admitted by flavor assignment in Kueue's order, and classic preemption.

- `_objects`: Kueue's objects (both API versions) read into one `KueueConfig`.
- `_tree`: the quota tree of cohorts and ClusterQueues: subtree quotas, limits, what is available.
- `_assign`: flavor assignment, with flavorFungibility.
- `_state`: what the model keeps: each workload's admission, folded from its decisions.
- `_workloads`: applications seen as workloads; their requests and the queues' usage.
- `_classic`: classic preemption (candidates, order, passes, greedy removal, minimisation).
- `_cycle`: the cycle: record running workloads, admit, preempt, block.

README.md beside this file describes the model for users, and where it departs from Kueue.
"""

from __future__ import annotations

from typing import Any

from preemptd.projections import ParsedConfig, PartitionState, QueueConfig, Words

from .._model import Bounds, Budget, Model, counted
from ._cycle import schedule
from ._objects import KueueConfig, claims, parse_objects
from ._state import KueueState, fold_decision, fold_event
from ._tree import QuotaTree

__all__ = ["MODEL", "ROOT", "KueueConfig", "QuotaTree", "parse_config", "parse_objects"]

#: The queue tree's root: every ClusterQueue is a leaf under it (cohorts live in the quota tree).
ROOT = "(cluster)"


def parse_config(document: Any, partition: str) -> ParsedConfig:
    """Kueue's objects (`{}`: none) as the partition's configuration: one leaf queue per
    ClusterQueue, LocalQueues (`namespace/name`) as their aliases, WorkloadPriorityClasses as
    priority classes."""
    config, warnings = parse_objects([] if document == {} else document)
    leaves = tuple(QueueConfig(name=name, path=name) for name in config.cluster_queues)
    return ParsedConfig(
        root=QueueConfig(name=ROOT, path=ROOT, children=leaves, is_parent=True),
        settings=config,
        warnings=warnings,
        aliases={local: queue for local, queue in config.local_queues.items() if queue in config.cluster_queues},
        priority_classes=config.priority_classes,
        words=WORDS,
    )


#: Kueue's words for its things, in the fold's refusals.
WORDS = Words(
    queue="ClusterQueue",
    queues="ClusterQueues",
    alias="LocalQueue",
    application="workload",
    priority_class="WorkloadPriorityClass",
    define_class="add a WorkloadPriorityClass (or PriorityClass) to the configuration, or publish priorityclass.upserted",
)


def next_wakeup(partition: PartitionState, now: int) -> int | None:
    return None  # nothing in this model waits on time


def bounds(partition: PartitionState) -> Bounds:
    """Per ClusterQueue, its nominal quota (summed over its flavors) as its guarantee, and as its
    max what borrowing allows on top when every flavor limits it (else none: the cohort does)."""
    config: KueueConfig = partition.settings
    out: Bounds = {}
    for name, queue in config.cluster_queues.items():
        nominal: dict[str, int] = {}
        limit: dict[str, int] | None = {}
        for group in queue.resource_groups:
            for flavor in group.flavors:
                for resource, quota in flavor.resources.items():
                    nominal[resource] = nominal.get(resource, 0) + quota.nominal
                    if limit is not None and quota.borrowing_limit is not None:
                        limit[resource] = limit.get(resource, 0) + quota.nominal + quota.borrowing_limit
                    else:
                        limit = None
        out[name] = (nominal, limit)
    return out


def describe(partition: PartitionState) -> str:
    """The quota tree's size, fair sharing or classic preemption, and which queues may preempt."""
    config: KueueConfig = partition.settings
    cohorts = [c for c in config.cohorts.values() if not c.implicit or any(q.cohort == c.name for q in config.cluster_queues.values())]
    line = (
        f"kueue: {counted(len(config.cluster_queues), 'ClusterQueue')} in {counted(len(cohorts), 'cohort')}, {counted(len(config.local_queues), 'LocalQueue')}, "
        f"{counted(len(config.priority_classes), 'priority class', 'priority classes')}; "
    )
    if config.fair_sharing.enabled:
        line += f"fair sharing on ({', '.join(config.fair_sharing.strategies)})"
    else:
        trees = [name for name, cohort in config.cohorts.items() if cohort.fair_sharing]
        line += f"fair sharing on in the cohort trees of {', '.join(trees)} (preemptd's annotation), classic elsewhere" if trees else "classic preemption (fair sharing off)"
    may = [name for name, queue in config.cluster_queues.items() if {queue.preemption.within_cluster_queue, queue.preemption.reclaim_within_cohort} != {"Never"}]
    if not may:
        return line + "; no ClusterQueue may preempt (withinClusterQueue and reclaimWithinCohort Never): nothing will be preempted"
    return line + f"; {len(may)} of {len(config.cluster_queues)} ClusterQueues may preempt"


MODEL = Model(
    name="kueue",
    parse_config=parse_config,
    schedule=schedule,
    next_wakeup=next_wakeup,
    fold_decision=fold_decision,
    state_type=KueueState,
    fold_event=fold_event,
    waits_on_time=False,
    budget=Budget(preemptions=50),
    bounds=bounds,
    claims=claims,
    describe=describe,
)
