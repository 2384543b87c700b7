"""Nodes as Volcano's actions see them, with what each queue and job holds, and the statement
that changes them as a unit.

A node has what it can hold (its capacity; `pods`, when the shim sends it, is its pod count:
every task takes one slot) and what is *used* by the tasks bound there. Victims in flight are
*releasing*; preemptors waiting for them are *pipelined* on the node. A task fits a node in the
future when its request is within idle (capacity less used) plus releasing less pipelined
(Volcano's FutureIdle), and now when it fits both idle and the future: a preemptor waits for its
room across cycles here (Volcano forgets a pipelined task at the end of a session), so what is
promised to it is not given to another task. A node has none of a resource it does not list,
as Volcano's predicates see it (a GPU task does not fit a node without GPUs), except pods: a
node published without a pod count is not limited in pods.

Beside the nodes, the session keeps what each queue and each job *holds* (its running tasks,
those placed and those pipelined; not victims in flight; pod slots are a node's, not a queue's)
and how many tasks of each job are *ready* (running or placed) and *pipelined*: the queue rules,
the gang vote and drf read them as they change. A job's are read from the job, and a queue's
from the fold's aggregates, the first time a session asks (`Lazily`): a session pays for the
jobs and queues it looks at, not for every one.

A `Statement` records placements, evictions and pipelined preemptors on the nodes as they are
tried, and is committed (kept) or discarded (every change undone, last first), as Volcano's
statements are: a gang job's tasks are placed together or not at all, and a preemption whose
job does not reach its gang evicts nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from preemptd.projections import PartitionState, add, subtract

from ._jobs import POD_SLOT, Job, Task

__all__ = ["Lazily", "Nodes", "Statement", "per_job", "queue_held", "queues_held"]

Amounts = dict[str, int]
V = TypeVar("V")


class Lazily(dict[str, V], Generic[V]):
    """A value per name, made by `read` the first time it is asked for, then kept: what a
    session changes is its own copy, what it was read from is never changed."""

    def __init__(self, read: Callable[[str], V]) -> None:
        super().__init__()
        self._read = read

    def __missing__(self, name: str) -> V:
        value = self[name] = self._read(name)
        return value

    def get(self, name: str, default: object = None) -> V:  # every name has a value
        return self[name]


def per_job(jobs: Mapping[str, Job], read: Callable[[Job], V], absent: Callable[[], V]) -> Lazily[V]:
    """A value per job id, read from the job (`absent()` for an id no job has)."""
    return Lazily(lambda job_id: read(job) if (job := jobs.get(job_id)) is not None else absent())


@dataclass
class Nodes:
    capacity: dict[str, Amounts]
    used: dict[str, Amounts]
    releasing: dict[str, Amounts] = field(default_factory=dict)
    pipelined: dict[str, Amounts] = field(default_factory=dict)
    held: dict[str, Amounts] = field(default_factory=dict)  # per queue
    job_held: dict[str, Amounts] = field(default_factory=dict)  # per job, as drf counts it
    ready: dict[str, int] = field(default_factory=dict)  # per job
    waiting: dict[str, int] = field(default_factory=dict)  # per job: its pipelined tasks

    @classmethod
    def of(cls, p: PartitionState, jobs: Mapping[str, Job] | None = None) -> Nodes:
        """The schedulable nodes of `p`, by name, with what their tasks use (a pod slot each),
        and what the queues and `jobs` (by id) hold (each job's counts are its own, kept with it,
        read when first asked for)."""
        nodes = cls({}, {})
        for name in sorted(p.nodes):
            node = p.nodes[name]
            if not node.schedulable:
                continue
            nodes.capacity[name] = dict(node.capacity)
            nodes.used[name] = _nonzero({**node.allocated, POD_SLOT: len(node.tasks)})
            if node.preempting:
                nodes.releasing[name] = _nonzero({**node.preempting, POD_SLOT: sum(1 for t in node.tasks if p.tasks[t].status == "preempting")})
            nodes.pipelined[name] = _nonzero({**node.reserved, POD_SLOT: len(node.reservations)})
        nodes.held = Lazily(lambda name: queue_held(p, name))
        jobs = jobs if jobs is not None else {}
        nodes.ready = per_job(jobs, lambda job: job.running, int)
        nodes.waiting = per_job(jobs, lambda job: job.pipelined, int)
        nodes.job_held = per_job(jobs, lambda job: dict(job.held), dict)
        return nodes

    def short_now(self, node: str, request: Mapping[str, int]) -> list[str]:
        """The resources `request` does not find idle on `node` (none: it fits now)."""
        return self._short(node, request, future=False)

    def short_in_future(self, node: str, request: Mapping[str, int]) -> list[str]:
        """The same, counting what is being released and what waits for it (FutureIdle)."""
        return self._short(node, request, future=True)

    def _short(self, node: str, request: Mapping[str, int], *, future: bool) -> list[str]:
        capacity, used = self.capacity[node], self.used[node]
        releasing, pipelined = self.releasing.get(node, {}), self.pipelined.get(node, {})
        short = []
        for name, amount in request.items():
            if not amount or (name == POD_SLOT and name not in capacity):
                continue
            if name not in capacity:
                short.append(name)
                continue
            idle = capacity[name] - used.get(name, 0)
            future_idle = idle + releasing.get(name, 0) - pipelined.get(name, 0)
            if amount > (future_idle if future else min(idle, future_idle)):
                short.append(name)
        return short

    def first_fitting(self, request: Mapping[str, int], nodes: Iterable[str] | None = None) -> str | None:
        """The first node, by name, where `request` fits now."""
        return next((n for n in (self.capacity if nodes is None else nodes) if not self.short_now(n, request)), None)


def queues_held(p: PartitionState) -> dict[str, Amounts]:
    """What each leaf queue holds (`queue_held`), those that hold anything."""
    return {name: queue_held(p, name) for name, queue in p.queues.items() if queue.leaf and (queue.allocated or queue.reserved)}


def queue_held(p: PartitionState, name: str) -> Amounts:
    """What leaf queue `name` holds as a session counts it (its running tasks and its preemptors
    pipelined, not its victims in flight), from the fold's aggregates: no pass over the tasks."""
    queue = p.queues.get(name)
    if queue is None or not queue.leaf:
        return {}
    amounts = dict(queue.allocated)
    subtract(amounts, queue.preempting)
    add(amounts, queue.reserved)
    return _nonzero(amounts)


def _add(amounts: Amounts, request: Mapping[str, int], sign: int) -> None:
    """Add (or take away) `request`; amounts that come to 0 are dropped, so that what is
    undone compares equal to what was."""
    for name, amount in request.items():
        total = amounts.get(name, 0) + sign * amount
        if total:
            amounts[name] = total
        else:
            amounts.pop(name, None)


def _nonzero(amounts: Mapping[str, int]) -> Amounts:
    return {name: amount for name, amount in amounts.items() if amount}


class Statement:
    """Placements tried on `nodes`, kept by `commit` or undone by `discard`."""

    def __init__(self, nodes: Nodes) -> None:
        self.nodes = nodes
        self.placed: list[tuple[Task, str]] = []
        self.evicted: list[Task] = []
        self.pipelined: list[tuple[Task, str]] = []

    def allocate(self, task: Task, node: str) -> None:
        self._change("used", task, node, +1)
        self.placed.append((task, node))

    def evict(self, victim: Task) -> None:
        """`victim` leaves its node: what it holds is releasing."""
        assert victim.node is not None
        self._change("releasing", victim, victim.node, +1)
        self.evicted.append(victim)

    def pipeline(self, task: Task, node: str) -> None:
        """`task` waits on `node` for what is being released there."""
        self._change("pipelined", task, node, +1)
        self.pipelined.append((task, node))

    def land(self, task: Task, node: str) -> bool:
        """Bind `task`, pipelined on `node` in an earlier session, there if it fits now."""
        self.unpipeline(task, node)
        if self.nodes.short_now(node, task.resources):
            self._change("pipelined", task, node, +1)
            return False
        self.allocate(task, node)
        return True

    def unpipeline(self, task: Task, node: str) -> None:
        """`task`, pipelined on `node` in an earlier session, waits there no more."""
        self._change("pipelined", task, node, -1)

    def absorb(self, attempt: Statement) -> None:
        """Take over what `attempt` (on the same nodes) changed, to keep or undo with the rest."""
        self.placed += attempt.placed
        self.evicted += attempt.evicted
        self.pipelined += attempt.pipelined
        attempt.placed, attempt.evicted, attempt.pipelined = [], [], []

    def discard(self) -> None:
        for task, node in reversed(self.pipelined):
            self._change("pipelined", task, node, -1)
        for victim in reversed(self.evicted):
            self._change("releasing", victim, victim.node or "", -1)
        for task, node in reversed(self.placed):
            self._change("used", task, node, -1)
        self.placed, self.evicted, self.pipelined = [], [], []

    def _change(self, what: str, task: Task, node: str, sign: int) -> None:
        nodes = self.nodes
        on_nodes = getattr(nodes, what)
        _add(on_nodes.setdefault(node, {}), task.resources, sign)
        if not on_nodes[node] and what != "used":  # undone: as it was
            del on_nodes[node]
        held = -sign if what == "releasing" else sign  # a victim's queue holds it no more
        _add(nodes.held[task.queue], task.queue_resources, held)
        _add(nodes.job_held[task.job], task.queue_resources, held)
        counts = nodes.waiting if what == "pipelined" else nodes.ready
        counts[task.job] = counts.get(task.job, 0) + held

    def commit(self) -> list[tuple[Task, str]]:
        """Keep every change; the placements made (evictions and pipelines stay in `evicted`
        and `pipelined` for the caller to decide on)."""
        placed, self.placed = self.placed, []
        return placed
