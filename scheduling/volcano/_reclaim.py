"""Volcano's reclaim: queues that hold less than they deserve, taking turns a job at a time by
share (as in allocate), for their starving jobs: a pending task the queue may reclaim for
(preemptive) evicts running tasks of other reclaimable queues through the votes (hook
`reclaimable`), only until it fits; the job's evictions are made only if it then has its gang.
Queue priority orders queues and victims; as in Volcano, it does not bound reclaim."""

from __future__ import annotations

import functools

from ._evict import for_gang, starving_jobs
from ._jobs import Job, Task
from ._session import Session
from ._victims import ByNode

__all__ = ["reclaim"]


def reclaim(s: Session) -> None:
    in_victim_order: list[list[Task]] = []  # sorted once, when a queue first may reclaim
    running: dict[str | None, dict[str, list[Task]]] = {}  # by node, in each reclaimer's order

    def serve(queue: str, job: Job) -> None:
        if s.quotas.overused(queue):
            s.note(s.waiting(job), f"reclaim: queue {queue} holds what it deserves ({s.quotas.name}): it reclaims nothing")
            return
        if not in_victim_order:
            in_victim_order.append(s.victims_in_order(s.jobs.values()))
        kin = queue if s.quotas.hierarchy else None  # under hierarchy, the victim order is the reclaimer's own
        if kin not in running:
            running[kin] = _by_node(in_victim_order[0] if kin is None else _nearest_first(s, kin, in_victim_order[0]))
        for_gang(s, job, "reclaim", running[kin], lambda t: _reclaimable(s, t, queue), "reclaimable")

    s.in_turns(starving_jobs(s), serve)


def _nearest_first(s: Session, reclaimer: str, tasks: list[Task]) -> list[Task]:
    """`tasks` (in victim order), the reclaimer's nearest relatives' first (capacity's victim
    queue order under hierarchy); a stable sort keeps victim order among relatives alike."""
    kinship = functools.cache(functools.partial(s.quotas.kinship, reclaimer))
    return sorted(tasks, key=lambda task: kinship(task.queue))


def _reclaimable(s: Session, task: Task, reclaimer: str) -> bool | str:
    """Whether `task` may be reclaimed for a task of queue `reclaimer` (a reason: spared)."""
    if task.queue == reclaimer:
        return False
    queue = s.config.queues[task.queue]
    if not queue.reclaimable:
        return f"reclaimable: queue {queue.name} is not reclaimable"
    return True


def _by_node(tasks: list[Task]) -> ByNode:
    """`tasks` by node, each node's in their order."""
    by_node = ByNode()
    for task in tasks:
        by_node.setdefault(task.node or "", []).append(task)
    return by_node
