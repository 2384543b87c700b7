"""Nodes as Volcano's actions see them, and the statement that changes them as a unit.

A node has what it can hold (its capacity; `pods`, when the shim sends it, is its pod count:
every task takes one slot) and what is *used* by the tasks bound there. Victims in flight are
*releasing*; preemptors waiting for them are *pipelined* on the node. A task fits a node now
when its request is within the node's idle resources (capacity less used), and in the future
when within idle plus releasing less pipelined (Volcano's FutureIdle). A resource the node does
not list is not limited there.

A `Statement` records placements on the nodes as they are tried, and is committed (what it
placed is kept) or discarded (every change undone, last first), as Volcano's statements are:
a gang job's tasks are placed together or not at all.
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
        for name in sorted(p.nodes):
            node = p.nodes[name]
            if not node.schedulable:
                continue
            capacity[name] = dict(node.capacity)
            used[name] = {**node.allocated, POD_SLOT: len(node.tasks)}
            releasing[name] = {**node.preempting, POD_SLOT: sum(1 for t in node.tasks if p.tasks[t].status == "preempting")}
        return cls(capacity, used, releasing)

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
    for name, amount in request.items():
        amounts[name] = amounts.get(name, 0) + sign * amount


class Statement:
    """Placements tried on `nodes`, kept by `commit` or undone by `discard`."""

    def __init__(self, nodes: Nodes) -> None:
        self.nodes = nodes
        self.placed: list[tuple[Task, str]] = []

    def allocate(self, task: Task, node: str) -> None:
        _add(self.nodes.used.setdefault(node, {}), task.resources, +1)
        self.placed.append((task, node))

    def discard(self) -> None:
        for task, node in reversed(self.placed):
            _add(self.nodes.used[node], task.resources, -1)
        self.placed.clear()

    def commit(self) -> list[tuple[Task, str]]:
        placed, self.placed = self.placed, []
        return placed
