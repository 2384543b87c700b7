"""The orders Volcano's actions go in.

- Queues: higher `priority` first, then the lower share (how far into what it deserves), then
  the name.
- Jobs of a queue: as the plugins with `enableJobOrder` say, in the order they sit in the tiers,
  the first that tells two jobs apart deciding (Volcano's JobOrderFn): priority, higher job
  priority first; gang, those below their gang first; drf, the lower dominant resource share
  first. Then the older.
- Tasks of a job: higher task priority first, then the older (`Job.pending`).
- Victims, the reverse: queues of lower priority and higher share first, then jobs in the
  reverse of the job order, then tasks of lower task priority and the newer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction

from ._config import Queue, SchedulerConf
from ._jobs import POD_SLOT, Job, Task

__all__ = ["JOB_ORDERS", "drf_share", "job_key", "job_orders", "queue_key", "victim_key", "victims_in_order"]

#: The plugins whose job order preemptd models.
JOB_ORDERS = ("priority", "gang", "drf")

JobKey = Callable[[Job], tuple[Fraction | int, ...]]
VictimKey = Callable[[Task], tuple[Fraction | int, ...]]


def queue_key(queue: Queue, share: Fraction) -> tuple[int, Fraction, str]:
    return (-queue.priority, share, queue.name)


def job_orders(conf: SchedulerConf) -> tuple[str, ...]:
    """The plugins that order jobs, in the order they sit in the tiers."""
    named = [plugin.name for tier in conf.tiers for plugin in tier if plugin.name in JOB_ORDERS and plugin.enabled("enableJobOrder")]
    return tuple(dict.fromkeys(named))


def job_key(orders: tuple[str, ...], shares: Mapping[str, Fraction]) -> JobKey:
    """The sort key of jobs by `orders` (`job_orders`), then age; `shares` are drf's."""

    def key(job: Job) -> tuple[Fraction | int, ...]:
        parts: list[Fraction | int] = []
        for order in orders:
            if order == "priority":
                parts.append(-job.priority)
            elif order == "gang":
                parts.append(int(job.ready))
            else:
                parts.append(shares.get(job.id, Fraction(0)))
        return (*parts, job.seq)

    return key


def drf_share(held: Mapping[str, int], total: Mapping[str, int]) -> Fraction:
    """drf's dominant resource share: the largest part of the cluster's total, over the
    resources it has (the pod count aside), that `held` is."""
    return max((Fraction(held.get(r, 0), amount) for r, amount in total.items() if amount > 0 and r != POD_SLOT), default=Fraction(0))


def victim_key(queues: Mapping[str, Queue], shares: Mapping[str, Fraction], jobs: Mapping[str, Job], jobs_key: JobKey) -> VictimKey:
    """The sort key of victims: the reverse of the queue, job and task orders (the queue's and
    the job's parts computed once: the key is taken for every running task)."""
    by_queue = _victim_queue_parts(queues, shares)
    by_job = {job.id: tuple(-part for part in jobs_key(job)) for job in jobs.values()}

    def key(task: Task) -> tuple[Fraction | int, ...]:
        return (*by_queue[task.queue], *by_job[task.job], task.priority, -task.seq)

    return key


def victims_in_order(queues: Mapping[str, Queue], share: Callable[[str], Fraction], jobs: Iterable[Job], jobs_key: JobKey) -> list[Task]:
    """The running tasks of `jobs`, sorted by `victim_key` (a queue's share as `share` says,
    asked once per queue of `jobs`): the jobs are sorted (the job part ends with the job's age,
    so no two jobs tie) and each job's tasks are in its own victim order, kept with the job;
    sorting thousands of jobs, not a hundred thousand tasks."""
    by_queue: dict[str, tuple[int, Fraction]] = {}

    def key(job: Job) -> tuple[Fraction | int, ...]:
        parts = by_queue.get(job.queue)
        if parts is None:
            parts = by_queue[job.queue] = (queues[job.queue].priority, -share(job.queue))
        return (*parts, *(-part for part in jobs_key(job)))

    return [task for job in sorted(jobs, key=key) for task in job.victim_order]


def _victim_queue_parts(queues: Mapping[str, Queue], shares: Mapping[str, Fraction]) -> dict[str, tuple[int, Fraction]]:
    return {name: (queue.priority, -shares.get(name, Fraction(0))) for name, queue in queues.items()}
