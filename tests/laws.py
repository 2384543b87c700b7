"""An oracle for YuniKorn's seven laws, written apart from the engine.

`violations(state, decision, now)` lists every law a `decision.preempted` breaks, judged on the
state just before the decision is folded. It shares no code with `scheduling`, so a bug in the
engine's reading of the laws cannot hide itself here.
"""

from __future__ import annotations

from preemptd.events import Preempted
from preemptd.projections import PartitionState, QueueState, TaskState


def _lineage(p: PartitionState, leaf: str) -> list[str]:
    parts = leaf.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]


def _settled(queue: QueueState) -> dict[str, int]:
    """Usage once victims in flight are gone and reserved preemptors have landed."""
    out = dict(queue.allocated)
    for name, amount in queue.preempting.items():
        out[name] = out.get(name, 0) - amount
    for name, amount in queue.reserved.items():
        out[name] = out.get(name, 0) + amount
    return out


def _landed(queue: QueueState) -> dict[str, int]:
    """Usage that is really there: victims in flight are gone, reservations do not count yet."""
    out = dict(queue.allocated)
    for name, amount in queue.preempting.items():
        out[name] = out.get(name, 0) - amount
    return out


def _priority_below(p: PartitionState, task: TaskState, shared: str) -> int:
    value = task.priority
    for path in _lineage(p, task.queue):
        if path == shared:
            break
        props = p.queues[path].props
        value = props.priority_offset if props.priority_policy == "fence" else value + props.priority_offset
    return value


def _shared_queue(p: PartitionState, a: str, b: str) -> str:
    mine = _lineage(p, a)
    return next(path for path in _lineage(p, b) if path in mine)


def violations(p: PartitionState, decision: Preempted, now: int) -> list[str]:
    preemptor = p.tasks[decision.preemptor]
    victims = [p.tasks[v.task] for v in decision.victims]
    found = _common(p, preemptor, victims, decision)
    if not preemptor.may_preempt:
        found.append("the preemptor's policy is Never")
    if preemptor.required_node is not None:
        return found + _required_node(preemptor, victims)
    generic = _generic(p, preemptor, victims, now)
    return found + generic + ([] if generic else _law_1(p, preemptor, victims, now))


def _common(p: PartitionState, preemptor: TaskState, victims: list[TaskState], decision: Preempted) -> list[str]:
    found = []
    if preemptor.status != "pending" or preemptor.reserved_node is not None:
        found.append(f"preemptor {preemptor.id} is {preemptor.status}, reserved on {preemptor.reserved_node}")
    for victim in victims:
        if victim.status != "running":
            found.append(f"victim {victim.id} chosen while {victim.status} (chosen twice?)")
        if victim.node != decision.node:
            found.append(f"victim {victim.id} on {victim.node}, not on {decision.node} (cross-node)")
        if victim.app == preemptor.app:
            found.append(f"law 3: victim {victim.id} is in the preemptor's application")
    if len({v.id for v in victims}) != len(victims) or not victims:
        found.append("victims repeated or empty")
    return found


def _required_node(preemptor: TaskState, victims: list[TaskState]) -> list[str]:
    found = []
    for victim in victims:
        if victim.required_node is not None:
            found.append(f"required-node victim {victim.id}")
        if victim.priority > preemptor.priority:
            found.append(f"law 6: victim {victim.id} priority {victim.priority} > {preemptor.priority}")
    return found


def _generic(p: PartitionState, preemptor: TaskState, victims: list[TaskState], now: int) -> list[str]:
    found = []
    path = _lineage(p, preemptor.queue)
    if not p.settings.enabled:
        found.append("generic preemption while the partition disables it")
    if now < preemptor.submitted_at + p.queues[preemptor.queue].props.preemption_delay:
        found.append("preempted before preemption.delay")
    fence = next((q for q in path[:-1] if p.queues[q].props.preemption_policy == "fence"), None)
    asked = [name for name, amount in preemptor.resources.items() if amount > 0]
    for victim in victims:
        shared = _shared_queue(p, preemptor.queue, victim.queue)
        below = path[: path.index(shared)]
        guaranteed = [q for q in below if any(name in p.queues[q].guaranteed for name in asked)]
        if not guaranteed:
            found.append(f"law 4: no guarantee below {shared} on the preemptor's path for victim {victim.id}")
        for q in guaranteed:
            usage, limit = _settled(p.queues[q]), p.queues[q].guaranteed
            if any(usage.get(name, 0) >= limit[name] for name in asked if name in limit):
                found.append(f"law 4: {q} is not under its guarantee")
        if fence is not None and not (victim.queue + ".").startswith(fence + "."):
            found.append(f"law 7: victim {victim.id} in {victim.queue} is outside the fence {fence}")
        if any(p.queues[q].props.preemption_policy == "disabled" for q in _lineage(p, victim.queue)[:1]):
            found.append(f"victim {victim.id} in a queue with preemption disabled")
        if _priority_below(p, victim, shared) > _priority_below(p, preemptor, shared):
            found.append(f"law 6: victim {victim.id} has higher priority below {shared}")
    return found + _law_2(p, preemptor, victims, path)


_RANKS = ("ordinary", "an originator", "opted out")


def _rank(task: TaskState) -> int:
    """Law 1's order: ordinary tasks, then originators, then tasks that opted out of preemption."""
    return 2 if not task.allow_preemption else 1 if task.originator else 0


def _law_1(p: PartitionState, preemptor: TaskState, victims: list[TaskState], now: int) -> list[str]:
    """A victim ranked later is taken only if no task ranked earlier could stand in for it: a
    running task on the node, under the queue the preemptor and the victim share, freeing at
    least as much of what the preemptor asks, whose swap breaks no other law."""
    found, chosen = [], {v.id for v in victims}
    asked = [name for name, amount in preemptor.resources.items() if amount > 0]
    for victim in victims:
        shared = _shared_queue(p, preemptor.queue, victim.queue)
        for task_id in p.nodes[victim.node].tasks:
            stand_in = p.tasks[task_id]
            if stand_in.id in chosen or stand_in.status != "running" or stand_in.required_node or stand_in.app == preemptor.app:
                continue
            if _rank(stand_in) >= _rank(victim) or shared not in _lineage(p, stand_in.queue):
                continue
            if any(stand_in.resources.get(name, 0) < victim.resources.get(name, 0) for name in asked):
                continue
            if not _generic(p, preemptor, [stand_in if v is victim else v for v in victims], now):
                found.append(f"law 1: victim {victim.id} ({_RANKS[_rank(victim)]}) taken while {stand_in.id} ({_RANKS[_rank(stand_in)]}) could stand in for it")
                break
    return found


def _law_2(p: PartitionState, preemptor: TaskState, victims: list[TaskState], path: list[str]) -> list[str]:
    """No queue ends below its guarantee where the preemption lowers it (law 2; law 5 follows),
    judged on landed usage: a reservation may still be dropped, so it protects nobody's tasks."""
    change: dict[str, dict[str, int]] = {}
    for victim in victims:
        for q in _lineage(p, victim.queue):
            for name, amount in victim.resources.items():
                change.setdefault(q, {})[name] = change.get(q, {}).get(name, 0) - amount
    for q in path:
        for name, amount in preemptor.resources.items():
            change.setdefault(q, {})[name] = change.get(q, {}).get(name, 0) + amount
    found = []
    for q, delta in change.items():
        usage, limit = _landed(p.queues[q]), p.queues[q].guaranteed
        for name, amount in delta.items():
            if amount < 0 and name in limit and usage.get(name, 0) + amount < limit[name]:
                found.append(f"law 2: {q} would end at {usage.get(name, 0) + amount} {name}, below its guarantee {limit[name]}")
    return found
