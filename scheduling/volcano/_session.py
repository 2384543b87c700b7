"""A Volcano session: the picture of the cluster its actions share (jobs, nodes, queue quotas,
the plugins' ballot), what the actions settled, and why each task still waits.

The jobs and their tasks are the model's kept ones (`_state.session_jobs`): a session never
changes them; what it changes is on `Nodes`, through statements, and in its own sets. The
session's jobs are those started, and the idle ones enqueue lets in (`admit_idle`); the idle
ones it refuses are told why by group (`tell_idle`), not read one by one. The actions that
place go over the jobs with tasks waiting (`waiting_jobs`), not over every job.
"""

from __future__ import annotations

import heapq
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction

from preemptd.events import Allocated, Resources
from preemptd.projections import PartitionState

from .._model import Cycle, rotation
from ._backlog import IdleGroup, waiting_in_order
from ._config import Plugin, SchedulerConf, config_of, sharing_plugin
from ._jobs import Job, Task, job_of
from ._nodes import Lazily, Nodes, per_job
from ._order import drf_share, job_key, job_orders, queue_key, victims_in_order
from ._queues import Quotas, demands_of
from ._shares import Demand
from ._state import session_jobs
from ._victims import ByNode
from ._votes import Ballot

__all__ = ["Session"]


class Session:
    def __init__(self, cycle: Cycle) -> None:
        p = cycle.partition
        self.cycle, self.p = cycle, p
        self.config = config_of(p)
        self.conf = self.config.scheduler
        self.kept = session_jobs(p)  # kept between sessions: the jobs and tasks are not to be changed
        self.idle = self.kept.idle
        self.jobs = dict(self.kept.started)  # the session's, in no order: the idle jobs let in join it
        self.tasks: ChainMap[str, Task] = ChainMap({}, self.kept.tasks)
        self.nodes = Nodes.of(p, self.jobs)
        self.quotas = Quotas(self.config, p.capacity, _demands(p, self.conf), self.nodes.held, self.kept.rules)
        queues = self.config.queues
        self.ballot = Ballot(
            jobs=self.jobs,
            held=self.nodes.held,
            deserved=self.quotas.deserved,
            ready=self.nodes.ready,
            guarantees=Lazily(lambda q: (queues[q].guarantee or {}) if q in queues else {}),
            holds=self.quotas.holds,
            job_held=self.nodes.job_held,
            total=p.capacity,
            ancestors=Lazily(lambda q: self.quotas.reclaim_ancestors(q) if q in queues else ()),
        )
        self.starving_voters = _starving_voters(self.conf.tiers)
        gang = next((plugin for tier in self.conf.tiers for plugin in tier if plugin.name == "gang"), None)
        self.gang_ready = gang is not None and gang.enabled("enableJobReady")  # nothing votes: every job is ready
        orders = job_orders(self.conf)
        # drf's shares as the session starts, read from the (unchanged) jobs as they are asked for
        shares = per_job(self.jobs, lambda job: drf_share(job.held, p.capacity), Fraction) if "drf" in orders else {}
        self.job_key = job_key(orders, shares)
        self.admitted: set[str] = set()  # idle jobs let in this session
        self.started_in = False  # the started jobs are in (once enqueue, or `admit_open`, ran)
        self.settled: set[str] = set()  # tasks placed or pipelined this session
        self.gone: set[str] = set()  # victims evicted this session
        self.why: dict[str, dict[str, None]] = {}  # a waiting task: why, in the order found
        self.details: dict[str, tuple[str, ...]] = {}  # a waiting task: the candidates spared, by action
        self.idle_told: list[tuple[str, list[Segment]]] = []  # per queue, in order: its idle jobs refused, by group
        self.idle_mark: int | None = None  # where, among the tasks told why, the idle ones' place is

    # -- the jobs and tasks in play ------------------------------------------------------------

    def started(self, job: Job) -> bool:
        return len(job.pending) < len(job.tasks)

    def pipelined_jobs(self) -> list[Job]:
        """The jobs with a task waiting on a node held for it (in no order)."""
        return [self.jobs[job_id] for job_id in self.kept.pipelined]

    def waiting_jobs(self) -> list[Job]:
        """The jobs in this session with tasks still waiting for a node, in the partition's
        order of applications."""
        ids = [*self.kept.pending, *self.admitted] if self.started_in else list(self.admitted)
        return [job for job in sorted((self.jobs[i] for i in ids), key=_seq) if self.waiting(job)]

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
        ordered = sorted(by_queue, key=self.queue_key)
        return [(q, sorted(by_queue[q], key=self.job_key)) for q in ordered]

    def queue_key(self, queue: str) -> tuple[int, Fraction, str]:
        """Where `queue` goes among queues: priority, then its share as it is now."""
        return queue_key(self.config.queues[queue], self.quotas.share(queue))

    def within_budget(self) -> bool:
        """Whether the cycle may still place and preempt (`Cycle.may_place`, `may_preempt`): a
        session stops at the first budget spent, and the next goes on from there."""
        return self.cycle.can_place() and self.cycle.can_preempt() and self.cycle.step()

    def in_turns(self, lines: list[tuple[str, list[Job]]], serve: Callable[[str, Job], None]) -> None:
        """Queues in order, one job at a time: after each, its queue goes back in line by its
        share as it is then (Volcano's priority queue of queues); within the cycle's budget."""
        heap = [(queue_key(self.config.queues[q], self.quotas.share(q)), q) for q, _ in lines]
        heapq.heapify(heap)
        jobs = {q: list(reversed(js)) for q, js in lines}
        first = self.rotated(jobs)
        while heap and self.within_budget():
            if first is not None:  # after a cut in this action: the queue after the one it began at goes first
                queue, first = first, None
                heap.remove(next(entry for entry in heap if entry[1] == queue))
                heapq.heapify(heap)
            else:
                _, queue = heapq.heappop(heap)
            self.cycle.begins_at(queue)
            serve(queue, jobs[queue].pop())
            if jobs[queue]:
                heapq.heappush(heap, (queue_key(self.config.queues[queue], self.quotas.share(queue)), queue))

    def rotated(self, queues: Iterable[str]) -> str | None:
        """The queue the current action begins at, when the previous session was cut in it
        (`Cycle.phase`): the next by name after the one it began at then; else None."""
        after = self.cycle.resume.get(self.cycle.phase_name)
        return rotation(queues, after) if after is not None else None

    def victims_in_order(self, jobs: Iterable[Job]) -> list[Task]:
        """The running tasks of `jobs` in victim order, as the shares are now."""
        return victims_in_order(self.config.queues, self.quotas.share, jobs, self.job_key)

    def running(self, queues: set[str]) -> dict[str, ByNode]:
        """The running tasks of `queues`, by queue and node, in victim order (the started jobs'
        of those queues: the others run nothing)."""
        by_queue: dict[str, ByNode] = {}
        started = self.kept.by_queue
        for task in self.victims_in_order(self.jobs[job_id] for queue in queues for job_id in started.get(queue, ())):
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

    def admit_idle(self, job_id: str) -> Job:
        """An idle job let in: read whole, it joins the session's jobs."""
        job = job_of(self.p, self.p.apps[job_id])
        assert job is not None  # an idle job has tasks
        self.jobs[job_id] = job
        self.tasks.maps[0].update((task.id, task) for task in job.tasks)
        self.admitted.add(job_id)
        return job

    def tell_idle(self, queue: str, segments: list[Segment]) -> None:
        """The idle jobs of `queue` refused, as told at the end of the session: each segment's
        jobs (a group's, with an order key in [low, high)) wait for its reason."""
        if self.idle_mark is None:
            self.idle_mark = len(self.why)
        self.idle_told.append((queue, segments))

    def block(self) -> None:
        """Tell each task still waiting why (`Cycle.block`: when its reasons changed), in the
        order found: those noted before enqueue, the idle jobs it refused, then the rest."""
        noted = list(self.why.items())
        mark = len(noted) if self.idle_mark is None else self.idle_mark
        for task_id, why in noted[:mark]:
            self._tell(task_id, why)
        self._tell_idle()
        for task_id, why in noted[mark:]:
            self._tell(task_id, why)

    def _tell(self, task_id: str, why: dict[str, None]) -> None:
        if task_id not in self.settled:
            task = self.tasks[task_id]
            self.cycle.block(self.p.tasks[task_id], app=task.job, queue=task.queue, reasons=tuple(why), explanation=self.details.get(task_id, ()))

    def _tell_idle(self) -> None:
        """The idle jobs refused and not told so yet, queue by queue, in job order."""
        for queue, segments in self.idle_told:
            for _, job_id, reasons in heapq.merge(*(_untold(segment) for segment in segments)):
                if not self.cycle.telling():
                    return  # the next session tells the rest
                for task in waiting_in_order(self.p, self.p.apps[job_id]):
                    self.cycle.block(task, app=job_id, queue=queue, reasons=reasons)


#: An idle group's jobs with an order key in [low, high), and why they wait.
Segment = tuple[IdleGroup, int, int, str]


def _untold(segment: Segment) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """The segment's jobs not told its reason, in job order: (key, job, the reasons to tell,
    one tuple for them all)."""
    group, low, high, reason = segment
    reasons = (reason,)
    runs = [bucket.irange_key(low, high, inclusive=(True, False)) for told, bucket in group.told.items() if told != reasons]
    for key, job in heapq.merge(*runs):
        yield key, job, reasons


def _demands(p: PartitionState, conf: SchedulerConf) -> dict[str, Demand]:
    """What each queue with jobs holds and asks, for proportion, whose rules rest on it (read
    for no other plugin: a session pays for every queue only where the rules need every queue)."""
    plugin = sharing_plugin(conf)
    if plugin is None or plugin.name != "proportion":
        return {}
    return demands_of(p, {name for name, queue in p.queues.items() if queue.leaf and (queue.running or queue.waiting)})


def _seq(job: Job) -> int:
    return job.seq


def _starving_voters(tiers: tuple[tuple[Plugin, ...], ...]) -> tuple[bool, bool]:
    """Whether gang and priority vote on JobStarving: those of the first tier with either."""
    for tier in tiers:
        voters = {plugin.name for plugin in tier if plugin.name in ("gang", "priority") and plugin.enabled("enableJobStarving")}
        if voters:
            return "gang" in voters, "priority" in voters
    return False, False
