"""A Volcano session: the picture of the cluster its actions share (jobs, nodes, queue quotas,
the plugins' ballot), what the actions settled, and why each task still waits.

The jobs and their tasks are the model's kept ones (`_state.session_jobs`): a session never
changes them; what it changes is on `Nodes`, through statements, and in its own sets.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from preemptd.events import Allocated, Resources

from .._model import Cycle
from ._config import Plugin, VolcanoConfig
from ._jobs import Job, Task
from ._nodes import Nodes
from ._order import drf_share, job_key, job_orders, queue_key, victims_in_order
from ._queues import Quotas, demands_of
from ._state import session_jobs
from ._victims import ByNode
from ._votes import Ballot

__all__ = ["Session"]


class Session:
    def __init__(self, cycle: Cycle) -> None:
        p = cycle.partition
        self.cycle, self.p = cycle, p
        self.config: VolcanoConfig = p.settings
        self.conf = self.config.scheduler
        self.jobs, self.tasks = session_jobs(p)  # kept between sessions: the tasks are not to be changed
        self.nodes = Nodes.of(p, self.jobs.values())
        self.quotas = Quotas(self.config, p.capacity, demands_of(p, {job.queue for job in self.jobs.values()}), self.nodes.held)
        self.ballot = Ballot(
            jobs=self.jobs,
            held=self.nodes.held,
            deserved=self.quotas.deserved,
            ready=self.nodes.ready,
            guarantees={q.name: q.guarantee or {} for q in self.config.queues.values()},
            holds=self.quotas.holds,
            job_held=self.nodes.job_held,
            total=p.capacity,
            ancestors={q: self.quotas.reclaim_ancestors(q) for q in self.config.queues if q != "root"},
        )
        self.starving_voters = _starving_voters(self.conf.tiers)
        gang = next((plugin for tier in self.conf.tiers for plugin in tier if plugin.name == "gang"), None)
        self.gang_ready = gang is not None and gang.enabled("enableJobReady")  # nothing votes: every job is ready
        orders = job_orders(self.conf)
        shares = {job: drf_share(held, p.capacity) for job, held in self.nodes.job_held.items()} if "drf" in orders else {}  # as the session starts
        self.job_key = job_key(orders, shares)
        self.admitted: set[str] = set()  # jobs let in this session
        self.settled: set[str] = set()  # tasks placed or pipelined this session
        self.gone: set[str] = set()  # victims evicted this session
        self.why: dict[str, dict[str, None]] = {}  # a waiting task: why, in the order found
        self.details: dict[str, tuple[str, ...]] = {}  # a waiting task: the candidates spared, by action

    # -- the jobs and tasks in play ------------------------------------------------------------

    def started(self, job: Job) -> bool:
        return len(job.pending) < len(job.tasks)

    def closed(self, job: Job) -> bool:
        return self.config.queues[job.queue].closed

    def waiting(self, job: Job) -> list[Task]:
        """Its tasks still waiting for a node, in task order."""
        return [task for task in job.pending if task.id not in self.settled]

    def starving(self, job: Job) -> bool:
        gang, priority = self.starving_voters
        return job.starving(gang=gang, priority=priority, placed=self.placed(job))

    def has_gang(self, job: Job) -> bool:
        return not self.gang_ready or self.placed(job) >= job.min_available

    def placed(self, job: Job) -> int:
        """Its tasks ready or waiting on a node held for them, as the session has them now."""
        return self.nodes.ready.get(job.id, 0) + self.nodes.waiting.get(job.id, 0)

    def queues_in_order(self, jobs: Iterable[Job]) -> list[tuple[str, list[Job]]]:
        """The queues of `jobs` by priority then share, each with its jobs in job order."""
        by_queue: dict[str, list[Job]] = {}
        for job in jobs:
            by_queue.setdefault(job.queue, []).append(job)
        ordered = sorted(by_queue, key=lambda q: queue_key(self.config.queues[q], self.quotas.share(q)))
        return [(q, sorted(by_queue[q], key=self.job_key)) for q in ordered]

    def within_budget(self) -> bool:
        """Whether the cycle may still place and preempt (`Cycle.may_place`, `may_preempt`): a
        session stops at the first budget spent, and the next goes on from there."""
        return self.cycle.may_place() and self.cycle.may_preempt()

    def in_turns(self, lines: list[tuple[str, list[Job]]], serve: Callable[[str, Job], None]) -> None:
        """Queues in order, one job at a time: after each, its queue goes back in line by its
        share as it is then (Volcano's priority queue of queues); within the cycle's budget."""
        heap = [(queue_key(self.config.queues[q], self.quotas.share(q)), q) for q, _ in lines]
        heapq.heapify(heap)
        jobs = {q: list(reversed(js)) for q, js in lines}
        while heap and self.within_budget():
            _, queue = heapq.heappop(heap)
            serve(queue, jobs[queue].pop())
            if jobs[queue]:
                heapq.heappush(heap, (queue_key(self.config.queues[queue], self.quotas.share(queue)), queue))

    def victims_in_order(self, jobs: Iterable[Job]) -> list[Task]:
        """The running tasks of `jobs` in victim order, as the shares are now."""
        return victims_in_order(self.config.queues, {q: self.quotas.share(q) for q in self.config.queues}, jobs, self.job_key)

    def running(self, queues: set[str]) -> dict[str, ByNode]:
        """The running tasks of `queues`, by queue and node, in victim order."""
        by_queue: dict[str, ByNode] = {}
        for task in self.victims_in_order(job for job in self.jobs.values() if job.queue in queues):
            by_queue.setdefault(task.queue, ByNode()).setdefault(task.node or "", []).append(task)
        return by_queue

    # -- what the actions decide ----------------------------------------------------------------

    def note(self, tasks: Iterable[Task], why: str) -> None:
        """`tasks` wait, and this is why (told at the end of the session, unless settled)."""
        for task in tasks:
            self.why.setdefault(task.id, {})[why] = None

    def allocated(self, task: Task, node: str, why: str) -> None:
        state = self.p.tasks[task.id]
        self.cycle.emit(Allocated, task=task.id, app=task.job, queue=task.queue, node=node, resources=Resources(state.resources), explanation=(why,))

    def block(self) -> None:
        """Tell each task still waiting why (`Cycle.block`: when its reasons changed)."""
        for task_id, why in self.why.items():
            if task_id not in self.settled:
                task = self.tasks[task_id]
                self.cycle.block(self.p.tasks[task_id], app=task.job, queue=task.queue, reasons=tuple(why), explanation=self.details.get(task_id, ()))


def _starving_voters(tiers: tuple[tuple[Plugin, ...], ...]) -> tuple[bool, bool]:
    """Whether gang and priority vote on JobStarving: those of the first tier with either."""
    for tier in tiers:
        voters = {plugin.name for plugin in tier if plugin.name in ("gang", "priority") and plugin.enabled("enableJobStarving")}
        if voters:
            return "gang" in voters, "priority" in voters
    return False, False
