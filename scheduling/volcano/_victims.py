"""Making room for one preemptor on one node, as Volcano's preempt and reclaim do.

The nodes are tried by name. On each, the candidates there (in victim order) go to the plugins'
votes; the node is passed over unless the preemptor would fit once every victim the votes allow
is gone. Then victims are evicted one after another, only while the preemptor does not fit in
the node's future (idle plus releasing less pipelined) or `enough` (the queue's rule) says more
is needed; once it fits, it is pipelined on the node and the search ends. A node where it still
does not fit has its evictions undone, and the next node is tried.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from ._config import SchedulerConf
from ._jobs import Task
from ._nodes import Nodes, Statement
from ._votes import Ballot, victims

__all__ = ["ByNode", "Room", "make_room"]


class ByNode(dict[str, list[Task]]):
    """Running tasks by node, each node's in victim order; made once for the preemptors of a
    session's action, which try the nodes by name (`names`, sorted once)."""

    @cached_property
    def names(self) -> list[str]:
        return sorted(self)


@dataclass(frozen=True)
class Room:
    """Where a preemptor waits, the victims evicted for it, and the plugins that allowed them."""

    node: str
    victims: list[Task]
    voters: tuple[str, ...]


def make_room(
    preemptor: Task,
    candidates: Mapping[str, Sequence[Task]],
    eligible: Callable[[Task], bool | str],
    hook: str,
    conf: SchedulerConf,
    ballot: Ballot,
    statement: Statement,
    enough: Callable[[], bool] = lambda: True,
    guard: str | None = None,
    fits_no_node_now: bool = False,
) -> tuple[Room | None, dict[str, str], int]:
    """The node and victims that make room for `preemptor` (kept in `statement`), or None;
    per candidate spared on the nodes tried, the rule or plugin that spared it; and how many
    candidates were eligible there. `candidates` are the running tasks by node, in victim
    order; `eligible` says whether one may be a victim of `preemptor` (a reason: spared, and why).
    When it `fits_no_node_now` (just checked), a node without candidates could take it only with what
    is being released there: the others are not looked at.
    """
    nodes = statement.nodes
    spared: dict[str, str] = {}
    seen = 0
    tried: Iterable[str] = nodes.capacity
    if fits_no_node_now:
        tried = _with_candidates_or_releasing(candidates, nodes)
    for node in tried:
        here = []
        for task in candidates.get(node, ()):
            verdict = eligible(task)
            if verdict is True:
                here.append(task)
            elif verdict:
                spared[task.id] = verdict
        seen += len(here)
        if not here and nodes.short_in_future(node, preemptor.resources):
            continue  # no victim here, and no room without one
        voted = victims(conf, hook, ballot, preemptor, here, guard) if here else None
        allowed = voted.allowed if voted else []
        spared.update(voted.dropped if voted else {})
        if not _fits_without(nodes, node, preemptor, allowed):
            continue
        attempt = Statement(nodes)
        for victim in allowed:
            if not nodes.short_in_future(node, preemptor.resources) and enough():
                break
            attempt.evict(victim)
        if nodes.short_in_future(node, preemptor.resources) or not enough():
            attempt.discard()
            continue
        attempt.pipeline(preemptor, node)
        room = Room(node, list(attempt.evicted), voted.voters if voted and attempt.evicted else ())
        for task in allowed[len(attempt.evicted) :]:  # allowed, but the preemptor fits without them
            spared[task.id] = (
                f"not needed: allowed by {', '.join(voted.voters) if voted else 'every plugin'}, but the preemptor fits once the victims before it in "
                "victim order are gone"
            )
        statement.absorb(attempt)
        return room, spared, seen
    return None, spared, seen


def _with_candidates_or_releasing(candidates: Mapping[str, Sequence[Task]], nodes: Nodes) -> Iterator[str]:
    """The schedulable nodes with candidates or with room being released, by name, as the
    search asks for them (it stops at the first that makes room)."""
    names = candidates.names if isinstance(candidates, ByNode) else sorted(candidates)
    releasing_only = sorted(node for node in nodes.releasing if node not in candidates)
    return (node for node in heapq.merge(names, releasing_only) if node in nodes.capacity)


def _fits_without(nodes: Nodes, node: str, preemptor: Task, allowed: list[Task]) -> bool:
    """`preemptor` would fit `node`'s future were every task of `allowed` gone."""
    attempt = Statement(nodes)
    for victim in allowed:
        attempt.evict(victim)
    try:
        return not nodes.short_in_future(node, preemptor.resources)
    finally:
        attempt.discard()
