"""The Volcano model: queues sharing by weight or deserved capacity, jobs that start whole (gang),
and preemption at three levels: reclaim across queues, preempt between jobs of a queue and
between tasks of a job.

- `_config`: Volcano's Queue objects and scheduler configuration read into one `VolcanoConfig`.
- `_state`: what the model keeps between sessions (its jobs, read again only where they changed).
- `_jobs`: applications seen as jobs (gang size, starving) and tasks (task priority,
  preemptable, BestEffort, the pod slot).
- `_nodes`: nodes (idle, releasing, pipelined, pod slots), what queues and jobs hold, and
  statements committed or discarded.
- `_shares`: what each queue deserves (proportion's water-filling, capacity's deserved) and its share.
- `_queues`: the sharing plugin's rules: allocatable, overused, preemptive, enqueueable.
- `_order`: the orders of queues, jobs and tasks, and of victims (the reverse).
- `_votes`: the plugins' votes on victims (gang, priority, proportion, capacity, conformance), tier by tier.
- `_victims`: making room for one preemptor on the first node that can, evicting only until it fits.
- `_session`: what a session's actions share: the picture of the cluster, what they settled, why tasks wait.
- `_enqueue`, `_allocate`, `_preempt`, `_reclaim`, `_backfill`: the actions, one module each, as
  Volcano splits them; `_evict` is what preempt and reclaim share (gang-aware evictions).
- `_cycle`: the session: reservations landing, the configured actions in order, then why every task still waits.

README.md beside this file describes the model for users, and where it departs from Volcano.
"""

from __future__ import annotations

from typing import Any

from preemptd.projections import ParsedConfig, PartitionState, QueueConfig, Words

from .._model import Bounds, Model, counted
from ._config import Queue, VolcanoConfig, claims, parse_objects
from ._cycle import schedule
from ._state import VolcanoState, fold_event

__all__ = ["MODEL", "VolcanoConfig", "parse_config", "parse_objects"]


def parse_config(document: Any, partition: str) -> ParsedConfig:
    """Volcano's objects (`{}`: none) as the partition's configuration: the queue tree under
    `root` by `spec.parent` (a queue without one is under root), each queue named as in Volcano."""
    config, warnings = parse_objects([] if document == {} else document)
    children: dict[str, list[Queue]] = {}
    for queue in config.queues.values():
        if queue.name != "root":
            children.setdefault(queue.parent or "root", []).append(queue)

    def node(queue: Queue) -> QueueConfig:
        below = tuple(node(child) for child in children.get(queue.name, ()))
        return QueueConfig(name=queue.name, path=queue.name, children=below, is_parent=bool(below) or queue.name == "root")

    return ParsedConfig(root=node(config.queues["root"]), settings=config, warnings=warnings, priority_classes=config.priority_classes, words=WORDS)


#: Volcano's words for its things, in the fold's refusals.
WORDS = Words(
    queue="queue",
    queues="queues jobs may use",
    application="job",
    priority_class="PriorityClass",
    define_class="add the PriorityClass to the configuration, or publish priorityclass.upserted",
)


def next_wakeup(partition: PartitionState, now: int) -> int | None:
    return None  # nothing in this model waits on time


def bounds(partition: PartitionState) -> Bounds:
    """Per queue, its deserved (else its guarantee) as its guarantee, its capability as its max."""
    config: VolcanoConfig = partition.settings
    return {
        name: (dict(queue.deserved or queue.guarantee or {}), dict(queue.capability) if queue.capability is not None else None)
        for name, queue in config.queues.items()
    }


def describe(partition: PartitionState) -> str:
    """The queues, the session's actions, the plugins tier by tier, and whether anything can be preempted."""
    config: VolcanoConfig = partition.settings
    conf = config.scheduler
    tiers = " ".join(f"[{', '.join(plugin.name for plugin in tier)}]" for tier in conf.tiers) or "none"
    line = f"volcano: {counted(len(config.queues) - 1, 'queue')} under root; actions {', '.join(conf.actions) or 'none'}; plugins by tier {tiers}"
    if not {"preempt", "reclaim"} & set(conf.actions):
        line += "; no preempt or reclaim action: nothing will be preempted"
    return line


MODEL = Model(
    name="volcano",
    parse_config=parse_config,
    schedule=schedule,
    next_wakeup=next_wakeup,
    bounds=bounds,
    claims=claims,
    describe=describe,
    waits_on_time=False,
    state_type=VolcanoState,
    fold_event=fold_event,
)
