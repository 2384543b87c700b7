"""Quota enforcement through preemption, as yunikorn-core's quota preemptor does it
(`pkg/scheduler/objects/quota_preemptor.go`; the design is `docs/design/quota_preemptor.md`):
a queue whose max was lowered below what it holds sheds running tasks toward it once its
`quota.preemption.delay` has run out (the timers are `_state`'s), with the partition's
`preemption.quotapreemptionenabled` on. Where the design and the code differ, the code is
followed (the wing README lists where and the one place preemptd departs).

- What is over: what the queue holds above its max, per resource its max names (victims in
  flight left out).
- The target, what is to be shed: that, capped per resource by the largest excess above a
  guarantee from the queue up to the root (`GetPreemptableResource`: a queue with no
  guarantee, or at or under it, does not cap).
- A leaf takes its running tasks (not DaemonSet pods: those with a required node) that use a
  resource of the target, best first: not an originator, allowing preemption, and the larger
  share of its resource types in the target (the score); then lower priority, younger by the
  hour, smaller use of the target's resources. Each is taken only if what is taken stays within
  the target on every resource of it: a task larger than what remains is passed over for a
  smaller one, so a queue never sheds more than it is over and may stay over.
- A parent splits its target among its children that hold more than their guarantee on some
  resource it names (all they hold without one), per resource in proportion to the difference
  (what they hold without one), rounded down, down to the leaves: the shares never add up to
  more than the target. A leaf sheds its share whatever its own guarantee.
- Once: one `decision.quota_enforced` per timer, with every victim and why, and what stays over
  the max (`short`) when it cannot all go; the timer ends with it, as YuniKorn's run clears its
  start time (a later cut starts another).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from preemptd.events import QuotaEnforced, Resources, Victim, format_human
from preemptd.projections import PartitionState, QueueState, TaskState

from .._explain import amounts_by_name
from .._model import Cycle
from .._quota_timers import QuotaTimer, timeline
from ._config import config_of
from ._state import held_now, over_max, state_of

__all__ = ["enforce_quotas", "next_enforcement"]

_HOUR = 3_600_000


def enforce_quotas(cycle: Cycle) -> None:
    """Each queue whose timer has fired and which still holds more than its max sheds toward it."""
    p = cycle.partition
    settings = config_of(p)
    state = state_of(p)
    if not settings.quota_preemption:
        return
    cycle.phase("quota")
    for path, timer in state.quota.fired(cycle.now):
        queue = p.queues.get(path)
        if queue is None or not cycle.may_preempt():
            continue
        over = over_max(queue)
        if over:
            _enforce(cycle, queue, timer, over)


def next_enforcement(p: PartitionState, now: int) -> int | None:
    """When the next timer of a queue above its max fires, after `now`."""
    state = state_of(p)
    settings = config_of(p)
    if not settings.quota_preemption:
        return None
    return state.quota.next_firing(now, lambda path: path in p.queues and bool(over_max(p.queues[path])))


@dataclass
class _Choice:
    """What an enforcement takes and says."""

    victims: list[Victim] = field(default_factory=list)
    shed: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)


def _enforce(cycle: Cycle, queue: QueueState, timer: QuotaTimer, over: dict[str, int]) -> None:
    p = cycle.partition
    assert queue.max is not None  # over_max found it over one
    choice = _Choice(lines=[_timeline(queue, timer), f"over its max by {amounts_by_name(over)} (victims in flight left out)"])
    target = _target(p, queue, over, choice.lines)
    for leaf, share in _shares(p, queue, target, choice.lines):
        _choose(p, leaf, share, choice)
    short = {name: amount - choice.shed.get(name, 0) for name, amount in over.items() if choice.shed.get(name, 0) < amount}
    if short:
        choice.lines.append(
            f"stays over its max by {amounts_by_name(short)}: nothing more is shed than the target, and no other task fits in what remains of it"
        )
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
    was = amounts_by_name(timer.was) if timer.was else "unlimited"
    return timeline(f"{queue.path}'s max", amounts_by_name(queue.max or {}), f"was {was}", "quota.preemption.delay", timer)


def _target(p: PartitionState, queue: QueueState, over: dict[str, int], lines: list[str]) -> dict[str, int]:
    """`over`, capped per resource by the largest excess above a guarantee from `queue` up to the root."""
    cap: dict[str, tuple[int, str]] = {}
    ancestor: QueueState | None = queue
    while ancestor is not None:
        held = held_now(ancestor)
        for name, floor in ancestor.guaranteed.items():
            excess = held.get(name, 0) - floor
            if excess > 0 and excess > cap.get(name, (0, ""))[0]:
                cap[name] = (excess, ancestor.path)
        ancestor = p.queues.get(ancestor.path.rsplit(".", 1)[0]) if "." in ancestor.path else None
    target = {name: min(amount, cap[name][0]) if name in cap else amount for name, amount in over.items()}
    for name in sorted(n for n in target if target[n] < over[n]):
        lines.append(f"target capped to {name} {format_human(name, target[name])}: {cap[name][1]} holds that much above its guaranteed")
    lines.append(f"target: {amounts_by_name(target)}, to be shed without going past it")
    return target


def _shares(p: PartitionState, queue: QueueState, target: dict[str, int], lines: list[str]) -> list[tuple[QueueState, dict[str, int]]]:
    """The leaves under `queue` and what each is to shed: a parent's target split among its
    children by what each holds above its guarantee (all it holds without one), rounded down."""
    if queue.leaf:
        return [(queue, target)]
    weights = {c.path: w for c in map(p.queues.__getitem__, queue.children) if (w := _weight(c))}
    split: dict[str, dict[str, int]] = {path: {} for path in weights}
    for name, amount in target.items():
        total = sum(w.get(name, 0) for w in weights.values())
        for path, w in weights.items():
            if total > 0 and name in w:
                split[path][name] = amount * w[name] // total
    out = []
    for path, share in split.items():
        if any(share.values()):
            lines.append(f"{path} is to shed {amounts_by_name(share)} of it (its weight in the split: {amounts_by_name(weights[path])})")
            out += _shares(p, p.queues[path], share, lines)
    return out


def _weight(child: QueueState) -> dict[str, int]:
    """A child's weight in its parent's split: the difference between what it holds and its
    guarantee, per resource the guarantee names, or all it holds without one; none when it holds
    nothing or no more than its guarantee."""
    held = {name: amount for name, amount in held_now(child).items() if amount}
    if not held:
        return {}
    floor = child.guaranteed
    if not floor:
        return held
    if all(amount >= held.get(name, 0) for name, amount in floor.items()):
        return {}
    return {name: abs(amount - held.get(name, 0)) for name, amount in floor.items()}


def _choose(p: PartitionState, leaf: QueueState, target: dict[str, int], choice: _Choice) -> None:
    """Take `leaf`'s tasks in the design's order while what is taken stays within `target`."""
    wanted = set(target)
    candidates = [t for t in map(p.tasks.__getitem__, leaf.running) if t.status == "running" and t.required_node is None and wanted & _uses(t)]
    taken: dict[str, int] = {}
    for task in sorted(candidates, key=lambda t: _order(t, wanted)):
        left = {name: amount - taken.get(name, 0) for name, amount in target.items()}
        if all(amount <= 0 for amount in left.values()):
            choice.lines.append(f"spared {task.id}: not needed, {leaf.path} sheds enough without it")
            continue
        larger = {name: task.resources[name] for name in sorted(wanted & _uses(task)) if task.resources[name] > left[name]}
        if larger:
            choice.lines.append(
                f"spared {task.id}: it holds {amounts_by_name(larger)}, more than the {amounts_by_name({n: left[n] for n in larger})} {leaf.path} has "
                "left to shed"
            )
            continue
        for name in wanted:
            taken[name] = taken.get(name, 0) + task.resources.get(name, 0)
            choice.shed[name] = choice.shed.get(name, 0) + task.resources.get(name, 0)
        assert task.node is not None  # running
        choice.victims.append(
            Victim(
                task=task.id,
                app=task.app,
                queue=task.queue,
                node=task.node,
                priority=task.priority,
                resources=Resources(task.resources),
                why=_why(task, leaf, wanted),
            )
        )


def _uses(task: TaskState) -> set[str]:
    return {name for name, amount in task.resources.items() if amount > 0}


def _order(task: TaskState, over: set[str]) -> tuple[float, int, int, int, str]:
    """Best victim first: the highest score, then lower priority, younger by the hour, smaller
    use of the resources over the max (then by name, for a defined order)."""
    used = _uses(task)
    score = (not task.originator) + task.allow_preemption + len(used & over) / len(used)
    return (-score, task.priority, -(task.submitted_at // _HOUR), sum(task.resources.get(name, 0) for name in over), task.id)


def _why(task: TaskState, leaf: QueueState, over: set[str]) -> str:
    traits = [
        "an originator" if task.originator else "not an originator",
        "allows preemption" if task.allow_preemption else "opted out of preemption",
        f"uses {', '.join(sorted(_uses(task) & over))} of the resources to shed",
    ]
    return (
        f"quota: {leaf.path} sheds what it holds above its share of the max, and this task fits in what is left to shed; {'; '.join(traits)}; "
        f"priority {task.priority}"
    )
