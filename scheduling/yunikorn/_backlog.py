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
cycle files them again (`refresh`). The tasks changed since the last cycle (up to `FRESH_MOST`)
are kept apart instead, as the leaf's `fresh` list, while allocation tries them: most are placed
in the cycle they arrive in and never enter the sorted groups; those left waiting are filed
before anything else reads the backlog (`file_fresh`). What is kept always equals what building it
from the whole partition gives; a configuration change, or a restore, builds it whole.
"""

from __future__ import annotations

import bisect
import functools
import heapq
from collections.abc import Callable, Container, Iterator

from sortedcontainers import SortedKeyList, SortedList

from preemptd.events import AppFinished, LogEvent, NodeRemoved, Preempted
from preemptd.projections import PartitionState, TaskState

from ._ordering import QueuePriorities
from ._settled import Settled

__all__ = ["FRESH_MOST", "Backlog", "Group", "GroupKey", "Kind", "kind_of", "order_key", "tasks_changed_by"]

Shape = tuple[tuple[str, int], ...]
#: What decides whether a group's tasks fit: their ask and required node.
Kind = tuple[Shape, str | None]
#: The ask, the priority, whether it may preempt, its required node and (with one) its application.
GroupKey = tuple[Shape, int, bool, str | None, str | None]
Reasons = tuple[str, ...]

#: At most this many tasks changed since the last cycle are tried by allocation before they are
#: filed: more (a restore's whole backlog, a burst) are mostly left waiting, and filing them at
#: once costs less than trying them from a list first.
FRESH_MOST = 10_000

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
    task = getattr(event, "task", None)  # the most frequent: the events of one task
    if task is not None:
        return (task,)
    match event:
        case Preempted():
            return (event.preemptor,)
        case NodeRemoved() if event.node in p.nodes:
            return tuple(p.nodes[event.node].reservations)
        case AppFinished() if event.app in p.apps:
            return tuple(p.apps[event.app].tasks)
    return ()


class Group:
    """The waiting tasks of one leaf alike for a cycle (`GroupKey`), sorted by `order` (the
    partition's `order_key`) and filed by the reasons each was last told; `first` is the key of
    its first task."""

    __slots__ = ("first", "key", "order", "size", "told", "young")

    def __init__(self, key: GroupKey, order: Callable[[TaskState], int]) -> None:
        self.key, self.order = key, order
        self.told: dict[Reasons, SortedKeyList] = {}
        self.size = 0
        self.young = 0  # how many are still within their delay (`Leaf.young`)
        self.first: int | None = None

    @property
    def priority(self) -> int:
        return self.key[1]

    def add(self, task: TaskState, key: int) -> None:
        """File `task`, whose order key is `key`."""
        bucket = self.told.get(task.blocked)
        if bucket is None:
            bucket = self.told[task.blocked] = SortedKeyList(key=self.order)
        bucket.add(task)
        self.size += 1
        if self.first is None or key < self.first:
            self.first = key

    def remove(self, task: TaskState, key: int) -> Reasons | None:
        """Take `task` out, filed under `key` (its application may be gone since); the
        reasons it was filed by (None: it was not here)."""
        for reasons, bucket in self.told.items():
            index = bucket.bisect_key_left(key)
            if index < len(bucket) and bucket[index] is task:
                del bucket[index]
                self.size -= 1
                if not bucket:
                    del self.told[reasons]
                if key == self.first:
                    self.first = min((self.order(bucket[0]) for bucket in self.told.values()), default=None)
                return reasons
        return None

    def first_after(self, cursor: int, skip: Reasons | None = None) -> TaskState | None:
        """Its first task with a key above `cursor`; those told `skip` left out."""
        if len(self.told) == 1:  # most groups: all told alike
            [(reasons, bucket)] = self.told.items()
            if reasons == skip:
                return None
            index = bucket.bisect_key_right(cursor)
            return bucket[index] if index < len(bucket) else None
        found, found_key = None, 0
        for reasons, bucket in self.told.items():
            if reasons == skip:
                continue
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


#: Groups alike but for their priority: every task of a class gets the same refusal from its
#: preconditions and its scope (`_preemption.scope_refusal`), whatever its priority.
Class = tuple[Shape, bool, str | None, str | None]


def class_of(key: GroupKey) -> Class:
    shape, _, may_preempt, required_node, app = key
    return shape, may_preempt, required_node, app


class Leaf:
    """A leaf queue's groups; for each kind, its groups by the key of their first task
    (`heads`: the first task to place is found without going over every group); for each class,
    its groups and how many of its tasks were last told which reasons; and its waiting tasks
    still within `preemption.delay` as of the last refresh (`young`)."""

    __slots__ = ("classes", "fresh", "groups", "heads", "priorities", "told", "young", "young_most")

    def __init__(self) -> None:
        self.groups: dict[GroupKey, Group] = {}
        self.heads: dict[Kind, SortedList] = {}  # per kind: (first key, group key) of its groups
        self.classes: dict[Class, dict[GroupKey, None]] = {}
        self.told: dict[Class, dict[Reasons, int]] = {}  # per class: how many tasks were last told each reasons
        self.priorities: dict[int, int] = {}  # how many groups and fresh tasks have each priority: the best is the leaf's
        self.fresh: list[tuple[int, TaskState]] = []  # (order key, task) of tasks not filed yet, sorted (`Backlog.refresh`), those changed since left in
        self.young: dict[str, TaskState] = {}
        self.young_most = 0  # the most `young` held since it was last made anew

    @property
    def priority(self) -> int:
        """The best priority of its waiting tasks."""
        return max(self.priorities)

    def first_fresh(self, cursor: int, failed: Container[Kind]) -> tuple[int, TaskState] | None:
        """Its first fresh task after `cursor` whose kind is not in `failed` (within allocation,
        the only fresh tasks that change are those it places, all at or before the cursor)."""
        fresh = self.fresh
        for index in range(bisect.bisect_left(fresh, (cursor + 1,)), len(fresh)):  # (k,) sorts before (k, task)
            key, task = fresh[index]
            if not (failed and kind_of(task) in failed):
                return key, task
        return None

    def class_size(self, of: Class) -> int:
        return sum(self.told[of].values())

    def _count_told(self, of: Class, reasons: Reasons, sign: int) -> None:
        counts = self.told.setdefault(of, {})
        counts[reasons] = counts.get(reasons, 0) + sign
        if not counts[reasons]:
            del counts[reasons]
            if not counts:
                del self.told[of]

    def _moved(self, group: Group, before: int | None) -> None:
        """`group`'s first task was `before` (None: it was empty): its place among the heads."""
        if group.first == before:
            return
        shape, _, _, required_node, _ = group.key
        heads = self.heads.get((shape, required_node))
        if heads is None:
            heads = self.heads[(shape, required_node)] = SortedList()
        if before is not None:
            heads.remove((before, group.key))
        if group.first is not None:
            heads.add((group.first, group.key))
        elif not heads:
            del self.heads[(shape, required_node)]


class Backlog:
    """The waiting tasks of a partition by leaf and group (see the module), the queues'
    priorities in the order (`priorities`), and the leaves each phase has nothing to do in until
    something changes (`allocation`, `preemption`: `_settled`)."""

    def __init__(self, p: PartitionState) -> None:
        """Empty, for `p`: every task of `p` is filed at the first `refresh`."""
        self.leaves: dict[str, Leaf] = {}
        self.changed: dict[str, tuple[TaskState, int] | None] = dict.fromkeys(p.tasks)  # task id -> as filed before it changed (None: not filed)
        self.fresh: dict[str, str] = {}  # task id -> leaf, of the tasks in a leaf's `fresh` list not changed since
        # (leaf, priority) of every task kept apart since the last refresh: its leaf and priority
        # count until then, as a filed task does until the refresh after it changed
        self.kept_apart: list[tuple[str, int]] = []
        self.order: Callable[[TaskState], int] = functools.partial(order_key, p)
        self.priorities = QueuePriorities(p)
        self.ends: list[tuple[int, int, str, str]] = []  # (delay ends, seq, task id, leaf) of young tasks, those gone since dropped as met
        self.allocation, self.preemption = Settled(()), Settled(())
        p.kept.touched = set()  # the fold notes the leaves it changes from now on

    def touch(self, p: PartitionState, task_id: str) -> None:
        """`task_id` may change (before the fold applies the event): filed again at the next
        `refresh`, as it was filed now unless an earlier change since the last refresh said so."""
        if task_id in self.changed:
            return
        task = p.tasks.get(task_id)
        if task is not None and task.status != "pending":
            return  # running or leaving: not in the backlog, and no event makes it wait again
        if task is not None:
            p.kept.touch(task.queue)
        if self.fresh.pop(task_id, None) is not None:  # changed while kept apart: no longer tried (it counts until the next refresh)
            self.changed[task_id] = None
            return
        self.changed[task_id] = (task, order_key(p, task)) if task is not None and _waiting(task) else None

    def refresh(self, p: PartitionState, now: int, fresh: bool = False) -> None:
        """File again the tasks that changed since the last refresh (with `fresh`, up to
        `FRESH_MOST` of them are kept apart in their leaf's `fresh` list instead), let those whose delay ended by `now` out of
        `young`, and visit again the leaves the fold changed."""
        self.file_fresh(p, now)
        changed, self.changed = self.changed, {}
        keep_apart = fresh and len(changed) <= FRESH_MOST
        for task_id, filed in changed.items():
            if filed is not None:
                self._unfile(p, *filed)
            task = p.tasks.get(task_id)
            if task is not None and _waiting(task):
                p.kept.touch(task.queue)
                if keep_apart:
                    self._add_fresh(p, task)
                else:
                    self._file(p, task, now)
        for path in dict.fromkeys(path for path, _ in self.kept_apart):
            self.leaves[path].fresh.sort()  # order keys are unique: tasks are never compared
        ends = self.ends
        while ends and ends[0][0] <= now:
            _, seq, task_id, path = heapq.heappop(ends)
            leaf = self.leaves.get(path)
            task = leaf.young.get(task_id) if leaf is not None else None
            if leaf is not None and task is not None and task.seq == seq:
                del leaf.young[task_id]
                leaf.groups[group_key(task)].young -= 1
                p.kept.touch(path)  # a task out of its delay may preempt now
                if len(leaf.young) * 4 < leaf.young_most:  # a dict keeps its size as it empties: made anew, it gives back a burst's memory
                    leaf.young = dict(leaf.young)
                    leaf.young_most = len(leaf.young)
        self.settle_changes(p)

    def settle_changes(self, p: PartitionState) -> None:
        """The leaves the fold changed since the last look are visited again in every phase."""
        touched = p.kept.touched
        if touched:
            self.allocation.changed(p, touched)
            self.preemption.changed(p, touched)
            touched.clear()

    def file_fresh(self, p: PartitionState, now: int) -> None:
        """File the fresh tasks allocation left waiting (their leaves were touched when they
        were kept apart, and are not again: a leaf allocation settled stays settled); those
        kept apart stop counting."""
        paths = dict.fromkeys(path for path, _ in self.kept_apart)
        for path in paths:
            leaf = self.leaves[path]
            for _, task in leaf.fresh:
                if task.id in self.fresh:
                    self._file(p, task, now)
            leaf.fresh = []
        for path, priority in self.kept_apart:
            self._count_priority(p, path, self.leaves[path], priority, -1)
        for path in paths:
            if not self.leaves[path].groups:
                del self.leaves[path]
        self.fresh.clear()
        self.kept_apart.clear()

    def _add_fresh(self, p: PartitionState, task: TaskState) -> None:
        leaf = self.leaves.get(task.queue)
        if leaf is None:
            leaf = self.leaves[task.queue] = Leaf()
        leaf.fresh.append((self.order(task), task))  # sorted once all are in
        self.fresh[task.id] = task.queue
        self.kept_apart.append((task.queue, task.priority))
        self._count_priority(p, task.queue, leaf, task.priority, +1)

    def _file(self, p: PartitionState, task: TaskState, now: int) -> None:
        leaf = self.leaves.get(task.queue)
        if leaf is None:
            leaf = self.leaves[task.queue] = Leaf()
        key = group_key(task)
        group = leaf.groups.get(key)
        if group is None:
            group = leaf.groups[key] = Group(key, self.order)
            leaf.classes.setdefault(class_of(key), {})[key] = None
            self._count_priority(p, task.queue, leaf, key[1], +1)
        before = group.first
        group.add(task, self.order(task))
        leaf._moved(group, before)
        leaf._count_told(class_of(key), task.blocked, +1)
        ends = task.submitted_at + p.queues[task.queue].props.preemption_delay
        if ends > now:
            leaf.young[task.id] = task
            leaf.young_most = max(leaf.young_most, len(leaf.young))
            group.young += 1
            heapq.heappush(self.ends, (ends, task.seq, task.id, task.queue))

    def _unfile(self, p: PartitionState, task: TaskState, key: int) -> None:
        p.kept.touch(task.queue)
        leaf = self.leaves[task.queue]
        group = leaf.groups[group_key(task)]
        before = group.first
        reasons = group.remove(task, key)
        assert reasons is not None, task.id  # filed in this group
        leaf._moved(group, before)
        leaf._count_told(class_of(group.key), reasons, -1)
        if leaf.young.get(task.id) is task:
            del leaf.young[task.id]
            group.young -= 1
        if not group.size:
            del leaf.groups[group.key]
            alike = leaf.classes[class_of(group.key)]
            del alike[group.key]
            if not alike:
                del leaf.classes[class_of(group.key)]
            self._count_priority(p, task.queue, leaf, group.priority, -1)
            if not leaf.groups and not leaf.priorities:  # nothing kept apart counts here either
                del self.leaves[task.queue]

    def _count_priority(self, p: PartitionState, path: str, leaf: Leaf, priority: int, sign: int) -> None:
        """A group of `priority` came (+1) or went (-1): the leaf's best priority, and so its
        queues', may change."""
        before = max(leaf.priorities, default=None)
        counts = leaf.priorities
        counts[priority] = counts.get(priority, 0) + sign
        if not counts[priority]:
            del counts[priority]
        best = max(counts, default=None)
        if best != before:
            self.priorities.set(path, best)

    def next_delay(self, now: int) -> int | None:
        """The earliest moment after `now` (the last refresh's) a waiting task's delay ends."""
        ends = self.ends
        while ends:
            _, seq, task_id, path = ends[0]
            leaf = self.leaves.get(path)
            task = leaf.young.get(task_id) if leaf is not None else None
            if task is not None and task.seq == seq:
                break
            heapq.heappop(ends)  # its task left the backlog
        return next((t for t, *_ in ends[:1] if t > now), None)


def kind_of(task: TaskState) -> Kind:
    """What decides whether `task` fits: its ask and required node."""
    return tuple(task.resources.items()), task.required_node


def _waiting(task: TaskState) -> bool:
    """Pending, and no node held for it: a task the cycle tries."""
    return task.status == "pending" and task.reserved_node is None
