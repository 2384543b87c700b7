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

from preemptd.events import Allocated, Preempted, Resources, Unreserved, Victim
from preemptd.projections import NodeState, PartitionState, TaskState

from .._model import Cycle
from ._config import PreemptionSettings
from ._daemonset import plan_for_required_node
from ._ordering import QueueOrder
from ._placement import Placement, fits_node, queue_blocker
from ._preemption import frees_unclaimed_room, plan_for_guarantee
from ._quota import enforce_quotas, next_enforcement
from ._victims import Plan, Refusal

__all__ = ["next_wakeup", "schedule"]


def schedule(cycle: Cycle) -> None:
    p = cycle.partition
    enforce_quotas(cycle)
    if not p.pending_count:
        return
    _land_reservations(cycle)
    if _allocate(cycle):
        _preempt(cycle)


def next_wakeup(p: PartitionState, now: int) -> int | None:
    """The earliest moment after `now` at which a pending task's preemption.delay runs out, or a
    queue above its max reaches the end of its quota.preemption.delay."""
    times = [
        task.submitted_at + p.queues[task.queue].props.preemption_delay
        for queue in p.queues.values()
        for task in map(p.tasks.__getitem__, queue.waiting)
        if task.reserved_node is None
    ]
    delays = min((t for t in times if t > now), default=None)
    quotas = next_enforcement(p, now)
    return min((t for t in (delays, quotas) if t is not None), default=None)


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
    placements stopped it (the tasks left are tried first the next cycle)."""
    p = cycle.partition
    if not cycle.may_place():
        return False
    order, placement = QueueOrder(p), Placement(p)
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
