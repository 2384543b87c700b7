"""Jobs and tasks as the Volcano model sees a partition.

- A job is an application: its queue, its priority (the PriorityClass of its PodGroup, here the
  application's priority) and its `min_available` (gang: the job runs only with that many tasks
  placed; left out, all of its tasks, as a Volcano Job without minAvailable; 0, none: no gang
  protection, as a PodGroup with minMember 0).
- A task is a pod. Its priority within the job is its `task_priority` (Volcano's
  `volcano.sh/task-priority` annotation), else its own priority. It may be a victim unless
  `preemptable` is false (missing means true). One that requests nothing is BestEffort. Every
  task takes one `pods` slot of its node: the model adds it to what the shim sent.
- A job is *ready* with `min_available` tasks running; whether it *starves* (may preempt) is
  voted by the gang and priority plugins.

Jobs are kept between sessions (`_backlog.KeptJobs`): the fold says which applications changed,
and a session reads only those again. A job and its tasks are not changed once read (a
session's changes are its statements', on `Nodes`), so what a job counts of its tasks is
counted once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from preemptd.projections import AppState, PartitionState, TaskState, TaskStatus

from .._views import Table
from ._shares import summed

__all__ = ["POD_SLOT", "Job", "Task", "job_of", "job_table", "jobs_of"]

POD_SLOT = "pods"


@dataclass(eq=False, slots=True)  # made for every task each session: no frozen-init cost
class Task:
    id: str
    job: str
    queue: str
    resources: dict[str, int]  # with its pod slot
    priority: int  # within its job
    preemptable: bool
    may_preempt: bool  # preemptionPolicy is not Never
    status: TaskStatus  # a victim on its way out is preempting
    node: str | None
    seq: int
    reserved: str | None = None  # a preemptor pipelined on this node, waiting for its victims
    priority_class: str | None = None
    namespace: str | None = None

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def queue_resources(self) -> dict[str, int]:
        """What it asks of its queue: all but its pod slot."""
        return {name: amount for name, amount in self.resources.items() if name != POD_SLOT}

    @property
    def waiting(self) -> bool:
        """Pending, with no node held for it."""
        return self.status == "pending" and self.reserved is None

    @property
    def best_effort(self) -> bool:
        """Requests nothing but its pod slot."""
        return not any(amount for name, amount in self.resources.items() if name != POD_SLOT)


@dataclass(eq=False)
class Job:
    id: str
    queue: str
    priority: int
    min_available: int
    seq: int
    tasks: list[Task] = field(default_factory=list)

    @cached_property
    def running(self) -> int:
        """Its tasks running (victims on their way out are not)."""
        return sum(task.running for task in self.tasks)

    @cached_property
    def pipelined(self) -> int:
        """Its tasks waiting on a node held for them."""
        return sum(task.reserved is not None for task in self.tasks)

    @cached_property
    def held(self) -> dict[str, int]:
        """What it holds of its queue, as drf counts it: its running and pipelined tasks."""
        held: dict[str, int] = {}
        for task in self.tasks:
            if task.running or task.reserved is not None:
                for name, amount in task.queue_resources.items():
                    total = held.get(name, 0) + amount
                    if total:
                        held[name] = total
                    else:
                        held.pop(name, None)
        return held

    @cached_property
    def elastic(self) -> list[Task]:
        """Its running tasks beyond its gang, the last in task order."""
        running = [t for t in self.tasks if t.running]
        if len(running) <= self.min_available:
            return []
        return sorted(running, key=lambda t: (-t.priority, t.seq))[self.min_available :]

    @cached_property
    def victim_order(self) -> list[Task]:
        """Its running tasks as victims are taken: lower task priority first, then the newer."""
        return sorted((t for t in self.tasks if t.running), key=lambda t: (t.priority, -t.seq))

    @cached_property
    def elastic_resources(self) -> dict[str, int]:
        """What its elastic tasks hold, their pod slots included (enqueue counts it as free)."""
        return summed(task.resources for task in self.elastic)

    @cached_property
    def pending(self) -> list[Task]:
        """Its tasks waiting for a node, in Volcano's task order: higher priority first, then
        the order they were submitted."""
        return sorted((t for t in self.tasks if t.waiting), key=lambda t: (-t.priority, t.seq))

    @property
    def ready(self) -> bool:
        """Enough tasks run for the gang."""
        return self.running >= self.min_available

    def starving(self, *, gang: bool, priority: bool, placed: int | None = None) -> bool:
        """Volcano's JobStarving, an AND of the plugins that vote: gang while fewer than
        `min_available` tasks are placed (running, or waiting on a node held for them; by
        default as the job is now), priority while fewer than all; no voter, not starving."""
        if not (gang or priority):
            return False
        if placed is None:
            placed = self.running + self.pipelined
        return (not gang or placed < self.min_available) and (not priority or placed < len(self.tasks))


def jobs_of(p: PartitionState) -> dict[str, Job]:
    """The partition's jobs by id, each with its tasks in submission order, read from the
    whole partition: what `KeptJobs.view` must equal."""
    jobs: dict[str, Job] = {}
    for app in p.apps.values():
        job = job_of(p, app)
        if job is not None:
            jobs[app.id] = job
    return jobs


def job_of(p: PartitionState, app: AppState) -> Job | None:
    """`app` as a job; None while it has no tasks."""
    if not app.tasks:
        return None
    tasks = [_task(p.tasks[t]) for t in app.tasks]
    min_available = len(tasks) if app.min_available is None else app.min_available
    return Job(id=app.id, queue=app.queue, priority=app.priority, min_available=min_available, seq=app.seq, tasks=sorted(tasks, key=lambda t: t.seq))


def _task(t: TaskState) -> Task:
    return Task(
        id=t.id,
        job=t.app,
        queue=t.queue,
        resources={**t.resources, POD_SLOT: 1},
        priority=t.task_priority or t.priority,
        preemptable=t.preemptable is not False,
        may_preempt=t.may_preempt,
        status=t.status,
        node=t.node,
        seq=t.seq,
        reserved=t.reserved_node,
        priority_class=t.priority_class,
        namespace=t.namespace,
    )


def job_table(p: PartitionState) -> list[Table]:
    """`Model.tables`: the jobs, each with its queue, priority, gang (`min_available`), its tasks
    running, whether that makes it ready (its gang runs), and its tasks pipelined and waiting."""
    rows = [
        {
            "job": job.id,
            "queue": job.queue,
            "priority": job.priority,
            "min_available": job.min_available,
            "running": job.running,
            "ready": "yes" if job.ready else "no",
            "pipelined": job.pipelined,
            "waiting": len(job.pending),
        }
        for job in jobs_of(p).values()
    ]
    return [("jobs", rows)]
