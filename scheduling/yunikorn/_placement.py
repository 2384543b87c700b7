"""Placement: does a task fit a node and its queues, and which node does it go to.

Room is what is free now less what reservations claim of it (`claimed`: the part of a waiting
preemptor's ask its leaving victims do not cover), so the room a preemption makes goes to its
preemptor and nobody else, and nothing else is held back. Nodes are tried in name order and the
first with room wins (first fit). Within one cycle free room only shrinks, so for each ask shape
the scan resumes where it last succeeded and a shape that fitted nowhere is not tried again:
placing N tasks costs O(N + nodes) per shape, not O(N * nodes). Between cycles room grows only
on the nodes the fold changed, so the scan resumes there or where it last stopped, whichever
is first (`_kept.first_fit`): a full cluster's first nodes are not tried again each cycle.
"""

from __future__ import annotations

from preemptd.projections import (
    NodeState,
    PartitionState,
    QueueState,
    TaskState,
    over_limit,
    reservation_claim,
)

__all__ = ["Placement", "fits_node", "queue_blocker"]


def fits_node(p: PartitionState, node: NodeState, task: TaskState) -> bool:
    """`task` fits in what `node` has free now that no other reservation claims."""
    ask, capacity, allocated, claimed = task.resources, node.capacity, node.allocated, node.claimed
    own = reservation_claim(p, task) if task.reserved_node == node.name else {}
    for name, amount in ask.items():
        free = capacity.get(name, 0) - allocated.get(name, 0) - claimed.get(name, 0) + own.get(name, 0)
        if amount > free:
            return False
    return True


def queue_blocker(p: PartitionState, task: TaskState) -> tuple[QueueState, dict[str, int]] | None:
    """The first queue on the task's lineage whose max the task would exceed, and by how much.

    Usage is what the queue holds plus what its reservations claim, the task's own claim aside.
    """
    for path in p.queues[task.queue].lineage:
        queue = p.queues[path]
        if queue.max is None:
            continue
        held = dict(queue.allocated)
        for name, amount in queue.claimed.items():
            held[name] = held.get(name, 0) + amount
        if task.reserved_node is not None:
            for name, amount in reservation_claim(p, task, path).items():
                held[name] -= amount
        over = over_limit(held, task.resources, queue.max)
        if over:
            return queue, over
    return None


class Placement:
    """First-fit node choice for one cycle."""

    def __init__(self, p: PartitionState, nodes: list[NodeState], cursor: dict[tuple[tuple[str, int], ...], int] | None = None) -> None:
        """For `p`, whose schedulable nodes by name are `nodes`; `cursor`: by the ask's shape,
        the first node that may fit it (kept between cycles by the caller, updated here)."""
        self._p = p
        self._nodes = nodes
        self._cursor = cursor if cursor is not None else {}

    def find(self, task: TaskState) -> NodeState | None:
        """The node `task` goes to, or None if no node has room for it now."""
        p = self._p
        if task.required_node is not None:
            node = p.nodes.get(task.required_node)
            return node if node is not None and node.schedulable and fits_node(p, node, task) else None
        shape = tuple(task.resources.items())
        start = self._cursor.get(shape, 0)
        for index in range(start, len(self._nodes)):
            if fits_node(p, self._nodes[index], task):
                self._cursor[shape] = index
                return self._nodes[index]
        self._cursor[shape] = len(self._nodes)
        return None
