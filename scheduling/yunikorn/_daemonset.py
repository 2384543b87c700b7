"""YuniKorn's required-node (DaemonSet) preemption: a task that must run on one node and does
not fit it preempts there, at once.

- No delay, fence or guarantee checks, and not gated by the partition's `preemption.enabled`;
  a task whose preemption policy is `Never` still may not preempt, and one that its queue's max
  (not the node) keeps out is refused: preemption on the node cannot help it.
- Victims run on the required node and share a resource with the task; never other
  required-node tasks, tasks of higher priority (plain priorities, no queue offsets: law 6) or
  the task's own application's (law 3, which YuniKorn's code does not apply here).
- Law 1: ordinary tasks first, then originators, then opted-out tasks and tasks in queues with
  `preemption.policy: disabled` (policies are broken only as a last resort); within a resort,
  lowest priority, then youngest. The victims are the first that cover what the node lacks,
  trimmed to a minimal set.
- Other tasks' reservations on the node are respected: their claimed room is not the task's.

Queue preemption by the seven laws is `_preemption`; what both share is `_victims`.
"""

from __future__ import annotations

from collections import Counter

from preemptd.projections import NodeState, PartitionState, TaskState, positive, shares_type

from .._explain import amounts
from ._placement import queue_blocker
from ._victims import (
    OPTED_OUT,
    ORDINARY,
    ORIGINATOR,
    RESORT_WHY,
    Candidate,
    Plan,
    Refusal,
    exclusions,
    minimise,
    node_available,
    resort_of,
    too_small,
    victim_order,
)

__all__ = ["plan_for_required_node"]


def plan_for_required_node(p: PartitionState, task: TaskState) -> Plan | Refusal:
    """Make room on the one node a DaemonSet task must run on: no delay, fence or guarantee
    checks; never other required-node tasks, tasks of higher priority or its own application;
    opted-out tasks, originators and tasks in queues with preemption disabled last (law 1).
    Refused at once if the task may not preempt (`Never`) or its queue's max keeps it out."""
    if not task.may_preempt:
        return Refusal(("the task's preemption policy is Never: it may not trigger preemption",))
    blocker = queue_blocker(p, task)
    if blocker is not None:
        queue, over = blocker
        return Refusal((f"max: {queue.path} has no room under its max for {amounts(over)} more",))
    node = p.nodes.get(task.required_node) if task.required_node is not None else None
    if node is None or not node.schedulable:
        return Refusal((f"its required node {task.required_node} is not schedulable",))
    ask = positive(task.resources)
    small = too_small(node, ask)
    if small:
        return Refusal((f"its required node {node.name} is too small for it: it has {amounts(node.capacity, small)}, the task asks {amounts(ask, small)}",))
    need = {name: short for name, amount in ask.items() if (short := amount - node_available(node).get(name, 0)) > 0}
    if not need:
        return Refusal(("victims in flight will make room",), quiet=True)
    pool, excluded = _required_node_candidates(p, task, node)
    for resort in (ORDINARY, ORIGINATOR, OPTED_OUT):
        chosen = _cover([c for c in pool if c.resort <= resort], need)
        if chosen is not None:
            return _required_node_plan(node, chosen, need, excluded)
    return Refusal(
        (f"required node {node.name}: no set of lower-priority tasks makes room for {amounts(need)}",),
        tuple(exclusions(excluded)),
    )


def _required_node_candidates(p: PartitionState, task: TaskState, node: NodeState) -> tuple[list[Candidate], Counter[str]]:
    pool: list[Candidate] = []
    excluded: Counter[str] = Counter()
    for task_id in node.tasks:
        victim = p.tasks[task_id]
        if victim.status != "running":
            continue
        if victim.required_node is not None:
            excluded["other required-node tasks"] += 1
        elif victim.app == task.app:
            excluded[f"law 3: tasks of the task's own application {task.app}"] += 1
        elif victim.priority > task.priority:
            excluded["law 6: tasks of higher priority"] += 1
        elif shares_type(victim.resources, task.resources):
            # A queue with preemption disabled is a policy that law 1 lets break only as a last resort.
            disabled = p.queues[victim.queue].props.preemption_policy == "disabled"
            pool.append(Candidate(victim, victim.priority, OPTED_OUT if disabled else resort_of(victim), []))
    pool.sort(key=victim_order)
    return pool, excluded


def _cover(pool: list[Candidate], need: dict[str, int]) -> list[Candidate] | None:
    chosen, remaining = [], dict(need)
    for candidate in pool:
        if any(candidate.task.resources.get(name, 0) > 0 for name, short in remaining.items() if short > 0):
            chosen.append(candidate)
            for name in remaining:
                remaining[name] -= candidate.task.resources.get(name, 0)
            if all(short <= 0 for short in remaining.values()):
                return minimise(chosen, need)
    return None


_REQUIRED_NODE_RESORT_WHY = {
    **RESORT_WHY,
    OPTED_OUT: "; opted out of preemption or in a queue with preemption disabled, taken as no other set would do (law 1)",
}


def _required_node_plan(node: NodeState, chosen: list[Candidate], need: dict[str, int], excluded: Counter[str]) -> Plan:
    whys = {c.task.id: f"runs on the required node with priority {c.priority}{_REQUIRED_NODE_RESORT_WHY[c.resort]}" for c in chosen}
    explanation = [
        f"required node {node.name} lacks {amounts(need)} for the task",
        "required-node preemption: no delay, fence or guarantee checks apply",
        *exclusions(excluded),
    ]
    return Plan(node, [c.task for c in chosen], whys, explanation, "required node")
