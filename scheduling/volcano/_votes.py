"""Which candidates may be victims: the plugins' votes, combined tier by tier as Volcano does.

In a tier, every enabled plugin that votes on the hook (`preemptable` for preempt, `reclaimable`
for reclaim, each behind its `enablePreemptable` / `enableReclaimable` switch) is shown every
candidate, and the victims are those every one of them keeps; a plugin keeping none leaves the
tier without victims. The first tier with victims decides; a tier where no plugin votes is
passed over. So where a plugin sits in the tiers matters, as in Volcano.

The votes:

- **gang**: a victim's job keeps at least `min_available` ready tasks (counting the
  candidates before it from the same job): a job at its gang size is protected.
- **priority** (preempt only): the victim's job has a strictly lower priority than the
  preemptor's; within the same job, a strictly lower task priority.
- **proportion** (reclaim only): a victim's queue holds more than it deserves (on some
  resource), counting the candidates before it from the same queue as gone.
- **capacity** (reclaim only): a victim must use a resource the reclaimer asks for; its queue
  never drops below its guarantee; and it is taken if its queue deserves none of what it uses,
  or holds more than it deserves of something it uses, and so does every ancestor up to
  `ancestorReclaimLevel` (a subtree that as a whole holds no more than it deserves is spared)
  but one the reclaimer's queue has at the same level (siblings under a parent at its share
  may reclaim from each other). A victim whose queue deserves none of what it uses is spared
  when its queue shares an ancestor within the level with the reclaimer's and the reclaimer's
  queue deserves none of what its task asks: no real contention (Volcano's
  `getReclaimeeAncestorToCheck` and `sharesAnyNonRootAncestorWithinLevel`).
- **drf** (preempt only): a victim's job keeps a dominant resource share (of the cluster) at
  least the preemptor job's once the preemptor is in, counting the candidates before it from
  the same job as gone.
- **conformance**: never a pod of priority class `system-cluster-critical` or
  `system-node-critical` (the task's `priority_class`, else its application's), nor one of
  namespace `kube-system` (the task's `namespace`, else its application's).

Every candidate a vote drops gets a line saying which plugin dropped it and why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from ._config import Plugin, SchedulerConf
from ._jobs import POD_SLOT, Job, Task
from ._order import drf_share

__all__ = ["Ballot", "Verdict", "conformance_spares", "victims"]


@dataclass(frozen=True)
class Ballot:
    """What the votes need to know: the jobs and how many tasks of each are ready, and per
    queue what it holds, deserves and is guaranteed (held and ready change as victims go);
    `holds` is what a queue holds, a parent its leaves' (live too), and `ancestors` the
    queues above a leaf that capacity's reclaim checks (up to `ancestorReclaimLevel`)."""

    jobs: Mapping[str, Job]
    held: Mapping[str, Mapping[str, int]]
    deserved: Mapping[str, Mapping[str, Fraction]]
    ready: Mapping[str, int]
    guarantees: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    holds: Callable[[str], Mapping[str, int]] | None = None
    ancestors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    job_held: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # per job, live: drf's
    total: Mapping[str, int] = field(default_factory=dict)  # the cluster's, drf's shares are of


Vote = Callable[[Ballot, Task, list[Task], dict[str, str]], list[Task]]


def _gang(ballot: Ballot, preemptor: Task, candidates: list[Task], dropped: dict[str, str]) -> list[Task]:
    running: dict[str, int] = {}
    kept = []
    for task in candidates:
        job = ballot.jobs[task.job]
        left = running.setdefault(job.id, ballot.ready.get(job.id, 0))
        if left > job.min_available:
            running[job.id] = left - 1
            kept.append(task)
        else:
            dropped[task.id] = f"gang: job {job.id} would drop below min_available {job.min_available} ({left} ready)"
    return kept


def _priority(ballot: Ballot, preemptor: Task, candidates: list[Task], dropped: dict[str, str]) -> list[Task]:
    mine = ballot.jobs[preemptor.job]
    kept = []
    for task in candidates:
        theirs = ballot.jobs[task.job]
        if theirs.id == mine.id:
            allowed, why = task.priority < preemptor.priority, f"task priority {task.priority} is not below the preemptor's {preemptor.priority}"
        else:
            allowed, why = theirs.priority < mine.priority, f"job priority {theirs.priority} is not below the preemptor job's {mine.priority}"
        if allowed:
            kept.append(task)
        else:
            dropped[task.id] = f"priority: {why}"
    return kept


def _proportion(ballot: Ballot, preemptor: Task, candidates: list[Task], dropped: dict[str, str]) -> list[Task]:
    holding: dict[str, dict[str, int]] = {}
    kept = []
    for task in candidates:
        held = holding.setdefault(task.queue, dict(ballot.held.get(task.queue, {})))
        deserved = ballot.deserved.get(task.queue, {})
        if all(amount <= deserved.get(r, 0) for r, amount in held.items() if r != POD_SLOT):
            dropped[task.id] = f"proportion: queue {task.queue} holds no more than it deserves"
            continue
        _take(held, task)
        kept.append(task)
    return kept


def _capacity(ballot: Ballot, preemptor: Task, candidates: list[Task], dropped: dict[str, str]) -> list[Task]:
    wanted = _used(preemptor)
    mine = ballot.ancestors.get(preemptor.queue, ())
    contends = _deserves_some(ballot.deserved.get(preemptor.queue, {}), wanted)
    holding: dict[str, dict[str, int]] = {}

    def held_by(queue: str) -> dict[str, int]:
        source = ballot.holds(queue) if ballot.holds is not None else ballot.held.get(queue, {})
        return holding.setdefault(queue, dict(source))

    kept = []
    for task in candidates:
        theirs = ballot.ancestors.get(task.queue, ())
        held, guarantee, uses = held_by(task.queue), ballot.guarantees.get(task.queue, {}), _used(task)
        deserved = ballot.deserved.get(task.queue, {})
        checked = _ancestors_checked(mine, theirs)
        within = next((q for q in checked if _within_deserved(held_by(q), ballot.deserved.get(q, {}), uses)), None)
        shared = [q for q in theirs if q in mine]
        if not uses & wanted:
            why = "it uses none of the resources the reclaimer asks for"
        elif any(held.get(r, 0) - task.resources[r] < guarantee.get(r, 0) for r in uses):
            why = f"queue {task.queue} would drop below its guarantee"
        elif not _deserves_some(deserved, uses) and shared and not contends:
            why = (
                f"no real contention: queue {task.queue} deserves none of what the task uses, and it shares {shared[0]} "
                f"(within ancestorReclaimLevel) with queue {preemptor.queue}, which deserves none of what its task asks"
            )
        elif _within_deserved(held, deserved, uses):
            why = f"queue {task.queue} holds no more than it deserves of what the task uses"
        elif within is not None:
            why = f"its ancestor queue {within} holds no more than it deserves of what the task uses (ancestorReclaimLevel)"
        else:
            for queue in (task.queue, *checked):
                _take(held_by(queue), task)
            kept.append(task)
            continue
        dropped[task.id] = f"capacity: {why}"
    return kept


def _ancestors_checked(mine: tuple[str, ...], theirs: tuple[str, ...]) -> tuple[str, ...]:
    """The ancestors of a victim's queue, `theirs` (below root, nearest first, up to the reclaim
    level), that capacity checks: each but one that is the reclaimer's own at the same level."""
    return tuple(queue for level, queue in enumerate(theirs) if level >= len(mine) or mine[level] != queue)


def _deserves_some(deserved: Mapping[str, Fraction], uses: set[str]) -> bool:
    return any(deserved.get(r, 0) > 0 for r in uses)


def _within_deserved(held: Mapping[str, int], deserved: Mapping[str, Fraction], uses: set[str]) -> bool:
    """A queue that deserves some of what a task uses, and holds no more than that of any."""
    counted = uses & set(deserved)
    return bool(counted) and all(held.get(r, 0) <= deserved[r] for r in counted)


def _used(task: Task) -> set[str]:
    return {r for r, amount in task.resources.items() if amount and r != POD_SLOT}


def _take(held: dict[str, int], task: Task) -> None:
    for r, amount in task.resources.items():
        held[r] = held.get(r, 0) - amount


def _drf(ballot: Ballot, preemptor: Task, candidates: list[Task], dropped: dict[str, str]) -> list[Task]:
    """A victim's job keeps a dominant resource share at least the preemptor job's, once the
    preemptor is in and the candidates before it from the same job are gone."""
    mine = dict(ballot.job_held.get(preemptor.job, {}))
    for r, amount in preemptor.queue_resources.items():
        mine[r] = mine.get(r, 0) + amount
    theirs_before = drf_share(mine, ballot.total)
    holding: dict[str, dict[str, int]] = {}
    kept = []
    for task in candidates:
        held = holding.setdefault(task.job, dict(ballot.job_held.get(task.job, {})))
        _take(held, task)
        left = drf_share(held, ballot.total)
        if theirs_before <= left:
            kept.append(task)
        else:
            dropped[task.id] = f"drf: job {task.job}'s dominant share would fall to {_shown(left)}, below the preemptor job's {_shown(theirs_before)}"
    return kept


def _shown(share: Fraction) -> str:
    return f"{float(share):.3f}"


#: What Volcano's conformance plugin never evicts: Kubernetes' critical pods, and kube-system's.
CRITICAL_CLASSES = ("system-cluster-critical", "system-node-critical")
SYSTEM_NAMESPACE = "kube-system"


def _conformance(ballot: Ballot, preemptor: Task, candidates: list[Task], dropped: dict[str, str]) -> list[Task]:
    kept = []
    for task in candidates:
        why = conformance_spares(task)
        if why:
            dropped[task.id] = why
        else:
            kept.append(task)
    return kept


def conformance_spares(task: Task) -> str | None:
    """Why conformance never evicts `task` (None: it may)."""
    if task.priority_class in CRITICAL_CLASSES:
        return f"conformance: priority class {task.priority_class} is never evicted"
    if task.namespace == SYSTEM_NAMESPACE:
        return f"conformance: a pod of namespace {SYSTEM_NAMESPACE} is never evicted"
    return None


VOTES: dict[str, dict[str, Vote]] = {
    "preemptable": {"gang": _gang, "priority": _priority, "conformance": _conformance, "drf": _drf},
    "reclaimable": {"gang": _gang, "proportion": _proportion, "capacity": _capacity, "conformance": _conformance},
}
SWITCH = {"preemptable": "enablePreemptable", "reclaimable": "enableReclaimable"}


@dataclass(frozen=True)
class Verdict:
    """The victims allowed (in victim order), the plugins of the tier that allowed them, and
    for each candidate dropped, which plugin dropped it and why."""

    allowed: list[Task]
    voters: tuple[str, ...]
    dropped: dict[str, str]


def victims(conf: SchedulerConf, hook: str, ballot: Ballot, preemptor: Task, candidates: list[Task], guard: str | None = None) -> Verdict:
    """What the first tier with any victims allows among `candidates` (in victim order).

    Guards vote on what a tier allows whichever tier they sit in (Volcano asks a later tier
    when one refuses all): gang wherever it votes on `hook` (a gang it protects is never
    broken), and `guard` if given (the sharing plugin, for reclaim)."""
    dropped: dict[str, str] = {}
    guards = [plugin.name for tier in conf.tiers for plugin in tier if plugin.name == "gang" and _votes(plugin, hook)]
    guards += [guard] if guard is not None else []
    for tier in conf.tiers:
        voters = [plugin.name for plugin in tier if _votes(plugin, hook)]
        if not voters:
            continue
        kept = {task.id for task in candidates}
        for plugin in voters:  # each sees every candidate; the tier keeps what all keep
            kept &= {task.id for task in VOTES[hook][plugin](ballot, preemptor, candidates, dropped)}
        allowed = [task for task in candidates if task.id in kept]
        for plugin in guards:
            if plugin not in voters and allowed:
                voters.append(plugin)
                allowed = VOTES[hook][plugin](ballot, preemptor, allowed, dropped)
        kept = {task.id for task in allowed}
        if allowed:
            return Verdict(allowed, tuple(voters), {task: why for task, why in dropped.items() if task not in kept})
    return Verdict([], (), dropped)


def _votes(plugin: Plugin, hook: str) -> bool:
    return plugin.name in VOTES[hook] and plugin.enabled(SWITCH[hook])
