"""The Volcano session as it was before idle jobs were kept in groups between sessions
(preemptd 81d46e5): every job read and enqueued one by one each session, every waiting task
told through one list. `test_volcano_backlog.py` runs it beside the model's own session, which
must make exactly the same decisions; nothing else uses it. The actions after enqueue are the
model's own (they see a session through the same methods)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from preemptd.events import Allocated, Resources
from preemptd.scheduling._model import Cycle
from preemptd.scheduling.volcano._allocate import allocate
from preemptd.scheduling.volcano._backfill import backfill
from preemptd.scheduling.volcano._config import VolcanoConfig
from preemptd.scheduling.volcano._cycle import _land_reservations
from preemptd.scheduling.volcano._jobs import Job, Task, jobs_of
from preemptd.scheduling.volcano._nodes import Nodes
from preemptd.scheduling.volcano._order import drf_share, job_key, job_orders, queue_key, victims_in_order
from preemptd.scheduling.volcano._preempt import preempt
from preemptd.scheduling.volcano._queues import Quotas, demands_of
from preemptd.scheduling.volcano._quota import enforce_quotas, quotas_due
from preemptd.scheduling.volcano._reclaim import reclaim
from preemptd.scheduling.volcano._session import _starving_voters
from preemptd.scheduling.volcano._shares import summed
from preemptd.scheduling.volcano._victims import ByNode
from preemptd.scheduling.volcano._votes import Ballot


class Session:
    def __init__(self, cycle: Cycle) -> None:
        p = cycle.partition
        self.cycle, self.p = cycle, p
        self.config: VolcanoConfig = p.settings
        self.conf = self.config.scheduler
        self.jobs = jobs_of(p)  # every job read again, each session
        self.tasks = {task.id: task for job in self.jobs.values() for task in job.tasks}
        self.nodes = Nodes.of(p, self.jobs)
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
        holding = [job for job in self.jobs.values() if job.running or job.pipelined]
        shares = {job.id: drf_share(job.held, p.capacity) for job in holding} if "drf" in orders else {}  # as the session starts
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

    def rotated(self, queues: Iterable[str]) -> str | None:
        """No rotation: the sessions compared are never cut."""
        return None

    def victims_in_order(self, jobs: Iterable[Job]) -> list[Task]:
        """The running tasks of `jobs` in victim order, as the shares are now."""
        return victims_in_order(self.config.queues, self.quotas.share, jobs, self.job_key)

    def running(self, queues: set[str]) -> dict[str, ByNode]:
        """The running tasks of `queues`, by queue and node, in victim order."""
        by_queue: dict[str, ByNode] = {}
        for task in self.victims_in_order(job for job in self.jobs.values() if job.queue in queues):
            by_queue.setdefault(task.queue, ByNode()).setdefault(task.node or "", []).append(task)
        return by_queue

    def pipelined_jobs(self) -> list[Job]:
        return [job for job in self.jobs.values() if job.pipelined]

    def waiting_jobs(self) -> list[Job]:
        return [job for job in self.jobs.values() if job.id in self.admitted and self.waiting(job)]

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


ACTIONS: dict[str, Callable[[Session], None]] = {"enqueue": enqueue, "allocate": allocate, "preempt": preempt, "reclaim": reclaim, "backfill": backfill}  # type: ignore[dict-item]


def schedule(cycle: Cycle) -> None:
    due = quotas_due(cycle.partition, cycle.now)
    if not cycle.partition.pending_count and not due:
        return
    s = Session(cycle)
    enforce_quotas(s, due)
    if not cycle.partition.pending_count:
        return
    _land_reservations(s)
    if "enqueue" not in s.conf.actions:
        admit_open(s)
    for action in s.conf.actions:
        if not s.within_budget():
            break  # the next session goes on from here
        ACTIONS[action](s)
    s.block()
