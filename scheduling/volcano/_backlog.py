"""The idle jobs of a partition (none of their tasks running, leaving or waiting on a node),
kept between sessions in groups, so that a session's cost follows what changed, not how many
jobs wait to be let in.

Per queue, idle jobs are kept in *groups* of the same gang request (what enqueue asks the
queue for: the first `min_available` tasks in task order): judged on the same state of the
queue, enqueue lets them in or refuses them alike. In each group the jobs are sorted in job
order (`idle_key`: for a job with nothing placed, the plugins' order is its priority, whether a
gang of 0 makes it ready, then its age) and filed by what their waiting tasks were last told,
so that a session finds at once the tasks still to be told.

The fold says which jobs an event may change (`_jobs.KeptJobs.touch`, before it applies the
event); the next session files them again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from sortedcontainers import SortedKeyList

from preemptd.projections import AppState, PartitionState, TaskState

from ._config import config_of
from ._jobs import POD_SLOT, Job, Task, job_of
from ._order import job_orders
from ._shares import summed

__all__ = ["MIXED", "Filed", "IdleGroup", "IdleJobs", "KeptJobs", "gang_request", "idle_key", "told_of", "waiting_in_order"]

Reasons = tuple[str, ...]
Gang = tuple[tuple[str, int], ...]
#: The told reasons of a job whose waiting tasks were not all told the same.
MIXED: Reasons = ("\x00mixed",)

_INT32 = 1 << 31
_SEQ = 53


def is_idle(p: PartitionState, app: AppState) -> bool:
    """Every task of `app` waits for a node, none held for it."""
    return bool(app.tasks) and all(p.tasks[t].status == "pending" and p.tasks[t].reserved_node is None for t in app.tasks)


def idle_key(orders: tuple[str, ...], app: AppState) -> int:
    """An idle job's place in its queue's job order (`_order.job_key`), as one number: the
    plugins' parts as they are for a job with nothing placed (drf's share is 0 for every such
    job and orders nothing among them), then its age."""
    key = 0
    for order in orders:
        if order == "priority":
            key = (key << 32) | (_INT32 - app.priority)
        elif order == "gang":
            key = (key << 1) | (app.min_available == 0)  # a gang of 0 is ready with nothing running
    return (key << _SEQ) | app.seq


def waiting_in_order(p: PartitionState, app: AppState) -> list[TaskState]:
    """Its waiting tasks in Volcano's task order: higher task priority first, then the older."""
    tasks = [p.tasks[t] for t in app.tasks]
    return sorted(tasks, key=lambda t: (-(t.task_priority or t.priority), t.seq))


def gang_request(p: PartitionState, app: AppState) -> dict[str, int]:
    """What enqueue asks its queue for: the first `min_available` waiting tasks, pod slots aside."""
    tasks = waiting_in_order(p, app)
    gang = len(tasks) if app.min_available is None else app.min_available
    return summed({name: amount for name, amount in t.resources.items() if name != POD_SLOT} for t in tasks[:gang])


def told_of(p: PartitionState, app: AppState) -> Reasons:
    """What its waiting tasks were last told, if all alike (else `MIXED`)."""
    told = {p.tasks[t].blocked for t in app.tasks}
    return told.pop() if len(told) == 1 else MIXED


@dataclass(frozen=True)
class Filed:
    """Where an idle job is filed: its queue, group, key and what it was told."""

    queue: str
    gang: Gang
    key: int
    told: Reasons


class IdleGroup:
    """The idle jobs of one queue with one gang request, in job order, filed by what they were told."""

    __slots__ = ("gang", "size", "told")

    def __init__(self, gang: Gang) -> None:
        self.gang = gang
        self.told: dict[Reasons, SortedKeyList] = {}  # of (key, job id)
        self.size = 0

    def add(self, key: int, job: str, told: Reasons) -> None:
        bucket = self.told.get(told)
        if bucket is None:
            bucket = self.told[told] = SortedKeyList(key=_first)
        bucket.add((key, job))
        self.size += 1

    def remove(self, key: int, told: Reasons) -> None:
        bucket = self.told[told]
        del bucket[bucket.bisect_key_left(key)]
        self.size -= 1
        if not bucket:
            del self.told[told]

    def first_after(self, cursor: int) -> tuple[int, str] | None:
        firsts = [bucket[i] for bucket in self.told.values() if (i := bucket.bisect_key_right(cursor)) < len(bucket)]
        return min(firsts, default=None, key=_first)

    def untold(self, low: int, high: int, told: Reasons) -> Iterator[tuple[int, str]]:
        """Its jobs with a key in [low, high) not told `told`, bucket by bucket."""
        for reasons, bucket in self.told.items():
            if reasons != told:
                yield from bucket.irange_key(low, high, inclusive=(True, False))


@dataclass
class IdleQueue:
    groups: dict[Gang, IdleGroup] = field(default_factory=dict)


class IdleJobs:
    """The idle jobs of a partition by queue and group (see the module)."""

    def __init__(self) -> None:
        self.queues: dict[str, IdleQueue] = {}

    def add(self, filed: Filed, job: str) -> None:
        queue = self.queues.setdefault(filed.queue, IdleQueue())
        group = queue.groups.get(filed.gang)
        if group is None:
            group = queue.groups[filed.gang] = IdleGroup(filed.gang)
        group.add(filed.key, job, filed.told)

    def remove(self, filed: Filed) -> None:
        queue = self.queues[filed.queue]
        group = queue.groups[filed.gang]
        group.remove(filed.key, filed.told)
        if not group.size:
            del queue.groups[filed.gang]
            if not queue.groups:
                del self.queues[filed.queue]

    def jobs(self) -> Iterator[str]:
        for queue in self.queues.values():
            for group in queue.groups.values():
                for bucket in group.told.values():
                    for _, job in bucket:
                        yield job


def _first(entry: tuple[int, str]) -> int:
    return entry[0]


class KeptJobs:
    """The jobs kept between sessions: those started (a task running, leaving or waiting on a
    node held for it) as `Job`s with their tasks, the idle ones filed in groups (`IdleJobs`).
    The fold says which applications changed (`touch`, before it applies the event: where an
    idle job was filed), and a session's `view` reads only those again. Made whole when absent
    (after a restore or a configuration change: the job order depends on the plugins).

    Of the started jobs, those with a task waiting for a node (`pending`) and those with a task
    waiting on a node held for it (`pipelined`) are listed apart, each queue's are listed
    (`by_queue`), and what each queue's could give back to preemption is summed (`elastic`): a
    session reads those, not every job.

    `quiet`: the queues whose idle jobs enqueue refused whole, each already told why, as the
    cluster was then (`quiet_basis`, `_enqueue`): passed over until a job of theirs changes
    (`touch`)."""

    def __init__(self, p: PartitionState) -> None:
        config = config_of(p)
        self.orders = job_orders(config.scheduler)
        self.started: dict[str, Job] = {}  # in no order a session may rely on
        self.tasks: dict[str, Task] = {}  # the started jobs'
        self.pending: dict[str, None] = {}
        self.pipelined: dict[str, None] = {}
        self.elastic: dict[str, dict[str, int]] = {}  # per queue: its started jobs' elastic resources
        self.by_queue: dict[str, dict[str, None]] = {}  # per queue: its started jobs
        self.idle = IdleJobs()
        self.changed: dict[str, Filed | None] = dict.fromkeys(p.apps)  # app -> where it was filed idle (None: it was not)
        self.quiet: dict[str, None] = {}
        self.quiet_basis: object = None
        self.touched: set[str] = set()  # the queues of the jobs changed since the last view
        self.rules: dict[object, object] = {}  # the queue rules kept for the configuration's sessions (`Quotas`)

    def touch(self, p: PartitionState, app_id: str) -> None:
        """`app_id` may change: read again at the next `view` (where it is filed now kept, the
        first time since the last view); its queue is no longer quiet."""
        if app_id in self.changed:
            return
        app = p.apps.get(app_id)
        if app is not None:
            self._unquiet(app.queue)
        self.changed[app_id] = self._filing(p, app) if app is not None and app_id not in self.started and is_idle(p, app) else None

    def _unquiet(self, queue: str) -> None:
        self.touched.add(queue)
        self.quiet.pop(queue, None)

    def view(self, p: PartitionState) -> KeptJobs:
        """Itself, with the jobs that changed since the last view read again."""
        for app_id, filed in self.changed.items():
            old = self.started.pop(app_id, None)
            if old is not None:
                self._unquiet(old.queue)
                self._count(old, -1)
                for task in old.tasks:
                    del self.tasks[task.id]
            if filed is not None:
                self.idle.remove(filed)
            app = p.apps.get(app_id)
            if app is not None:
                self._unquiet(app.queue)
            if app is None or not app.tasks:
                continue
            if is_idle(p, app):
                self.idle.add(self._filing(p, app), app_id)
                continue
            job = job_of(p, app)
            assert job is not None  # it has tasks
            self.started[app_id] = job
            self.tasks.update((task.id, task) for task in job.tasks)
            self._count(job, +1)
        self.changed = {}
        self.touched.clear()
        return self

    def _count(self, job: Job, sign: int) -> None:
        """A started job read (+1) or gone (-1): the lists and sums it is in."""
        listed_in_queue = self.by_queue.setdefault(job.queue, {})
        if sign > 0:
            listed_in_queue[job.id] = None
        else:
            del listed_in_queue[job.id]
            if not listed_in_queue:
                del self.by_queue[job.queue]
        for listed, member in ((self.pending, bool(job.pending)), (self.pipelined, bool(job.pipelined))):
            if member and sign > 0:
                listed[job.id] = None
            elif member:
                del listed[job.id]
        if job.elastic_resources:
            elastic = self.elastic.setdefault(job.queue, {})
            for name, amount in job.elastic_resources.items():
                elastic[name] = elastic.get(name, 0) + sign * amount

    def _filing(self, p: PartitionState, app: AppState) -> Filed:
        return Filed(app.queue, tuple(gang_request(p, app).items()), idle_key(self.orders, app), told_of(p, app))
