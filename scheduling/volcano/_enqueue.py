"""Volcano's enqueue: a job that has not started is let in if its queue is open and has room
under its capability (and its ancestors', under hierarchy) for its gang's request (the first
`min_available` tasks) beside what it holds, less what preemption could take back (its
elastic resources: running tasks beyond their job's gang), and what was let in before it this
session. A job that has started is always in. Without the enqueue action, every job of an open
queue is in."""

from __future__ import annotations

from ._session import Session
from ._shares import summed

__all__ = ["admit_open", "enqueue"]


def enqueue(s: Session) -> None:
    inqueue: dict[str, dict[str, int]] = {}
    elastic: dict[str, dict[str, int]] = {}
    waiting = []
    for job in s.jobs.values():
        if s.started(job):
            elastic[job.queue] = summed((elastic.get(job.queue, {}), job.elastic_resources))
            s.admitted.add(job.id)
        else:
            waiting.append(job)
    for queue, jobs in s.queues_in_order(waiting):  # enqueue changes no share: the order holds
        for job in jobs:
            if s.closed(job):
                s.note(job.pending, f"enqueue: queue {queue} is closed: it takes no new jobs")
                continue
            gang = summed(task.queue_resources for task in job.pending[: job.min_available])
            refusal = s.quotas.enqueueable(queue, gang, inqueue, elastic)
            if refusal:
                s.note(job.pending, f"enqueue: {refusal}")
                continue
            for limited in s.quotas.lineage(queue):
                inqueue[limited] = summed((inqueue.get(limited, {}), gang))
            s.admitted.add(job.id)


def admit_open(s: Session) -> None:
    """Without enqueue: every started job, and every job of an open queue, is in."""
    s.admitted = {job.id for job in s.jobs.values() if s.started(job) or not s.closed(job)}
    for job in s.jobs.values():
        if job.id not in s.admitted:
            s.note(job.pending, f"queue {job.queue} is closed: it takes no new jobs")
