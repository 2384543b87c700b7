"""The YuniKorn model's cycle: hierarchical queues, allocation by queue priority and fairness,
and preemption by the seven laws (`_preemption`) or on a required node (`_daemonset`).

A cycle has four phases:

0. Quotas: a queue above a lowered max sheds running tasks once its quota.preemption.delay has
   run out (`_quota`).
1. Reservations land: a preemptor whose reserved node now has room is allocated there.
2. Allocation: pending tasks in queue order (`_ordering`) go to the first node with room,
   within every queue max up the tree (`_placement`).
3. Preemption: for each task left unplaced, in the same order, find victims (required-node
   tasks on their node, the others for their queue's guarantee), within the cycle's pace budget.
   A task that may not preempt gets a `decision.blocked` when its reasons change, within the
   cycle's budget for them (`Cycle.block`: the rest in the next cycles), so that a large backlog
   does not flood the log and the stream at once.

A cycle's work is bounded, whatever the pace settings allow, by the model's `Budget` (the
default: 20,000 placements, landed reservations counted, and 100 preemptions): allocation stops
when `cycle.may_place()` says no (then no preemption: the tasks left may fit the next cycle),
and preemption when `cycle.may_preempt()` does; the rest come in the next cycles.
"""

from __future__ import annotations

import heapq
import itertools

from preemptd.events import Allocated, Preempted, Resources, Unreserved, Victim
from preemptd.projections import NodeState, PartitionState, TaskState

from .._model import Cycle, bounded
from ._backlog import Backlog, Group, GroupKey, Kind, Leaf, group_key, kind_of
from ._config import PreemptionSettings, config_of
from ._daemonset import plan_for_required_node
from ._kept import backlog, first_fit, nodes_by_name
from ._ordering import QueueOrder
from ._placement import Placement, fits_node, queue_blocker
from ._preemption import frees_unclaimed_room, plan_for_guarantee, scope_refusal
from ._quota import enforce_quotas, next_enforcement
from ._victims import Plan, Refusal

__all__ = ["next_wakeup", "schedule"]


def schedule(cycle: Cycle) -> None:
    p = cycle.partition
    enforce_quotas(cycle)
    if not p.pending_count:
        return
    _land_reservations(cycle)
    if _allocate(cycle) and p.pending_count:
        _preempt(cycle)


def next_wakeup(p: PartitionState, now: int) -> int | None:
    """The earliest moment after `now` at which a waiting task's preemption.delay runs out (kept
    per leaf as tasks arrive and leave: `_backlog`), or a queue above its max reaches the end of
    its quota.preemption.delay."""
    times = (backlog(p, now).next_delay(now), next_enforcement(p, now))
    return min((t for t in times if t is not None), default=None)


# 1. reservations -----------------------------------------------------------------------------


def _land_reservations(cycle: Cycle) -> None:
    p = cycle.partition
    reserved = [p.tasks[task_id] for node in p.nodes.values() for task_id in node.reservations]
    for task in reserved:
        assert task.reserved_node is not None, task.id  # listed from a node's reservations
        node = p.nodes[task.reserved_node]
        if not node.schedulable:
            reason = f"{node.name} is no longer schedulable; the task is pending again"
        elif fits_node(p, node, task) and queue_blocker(p, task) is None:
            _emit_allocated(cycle, task, node.name, f"{node.name} was reserved for the task and now has room for it")
            continue
        elif not task.victims:
            reason = f"its victims are gone but {node.name} still lacks room; the task is pending again"
        else:
            continue
        cycle.emit(Unreserved, task=task.id, node=node.name, reason=reason)


# 2. allocation -------------------------------------------------------------------------------


def _allocate(cycle: Cycle) -> bool:
    """Place every pending task that fits, in queue order; False if the cycle's budget for
    placements stopped it (the tasks left are tried first the next cycle).

    Tasks are visited by group (`_backlog`): once a task does not fit (no node has room for its
    ask, or a queue max on its lineage), no later task of its ask and required node in its leaf
    fits this phase either (room only shrinks as tasks are placed), so the rest of its kind is
    passed over whole, and a leaf where nothing fits is left at once."""
    p = cycle.partition
    resume = cycle.phase("allocate")
    if not cycle.can_place():
        return False
    waiting = backlog(p, cycle.now, fresh=True)
    order, placement = QueueOrder(p, waiting.priorities.of, waiting.allocation.live(waiting.leaves)), Placement(p, nodes_by_name(p), first_fit(p))
    cursor: dict[str, int] = {}  # per leaf, the order key of the last task placed
    placed_from: dict[str, set[GroupKey]] = {}  # per leaf, the groups it placed from (their first tasks are behind the cursor)
    failed: dict[str, dict[Kind, str | None]] = {}  # per leaf, the asks (and required nodes) that fit nowhere now: the max in the way, if one is
    path = order.rotated(resume) if resume is not None else order.next_leaf()
    if path is not None:
        cycle.begins_at(path)
    while path is not None:
        if not cycle.step():
            return False
        found = _next_to_place(
            p, waiting, waiting.leaves[path], cursor.get(path, -1), placed_from.setdefault(path, set()), failed.setdefault(path, {}), placement
        )
        if found is None:
            order.retire(path)
            in_the_way = failed[path].values()
            if path not in cursor and all(in_the_way):  # every ask over a max: nothing to do here until a max's queue changes
                waiting.allocation.settle(path, tuple(sorted({queue for queue in in_the_way if queue is not None})))
        else:
            key, task, node = found
            where = f"required node {node.name} has room" if task.required_node else f"{node.name} is the first node by name with room"
            _emit_allocated(cycle, task, node.name, f"{where}; {task.queue} and its parents stay within their max")
            cursor[path] = key
            order.allocated(path)
            if not cycle.can_place():
                return False
        path = order.next_leaf()
    return True


def _next_to_place(
    p: PartitionState, waiting: Backlog, leaf: Leaf, cursor: int, placed_from: set[GroupKey], failed: dict[Kind, str | None], placement: Placement
) -> tuple[int, TaskState, NodeState] | None:
    """The leaf's first task after `cursor`, in order, that fits a node and its queues, with its
    order key; the kinds of task that do not are marked `failed`, with the queue whose max is in
    the way (None: no node has room). The first task after the cursor is the first of a group
    whose first task is after it (`Leaf.heads`, by kind), of a group placed from already, or of
    the leaf's fresh tasks (not filed yet)."""
    while True:
        fresh = leaf.first_fresh(cursor, failed)
        found: tuple[int, TaskState, Group | None] | None = (*fresh, None) if fresh is not None else None
        for kind, heads in leaf.heads.items():
            if kind in failed:
                continue
            index = heads.bisect_left((cursor + 1,))
            if index < len(heads):
                first, key = heads[index]
                if found is None or first < found[0]:
                    group = leaf.groups[key]
                    found = (first, group.first_after(cursor), group)  # type: ignore[assignment]  # a group's first task is after the cursor
        for key in placed_from:
            group = leaf.groups[key]
            task = group.first_after(cursor) if _kind(group) not in failed else None
            if task is not None and (found is None or waiting.order(task) < found[0]):
                found = (waiting.order(task), task, group)
        if found is None:
            return None
        key, task, placed_group = found
        blocker = queue_blocker(p, task)
        node = placement.find(task) if blocker is None else None
        if node is not None:
            if placed_group is not None:
                placed_from.add(placed_group.key)
            return key, task, node
        failed[kind_of(task)] = blocker[0].path if blocker is not None else None


def _kind(group: Group) -> Kind:
    """What decides whether a group's tasks fit: their ask and required node."""
    shape, _, _, required_node, _ = group.key
    return shape, required_node


def _emit_allocated(cycle: Cycle, task: TaskState, node: str, why: str) -> None:
    cycle.emit(Allocated, task=task.id, app=task.app, queue=task.queue, node=node, resources=Resources(task.resources), explanation=(why,))


# 3. preemption -------------------------------------------------------------------------------


class _Pace:
    """Pace control: victims per cycle, and their share of the cluster per resource.
    The first preemption of a cycle is always allowed, so a large ask is never starved.
    (The cycle's own bound on preemptions, whatever the pace allows, is `cycle.may_preempt()`.)"""

    def __init__(self, settings: PreemptionSettings, capacity: dict[str, int]) -> None:
        self.settings, self.capacity = settings, capacity
        self.victims = 0
        self.freed: dict[str, int] = {}

    def allows(self, victims: list[TaskState]) -> bool:
        if not self.victims:
            return True
        if self.victims + len(victims) > self.settings.max_victims_per_cycle:
            return False
        share = self.settings.max_share_per_cycle
        for victim in victims:
            for name, amount in victim.resources.items():
                if self.freed.get(name, 0) + amount > share * self.capacity.get(name, 0):
                    return False
        return True

    def spend(self, victims: list[TaskState]) -> None:
        self.victims += len(victims)
        for victim in victims:
            for name, amount in victim.resources.items():
                self.freed[name] = self.freed.get(name, 0) + amount


def _preempt(cycle: Cycle) -> None:
    """Try preemption for the tasks still pending, in queue order; a queue that got room by
    preemption is ranked again, as after an allocation, so equals take turns.

    Tasks in the same situation (`_Situation`: a leaf's group, on the same side of its
    preemption.delay) get the same refusal within a cycle, found once; then only those not
    told it yet are visited (to be told, while the cycle's budget for it lasts). A situation
    found to wait quietly (its delay, or victims in flight that will make room) waits alike
    until a preemption changes the state. So the tasks visited are those that could make or
    say something, in the order every task would be visited."""
    p = cycle.partition
    resume = cycle.phase("preempt")
    pace = _Pace(config_of(p), p.capacity)
    draining = [node for node in p.nodes.values() if node.preempting and frees_unclaimed_room(node)]
    waiting = backlog(p, cycle.now)
    order = QueueOrder(p, waiting.priorities.of, waiting.preemption.live(waiting.leaves))
    visits = _Visits(cycle, waiting)
    path = order.rotated(resume) if resume is not None else order.next_leaf()
    if path is not None:
        cycle.begins_at(path)
    while path is not None:
        found = visits.next(path)
        if found is None:
            order.retire(path)
            if visits.settled_on(path) == ():  # every task there told a refusal of the configuration's
                waiting.preemption.settle(path, ())
            path = order.next_leaf()
            continue
        task, situation = found
        known = visits.outcomes.get(situation)
        if isinstance(known, Refusal):
            outcome: Plan | Refusal = known
        elif not cycle.step():  # a plan is the step to pay for, before it is made
            return
        else:
            outcome = _plan(p, task, cycle.now, draining)
        if isinstance(outcome, Plan):
            if not cycle.can_preempt() or not pace.allows(outcome.victims):
                return
            pace.spend(outcome.victims)
            _emit_preempted(cycle, task, outcome)
            if frees_unclaimed_room(outcome.node):
                draining.append(outcome.node)
            order.allocated(path)
            visits.plans += 1
        elif outcome.quiet:
            visits.outcomes[situation] = visits.plans
        else:
            visits.outcomes[situation] = outcome
            cycle.block(task, app=task.app, queue=task.queue, reasons=outcome.reasons, explanation=outcome.details, stepped=not isinstance(known, Refusal))
        path = order.next_leaf()


#: A leaf, its group of alike tasks, and whether their preemption.delay has passed.
_Situation = tuple[str, GroupKey, bool]


class _Visits:
    """Which task of a leaf the preemption phase visits next: the first, in order after the
    last one visited, that could make or say something (see `_preempt`).

    Per leaf, each situation stands in a heap at (at most) the key of its next such task: as
    the cursor moves and refusals are found and told, a situation's next task only moves later,
    so the heap's head, checked again, is the first (a leaf of G priorities costs G log G, not
    G^2). A situation that waits quietly leaves the heap until a preemption is made. A leaf
    whose every task was told the refusal its class gets from its scope, which no priority
    changes (`Leaf.told`), is passed over whole."""

    def __init__(self, cycle: Cycle, waiting: Backlog) -> None:
        self.cycle, self.p, self.waiting = cycle, cycle.partition, waiting
        self.outcomes: dict[_Situation, Refusal | int] = {}  # a refusal found, or when a quiet wait was (in plans made before it)
        self.plans = 0
        self.cursor: dict[str, int] = {}  # per leaf, the order key of the last task visited
        self.heaps: dict[str, list[tuple[int, int, _Situation]]] = {}  # per leaf: situations at (at most) their next task's key
        self.quiet: dict[str, list[_Situation]] = {}  # per leaf: situations out of the heap until the next preemption
        self.heap_plans: dict[str, int] = {}  # per leaf: the preemptions made when its quiet ones were last let back
        self.last: dict[str, _Situation] = {}  # per leaf: the situation of the task visited last, back in the heap at the next visit
        self.alike: dict[str, tuple[str, ...]] = {}  # leaves passed over whole: the queues their refusals depend on
        self.pushed = itertools.count()
        settings = config_of(self.p)
        self.enabled = settings.enabled

    def settled_on(self, path: str) -> tuple[str, ...] | None:
        """The queues the refusals told in leaf `path` depend on, when every task waiting there
        was told one that holds until their usage changes (`Refusal.depends_on`); else None."""
        if path in self.alike:
            return self.alike[path]
        leaf = self.waiting.leaves[path]
        if leaf.young or not self.cycle.telling():
            return None
        on: set[str] = set()
        for key in leaf.groups:
            outcome = self.outcomes.get((path, key, True))
            if not isinstance(outcome, Refusal) or outcome.depends_on is None:
                return None
            on.update(outcome.depends_on)
        return tuple(sorted(on))

    def next(self, path: str) -> tuple[TaskState, _Situation] | None:
        leaf, order = self.waiting.leaves[path], self.waiting.order
        heap = self.heaps.get(path)
        if heap is None:
            heap = self.heaps[path] = []
            self.heap_plans[path] = self.plans
            alike = self._told_alike(path, leaf)
            if alike is not None:
                self.alike[path] = alike
                return None
            for group in leaf.groups.values():
                for situation in self._situations(path, group):
                    self._push(heap, path, leaf, situation)
        else:
            last = self.last.pop(path, None)
            if last is not None:
                self._push(heap, path, leaf, last)
            if self.heap_plans[path] != self.plans:  # a preemption since: what waited quietly may act now
                self.heap_plans[path] = self.plans
                for situation in self.quiet.pop(path, ()):
                    self._push(heap, path, leaf, situation)
        while heap:
            key, _, situation = heap[0]
            task = self._candidate(path, leaf, situation)
            if task is None:
                heapq.heappop(heap)
            elif (now_key := order(task)) != key:
                heapq.heapreplace(heap, (now_key, next(self.pushed), situation))
            else:
                heapq.heappop(heap)
                self.cursor[path] = key
                self.last[path] = situation
                return task, situation
        return None

    def _situations(self, path: str, group: Group) -> list[_Situation]:
        _, _, may_preempt, required_node, _ = group.key
        if required_node is None and self.enabled and may_preempt:
            return [(path, group.key, True)]  # within its delay, such a task waits quietly (`_preemption._preconditions`)
        return [(path, group.key, True), (path, group.key, False)]

    def _push(self, heap: list[tuple[int, int, _Situation]], path: str, leaf: Leaf, situation: _Situation) -> None:
        task = self._candidate(path, leaf, situation)
        if task is not None:
            heapq.heappush(heap, (self.waiting.order(task), next(self.pushed), situation))

    def _candidate(self, path: str, leaf: Leaf, situation: _Situation) -> TaskState | None:
        """The situation's next task after the leaf's cursor that could make or say something;
        None if none (a situation waiting quietly is set apart until the next preemption)."""
        _, key, waited = situation
        group = leaf.groups[key]
        cursor, order = self.cursor.get(path, -1), self.waiting.order
        outcome = self.outcomes.get(situation)
        if outcome == self.plans and not isinstance(outcome, Refusal):
            self.quiet.setdefault(path, []).append(situation)
            return None
        told = bounded(outcome.reasons) if isinstance(outcome, Refusal) else None
        if told is not None and not self.cycle.telling():
            return None
        if waited:
            if group.young == group.size:
                return None
            if not group.young:
                return group.first_after(cursor, told)
            delay, now = self.p.queues[path].props.preemption_delay, self.cycle.now
            return next((t for t in group.after(cursor, told) if now >= t.submitted_at + delay), None)
        alike = [t for t in leaf.young.values() if group_key(t) == key and (told is None or t.blocked != told) and order(t) > cursor]
        return min(alike, key=order, default=None)

    def _told_alike(self, path: str, leaf: Leaf) -> tuple[str, ...] | None:
        """When every task waiting in the leaf was told the refusal its class gets from its
        preconditions or its scope (`scope_refusal`, alike whatever a task's priority): the
        queues those refusals depend on; else None."""
        if leaf.young or not self.cycle.telling():
            return None
        on: set[str] = set()
        for alike, keys in leaf.classes.items():
            _, _, required_node, _ = alike
            if required_node is not None:
                return None
            task = leaf.groups[next(iter(keys))].first_after(-1)
            refusal = scope_refusal(self.p, task, self.cycle.now) if task is not None else None
            if refusal is None or refusal.quiet or refusal.depends_on is None:
                return None
            if leaf.told[alike].get(bounded(refusal.reasons), 0) != leaf.class_size(alike):
                return None
            on.update(refusal.depends_on)
        return tuple(sorted(on))


def _plan(p: PartitionState, task: TaskState, now: int, draining: list[NodeState]) -> Plan | Refusal:
    if task.required_node is None:
        return plan_for_guarantee(p, task, now, draining)
    return plan_for_required_node(p, task)


def _emit_preempted(cycle: Cycle, task: TaskState, plan: Plan) -> None:
    victims = tuple(_victim(victim, plan.whys[victim.id]) for victim in plan.victims)
    cycle.emit(
        Preempted,
        preemptor=task.id,
        app=task.app,
        queue=task.queue,
        node=plan.node.name,
        resources=Resources(task.resources),
        victims=victims,
        model=cycle.partition.model,
        reason=plan.reason,
        explanation=tuple(plan.explanation),
    )


def _victim(task: TaskState, why: str) -> Victim:
    assert task.node is not None, task.id  # a victim runs on a node
    return Victim(task=task.id, app=task.app, queue=task.queue, node=task.node, priority=task.priority, resources=Resources(task.resources), why=why)
