"""The order in which pending tasks are tried: queues by priority then fairness; within a leaf,
applications first in, first out, tasks by priority (`_backlog.order_key`, kept between cycles).

At every parent the children are kept in a heap keyed on (queue priority, share of guarantee,
path); after each allocation only the keys on the allocated leaf's lineage change, so picking the
next leaf costs O(depth * log children) rather than a full sort of the tree.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from preemptd.projections import PartitionState, QueueState

from .._model import rotation

__all__ = ["QueueOrder", "QueuePriorities", "effective_priority", "share"]


def effective_priority(p: PartitionState, priority: int, leaf: str, stop_before: str | None = None) -> int:
    """A task's priority as seen from `stop_before` (a common ancestor), or from above the root.

    Walking up from the leaf, each queue adds its `priority.offset`; a queue with
    `priority.policy: fence` replaces the value by its offset, so from outside the fence every
    task inside looks alike.
    """
    value = priority
    for path in p.queues[leaf].lineage:
        if path == stop_before:
            break
        queue = p.queues[path]
        if queue.props.priority_policy == "fence":
            value = queue.props.priority_offset
        else:
            value += queue.props.priority_offset
    return value


def used(queue: QueueState) -> dict[str, int]:
    """What a queue holds for fairness and limits: allocations plus asks waiting on a reservation."""
    if not queue.reserved:
        return queue.allocated
    out = dict(queue.allocated)
    for name, amount in queue.reserved.items():
        out[name] = out.get(name, 0) + amount
    return out


def share(queue: QueueState, capacity: dict[str, int]) -> float:
    """The dominant share of the queue's usage against its guarantee (else its max, else the
    cluster): the fair-order key, lowest first."""
    base = queue.guaranteed or queue.max or capacity
    held = used(queue)
    ratios = [held.get(name, 0) / limit for name, limit in base.items() if limit > 0]
    return max(ratios, default=0.0)


class QueuePriorities:
    """Each queue's priority in the order: the best priority of the tasks waiting below it, as
    seen from above it (each queue's `priority.offset` added, a fence's offset in place of what
    is below it). Kept between cycles as leaves' best priorities change (`set`): a parent's is
    its children's best, shifted, so a change climbs only as far as it changes something."""

    def __init__(self, p: PartitionState) -> None:
        self._p = p
        self.of: dict[str, int] = {}  # every queue with tasks waiting below it
        self._children: dict[str, dict[int, int]] = {}  # per parent: how many of its children have each priority

    def set(self, leaf: str, best: int | None) -> None:
        """The best priority of the tasks waiting in `leaf` is now `best` (None: none waits)."""
        queues = self._p.queues
        lineage = queues[leaf].lineage
        value = None if best is None else _shifted(queues[leaf], best)
        for path, parent in zip(lineage, [*lineage[1:], None]):
            old = self.of.get(path)
            if old == value:
                return
            if value is None:
                del self.of[path]
            else:
                self.of[path] = value
            if parent is None:
                return
            counts = self._children.setdefault(parent, {})
            if old is not None:
                counts[old] -= 1
                if not counts[old]:
                    del counts[old]
            if value is not None:
                counts[value] = counts.get(value, 0) + 1
            value = _shifted(queues[parent], max(counts)) if counts else None


def _shifted(queue: QueueState, priority: int) -> int:
    """A priority below `queue` as seen from above it."""
    props = queue.props
    offset: int = props.priority_offset
    return offset if props.priority_policy == "fence" else priority + offset


class QueueOrder:
    """The order leaf queues are served in: `next_leaf()` is the leaf whose next task is tried;
    `allocated(leaf)` re-ranks its queues once a task of it got room; `retire(leaf)` once it
    has nothing left to try this phase. `priority` gives each queue with tasks waiting below it
    its priority (`QueuePriorities`); `leaves` are the leaves with tasks to try, a subset of
    those (a leaf passed over keeps its place in its parents' priorities).

    A queue is live while some leaf below it has tasks left to try. Each live queue has one
    current entry in its parent's heap; older entries are skipped by their version number.
    """

    def __init__(self, p: PartitionState, priority: dict[str, int], leaves: Iterable[str]) -> None:
        self._p = p
        self._leaves = set(leaves)
        self._priority = priority
        self._live: set[str] = set()
        self._live_children: dict[str, int] = {}
        self._version: dict[str, int] = {}
        self._heaps: dict[str, list[tuple[int, float, str, int]]] = {}
        for leaf in self._leaves:  # the order of pushes is none of the order's: a heap key ends in the path
            self._make_live(p.queues[leaf].lineage)

    def _make_live(self, lineage: list[str]) -> None:
        for path, parent in zip(lineage, [*lineage[1:], None]):
            if path in self._live:
                return
            self._live.add(path)
            if parent is not None:
                self._live_children[parent] = self._live_children.get(parent, 0) + 1
                self._push(path, parent)

    def _push(self, path: str, parent: str) -> None:
        version = self._version[path] = self._version.get(path, 0) + 1
        key = (-self._priority[path], share(self._p.queues[path], self._p.capacity), path, version)
        heapq.heappush(self._heaps.setdefault(parent, []), key)

    def next_leaf(self) -> str | None:
        root = next(iter(self._p.queues))
        if root not in self._live:
            return None
        path = root
        while path not in self._leaves:
            heap = self._heaps[path]
            while heap[0][2] not in self._live or self._version[heap[0][2]] != heap[0][3]:
                heapq.heappop(heap)
            path = heap[0][2]
        return path

    def rotated(self, after: str | None) -> str | None:
        """The leaf a phase begins at after a cut (`Cycle.phase`): the first live leaf by name
        after `after`; then `next_leaf` goes on in the usual order."""
        return rotation(self._leaves, after)

    def retire(self, leaf: str) -> None:
        """A leaf with nothing left to try stops being live, and so do parents left empty."""
        self._leaves.discard(leaf)
        lineage = self._p.queues[leaf].lineage
        for path, parent in zip(lineage, [*lineage[1:], None]):
            self._live.discard(path)
            if parent is None:
                return
            self._live_children[parent] -= 1
            if self._live_children[parent]:
                return

    def allocated(self, leaf: str) -> None:
        """A task of `leaf` was placed: its queues' shares grew, so rank the live ones again."""
        lineage = self._p.queues[leaf].lineage
        for path, parent in zip(lineage, lineage[1:]):
            if path in self._live:
                self._push(path, parent)
