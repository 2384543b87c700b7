"""The waiting tasks of a YuniKorn partition, kept between cycles in the order a cycle tries
them, so that a cycle's cost follows what changed, not how many tasks wait.

Per leaf queue, the tasks waiting for a node (pending, no node reserved for them) are kept in
*groups* of tasks alike for a cycle: the same ask (resources in their order), priority,
preemption policy and required node (and application, for a required node). Every task of a
group fits the same nodes and queue maxes, and is refused preemption for the same reasons. In
each group the tasks are sorted in the order a cycle tries them (`order_key`), and filed by the
reasons they were last told (`TaskState.blocked`), so that a cycle finds at once the tasks
that still need telling. Tasks still within their queue's `preemption.delay` are listed apart
(`Leaf.young`, counted per group), for the next moment time alone changes a decision
(`next_delay`) and so that a group of only such tasks is passed over at once.

The fold says which tasks an event changes (`touch`, before it applies the event); the next
cycle files them again (`refresh`). What is kept always equals what `Backlog.of` builds from
the whole partition; a configuration change, or a restore, builds it whole.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterator

from sortedcontainers import SortedKeyList

from preemptd.events import AppFinished, Blocked, LogEvent, NodeRemoved, Preempted, Tick, Unreserved
from preemptd.projections import PartitionState, TaskState

__all__ = ["Backlog", "Group", "GroupKey", "order_key", "tasks_changed_by"]

Shape = tuple[tuple[str, int], ...]
#: The ask, the priority, whether it may preempt, its required node and (with one) its application.
GroupKey = tuple[Shape, int, bool, str | None, str | None]
Reasons = tuple[str, ...]

_INT32 = 1 << 31
_SEQ = 53  # bits of a log position (`MAX_TIMESTAMP` bounds them too)


def order_key(p: PartitionState, task: TaskState) -> int:
    """The order a cycle tries a leaf's tasks in, as one number: the application's priority
    (higher first), the application's arrival, the task's priority (higher first), its own
    arrival. Packed, a key costs a fraction of a tuple's memory, kept for every waiting task."""
    app = p.apps[task.app]
    return (((((_INT32 - app.priority) << _SEQ) | app.seq) << 32 | (_INT32 - task.priority)) << _SEQ) | task.seq


def group_key(task: TaskState) -> GroupKey:
    return (tuple(task.resources.items()), task.priority, task.may_preempt, task.required_node, task.app if task.required_node else None)


def tasks_changed_by(p: PartitionState, event: LogEvent) -> tuple[str, ...]:
    """The tasks whose place in the backlog `event` may change, asked before the fold applies
    it: those it submits, binds, places, releases, tells, reserves or lets go of."""
    match event:
        case Tick():
            return ()
        case Preempted():
            return (event.preemptor,)
        case NodeRemoved() if event.node in p.nodes:
            return tuple(p.nodes[event.node].reservations)
        case AppFinished() if event.app in p.apps:
            return tuple(p.apps[event.app].tasks)
        case Blocked() | Unreserved():
            return (event.task,)
    task = getattr(event, "task", None)
    return (task,) if isinstance(task, str) else ()


class Group:
    """The waiting tasks of one leaf alike for a cycle (`GroupKey`), sorted by `order` (the
    partition's `order_key`) and filed by the reasons each was last told."""

    __slots__ = ("key", "order", "size", "told", "young")

    def __init__(self, key: GroupKey, order: Callable[[TaskState], int]) -> None:
        self.key, self.order = key, order
        self.told: dict[Reasons, SortedKeyList] = {}
        self.size = 0
        self.young = 0  # how many are still within their delay (`Leaf.young`)

    @property
    def priority(self) -> int:
        return self.key[1]

    def add(self, task: TaskState) -> None:
        bucket = self.told.get(task.blocked)
        if bucket is None:
            bucket = self.told[task.blocked] = SortedKeyList(key=self.order)
        bucket.add(task)
        self.size += 1

    def remove(self, task: TaskState, key: int) -> None:
        """Take `task` out, filed under `key` (its application may be gone since)."""
        for reasons, bucket in self.told.items():
            index = bucket.bisect_key_left(key)
            if index < len(bucket) and bucket[index] is task:
                del bucket[index]
                self.size -= 1
                if not bucket:
                    del self.told[reasons]
                return

    def first_after(self, cursor: int) -> TaskState | None:
        """Its first task with a key above `cursor` (`after`'s first, without the iterators)."""
        if len(self.told) == 1:  # most groups: all told alike
            [bucket] = self.told.values()
            index = bucket.bisect_key_right(cursor)
            return bucket[index] if index < len(bucket) else None
        found, found_key = None, 0
        for bucket in self.told.values():
            index = bucket.bisect_key_right(cursor)
            if index < len(bucket):
                task = bucket[index]
                key = self.order(task)
                if found is None or key < found_key:
                    found, found_key = task, key
        return found

    def after(self, cursor: int, skip: Reasons | None = None) -> Iterator[TaskState]:
        """Its tasks with a key above `cursor`, in order; those told `skip` left out."""
        runs = [bucket.irange_key(cursor, inclusive=(False, True)) for reasons, bucket in self.told.items() if reasons != skip]
        if len(runs) == 1:
            return iter(runs[0])
        return heapq.merge(*runs, key=self.order)


class Leaf:
    """A leaf queue's groups, and its waiting tasks still within `preemption.delay` as of the
    last refresh (`young`), with a heap of when their delays end (entries of tasks gone since
    are dropped as they are met)."""

    __slots__ = ("ends", "groups", "young", "young_most")

    def __init__(self) -> None:
        self.groups: dict[GroupKey, Group] = {}
        self.young: dict[str, TaskState] = {}
        self.young_most = 0  # the most `young` held since it was last made anew
        self.ends: list[tuple[int, int, str]] = []  # (delay ends, seq, task id)

    @property
    def priority(self) -> int:
        """The best priority of its waiting tasks."""
        return max(group.priority for group in self.groups.values())


class Backlog:
    """The waiting tasks of a partition by leaf and group (see the module)."""

    def __init__(self, p: PartitionState) -> None:
        """Empty, for `p`: every task of `p` is filed at the first `refresh`."""
        self.leaves: dict[str, Leaf] = {}
        self.changed: dict[str, tuple[TaskState, int] | None] = dict.fromkeys(p.tasks)  # task id -> as filed before it changed (None: not filed)
        self.order: Callable[[TaskState], int] = functools.partial(order_key, p)

    def touch(self, p: PartitionState, task_id: str) -> None:
        """`task_id` may change (before the fold applies the event): filed again at the next
        `refresh`, as it was filed now unless an earlier change since the last refresh said so."""
        if task_id in self.changed:
            return
        task = p.tasks.get(task_id)
        self.changed[task_id] = (task, order_key(p, task)) if task is not None and _waiting(task) else None

    def refresh(self, p: PartitionState, now: int) -> None:
        """File again the tasks that changed since the last refresh, and let those whose
        delay ended by `now` out of `young`."""
        for task_id, filed in self.changed.items():
            if filed is not None:
                self._unfile(*filed)
            task = p.tasks.get(task_id)
            if task is not None and _waiting(task):
                self._file(p, task, now)
        self.changed = {}
        for leaf in self.leaves.values():
            while leaf.ends and leaf.ends[0][0] <= now:
                _, seq, task_id = heapq.heappop(leaf.ends)
                task = leaf.young.get(task_id)
                if task is not None and task.seq == seq:
                    del leaf.young[task_id]
                    leaf.groups[group_key(task)].young -= 1
            if len(leaf.young) * 4 < leaf.young_most:  # a dict keeps its size as it empties: made anew, it gives back a burst's memory
                leaf.young = dict(leaf.young)
                leaf.young_most = len(leaf.young)

    def _file(self, p: PartitionState, task: TaskState, now: int) -> None:
        leaf = self.leaves.get(task.queue)
        if leaf is None:
            leaf = self.leaves[task.queue] = Leaf()
        key = group_key(task)
        group = leaf.groups.get(key)
        if group is None:
            group = leaf.groups[key] = Group(key, self.order)
        group.add(task)
        ends = task.submitted_at + p.queues[task.queue].props.preemption_delay
        if ends > now:
            leaf.young[task.id] = task
            leaf.young_most = max(leaf.young_most, len(leaf.young))
            group.young += 1
            heapq.heappush(leaf.ends, (ends, task.seq, task.id))

    def _unfile(self, task: TaskState, key: int) -> None:
        leaf = self.leaves[task.queue]
        group = leaf.groups[group_key(task)]
        group.remove(task, key)
        if leaf.young.get(task.id) is task:
            del leaf.young[task.id]
            group.young -= 1
        if not group.size:
            del leaf.groups[group.key]
            if not leaf.groups:
                del self.leaves[task.queue]

    def next_delay(self, now: int) -> int | None:
        """The earliest moment after `now` (the last refresh's) a waiting task's delay ends."""
        ends = []
        for leaf in self.leaves.values():
            heap = leaf.ends
            while heap and (leaf.young.get(heap[0][2]) is None or leaf.young[heap[0][2]].seq != heap[0][1]):
                heapq.heappop(heap)  # its task left the backlog
            if heap:
                ends.append(heap[0][0])
        return min((t for t in ends if t > now), default=None)


def _waiting(task: TaskState) -> bool:
    """Pending, and no node held for it: a task the cycle tries."""
    return task.status == "pending" and task.reserved_node is None
