"""Nodes as Volcano's actions see them, and the statement that changes them as a unit.

A node has what it can hold (its capacity; `pods`, when the shim sends it, is its pod count:
every task takes one slot) and what is *used* by the tasks bound there. Victims in flight are
*releasing*; preemptors waiting for them are *pipelined* on the node. A task fits a node now
when its request is within the node's idle resources (capacity less used), and in the future
when within idle plus releasing less pipelined (Volcano's FutureIdle). A resource the node does
not list is not limited there.

A `Statement` records placements, evictions and pipelined preemptors on the nodes as they are
tried, and is committed (kept) or discarded (every change undone, last first), as Volcano's
statements are: a gang job's tasks are placed together or not at all, and a preemption whose
job does not reach its gang evicts nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from preemptd.projections import PartitionState

from ._jobs import POD_SLOT, Task

__all__ = ["Nodes", "Statement"]

Amounts = dict[str, int]


@dataclass
class Nodes:
    capacity: dict[str, Amounts]
    used: dict[str, Amounts]
    releasing: dict[str, Amounts] = field(default_factory=dict)
    pipelined: dict[str, Amounts] = field(default_factory=dict)

    @classmethod
    def of(cls, p: PartitionState) -> Nodes:
        """The schedulable nodes of `p`, by name, with what their tasks use (a pod slot each)."""
        capacity: dict[str, Amounts] = {}
        used: dict[str, Amounts] = {}
        releasing: dict[str, Amounts] = {}
        pipelined: dict[str, Amounts] = {}
        for name in sorted(p.nodes):
            node = p.nodes[name]
            if not node.schedulable:
                continue
            capacity[name] = dict(node.capacity)
            used[name] = _nonzero({**node.allocated, POD_SLOT: len(node.tasks)})
            releasing[name] = _nonzero({**node.preempting, POD_SLOT: sum(1 for t in node.tasks if p.tasks[t].status == "preempting")})
            pipelined[name] = _nonzero({**node.reserved, POD_SLOT: len(node.reservations)})
        return cls(capacity, used, releasing, pipelined)

    def short_now(self, node: str, request: Mapping[str, int]) -> list[str]:
        """The resources `request` does not find idle on `node` (none: it fits now)."""
        return self._short(node, request, future=False)

    def short_in_future(self, node: str, request: Mapping[str, int]) -> list[str]:
        """The same, counting what is being released and what waits for it (FutureIdle)."""
        return self._short(node, request, future=True)

    def _short(self, node: str, request: Mapping[str, int], *, future: bool) -> list[str]:
        capacity, used = self.capacity[node], self.used[node]
        releasing, pipelined = self.releasing.get(node, {}), self.pipelined.get(node, {})
        short = []
        for name, amount in request.items():
            if name not in capacity or not amount:
                continue
            idle = capacity[name] - used.get(name, 0)
            if future:
                idle += releasing.get(name, 0) - pipelined.get(name, 0)
            if amount > idle:
                short.append(name)
        return short

    def first_fitting(self, request: Mapping[str, int], nodes: Iterable[str] | None = None) -> str | None:
        """The first node, by name, where `request` fits now."""
        return next((n for n in (self.capacity if nodes is None else nodes) if not self.short_now(n, request)), None)


def _add(amounts: Amounts, request: Mapping[str, int], sign: int) -> None:
    """Add (or take away) `request`; amounts that come to 0 are dropped, so that what is
    undone compares equal to what was."""
    for name, amount in request.items():
        total = amounts.get(name, 0) + sign * amount
        if total:
            amounts[name] = total
        else:
            amounts.pop(name, None)


def _nonzero(amounts: Mapping[str, int]) -> Amounts:
    return {name: amount for name, amount in amounts.items() if amount}


class Statement:
    """Placements tried on `nodes`, kept by `commit` or undone by `discard`."""

    def __init__(self, nodes: Nodes) -> None:
        self.nodes = nodes
        self.placed: list[tuple[Task, str]] = []
        self.evicted: list[Task] = []
        self.pipelined: list[tuple[Task, str]] = []

    def allocate(self, task: Task, node: str) -> None:
        self._change("used", task, node, +1)
        self.placed.append((task, node))

    def evict(self, victim: Task) -> None:
        """`victim` leaves its node: what it holds is releasing."""
        assert victim.node is not None
        self._change("releasing", victim, victim.node, +1)
        self.evicted.append(victim)

    def pipeline(self, task: Task, node: str) -> None:
        """`task` waits on `node` for what is being released there."""
        self._change("pipelined", task, node, +1)
        self.pipelined.append((task, node))

    def absorb(self, attempt: Statement) -> None:
        """Take over what `attempt` (on the same nodes) changed, to keep or undo with the rest."""
        self.placed += attempt.placed
        self.evicted += attempt.evicted
        self.pipelined += attempt.pipelined
        attempt.placed, attempt.evicted, attempt.pipelined = [], [], []

    def discard(self) -> None:
        for task, node in reversed(self.pipelined):
            self._change("pipelined", task, node, -1)
        for victim in reversed(self.evicted):
            self._change("releasing", victim, victim.node or "", -1)
        for task, node in reversed(self.placed):
            self._change("used", task, node, -1)
        self.placed, self.evicted, self.pipelined = [], [], []

    def _change(self, what: str, task: Task, node: str, sign: int) -> None:
        _add(getattr(self.nodes, what).setdefault(node, {}), task.resources, sign)

    def commit(self) -> list[tuple[Task, str]]:
        """Keep every change; the placements made (evictions and pipelines stay in `evicted`
        and `pipelined` for the caller to decide on)."""
        placed, self.placed = self.placed, []
        return placed
