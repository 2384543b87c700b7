"""Placement: does a task fit a node and its queues, and which node does it go to.

Nodes are tried in name order and the first with room wins (first fit). Within one cycle free
space only shrinks, so for each ask shape the scan resumes where it last succeeded and a shape
that fitted nowhere is not tried again: placing N tasks costs O(N + nodes) per shape, not
O(N * nodes). The same checks serve preemption, which asks "would it fit once these go?".
"""

from __future__ import annotations

from projections import NodeState, PartitionState, QueueState, TaskState, over_limit
from scheduling._ordering import used

__all__ = ["Placement", "node_room", "queue_blocker"]


def node_room(node: NodeState, task: TaskState) -> dict[str, int]:
    """What `task` may use on `node` now: capacity less allocations and other reservations."""
    room = {}
    own = task.resources if task.reserved_node == node.name else None
    for name in task.resources:
        free = node.capacity.get(name, 0) - node.allocated.get(name, 0) - node.reserved.get(name, 0)
        room[name] = free + (own[name] if own else 0)
    return room


def _fits_node(node: NodeState, task: TaskState) -> bool:
    ask, capacity, allocated, reserved = task.resources, node.capacity, node.allocated, node.reserved
    own = task.resources if task.reserved_node == node.name else None
    for name, amount in ask.items():
        free = capacity.get(name, 0) - allocated.get(name, 0) - reserved.get(name, 0)
        if own:
            free += own[name]
        if amount > free:
            return False
    return True


def queue_blocker(p: PartitionState, task: TaskState) -> tuple[QueueState, dict[str, int]] | None:
    """The first queue on the task's lineage whose max the task would exceed, and by how much.

    A queue's usage counts asks waiting on reservations, so a reserved preemptor's room is kept;
    the task's own reservation is not counted twice.
    """
    for path in p.queues[task.queue].lineage:
        queue = p.queues[path]
        if queue.max is None:
            continue
        held = used(queue)
        if task.reserved_node is not None:
            held = {name: amount - task.resources.get(name, 0) for name, amount in held.items()}
        over = over_limit(held, task.resources, queue.max)
        if over:
            return queue, over
    return None


class Placement:
    """First-fit node choice for one cycle."""

    def __init__(self, p: PartitionState) -> None:
        self._p = p
        self._nodes = [p.nodes[name] for name in sorted(p.nodes) if p.nodes[name].schedulable]
        self._cursor: dict[tuple, int] = {}

    def find(self, task: TaskState) -> NodeState | None:
        """The node `task` goes to, or None if no node has room for it now."""
        if task.required_node is not None:
            node = self._p.nodes.get(task.required_node)
            return node if node is not None and node.schedulable and _fits_node(node, task) else None
        shape = tuple(task.resources.items())
        start = self._cursor.get(shape, 0)
        for index in range(start, len(self._nodes)):
            if _fits_node(self._nodes[index], task):
                self._cursor[shape] = index
                return self._nodes[index]
        self._cursor[shape] = len(self._nodes)
        return None
