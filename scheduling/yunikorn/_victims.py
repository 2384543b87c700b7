"""What YuniKorn's two preemptions share: queue preemption by the seven laws (`_preemption`)
and required-node (DaemonSet) preemption (`_daemonset`).

Their outcomes (`Plan`, `Refusal`), their candidates (`Candidate`) and law 1's resorts
(ordinary tasks, then originators, then opted-out tasks), the room a node will have once its
victims in flight are gone, the order victims are preferred in, and the minimal set a greedy
choice is trimmed to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from preemptd.projections import NodeState, QueueState, TaskState

from .._explain import counted

__all__ = [
    "OPTED_OUT",
    "ORDINARY",
    "ORIGINATOR",
    "RESORT_WHY",
    "Candidate",
    "Plan",
    "Refusal",
    "exclusions",
    "minimise",
    "node_available",
    "resort_of",
    "summed",
    "too_small",
    "victim_order",
]


@dataclass(frozen=True)
class Refusal:
    """Why the task may not preempt, said as `decision.blocked`. `quiet` marks outcomes that
    are waits, not refusals (the delay has not passed, victims already leaving will make the
    room): nothing is said. `depends_on`, for a refusal that holds until the usage of one of
    these queues changes (a queue's usage covers the queues below it; none: the configuration
    alone), as those of the task's scope do; None for one that depends on more (nodes, victims)."""

    reasons: tuple[str, ...]
    details: tuple[str, ...] = ()
    quiet: bool = False
    depends_on: tuple[str, ...] | None = None


@dataclass
class Plan:
    """A preemption: the node the task will land on, its victims and why each was taken, the
    explanation and the reason (`guarantee` or `required node`)."""

    node: NodeState
    victims: list[TaskState]
    whys: dict[str, str]
    explanation: list[str]
    reason: Literal["guarantee", "required node"]


# How far law 1 lets a candidate be a victim: the higher, the later it is taken.
ORDINARY, ORIGINATOR, OPTED_OUT = 0, 1, 2  # OPTED_OUT: allow-preemption false, or (required-node) a disabled queue
RESORT_WHY = {
    ORDINARY: "",
    ORIGINATOR: "; an originator, taken as a last resort (law 1)",
    OPTED_OUT: "; opted out of preemption, taken as no other set would do (law 1)",
}


@dataclass(slots=True)
class Candidate:
    """A task that may be a victim, with what the victim order needs."""

    task: TaskState
    priority: int  # as seen from the queue the ask and the victim share
    resort: int  # ORDINARY, ORIGINATOR or OPTED_OUT
    lineage: list[QueueState]


def node_available(node: NodeState) -> dict[str, int]:
    """Room on the node once victims in flight leave, less what is reserved for others."""
    out = {}
    for name, amount in node.capacity.items():
        out[name] = amount - node.allocated.get(name, 0) + node.preempting.get(name, 0) - node.reserved.get(name, 0)
    return out


def too_small(node: NodeState, ask: dict[str, int]) -> list[str]:
    """The resources of which the node has less than the ask, even empty."""
    return [name for name, amount in ask.items() if amount > node.capacity.get(name, 0)]


def victim_order(candidate: Candidate) -> tuple[int, int, int, int, str]:
    """Preferred victims first: ordinary, then originators, then opted out (law 1), lowest
    priority, youngest (started last, then submitted last), then task id as the final tie-break."""
    task = candidate.task
    return (candidate.resort, candidate.priority, -(task.bound_at or 0), -task.seq, task.id)


def resort_of(task: TaskState) -> int:
    """How far law 1 lets `task` be a victim: opted out last, originators before them."""
    return OPTED_OUT if not task.allow_preemption else ORIGINATOR if task.originator else ORDINARY


def minimise(chosen: list[Candidate], need: dict[str, int]) -> list[Candidate]:
    """Drop victims the others make unnecessary, latest choices first but the last one kept."""
    kept = list(chosen)
    for candidate in reversed(chosen[:-1]):
        trial = [c for c in kept if c is not candidate]
        freed = summed(c.task.resources for c in trial)
        if all(freed.get(name, 0) >= short for name, short in need.items()):
            kept = trial
    return kept


def summed(resource_maps: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for resources in resource_maps:
        for name, amount in resources.items():
            out[name] = out.get(name, 0) + amount
    return out


def exclusions(excluded: Counter[str]) -> list[str]:
    """The tasks that were not candidates, counted per reason (at most ten reasons)."""
    return [f"not victims: {counted(count, 'task')}: {reason}" for reason, count in sorted(excluded.items())][:10]
