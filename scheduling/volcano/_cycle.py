"""One session of the Volcano model: the configured actions, in their order, on one picture of
the cluster; then every task still waiting is told why.

- First, a preemptor pipelined in an earlier session whose victims are gone is bound to the node
  held for it (`decision.allocated`), or let go (`decision.unreserved`) if the node went or still
  lacks room with nothing left to release there.
- **enqueue**: a job that has not started is let in if its queue is open and has room under its
  capability (and its ancestors', under hierarchy) for its gang's request (the first
  `min_available` tasks) beside what it holds, less what preemption could take back, and what
  was let in before it this session. Without enqueue, every job of an open queue is in. A job
  that has started is always in.
- **allocate**: queues by priority, then the lower share, a job at a time (the queue goes back in
  line after each job); a job's pending tasks go on the first node where they fit now, within
  what the queue may hold, and are kept only if the job then has its gang.
- **preempt**: in each queue, every starving job's pending tasks evict running tasks of the
  queue's lower-priority jobs, node by node, through the plugins' votes (hook `preemptable`);
  the job's evictions are made only if it then has its gang. Then, within each job still
  starving, a pending task evicts running tasks of its own job with a lower task priority, one
  preemptor at a time, until one cannot.
- **reclaim**: queues that hold less than they deserve, taking turns a job at a time by share
  (as in allocate), for their starving jobs: a pending
  task the queue may reclaim for (preemptive) evicts running tasks of other reclaimable queues
  through the votes (hook `reclaimable`), only until it fits; the job's evictions are made only
  if it then has its gang.
- **backfill**: BestEffort tasks (they ask only a pod slot) of jobs let in, on the first node
  with a slot, gang-aware.

A preemptor that needs no victim but fits the room others' victims are releasing waits on that
node too (`decision.preempted` with no victims). A BestEffort preemptor takes only BestEffort
victims; a task whose preemptionPolicy is Never evicts nothing. Queue priority orders queues and
victims; as in Volcano, it does not bound reclaim.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from preemptd.events import Allocated, Preempted, Resources, Unreserved, Victim

from .._explain import amounts, plural
from .._model import Cycle
from ._allocate import allocate_job
from ._jobs import POD_SLOT, Job, Task
from ._nodes import Nodes, Statement
from ._objects import Plugin, VolcanoConfig
from ._order import drf_share, job_key, job_orders, queue_key, victims_in_order
from ._queues import Quotas, demands_of
from ._shares import summed
from ._state import session_jobs
from ._victims import Room, make_room
from ._votes import Ballot

__all__ = ["schedule"]

SPARED_SHOWN = 10  # candidates spared, listed in an explanation


def schedule(cycle: Cycle) -> None:
    if cycle.partition.pending_count:
        _Session(cycle).run()


@dataclass(frozen=True)
class _Eviction:
    """A preemptor, the room made for it and the candidates spared."""

    task: Task
    room: Room
    spared: dict[str, str]


class _Session:
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
        self.details: dict[str, tuple[str, ...]] = {}

    def run(self) -> None:
        self._land_reservations()
        if "enqueue" not in self.conf.actions:
            self.admitted = {job.id for job in self.jobs.values() if self._started(job) or not self._closed(job)}
            for job in self.jobs.values():
                if job.id not in self.admitted:
                    self._note(job.pending, f"queue {job.queue} is closed: it takes no new jobs")
        actions: dict[str, Callable[[], None]] = {
            "enqueue": self._enqueue, "allocate": self._allocate, "preempt": self._preempt, "reclaim": self._reclaim, "backfill": self._backfill,
        }  # fmt: skip
        for action in self.conf.actions:
            actions[action]()
        self._block()

    # -- the jobs and tasks in play ------------------------------------------------------------

    def _started(self, job: Job) -> bool:
        return len(job.pending) < len(job.tasks)

    def _closed(self, job: Job) -> bool:
        return self.config.queues[job.queue].closed

    def _waiting(self, job: Job) -> list[Task]:
        """Its tasks still waiting for a node, in task order."""
        return [task for task in job.pending if task.id not in self.settled]

    def _starving(self, job: Job) -> bool:
        gang, priority = self.starving_voters
        placed = self.nodes.ready.get(job.id, 0) + self.nodes.waiting.get(job.id, 0)
        return job.starving(gang=gang, priority=priority, placed=placed)

    def _has_gang(self, job: Job) -> bool:
        return not self.gang_ready or self.nodes.ready.get(job.id, 0) + self.nodes.waiting.get(job.id, 0) >= job.min_available

    def _queues_in_order(self, jobs: Iterable[Job]) -> list[tuple[str, list[Job]]]:
        """The queues of `jobs` by priority then share, each with its jobs in job order."""
        by_queue: dict[str, list[Job]] = {}
        for job in jobs:
            by_queue.setdefault(job.queue, []).append(job)
        ordered = sorted(by_queue, key=lambda q: queue_key(self.config.queues[q], self.quotas.share(q)))
        return [(q, sorted(by_queue[q], key=self.job_key)) for q in ordered]

    def _note(self, tasks: Iterable[Task], why: str) -> None:
        for task in tasks:
            self.why.setdefault(task.id, {})[why] = None

    # -- reservations from earlier sessions -----------------------------------------------------

    def _land_reservations(self) -> None:
        for task in sorted((t for t in self.tasks.values() if t.reserved is not None), key=lambda t: t.seq):
            node, state = task.reserved, self.p.tasks[task.id]
            if node not in self.nodes.capacity:
                reason = f"{node} is gone or no longer schedulable; the task is pending again"
            elif state.victims:
                continue  # its victims are still leaving
            elif Statement(self.nodes).land(task, node):
                self.settled.add(task.id)
                self._allocated(task, node, f"its victims are gone: {node}, held for it, has room now")
                continue
            elif self.nodes.releasing.get(node):
                continue  # still waiting for what others' victims release there
            else:
                reason = f"its victims are gone but {node} still lacks room; the task is pending again"
            self.cycle.emit(Unreserved, task=task.id, node=node, reason=reason)
            if node in self.nodes.capacity:
                Statement(self.nodes).unpipeline(task, node)
            self.settled.add(task.id)  # pending again: tried from the next session on

    # -- enqueue and allocate -------------------------------------------------------------------

    def _enqueue(self) -> None:
        """What a queue lets in counts its elastic resources (running tasks beyond their job's
        gang) as free: preemption can take them back."""
        inqueue: dict[str, dict[str, int]] = {}
        elastic: dict[str, dict[str, int]] = {}
        for job in self.jobs.values():
            if self._started(job):
                elastic[job.queue] = summed((elastic.get(job.queue, {}), job.elastic_resources))
        for queue, jobs in self._queues_in_order(self.jobs.values()):
            for job in jobs:
                if self._started(job):
                    self.admitted.add(job.id)
                    continue
                if self._closed(job):
                    self._note(job.pending, f"enqueue: queue {queue} is closed: it takes no new jobs")
                    continue
                gang = summed(task.queue_resources for task in job.pending[: job.min_available])
                refusal = self.quotas.enqueueable(queue, gang, inqueue, elastic)
                if refusal:
                    self._note(job.pending, f"enqueue: {refusal}")
                    continue
                for limited in self.quotas.lineage(queue):
                    inqueue[limited] = summed((inqueue.get(limited, {}), gang))
                self.admitted.add(job.id)

    def _allocate(self) -> None:
        lines = self._queues_in_order(job for job in self.jobs.values() if job.id in self.admitted and self._waiting(job))
        self._in_turns(lines, lambda queue, job: self._place(job, "allocate", lambda task: self.quotas.allocatable(queue, task.resources)))

    def _in_turns(self, lines: list[tuple[str, list[Job]]], serve: Callable[[str, Job], None]) -> None:
        """Queues in order, one job at a time: after each, its queue goes back in line by its
        share as it is then (Volcano's priority queue of queues)."""
        heap = [(queue_key(self.config.queues[q], self.quotas.share(q)), q) for q, _ in lines]
        heapq.heapify(heap)
        jobs = {q: list(reversed(js)) for q, js in lines}
        while heap:
            _, queue = heapq.heappop(heap)
            serve(queue, jobs[queue].pop())
            if jobs[queue]:
                heapq.heappush(heap, (queue_key(self.config.queues[queue], self.quotas.share(queue)), queue))

    def _backfill(self) -> None:
        waiting = {job_id: [task for task in self._waiting(self.jobs[job_id]) if task.best_effort] for job_id in self.admitted}
        for job in sorted((self.jobs[j] for j, best_effort in waiting.items() if best_effort), key=self.job_key):
            self._place(job, "backfill", tasks=waiting[job.id])

    def _place(self, job: Job, action: str, queue_refuses: Callable[[Task], str | None] = lambda task: None, tasks: list[Task] | None = None) -> None:
        placed, unplaced = allocate_job(job, self.nodes, self._waiting(job) if tasks is None else tasks, queue_refuses, gang=self.gang_ready)
        for task, node in placed:
            self.settled.add(task.id)
            self._allocated(
                task,
                node,
                f"{action}: the first node, by name, where the task fits now"
                + (f"; job {job.id} has its gang of {job.min_available}" if job.min_available > 1 else ""),
            )
        for task_id, why in unplaced.items():
            self._note([self.tasks[task_id]], f"{action}: {why}")

    def _allocated(self, task: Task, node: str, why: str) -> None:
        state = self.p.tasks[task.id]
        self.cycle.emit(Allocated, task=task.id, app=task.job, queue=task.queue, node=node, resources=Resources(state.resources), explanation=(why,))

    # -- preempt and reclaim --------------------------------------------------------------------

    def _starving_jobs(self) -> list[tuple[str, list[Job]]]:
        """The queues of the jobs that starve (they may evict), in order; the waiting tasks of
        the others are told why they evict nothing."""
        starving = []
        for job in self.jobs.values():
            waiting = self._waiting(job) if job.id in self.admitted else []
            if waiting and self._starving(job):
                starving.append(job)
            elif waiting:
                self._note(
                    waiting, f"job {job.id} is not starving (it has its gang of {job.min_available}): its other tasks wait for free room and evict nothing"
                )
        return self._queues_in_order(starving)

    def _preempt(self) -> None:
        starving = self._starving_jobs()
        running = self._running({queue for queue, _ in starving})
        for queue, jobs in starving:
            mine = running.get(queue, {})
            for job in jobs:
                self._for_gang(job, "preempt", mine, functools.partial(_of_another_job, job.id), "preemptable")
            for job in jobs:
                self._within_job(job, mine)

    def _reclaim(self) -> None:
        in_victim_order: list[list[Task]] = []  # sorted once, when a queue first may reclaim
        running: dict[str | None, dict[str, list[Task]]] = {}  # by node, in each reclaimer's order

        def serve(queue: str, job: Job) -> None:
            if self.quotas.overused(queue):
                self._note(self._waiting(job), f"reclaim: queue {queue} holds what it deserves ({self.quotas.name}): it reclaims nothing")
                return
            if not in_victim_order:
                in_victim_order.append(self._victims_in_order(self.jobs.values()))
            kin = queue if self.quotas.hierarchy else None  # under hierarchy, the victim order is the reclaimer's own
            if kin not in running:
                running[kin] = _by_node(in_victim_order[0] if kin is None else self._nearest_first(kin, in_victim_order[0]))
            self._for_gang(job, "reclaim", running[kin], lambda t: self._reclaimable(t, queue), "reclaimable")

        self._in_turns(self._starving_jobs(), serve)

    def _nearest_first(self, reclaimer: str, tasks: list[Task]) -> list[Task]:
        """`tasks` (in victim order), the reclaimer's nearest relatives' first (capacity's victim
        queue order under hierarchy); a stable sort keeps victim order among relatives alike."""
        kinship = functools.cache(functools.partial(self.quotas.kinship, reclaimer))
        return sorted(tasks, key=lambda task: kinship(task.queue))

    def _victims_in_order(self, jobs: Iterable[Job]) -> list[Task]:
        """The running tasks of `jobs` in victim order, as the shares are now."""
        return victims_in_order(self.config.queues, {q: self.quotas.share(q) for q in self.config.queues}, jobs, self.job_key)

    def _running(self, queues: set[str]) -> dict[str, dict[str, list[Task]]]:
        """The running tasks of `queues`, by queue and node, in victim order."""
        by_queue: dict[str, dict[str, list[Task]]] = {}
        for task in self._victims_in_order(job for job in self.jobs.values() if job.queue in queues):
            by_queue.setdefault(task.queue, {}).setdefault(task.node or "", []).append(task)
        return by_queue

    def _reclaimable(self, task: Task, reclaimer: str) -> bool | str:
        """Whether `task` may be reclaimed for a task of queue `reclaimer` (a reason: spared).
        Queue priority orders queues; as in Volcano, it does not bound reclaim."""
        if task.queue == reclaimer:
            return False
        queue = self.config.queues[task.queue]
        if not queue.reclaimable:
            return f"reclaimable: queue {queue.name} is not reclaimable"
        return True

    def _for_gang(self, job: Job, action: str, running: dict[str, list[Task]], candidate: Callable[[Task], bool | str], hook: str) -> None:
        """`action` for `job`'s waiting tasks while it starves: each is placed where it fits
        now, else room is made for it; all is kept only if the job then has its gang."""
        statement, evictions = Statement(self.nodes), []
        failed: dict[tuple[tuple[tuple[str, int], ...], int], Task] = {}  # tasks alike that found no room since the last change
        for task in self._waiting(job):
            if not self._starving(job):
                break
            if self._place_now(task, statement):
                failed.clear()
                continue
            refusal = self._may_not_evict(task, action)
            if refusal:
                self._note([task], refusal)
                continue
            alike = (tuple(sorted(task.resources.items())), task.priority)
            if alike in failed:  # the same search on the same state: the same answer, at no cost
                self._fail_like(task, failed[alike])
                continue
            eviction = self._make_room(task, running, candidate, hook, statement, action, fits_no_node_now=True)
            if eviction is None:
                failed[alike] = task
            else:
                evictions.append(eviction)
                failed.clear()
        if not evictions:
            statement.discard()
            self.settled.difference_update(task.id for task, _ in statement.placed)
            return
        if self._has_gang(job):
            self._commit(statement, evictions, action)
            return
        found = len(evictions) + len(statement.placed)
        self.settled.difference_update([*(e.task.id for e in evictions), *(task.id for task, _ in statement.placed)])
        statement.discard()
        ready = self.nodes.ready.get(job.id, 0) + self.nodes.waiting.get(job.id, 0)
        self._note(
            (e.task for e in evictions),
            f"{action}: gang: room was found for {plural(found, 'task')}, but job {job.id} would still have {ready + found} of the {job.min_available} it needs to start (min_available): nothing evicted",
        )

    def _fail_like(self, task: Task, other: Task) -> None:
        """`task` finds no room, as `other`, just before it, did not."""
        for why in self.why.get(other.id, {}):
            self._note([task], why)
        if other.id in self.details:
            self.details[task.id] = self.details[other.id]

    def _place_now(self, task: Task, statement: Statement) -> bool:
        """Place `task` where it fits now, within what its queue may hold, if it does anywhere."""
        if self.quotas.allocatable(task.queue, task.resources) is not None:
            return False
        node = self.nodes.first_fitting(task.resources)
        if node is None:
            return False
        statement.allocate(task, node)
        self.settled.add(task.id)
        return True

    def _within_job(self, job: Job, running: dict[str, list[Task]]) -> None:
        if not self.nodes.ready.get(job.id):
            return  # nothing of its own to give
        for task in self._waiting(job):
            if not self._starving(job):
                return
            if self._may_not_evict(task, "preempt"):
                continue
            statement = Statement(self.nodes)
            eviction = self._make_room(task, running, lambda t: t.job == job.id, "preemptable", statement, "preempt")
            if eviction is None or not eviction.room.victims:
                statement.discard()
                self.settled.discard(task.id)
                return
            self._commit(statement, [eviction], "preempt")

    def _commit(self, statement: Statement, evictions: list[_Eviction], action: str) -> None:
        for task, node in statement.commit():
            self._allocated(task, node, f"{action}: placed with the room made for job {task.job}'s gang")
        for eviction in evictions:
            self.gone.update(victim.id for victim in eviction.room.victims)
            self._evicted(eviction, action)

    def _may_not_evict(self, task: Task, action: str) -> str | None:
        if not task.may_preempt:
            return f"{action}: its preemptionPolicy is Never: it evicts nothing"
        if action == "reclaim":
            refusal = self.quotas.preemptive(task.queue, task.resources)
            return f"reclaim: {refusal}" if refusal else None
        return None

    def _make_room(
        self,
        task: Task,
        running: dict[str, list[Task]],
        candidate: Callable[[Task], bool | str],
        hook: str,
        statement: Statement,
        action: str,
        *,
        fits_no_node_now: bool = False,
    ) -> _Eviction | None:
        leaving = self.gone | {victim.id for victim in statement.evicted}

        def eligible(t: Task) -> bool | str:
            verdict = candidate(t)
            if verdict is not True or t.id in leaving:
                return verdict if t.id not in leaving else False
            if not t.preemptable:
                return "preemptable: the task is marked not preemptable"
            if task.best_effort and not t.best_effort:
                return "BestEffort: a BestEffort preemptor takes only BestEffort victims"
            return True

        enough = (lambda: self.quotas.allocatable(task.queue, task.resources) is None) if action == "preempt" else (lambda: True)
        guard = self.quotas.name if action == "reclaim" and self.quotas.plugin else None  # the design: never below deserved
        room, spared, seen = make_room(task, running, eligible, hook, self.conf, self.ballot, statement, enough, guard, fits_no_node_now)
        if room is None:
            if not seen:
                self._note([task], f"{action}: no running task may make room for it" + (" (spared: see the explanation)" if spared else ""))
            else:
                self._note([task], f"{action}: no node has room for it even with every victim the plugins allow")
            self._detail(task, action, spared)
            return None
        self.settled.add(task.id)
        return _Eviction(task, room, spared)

    def _detail(self, task: Task, action: str, spared: dict[str, str]) -> None:
        """Add the candidates `action` spared for `task` to what earlier actions spared."""
        earlier = [line for line in self.details.get(task.id, ()) if not line.startswith(f"{action}: ")]
        self.details[task.id] = (*earlier, *(f"{action}: {line}" for line in _spared_lines(spared)))

    def _evicted(self, eviction: _Eviction, action: str) -> None:
        task, room = eviction.task, eviction.room
        job = self.jobs[task.job]
        victims = tuple(
            Victim(
                task=v.id,
                app=v.job,
                queue=v.queue,
                node=v.node or room.node,
                priority=self.p.tasks[v.id].priority,
                resources=Resources(self.p.tasks[v.id].resources),
                why=f"{action}: {self._why_victim(task, v, action)}; allowed by {', '.join(room.voters)}",
            )
            for v in room.victims
        )
        if not victims:
            reason = f"{action}: job {job.id} waits on {room.node} for the room being released there"
        elif action == "reclaim":
            reason = f"reclaim: queue {task.queue} takes back what it deserves ({self.quotas.name}) from queues holding more than theirs"
        elif all(v.job == job.id for v in room.victims):
            reason = f"preempt: within job {job.id}, a task of task priority {task.priority} takes the place of lower ones"
        else:
            reason = f"preempt: job {job.id} (priority {job.priority}) takes from lower-priority jobs of queue {task.queue}"
        self.cycle.emit(
            Preempted,
            preemptor=task.id,
            app=task.job,
            queue=task.queue,
            node=room.node,
            resources=Resources(self.p.tasks[task.id].resources),
            victims=victims,
            model=self.p.model,
            reason=reason,
            explanation=_spared_lines(eviction.spared),
        )

    def _why_victim(self, task: Task, victim: Task, action: str) -> str:
        if action == "reclaim":
            deserved = {r: int(a) for r, a in self.quotas.deserved.get(victim.queue, {}).items() if r != POD_SLOT}
            none = [r for r in victim.queue_resources if victim.queue_resources[r] and not deserved.get(r)]
            if none:
                return f"queue {victim.queue} deserves no {', '.join(none)}: it runs on what other queues leave"
            return f"queue {victim.queue} held more than it deserves ({amounts(deserved)})"
        if victim.job == task.job:
            return f"task priority {victim.priority} is below the preemptor's {task.priority}"
        return f"job {victim.job} (priority {self.jobs[victim.job].priority}) is below job {task.job} (priority {self.jobs[task.job].priority})"

    # -- why the rest wait ----------------------------------------------------------------------

    def _block(self) -> None:
        for task_id, why in self.why.items():
            if task_id not in self.settled:
                task = self.tasks[task_id]
                self.cycle.block(self.p.tasks[task_id], app=task.job, queue=task.queue, reasons=tuple(why), explanation=self.details.get(task_id, ()))


def _by_node(tasks: Iterable[Task]) -> dict[str, list[Task]]:
    """`tasks` by node, each node's in their order."""
    by_node: dict[str, list[Task]] = {}
    for task in tasks:
        by_node.setdefault(task.node or "", []).append(task)
    return by_node


def _of_another_job(job_id: str, task: Task) -> bool:
    """A preempt candidate: preempt takes victims of other jobs (of the same queue)."""
    return task.job != job_id


def _starving_voters(tiers: tuple[tuple[Plugin, ...], ...]) -> tuple[bool, bool]:
    """Whether gang and priority vote on JobStarving: those of the first tier with either."""
    for tier in tiers:
        voters = {plugin.name for plugin in tier if plugin.name in ("gang", "priority") and plugin.enabled("enableJobStarving")}
        if voters:
            return "gang" in voters, "priority" in voters
    return False, False


def _spared_lines(spared: dict[str, str]) -> tuple[str, ...]:
    lines = [f"spared {task}: {why}" for task, why in sorted(spared.items())]
    if len(lines) > SPARED_SHOWN:
        lines = [*lines[:SPARED_SHOWN], f"and {len(lines) - SPARED_SHOWN} more candidates spared"]
    return tuple(lines)
