"""The YuniKorn cycle as it was before the backlog was kept between cycles (preemptd 81d46e5):
every pending task visited, in a queue order rebuilt each cycle. `test_yunikorn_backlog.py` runs
it beside the model's own cycle, which must make exactly the same decisions; nothing else
uses it."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator

from preemptd.projections import NodeState, PartitionState, TaskState
from preemptd.scheduling._model import Cycle
from preemptd.scheduling.yunikorn._cycle import _emit_allocated, _emit_preempted, _land_reservations, _Pace
from preemptd.scheduling.yunikorn._daemonset import plan_for_required_node
from preemptd.scheduling.yunikorn._ordering import share
from preemptd.scheduling.yunikorn._placement import Placement, queue_blocker
from preemptd.scheduling.yunikorn._preemption import frees_unclaimed_room, plan_for_guarantee
from preemptd.scheduling.yunikorn._quota import enforce_quotas
from preemptd.scheduling.yunikorn._victims import Plan, Refusal


def schedule(cycle: Cycle) -> None:
    p = cycle.partition
    enforce_quotas(cycle)
    if not p.pending_count:
        return
    _land_reservations(cycle)
    if _allocate(cycle):
        _preempt(cycle)


def _task_key(p: PartitionState, task: TaskState) -> tuple[int, int, int, int]:
    app = p.apps[task.app]
    return (-app.priority, app.seq, -task.priority, task.seq)


class QueueOrder:
    """Yields pending tasks in scheduling order; `allocated(task)` re-ranks the task's queues.

    A queue is live while some leaf below it has tasks left to try. Each live queue has one
    current entry in its parent's heap; older entries are skipped by their version number.
    """

    def __init__(self, p: PartitionState) -> None:
        self._p = p
        self._tasks: dict[str, deque[TaskState]] = {}
        pending: dict[str, list[TaskState]] = {}
        for task in p.tasks.values():  # every pending task, read each cycle
            if task.status == "pending" and task.reserved_node is None:
                pending.setdefault(task.queue, []).append(task)
        for queue in p.queues.values():
            if queue.leaf and queue.waiting:
                waiting = pending.get(queue.path, [])
                if waiting:
                    waiting.sort(key=lambda task: _task_key(p, task))
                    self._tasks[queue.path] = deque(waiting)
        self._priority = self._queue_priorities()
        self._live: set[str] = set()
        self._live_children: dict[str, int] = {}
        self._version: dict[str, int] = {}
        self._heaps: dict[str, list[tuple[int, float, str, int]]] = {}
        for leaf in self._tasks:
            self._make_live(p.queues[leaf].lineage)

    def _queue_priorities(self) -> dict[str, int]:
        """Each active queue's priority: the best task priority below it, offsets applied."""
        priority: dict[str, int] = {}
        for leaf, tasks in self._tasks.items():
            best = max(task.priority for task in tasks)
            for path in self._p.queues[leaf].lineage:
                props = self._p.queues[path].props
                best = props.priority_offset if props.priority_policy == "fence" else best + props.priority_offset
                if path in priority and priority[path] >= best:
                    break
                priority[path] = best
        return priority

    def _make_live(self, lineage: list[str]) -> None:
        for path, parent in zip(lineage, [*lineage[1:], None]):
            if path in self._live:
                return
            self._live.add(path)
            if parent is not None:
                self._live_children[parent] = self._live_children.get(parent, 0) + 1
                self._push(path, parent)

    def _push(self, path: str, parent: str) -> None:
        version = self._version[path] = self._version.get(path, 0) + 1
        key = (-self._priority[path], share(self._p.queues[path], self._p.capacity), path, version)
        heapq.heappush(self._heaps.setdefault(parent, []), key)

    def _next_leaf(self) -> str | None:
        root = next(iter(self._p.queues))
        if root not in self._live:
            return None
        path = root
        while path not in self._tasks:
            heap = self._heaps[path]
            while heap[0][2] not in self._live or self._version[heap[0][2]] != heap[0][3]:
                heapq.heappop(heap)
            path = heap[0][2]
        return path

    def _retire(self, leaf: str) -> None:
        """A leaf with nothing left to try stops being live, and so do parents left empty."""
        del self._tasks[leaf]
        lineage = self._p.queues[leaf].lineage
        for path, parent in zip(lineage, [*lineage[1:], None]):
            self._live.discard(path)
            if parent is None:
                return
            self._live_children[parent] -= 1
            if self._live_children[parent]:
                return

    def __iter__(self) -> Iterator[TaskState]:
        while (leaf := self._next_leaf()) is not None:
            tasks = self._tasks[leaf]
            task = tasks.popleft()
            if not tasks:
                self._retire(leaf)
            yield task

    def allocated(self, task: TaskState) -> None:
        """The task was placed: its queues' shares grew, so rank the live ones again."""
        lineage = self._p.queues[task.queue].lineage
        for path, parent in zip(lineage, lineage[1:]):
            if path in self._live:
                self._push(path, parent)


def _allocate(cycle: Cycle) -> bool:
    """Place every pending task that fits, in queue order; False if the cycle's budget for
    placements stopped it (the tasks left are tried first the next cycle)."""
    p = cycle.partition
    if not cycle.may_place():
        return False
    order, placement = QueueOrder(p), Placement(p, [p.nodes[name] for name in sorted(p.nodes) if p.nodes[name].schedulable])
    for task in order:
        node = placement.find(task) if queue_blocker(p, task) is None else None
        if node is None:
            continue
        where = f"required node {node.name} has room" if task.required_node else f"{node.name} is the first node by name with room"
        _emit_allocated(cycle, task, node.name, f"{where}; {task.queue} and its parents stay within their max")
        order.allocated(task)
        if not cycle.may_place():
            return False
    return True


def _preempt(cycle: Cycle) -> None:
    """Try preemption for the tasks still pending, in queue order; a queue that got room by
    preemption is ranked again, as after an allocation, so equals take turns."""
    p = cycle.partition
    pace = _Pace(p.settings, p.capacity)
    refusals: dict[_Situation, Refusal] = {}
    draining = [node for node in p.nodes.values() if node.preempting and frees_unclaimed_room(node)]
    order = QueueOrder(p)
    for task in order:
        key = _situation(p, task, cycle.now)
        outcome = refusals.get(key) or _plan(p, task, cycle.now, draining)
        if isinstance(outcome, Plan):
            if not cycle.may_preempt() or not pace.allows(outcome.victims):
                return
            pace.spend(outcome.victims)
            _emit_preempted(cycle, task, outcome)
            if frees_unclaimed_room(outcome.node):
                draining.append(outcome.node)
            order.allocated(task)
        elif not outcome.quiet:
            refusals[key] = outcome
            cycle.block(task, app=task.app, queue=task.queue, reasons=outcome.reasons, explanation=outcome.details)


#: The queue, the ask, the priority and policy, the required node, its application (for a
#: required-node task) and whether its preemption.delay has passed.
_Situation = tuple[str, tuple[tuple[str, int], ...], int, bool, str | None, str | None, bool]


def _situation(p: PartitionState, task: TaskState, now: int) -> _Situation:
    """Tasks in the same situation get the same refusal within a cycle: same queue, ask,
    priority and policy, and on the same side of their preemption.delay."""
    app = task.app if task.required_node else None
    waited = now >= task.submitted_at + p.queues[task.queue].props.preemption_delay
    return (task.queue, tuple(task.resources.items()), task.priority, task.may_preempt, task.required_node, app, waited)


def _plan(p: PartitionState, task: TaskState, now: int, draining: list[NodeState]) -> Plan | Refusal:
    if task.required_node is None:
        return plan_for_guarantee(p, task, now, draining)
    return plan_for_required_node(p, task)


_Situation = tuple[str, tuple[tuple[str, int], ...], int, bool, str | None, str | None, bool]


def _situation(p: PartitionState, task: TaskState, now: int) -> _Situation:
    app = task.app if task.required_node else None
    waited = now >= task.submitted_at + p.queues[task.queue].props.preemption_delay
    return (task.queue, tuple(task.resources.items()), task.priority, task.may_preempt, task.required_node, app, waited)


def _plan(p: PartitionState, task: TaskState, now: int, draining: list[NodeState]) -> Plan | Refusal:
    if task.required_node is None:
        return plan_for_guarantee(p, task, now, draining)
    return plan_for_required_node(p, task)
