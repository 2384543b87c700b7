"""What preempt and reclaim share: a starving job's waiting tasks are placed where they fit now,
else room is made for each by evicting candidates the plugins allow (`_victims.make_room`), and
all of it is kept only if the job then has its gang; the evictions become `decision.preempted`.

A preemptor that needs no victim but fits the room others' victims are releasing waits on that
node too (`decision.preempted` with no victims). A BestEffort preemptor takes only BestEffort
victims; a task whose preemptionPolicy is Never evicts nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from preemptd.events import Preempted, Resources, Victim

from .._explain import amounts, counted
from ._jobs import POD_SLOT, Job, Task
from ._nodes import Statement
from ._session import Session
from ._victims import Room, make_room

__all__ = ["Action", "Eviction", "Hook", "commit", "for_gang", "may_not_evict", "spared_lines", "starving_jobs", "try_room"]

SPARED_SHOWN = 10  # candidates spared, listed in an explanation


@dataclass(frozen=True)
class Eviction:
    """A preemptor, the room made for it and the candidates spared."""

    task: Task
    room: Room
    spared: dict[str, str]


#: The actions that evict, and the votes each asks (Volcano's plugin hooks).
Action = Literal["preempt", "reclaim"]
Hook = Literal["preemptable", "reclaimable"]


def starving_jobs(s: Session) -> list[tuple[str, list[Job]]]:
    """The queues of the jobs that starve (they may evict), in order; the waiting tasks of the
    others are told why they evict nothing."""
    starving = []
    for job in s.waiting_jobs():
        waiting = s.waiting(job)
        if s.starving(job):
            starving.append(job)
        else:
            s.note(waiting, f"job {job.id} is not starving (it has its gang of {job.min_available}): its other tasks wait for free room and evict nothing")
    return s.queues_in_order(starving)


def for_gang(s: Session, job: Job, action: Action, running: dict[str, list[Task]], candidate: Callable[[Task], bool | str], hook: Hook) -> None:
    """`action` for `job`'s waiting tasks while it starves: each is placed where it fits now,
    else room is made for it; all is kept only if the job then has its gang."""
    statement, evictions = Statement(s.nodes), []
    failed: dict[tuple[tuple[tuple[str, int], ...], int], Task] = {}  # tasks alike that found no room since the last change
    for task in s.waiting(job):
        if not s.starving(job):
            break
        if _place_now(s, task, statement):
            failed.clear()
            continue
        refusal = may_not_evict(s, task, action)
        if refusal:
            s.note([task], refusal)
            continue
        alike = (tuple(sorted(task.resources.items())), task.priority)
        if alike in failed:  # the same search on the same state: the same answer, at no cost
            _fail_like(s, task, failed[alike])
            continue
        eviction = try_room(s, task, running, candidate, hook, statement, action, fits_no_node_now=True)
        if eviction is None:
            failed[alike] = task
        else:
            evictions.append(eviction)
            failed.clear()
    if not evictions:
        statement.discard()
        s.settled.difference_update(task.id for task, _ in statement.placed)
        return
    if s.has_gang(job):
        commit(s, statement, evictions, action)
        return
    found = len(evictions) + len(statement.placed)
    s.settled.difference_update([*(e.task.id for e in evictions), *(task.id for task, _ in statement.placed)])
    statement.discard()
    s.note(
        (e.task for e in evictions),
        f"{action}: gang: room was found for {counted(found, 'task')}, but job {job.id} would still have {s.placed(job) + found} of the "
        f"{job.min_available} it needs to start (min_available): nothing evicted",
    )


def _fail_like(s: Session, task: Task, other: Task) -> None:
    """`task` finds no room, as `other`, just before it, did not."""
    for why in s.why.get(other.id, {}):
        s.note([task], why)
    if other.id in s.details:
        s.details[task.id] = s.details[other.id]


def _place_now(s: Session, task: Task, statement: Statement) -> bool:
    """Place `task` where it fits now, within what its queue may hold, if it does anywhere."""
    if s.quotas.allocatable(task.queue, task.resources) is not None:
        return False
    node = s.nodes.first_fitting(task.resources)
    if node is None:
        return False
    statement.allocate(task, node)
    s.settled.add(task.id)
    return True


def commit(s: Session, statement: Statement, evictions: list[Eviction], action: Action) -> None:
    for task, node in statement.commit():
        s.allocated(task, node, f"{action}: placed with the room made for job {task.job}'s gang")
    for eviction in evictions:
        s.gone.update(victim.id for victim in eviction.room.victims)
        _evicted(s, eviction, action)


def may_not_evict(s: Session, task: Task, action: Action) -> str | None:
    if not task.may_preempt:
        return f"{action}: its preemptionPolicy is Never: it evicts nothing"
    if action == "reclaim":
        refusal = s.quotas.preemptive(task.queue, task.resources)
        return f"reclaim: {refusal}" if refusal else None
    return None


def try_room(
    s: Session,
    task: Task,
    running: dict[str, list[Task]],
    candidate: Callable[[Task], bool | str],
    hook: Hook,
    statement: Statement,
    action: Action,
    *,
    fits_no_node_now: bool = False,
) -> Eviction | None:
    """Room for `task` among `running` (by node, in victim order) through the votes of `hook`,
    recorded on `statement`; None (and `task` told why) if there is none."""
    leaving = s.gone | {victim.id for victim in statement.evicted}

    def eligible(t: Task) -> bool | str:
        verdict = candidate(t)
        if verdict is not True or t.id in leaving:
            return verdict if t.id not in leaving else False
        if not t.preemptable:
            return "preemptable: the task is marked not preemptable"
        if task.best_effort and not t.best_effort:
            return "BestEffort: a BestEffort preemptor takes only BestEffort victims"
        return True

    enough = (lambda: s.quotas.allocatable(task.queue, task.resources) is None) if action == "preempt" else (lambda: True)
    guard = s.quotas.name if action == "reclaim" and s.quotas.plugin else None  # the design: never below deserved
    room, spared, seen = make_room(task, running, eligible, hook, s.conf, s.ballot, statement, enough, guard, fits_no_node_now)
    if room is None:
        if not seen:
            s.note([task], f"{action}: no running task may make room for it" + (" (spared: see the explanation)" if spared else ""))
        else:
            s.note([task], f"{action}: no node has room for it even with every victim the plugins allow")
        _detail(s, task, action, spared)
        return None
    s.settled.add(task.id)
    return Eviction(task, room, spared)


def _detail(s: Session, task: Task, action: Action, spared: dict[str, str]) -> None:
    """Add the candidates `action` spared for `task` to what earlier actions spared."""
    earlier = [line for line in s.details.get(task.id, ()) if not line.startswith(f"{action}: ")]
    s.details[task.id] = (*earlier, *(f"{action}: {line}" for line in spared_lines(spared)))


def _evicted(s: Session, eviction: Eviction, action: Action) -> None:
    task, room = eviction.task, eviction.room
    job = s.jobs[task.job]
    victims = tuple(
        Victim(
            task=v.id,
            app=v.job,
            queue=v.queue,
            node=v.node or room.node,
            priority=s.p.tasks[v.id].priority,
            resources=Resources(s.p.tasks[v.id].resources),
            why=f"{action}: {_why_victim(s, task, v, action)}; allowed by {', '.join(room.voters)}",
        )
        for v in room.victims
    )
    if not victims:
        reason = f"{action}: job {job.id} waits on {room.node} for the room being released there"
    elif action == "reclaim":
        reason = f"reclaim: queue {task.queue} takes back what it deserves ({s.quotas.name}) from queues holding more than theirs"
    elif all(v.job == job.id for v in room.victims):
        reason = f"preempt: within job {job.id}, a task of task priority {task.priority} takes the place of lower ones"
    else:
        reason = f"preempt: job {job.id} (priority {job.priority}) takes from lower-priority jobs of queue {task.queue}"
    s.cycle.emit(
        Preempted,
        preemptor=task.id,
        app=task.job,
        queue=task.queue,
        node=room.node,
        resources=Resources(s.p.tasks[task.id].resources),
        victims=victims,
        model=s.p.model,
        reason=reason,
        explanation=spared_lines(eviction.spared),
    )


def _why_victim(s: Session, task: Task, victim: Task, action: Action) -> str:
    if action == "reclaim":
        deserved = {r: int(a) for r, a in s.quotas.deserved.get(victim.queue, {}).items() if r != POD_SLOT}
        none = [r for r in victim.queue_resources if victim.queue_resources[r] and not deserved.get(r)]
        if none:
            return f"queue {victim.queue} deserves no {', '.join(none)}: it runs on what other queues leave"
        return f"queue {victim.queue} held more than it deserves ({amounts(deserved)})"
    if victim.job == task.job:
        return f"task priority {victim.priority} is below the preemptor's {task.priority}"
    return f"job {victim.job} (priority {s.jobs[victim.job].priority}) is below job {task.job} (priority {s.jobs[task.job].priority})"


def spared_lines(spared: dict[str, str]) -> tuple[str, ...]:
    lines = [f"spared {task}: {why}" for task, why in sorted(spared.items())]
    if len(lines) > SPARED_SHOWN:
        lines = [*lines[:SPARED_SHOWN], f"and {len(lines) - SPARED_SHOWN} more candidates spared"]
    return tuple(lines)
