"""Volcano's preempt: in each queue, every starving job's pending tasks evict running tasks of
the queue's lower-priority jobs, node by node, through the plugins' votes (hook `preemptable`);
the job's evictions are made only if it then has its gang. Then, within each job still
starving, a pending task evicts running tasks of its own job with a lower task priority, one
preemptor at a time, until one cannot."""

from __future__ import annotations

import functools

from ._evict import commit, for_gang, may_not_evict, starving_jobs, try_room
from ._jobs import Job, Task
from ._nodes import Statement
from ._session import Session
from ._victims import ByNode

__all__ = ["preempt"]


def preempt(s: Session) -> None:
    starving = starving_jobs(s)
    running = s.running({queue for queue, _ in starving})
    first = s.rotated(queue for queue, _ in starving)
    if first is not None:  # after a cut in preempt: the queue after the one it began at goes first
        starving.sort(key=lambda line: line[0] != first)
    for queue, jobs in starving:
        s.cycle.begins_at(queue)
        mine = running.get(queue) or ByNode()
        for job in jobs:
            if not s.within_budget():
                return
            for_gang(s, job, "preempt", mine, functools.partial(_of_another_job, job.id), "preemptable")
        for job in jobs:
            _within_job(s, job, mine)


def _of_another_job(job_id: str, task: Task) -> bool:
    """A preempt candidate: preempt takes victims of other jobs (of the same queue)."""
    return task.job != job_id


def _within_job(s: Session, job: Job, running: dict[str, list[Task]]) -> None:
    if not s.nodes.ready.get(job.id):
        return  # nothing of its own to give
    for task in s.waiting(job):
        if not s.starving(job) or not s.within_budget():
            return
        if may_not_evict(s, task, "preempt"):
            continue
        statement = Statement(s.nodes)
        eviction = try_room(s, task, running, lambda t: t.job == job.id, "preemptable", statement, "preempt")
        if eviction is None or not eviction.room.victims:
            statement.discard()
            s.settled.discard(task.id)
            return
        commit(s, statement, [eviction], "preempt")
