"""The workloads waiting for admission, kept between cycles in groups of workloads alike for a
cycle, so that a cycle's cost follows what changed, not how many workloads wait.

Per ClusterQueue, its waiting workloads (not admitted, no pod running yet) are kept in *groups*
of the same request, priority and preemptor state (and, where the queue's withinClusterQueue
is LowerOrNewerEqualPriority, creation: the candidates then depend on it): judged on the same
state of their cohort tree, the workloads of a group are admitted or refused alike. In each
group the workloads are sorted in the queue's order (priority, then creation: `queue_key`) and
filed by the reasons their first pod was last told, so that a cycle finds at once those still
to be told. A group also keeps how the last cycle that judged it found it (`Group.kept`), valid
while nothing changed in its cohort tree.

The queue's order across its groups gives each workload its *turn* (its index among the
queue's waiting workloads): `QueueBacklog.rank` and `QueueBacklog.kth`, by bisection.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from sortedcontainers import SortedKeyList

if TYPE_CHECKING:
    from ._fair import Share

__all__ = ["Backlog", "Class", "Group", "GroupKey", "Kept", "QueueBacklog", "class_of", "queue_key"]

Reasons = tuple[str, ...]
_AMOUNTS = re.compile(r"\d[\d,.]*")


def gist(reasons: Reasons | None) -> Reasons | None:
    """What a workload is told, without its amounts and counts: a workload is told again only
    when this changes (a quota flapping between two values changed a count in every waiting
    workload's reasons, and each was told again every second: 6,204 decisions a minute)."""
    return None if reasons is None else tuple(_AMOUNTS.sub("#", reason) for reason in reasons)


#: The ClusterQueue, the request, the priority, the creation where the candidates depend on
#: it (else None), and whether the workload evicted others and waits for them to go.
GroupKey = tuple[str, tuple[tuple[str, int], ...], int, int | None, bool]

_INT32 = 1 << 31
_SEQ = 53


def queue_key(priority: int, seq: int) -> int:
    """A ClusterQueue's order of its waiting workloads, as one number: priority (higher
    first), then creation."""
    return ((_INT32 - priority) << _SEQ) | seq


class Kept(NamedTuple):
    """How a cycle found a group it blocked: its rank among the waiting (whether it would
    borrow, the share its queue would have) and why it waits, `bounded` as told."""

    borrows: bool
    share: Share
    reasons: Reasons


#: Groups of one ClusterQueue alike but for their priority and creation: a judgment that no
#: candidate enters (no quota fits, the queue stopped or inactive) is the same for all of them.
Class = tuple[str, tuple[tuple[str, int], ...], bool]


def class_of(key: GroupKey) -> Class:
    queue, request, _, _, preempting = key
    return queue, request, preempting


class Group:
    """The waiting workloads of one ClusterQueue alike for a cycle, filed by the reasons told."""

    __slots__ = ("key", "kept", "order", "size", "told")

    def __init__(self, key: GroupKey, order: Callable[[object], int]) -> None:
        self.key, self.order = key, order
        self.told: dict[Reasons, SortedKeyList] = {}
        self.size = 0
        self.kept: Kept | None = None

    @property
    def preempting(self) -> bool:
        return self.key[4]

    def add(self, workload: object, told: Reasons) -> Reasons:
        """File `workload`, told `told`; the reasons' `gist` it is filed by."""
        told = gist(told)  # type: ignore[assignment]  # as told: a workload never told files under its None
        bucket = self.told.get(told)
        if bucket is None:
            bucket = self.told[told] = SortedKeyList(key=self.order)
        bucket.add(workload)
        self.size += 1
        return told

    def remove(self, workload: object) -> Reasons | None:
        """Take `workload` out; the `gist` it was filed by."""
        key = self.order(workload)
        for told, bucket in self.told.items():
            index = bucket.bisect_key_left(key)
            if index < len(bucket) and bucket[index] is workload:
                del bucket[index]
                self.size -= 1
                if not bucket:
                    del self.told[told]
                return told
        return None

    def first_after(self, cursor: int, skip: Reasons | None = None) -> object | None:
        """Its first workload after `cursor` in the queue's order, those told `skip` (in its
        `gist`) left out."""
        found = None
        skip = gist(skip)
        for told, bucket in self.told.items():
            if told == skip:
                continue
            index = bucket.bisect_key_right(cursor)
            if index < len(bucket) and (found is None or self.order(bucket[index]) < self.order(found)):
                found = bucket[index]
        return found

    def before(self, key: int) -> int:
        """How many of its workloads come before `key` in the queue's order."""
        return sum(bucket.bisect_key_left(key) for bucket in self.told.values())

    def members(self) -> Iterator[object]:
        for bucket in self.told.values():
            yield from bucket


class QueueBacklog:
    """A ClusterQueue's groups of waiting workloads; for each class, its groups and how many of
    its workloads were last told each `gist` (a class told alike is passed over whole)."""

    __slots__ = ("classes", "groups", "order", "told")

    def __init__(self, order: Callable[[object], int]) -> None:
        self.groups: dict[GroupKey, Group] = {}
        self.classes: dict[Class, dict[GroupKey, None]] = {}
        self.told: dict[Class, dict[Reasons | None, int]] = {}
        self.order = order

    def add(self, key: GroupKey, workload: object, told: Reasons) -> None:
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group(key, self.order)
            self.classes.setdefault(class_of(key), {})[key] = None
        self._count(class_of(key), group.add(workload, told), +1)

    def remove(self, key: GroupKey, workload: object) -> None:
        group = self.groups[key]
        self._count(class_of(key), group.remove(workload), -1)
        if not group.size:
            del self.groups[key]
            alike = self.classes[class_of(key)]
            del alike[key]
            if not alike:
                del self.classes[class_of(key)]

    def _count(self, of: Class, told: Reasons | None, sign: int) -> None:
        counts = self.told.setdefault(of, {})
        counts[told] = counts.get(told, 0) + sign
        if not counts[told]:
            del counts[told]
            if not counts:
                del self.told[of]

    def all_told(self, of: Class, reasons: Reasons) -> bool:
        """Every waiting workload of class `of` was told `reasons` (in their `gist`)."""
        counts = self.told.get(of, {})
        return len(counts) == 1 and gist(reasons) in counts

    def rank(self, key: int) -> int:
        """How many of its waiting workloads come before `key` in its order: the turn of the one at `key`."""
        return sum(group.before(key) for group in self.groups.values())

    def kth(self, turn: int) -> int | None:
        """The queue key of its workload at `turn` (None past the last), by bisection on keys."""
        total = sum(group.size for group in self.groups.values())
        if turn >= total:
            return None
        keys = [self.order(w) for group in self.groups.values() for bucket in group.told.values() for w in (bucket[0], bucket[-1])]
        low, high = min(keys), max(keys)
        while low < high:  # the least key with more than `turn` workloads at or before it
            middle = (low + high) // 2
            if self.rank(middle + 1) > turn:
                high = middle
            else:
                low = middle + 1
        return low

    @property
    def size(self) -> int:
        return sum(group.size for group in self.groups.values())

    def quiet(self) -> bool:
        """Every group kept with the reasons a cycle found, and every workload told them."""
        return all(group.kept is not None and list(group.told) == [gist(group.kept.reasons)] for group in self.groups.values())


class Backlog:
    """The waiting workloads of a partition by ClusterQueue and group (see the module), and the
    ClusterQueues a cycle may find something to do in (`unquiet`: those whose waiting changed
    since a cycle found every one of them told how their group was kept)."""

    def __init__(self, order: Callable[[object], int]) -> None:
        self.queues: dict[str, QueueBacklog] = {}
        self.order = order
        self.unquiet: set[str] = set()

    def add(self, queue: str, key: GroupKey, workload: object, told: Reasons) -> None:
        self.unquiet.add(queue)
        backlog = self.queues.get(queue)
        if backlog is None:
            backlog = self.queues[queue] = QueueBacklog(self.order)
        backlog.add(key, workload, told)

    def remove(self, queue: str, key: GroupKey, workload: object) -> None:
        self.unquiet.add(queue)
        backlog = self.queues[queue]
        backlog.remove(key, workload)
        if not backlog.groups:
            del self.queues[queue]
