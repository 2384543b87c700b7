"""preemptd's extension of Volcano: a lowered capability takes effect. Volcano never evicts for
a capability: a queue whose capability is cut below what it holds keeps it until its tasks end.
A Queue annotated `preemptd.io/quota-preemption-delay: "30s"` sheds running tasks down to its
capability once that long has passed since the cut (the timers are `_state`'s), before the
session's actions; without the annotation (or "0s"), nothing changes.

- The target is what the queue holds above its capability, per resource the capability names
  (running tasks and pipelined preemptors, a parent's those of its leaves; victims in flight
  left out: an enforcement is not repeated while its victims leave).
- Candidates are the running tasks of the queue (a parent's: of its leaves) in Volcano's victim
  order (`_order`: queues of lower priority and higher share first, then the reverse of the job
  order the plugins give, then lower task priority and the newer), those using a resource over
  the capability; never one marked not preemptable, nor one conformance spares (when in the tiers).
- Gang-aware, in two passes: first the tasks whose job keeps its `min_available` without them
  (gang's vote); then, if the queue is still over, whole jobs in victim order, each with all its
  running tasks (a job is never left below its gang unless all of it goes); a job with a task
  that may not be evicted cannot go whole, and keeps its gang. Once a whole job went, the first
  pass's victims no longer needed stay, the last in victim order first.
- One `decision.quota_enforced` per queue and session, with every victim and why; what cannot
  be taken is said as `short`, once until it changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from preemptd.events import QuotaEnforced, Resources, Victim
from preemptd.projections import PartitionState

from .._explain import amounts
from .._quota_timers import QuotaTimer, timeline
from ._config import QUOTA_DELAY_ANNOTATION
from ._evict import spared_lines
from ._jobs import Task
from ._nodes import Statement
from ._session import Session
from ._state import over_capability, state_of
from ._votes import conformance_spares

__all__ = ["enforce_quotas", "next_enforcement", "quotas_due"]


def quotas_due(p: PartitionState, now: int) -> list[str]:
    """The queues, by name, whose timer has run out at `now` and that hold more than their capability."""
    state = state_of(p)
    return [name for name, _ in state.quota.fired(now) if over_capability(p, name)]


def next_enforcement(p: PartitionState, now: int) -> int | None:
    """When the next timer of a queue above its capability runs out, after `now`."""
    state = state_of(p)
    return state.quota.next_firing(now, lambda name: bool(over_capability(p, name)))


def enforce_quotas(s: Session, due: list[str]) -> None:
    """Each queue of `due` sheds what it holds above its capability, within the cycle's budget."""
    for name in due:
        if not s.cycle.may_preempt():
            return
        target = over_capability(s.p, name)  # again: a queue before it may have shed some of it
        if target:
            _enforce(s, name, target)


@dataclass
class _Choice:
    """What an enforcement takes, and the candidates it spares, and why."""

    target: dict[str, int]
    shed: dict[str, int] = field(default_factory=dict)
    victims: dict[str, tuple[Task, str]] = field(default_factory=dict)  # by id, in the order taken, with why
    per_job: dict[str, int] = field(default_factory=dict)  # tasks taken of each job
    spared: dict[str, str] = field(default_factory=dict)

    def left(self) -> dict[str, int]:
        """What the queue still holds above its capability."""
        return {r: amount - self.shed.get(r, 0) for r, amount in self.target.items() if self.shed.get(r, 0) < amount}

    def helps(self, task: Task) -> bool:
        """`task` uses a resource the queue still holds too much of."""
        return any(task.queue_resources.get(r) for r in self.left())

    def take(self, task: Task, why: str) -> None:
        self.victims[task.id] = (task, why)
        self._count(task, +1)
        self.spared.pop(task.id, None)

    def give_back(self, task: Task, why: str) -> None:
        del self.victims[task.id]
        self._count(task, -1)
        self.spared[task.id] = why

    def spare(self, task: Task) -> bool:
        """Whether the target is met without `task`, one of the victims."""
        return all(self.shed.get(r, 0) - task.queue_resources.get(r, 0) >= amount for r, amount in self.target.items())

    def _count(self, task: Task, sign: int) -> None:
        self.per_job[task.job] = self.per_job.get(task.job, 0) + sign
        for r in self.target:
            self.shed[r] = self.shed.get(r, 0) + sign * task.queue_resources.get(r, 0)


def _enforce(s: Session, name: str, target: dict[str, int]) -> None:
    state = state_of(s.p)
    timer, capability = state.quota.timers[name], s.config.queues[name].capability or {}
    leaves = _leaves(s.p, name)
    order = [t for t in s.victims_in_order(job for job in s.jobs.values() if job.queue in leaves) if t.id not in s.gone]
    choice = _Choice(target)
    _within_gangs(s, name, order, choice)
    within = list(choice.victims.values())
    whole = _whole_jobs(s, name, order, choice)
    if whole:
        _give_back(name, [(task, why) for task, why in within if task.job not in whole], choice)
    short = choice.left()
    if not choice.victims and short == state.quota.short.get(name):
        return  # said already
    lines = [_timeline(name, capability, timer), f"target: {amounts(target)}, what {name} holds above its capability (victims in flight left out)"]
    lines += spared_lines(choice.spared)
    if short:
        lines.append(f"short of its capability by {amounts(short)}: the rest may not be evicted, or is of jobs that cannot go whole")
    victims = tuple(_victim(s, task, why) for task, why in choice.victims.values())
    s.cycle.emit(
        QuotaEnforced,
        queue=name,
        max=Resources(capability),
        target=Resources(target),
        victims=victims,
        short=Resources(short) if short else None,
        model=s.p.model,
        reason="quota",
        explanation=tuple(lines),
    )
    statement = Statement(s.nodes)  # the session's actions after this one see the victims leaving
    for task, _ in choice.victims.values():
        statement.evict(task)
    s.gone.update(choice.victims)


def _victim(s: Session, task: Task, why: str) -> Victim:
    assert task.node is not None  # a candidate runs
    state = s.p.tasks[task.id]
    return Victim(task=task.id, app=task.job, queue=task.queue, node=task.node, priority=state.priority, resources=Resources(state.resources), why=why)


def _within_gangs(s: Session, name: str, order: list[Task], choice: _Choice) -> None:
    """The first pass: in victim order, the tasks whose job keeps its gang without them (gang's vote)."""
    conformance = _conformance_on(s)
    for task in order:
        job = s.jobs[task.job]
        left = s.nodes.ready.get(job.id, 0) - choice.per_job.get(job.id, 0)
        if not choice.left():
            choice.spared[task.id] = f"not needed: {name} is within its capability without it"
        elif not choice.helps(task):
            choice.spared[task.id] = f"not needed: it uses none of what {name} holds above its capability"
        elif refusal := _never(task, conformance):
            choice.spared[task.id] = refusal
        elif left <= job.min_available:
            choice.spared[task.id] = f"gang: job {job.id} would drop below its min_available {job.min_available} ({left} ready)"
        else:
            choice.take(
                task,
                f"quota: {name} holds more than its capability; in victim order, job {job.id} (priority {job.priority}) keeps its gang of "
                f"{job.min_available} without it; task priority {task.priority}",
            )


def _whole_jobs(s: Session, name: str, order: list[Task], choice: _Choice) -> dict[str, None]:
    """The second pass, while the queue is still over: whole jobs in victim order, each with all
    its running tasks left; one with a task that may not be evicted keeps its gang. The jobs
    that went whole."""
    went: dict[str, None] = {}
    conformance = _conformance_on(s)
    by_job: dict[str, list[Task]] = {}
    for task in order:
        if task.id not in choice.victims:
            by_job.setdefault(task.job, []).append(task)
    for job_id, rest in by_job.items():
        if not choice.left():
            break
        if not any(choice.helps(task) for task in rest):
            continue
        kept = next(((task, why) for task in rest if (why := _never(task, conformance))), None)
        job = s.jobs[job_id]
        if kept is not None:
            for task in rest:
                if task.id not in choice.spared or choice.spared[task.id].startswith("gang:"):
                    choice.spared[task.id] = (
                        f"gang: job {job_id} would drop below its min_available {job.min_available}, and cannot go whole: {kept[0].id} is spared ({kept[1]})"
                    )
            continue
        why = (
            f"quota: {name} holds more than its capability; in victim order, job {job_id} (priority {job.priority}) goes whole: any fewer of its "
            f"running tasks would leave it below its min_available {job.min_available}"
        )
        for task in rest:
            choice.take(task, why)
        went[job_id] = None
    return went


def _give_back(name: str, within: list[tuple[Task, str]], choice: _Choice) -> None:
    """The first pass's victims (`within`, of jobs that did not go whole) that whole jobs made
    unneeded stay, the last in victim order first (as Volcano's topology-aware preemption adds
    back the victims it did not need)."""
    for task, _ in reversed(within):
        if choice.spare(task):
            choice.give_back(task, f"not needed: {name} is within its capability without it once whole jobs went")


def _never(task: Task, conformance: bool) -> str | None:
    """Why `task` is never a victim (None: it may be); `conformance`: the plugin is in the tiers."""
    if not task.preemptable:
        return "preemptable: the task is marked not preemptable"
    return conformance_spares(task) if conformance else None


def _conformance_on(s: Session) -> bool:
    return any(plugin.name == "conformance" for tier in s.conf.tiers for plugin in tier)


def _leaves(p: PartitionState, name: str) -> set[str]:
    """The leaf queues at or below `name`."""
    queue = p.queues[name]
    if queue.leaf:
        return {name}
    return set().union(*(_leaves(p, child) for child in queue.children))


def _timeline(name: str, capability: dict[str, int], timer: QuotaTimer) -> str:
    was = amounts(timer.was) if timer.was else "no capability"
    return timeline(f"{name}'s capability", amounts(capability), f"was {was}", QUOTA_DELAY_ANNOTATION, timer)
