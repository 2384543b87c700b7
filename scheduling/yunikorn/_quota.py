"""Quota enforcement through preemption (YuniKorn's design, `docs/design/quota_preemptor.md`):
a queue whose max was lowered below what it holds sheds running tasks down to it once its
`quota.preemption.delay` has run out (the timers are `_state`'s), with the partition's
`preemption.quotapreemptionenabled` on.

- The target is what the queue holds above its max, per resource its max names (victims in
  flight left out: an enforcement is not repeated while its victims leave).
- A leaf takes its running tasks (not DaemonSet pods: those with a required node), only those
  using a resource over the max, best first: not an originator, allowing preemption, and the
  larger share of its resource types over the max (the score); then lower priority, younger by
  the hour, smaller use of the resources over. It takes them until the target is met, skipping
  any that would take it below its guaranteed (the floor).
- A parent splits its target among its children with usage and no victims in flight, per
  resource, in proportion to what each holds above its guaranteed (all it holds without one),
  down to the leaves.
- One `decision.quota_enforced` per queue and cycle, with every victim and why; when the floor
  stops it short, the decision says how much stays over (`short`), once until that changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from preemptd.events import QuotaEnforced, Resources, Victim, format_human
from preemptd.projections import PartitionState, QueueState, TaskState

from .._model import Cycle
from .._quota_timers import QuotaTimer
from ._config import PreemptionSettings
from ._state import YuniKornState, held_now, over_max

__all__ = ["enforce_quotas", "next_enforcement"]

_HOUR = 3_600_000


def enforce_quotas(cycle: Cycle) -> None:
    """Each queue whose timer has fired and which still holds more than its max sheds the rest."""
    p = cycle.partition
    settings: PreemptionSettings = p.settings
    state: YuniKornState = p.model_state
    if not settings.quota_preemption:
        return
    for path, timer in sorted(state.timers.items()):
        queue = p.queues.get(path)
        if queue is None or timer.fires > cycle.now or not cycle.may_preempt():
            continue
        target = over_max(queue)
        if target:
            _enforce(cycle, queue, timer, target)


def next_enforcement(p: PartitionState, now: int) -> int | None:
    """When the next timer of a queue above its max fires, after `now`."""
    state: YuniKornState = p.model_state
    settings: PreemptionSettings = p.settings
    if not settings.quota_preemption:
        return None
    return min((t.fires for path, t in state.timers.items() if t.fires > now and path in p.queues and over_max(p.queues[path])), default=None)


@dataclass
class _Choice:
    """What an enforcement takes and says."""

    victims: list[Victim] = field(default_factory=list)
    shed: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)


def _enforce(cycle: Cycle, queue: QueueState, timer: QuotaTimer, target: dict[str, int]) -> None:
    p = cycle.partition
    state: YuniKornState = p.model_state
    assert queue.max is not None  # over_max found it over one
    choice = _Choice(lines=[_timeline(queue, timer), f"target: {_amounts(target)}, what {queue.path} holds above its max (victims in flight left out)"])
    for leaf, share in _shares(p, queue, target, choice.lines):
        _choose(p, leaf, share, choice)
    short = {name: amount - choice.shed.get(name, 0) for name, amount in target.items() if choice.shed.get(name, 0) < amount}
    if short:
        choice.lines.append(f"short of its max by {_amounts(short)}: its queues' guarantees keep the rest")
    if not choice.victims and short == state.short.get(queue.path):
        return  # said already
    cycle.emit(
        QuotaEnforced,
        queue=queue.path,
        max=Resources(queue.max),
        target=Resources(target),
        victims=tuple(choice.victims),
        short=Resources(short) if short else None,
        model=p.model,
        reason="quota",
        explanation=tuple(choice.lines),
    )


def _timeline(queue: QueueState, timer: QuotaTimer) -> str:
    was = _amounts(timer.was) if timer.was else "unlimited"
    return (
        f"quota: {queue.path}'s max is {_amounts(queue.max or {})} (was {was}); quota.preemption.delay "
        f"{timer.delay / 1000:g}s from {timer.start} ms: enforced from {timer.fires} ms"
    )


def _shares(p: PartitionState, queue: QueueState, target: dict[str, int], lines: list[str]) -> list[tuple[QueueState, dict[str, int]]]:
    """The leaves under `queue` and what each is to shed: a parent's target split among its
    children in proportion to what each may release (above its guaranteed), down the tree."""
    if queue.leaf:
        return [(queue, target)]
    children = [p.queues[c] for c in queue.children if held_now(p.queues[c]) and not p.queues[c].preempting]
    releasable = {c.path: {name: max(0, held_now(c).get(name, 0) - c.guaranteed.get(name, 0)) for name in target} for c in children}
    split: dict[str, dict[str, int]] = {c.path: {} for c in children}
    for name, amount in target.items():
        total = sum(r[name] for r in releasable.values())
        if total <= 0:
            continue
        exact = {path: amount * r[name] / total for path, r in releasable.items()}
        parts = {path: int(value) for path, value in exact.items()}
        for path in sorted(exact, key=lambda q: (parts[q] - exact[q], q))[: amount - sum(parts.values())]:  # the remainder, largest fractions first
            parts[path] += 1
        for path, part in parts.items():
            if part:
                split[path][name] = part
    out = []
    for child in children:
        if split[child.path]:
            lines.append(f"{child.path} is to shed {_amounts(split[child.path])} of it (it may release {_amounts(releasable[child.path])} above its guaranteed)")
            out += _shares(p, child, split[child.path], lines)
    return out


def _choose(p: PartitionState, leaf: QueueState, target: dict[str, int], choice: _Choice) -> None:
    """Take `leaf`'s tasks in the design's order until `target` is shed, above its guaranteed."""
    over = set(target)
    candidates = [t for t in map(p.tasks.__getitem__, leaf.running) if t.status == "running" and t.required_node is None and over & _uses(t)]
    taken: dict[str, int] = {}
    for task in sorted(candidates, key=lambda t: _order(t, over)):
        if all(taken.get(name, 0) >= amount for name, amount in target.items()):
            choice.lines.append(f"spared {task.id}: not needed, {leaf.path} sheds enough without it")
            continue
        if _below_guarantee(leaf, taken, task):
            choice.lines.append(f"spared {task.id}: {leaf.path} would go below its guaranteed {_amounts(leaf.guaranteed)}")
            continue
        for name, amount in task.resources.items():
            taken[name] = taken.get(name, 0) + amount
            if name in over:
                choice.shed[name] = choice.shed.get(name, 0) + amount
        assert task.node is not None  # running
        choice.victims.append(Victim(task=task.id, app=task.app, queue=task.queue, node=task.node, priority=task.priority, resources=Resources(task.resources), why=_why(task, leaf, over)))


def _uses(task: TaskState) -> set[str]:
    return {name for name, amount in task.resources.items() if amount > 0}


def _order(task: TaskState, over: set[str]) -> tuple[float, int, int, int, str]:
    """Best victim first: the highest score, then lower priority, younger by the hour, smaller
    use of the resources over the max (then by name, for a defined order)."""
    used = _uses(task)
    score = (not task.originator) + task.allow_preemption + len(used & over) / len(used)
    return (-score, task.priority, -(task.submitted_at // _HOUR), sum(task.resources.get(name, 0) for name in over), task.id)


def _below_guarantee(leaf: QueueState, taken: dict[str, int], task: TaskState) -> bool:
    held = held_now(leaf)
    return any(held.get(name, 0) - taken.get(name, 0) - task.resources.get(name, 0) < floor for name, floor in leaf.guaranteed.items() if task.resources.get(name))


def _why(task: TaskState, leaf: QueueState, over: set[str]) -> str:
    traits = [
        "an originator" if task.originator else "not an originator",
        "allows preemption" if task.allow_preemption else "opted out of preemption",
        f"uses {', '.join(sorted(_uses(task) & over))} of the resources over the max",
    ]
    return f"quota: {leaf.path} sheds what it holds above its share of the max; {'; '.join(traits)}; priority {task.priority}"


def _amounts(values: dict[str, int]) -> str:
    return ", ".join(f"{name} {format_human(name, amount)}" for name, amount in sorted(values.items())) or "nothing"
