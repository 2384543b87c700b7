"""The orders Volcano's actions go in.

- Queues: higher `priority` first, then the lower share (how far into what it deserves), then
  the name.
- Jobs of a queue: higher priority first, then (with gang's job order, on by default) those
  below their gang, then the older.
- Tasks of a job: higher task priority first, then the older (`Job.pending`).
- Victims, the reverse: queues of lower priority and higher share first, then jobs of lower
  priority, running their gang, and the newer, then tasks of lower task priority and the newer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction

from ._jobs import Job, Task
from ._objects import Queue

__all__ = ["job_key", "queue_key", "victim_key"]


def queue_key(queue: Queue, share: Fraction) -> tuple[int, Fraction, str]:
    return (-queue.priority, share, queue.name)


def job_key(job: Job, *, gang_order: bool = False) -> tuple[int, bool, int]:
    """With gang's job order, among jobs of a priority those below their gang go first."""
    return (-job.priority, gang_order and job.ready, job.seq)


def victim_key(
    queues: Mapping[str, Queue], shares: Mapping[str, Fraction], jobs: Mapping[str, Job], *, gang_order: bool = False
) -> Callable[[Task], tuple[int, Fraction, int, bool, int, int, int]]:
    """The sort key of victims: the reverse of the queue, job and task orders (the queue's and
    the job's parts computed once: the key is taken for every running task)."""
    by_queue = {name: (queue.priority, -shares.get(name, Fraction(0))) for name, queue in queues.items()}
    by_job = {job.id: (job.priority, not (gang_order and job.ready), -job.seq) for job in jobs.values()}

    def key(task: Task) -> tuple[int, Fraction, int, bool, int, int, int]:
        return (*by_queue[task.queue], *by_job[task.job], task.priority, -task.seq)

    return key
