"""Workloads as the Kueue model sees a partition: each application is one workload, its tasks
its pods, its request their sum. A workload is admitted once a `decision.admitted` gave it a
flavor per resource (or, arriving already running, once the model recorded it so), pending
while it has tasks and no admission."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from preemptd.projections import AppState, PartitionState, shared_shape

from ._backlog import Backlog, GroupKey, queue_key
from ._config import ClusterQueue, KueueConfig, config_of
from ._kept import kept
from ._state import admission_of, preempting
from ._tree import FlavorResource, Node, QuotaTree

__all__ = ["Admitted", "KeptWorkloads", "Kind", "charge", "Workload", "Workloads", "kept_workloads", "never_preempts", "usage_of", "workload_of"]


K = TypeVar("K")
Kind = tuple[frozenset[FlavorResource], int]  # the flavor-resources a workload holds, and its priority


@dataclass(frozen=True, eq=False, slots=True)  # one per workload, a million waiting: no __dict__ each
class Workload:
    """`seq` is its creation (the log position of its submission), `admitted_at` the cycle
    that admitted it; `running` says whether the cluster runs any of its pods."""

    id: str
    queue: str
    priority: int
    seq: int
    request: dict[str, int]
    first_task: str
    flavors: dict[str, str] | None
    admitted_at: int
    evicted: bool
    preempting: bool
    running: bool

    usage: dict[FlavorResource, int] = field(init=False, repr=False)  # what an admitted workload holds, per flavor-resource
    kind: Kind = field(init=False, repr=False)  # what the never-candidates summary tells workloads apart by

    def __post_init__(self) -> None:
        # Made with the workload, not on first read: the first preemption in a cohort reads
        # those of thousands, and a cached_property's first read takes a lock (Python 3.11).
        usage = usage_of(self.flavors, self.request) if self.flavors else _NOTHING_HELD
        object.__setattr__(self, "usage", usage)
        object.__setattr__(self, "kind", _kind(frozenset(usage) if usage else _NO_FLAVORS, self.priority))


#: What a workload not admitted holds, and its flavor-resources: shared by every such workload
#: (never changed: a cycle charges usage into totals of its own).
_NOTHING_HELD: dict[FlavorResource, int] = {}
_NO_FLAVORS: frozenset[FlavorResource] = frozenset()


_KINDS: dict[Kind, Kind] = {}


def _kind(flavors: frozenset[FlavorResource], priority: int) -> Kind:
    """One tuple per kind, shared by the workloads of that kind (at most 4,096 kept)."""
    kind = (flavors, priority)
    found = _KINDS.get(kind)
    if found is None:
        found = kind
        if len(_KINDS) < 4096:
            _KINDS[kind] = kind
    return found


def usage_of(flavors: Mapping[str, str], request: Mapping[str, int]) -> dict[FlavorResource, int]:
    """`request` per flavor-resource, for the resources `flavors` assigns."""
    return {(flavors[r], r): amount for r, amount in request.items() if r in flavors}


def workload_of(p: PartitionState, app: AppState) -> Workload | None:
    """`app` as a workload; None while it has no tasks (it holds nothing and waits for nothing)."""
    if not app.tasks:
        return None
    tasks = [p.tasks[t] for t in app.tasks]
    request: dict[str, int] = {}
    for task in tasks:
        for name, amount in task.resources.items():
            request[name] = request.get(name, 0) + amount
    admission = admission_of(p, app)
    return Workload(
        id=app.id,
        queue=app.queue,
        priority=max(task.priority for task in tasks),
        seq=app.seq,
        request=shared_shape(request),
        first_task=tasks[0].id,
        flavors=admission.flavors if admission is not None else None,
        admitted_at=admission.cycle if admission is not None else 0,
        evicted=admission is not None and admission.evicted,
        preempting=preempting(p, app),
        running=any(task.status != "pending" for task in tasks),
    )


class Admitted(Mapping[str, Sequence[Workload]]):
    """Admitted workloads by ClusterQueue, each queue's by creation, listed when first asked
    (`listing`: a cycle reads the few queues it plans in, not all of them); and, asked per
    queue, how many of each `Kind` it holds, in the order each kind first comes (what a
    preemption's summary of the workloads that were never candidates needs, counted once per
    change of the queue, not once per preemption). `kinds` may be shared with the next cycles'
    (`KeptWorkloads`)."""

    def __init__(
        self, listings: Mapping[str, object], kinds: dict[str, dict[Kind, int]] | None = None, listing: Callable[[str], Sequence[Workload]] | None = None
    ) -> None:
        """`listings`: each queue's listing, or (with `listing`, which lists a queue) what
        says which queues hold any."""
        self._listings, self._listing = listings, listing
        self._kinds = {} if kinds is None else kinds

    def __getitem__(self, queue: str) -> Sequence[Workload]:
        found = self._listings[queue]
        if self._listing is not None:
            return self._listing(queue)
        assert isinstance(found, Sequence)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._listings)

    def __len__(self) -> int:
        return len(self._listings)

    def kinds(self, queue: str) -> dict[Kind, int]:
        found = self._kinds.get(queue)
        if found is None:
            found = self._kinds[queue] = {}
            for w in self.get(queue, ()):
                found[w.kind] = found.get(w.kind, 0) + 1
        return found


@dataclass
class Workloads:
    """The partition's workloads at one moment: pending ones in Kueue's order (priority, then
    creation), admitted ones by ClusterQueue (by creation), and each ClusterQueue's usage."""

    pending: list[Workload]
    admitted: Admitted
    usage: Mapping[str, Mapping[FlavorResource, int]]

    @classmethod
    def of(cls, p: PartitionState) -> Workloads:
        """Read from the whole partition: what `KeptWorkloads.view` must equal."""
        pending: list[Workload] = []
        admitted: dict[str, list[Workload]] = {}
        usage: dict[str, dict[FlavorResource, int]] = {}
        for app in p.apps.values():
            workload = workload_of(p, app)
            if workload is None:
                continue
            if workload.flavors is None:
                pending.append(workload)
                continue
            admitted.setdefault(app.queue, []).append(workload)
            charge(usage.setdefault(app.queue, {}), workload.usage, +1)
        pending.sort(key=_pending_order)
        return cls(pending, Admitted(admitted), usage)


def _pending_order(w: Workload) -> tuple[int, int]:
    return (-w.priority, w.seq)


def _queue_order(w: object) -> int:
    """A ClusterQueue's order of its waiting workloads, as one number (`_backlog.queue_key`)."""
    assert isinstance(w, Workload)
    return queue_key(w.priority, w.seq)


def charge(totals: dict[K, int], amounts: Mapping[K, int], sign: int) -> None:
    """Add (`sign` +1) or take away (-1) `amounts`; a total back at 0 goes, so that what is
    undone compares equal to what was."""
    for key, amount in amounts.items():
        total = totals.get(key, 0) + sign * amount
        if total:
            totals[key] = total
        else:
            totals.pop(key, None)


def never_preempts(queue: ClusterQueue, config: KueueConfig) -> bool:
    """The queue's policy lets no admitted workload be a candidate, whatever the preemptor's
    priority, and no fair sharing weighs shares: its judgments hold whatever the priority."""
    policy = queue.preemption
    never = policy.within_cluster_queue == policy.reclaim_within_cohort == policy.borrow_within_cohort == "Never"
    return never and not config.fair_sharing_in(_root(config, queue))


def _root(config: KueueConfig, queue: ClusterQueue) -> str:
    """The root cohort of `queue`'s tree (itself, without a cohort)."""
    root, seen = queue.cohort, set()
    while root is not None and root not in seen and (cohort := config.cohorts.get(root)) is not None and cohort.parent is not None:
        seen.add(root)
        root = cohort.parent
    return queue.name if root is None else root


def kept_workloads(p: PartitionState) -> KeptWorkloads:
    """The partition's kept workloads (`KueueKept.workloads`), read whole the first time."""
    found = kept(p)
    if found.workloads is None:
        found.workloads = KeptWorkloads.of(p)
    return found.workloads


class KeptWorkloads:
    """The workloads kept between cycles: the fold says which applications changed (`touch`),
    and a cycle's `view` reads only those again, so that its cost follows what changed, not how
    many workloads there are. Rebuilt whole when absent (a restored snapshot, a configuration
    change: the groups of the waiting depend on the queues' policies).

    The workloads not admitted are the `backlog` (`_backlog`: by ClusterQueue, in groups, filed
    by what their first pod was told; `retell` files one again once it was told something new),
    but those whose pods already run, `running`: a cycle records those as admitted."""

    def __init__(self, config: KueueConfig) -> None:
        self.config = config
        self.tree = QuotaTree(config)  # of the configuration: kept as it is
        self.by_app: dict[str, Workload] = {}
        self.backlog = Backlog(_queue_order)
        self.running: dict[str, Workload] = {}  # not admitted, some pod running already
        self.retold: dict[str, None] = {}  # waiting workloads told something since the last view
        self.admitted: dict[str, dict[str, Workload]] = {}  # by ClusterQueue, then application
        self.usage: dict[str, dict[FlavorResource, int]] = {}
        self.node_usage: dict[Node, dict[FlavorResource, int]] = {}  # the tree's nodes' (`QuotaTree.usage`), kept as workloads come and go
        self.changed: dict[str, None] = {}  # applications to read again, in the order they changed
        self.requeued: dict[str, None] = {}  # ClusterQueues whose workloads changed since the last `take_requeued`
        self._listed: dict[str, tuple[Workload, ...]] = {}  # each ClusterQueue's admitted, by creation
        self._kinds: dict[str, dict[Kind, int]] = {}  # each ClusterQueue's admitted kinds, counted when asked (`Admitted.kinds`)

    @classmethod
    def of(cls, p: PartitionState) -> KeptWorkloads:
        kept = cls(config_of(p))
        kept.changed = dict.fromkeys(p.apps)
        return kept

    def touch(self, app_id: str) -> None:
        self.changed[app_id] = None

    def retell(self, app_id: str) -> None:
        """A workload's first pod is told something new (a `decision.blocked`): filed again."""
        self.retold[app_id] = None

    def view(self, p: PartitionState) -> Workloads:
        """The workloads now, as kept: nothing changes them until the next view (what a cycle
        decides is read then). Its `pending` is left empty: the cycle reads `backlog` and
        `running`."""
        for app_id in self.changed:
            self._read(p, app_id)
        for app_id in self.retold:
            workload = self.by_app.get(app_id)
            if app_id not in self.changed and workload is not None and workload.flavors is None and not workload.running:
                key = self.group_key(workload)
                self.backlog.remove(workload.queue, key, workload)
                self.backlog.add(workload.queue, key, workload, p.tasks[workload.first_task].blocked)
        self.changed, self.retold = {}, {}
        return Workloads([], Admitted(self.admitted, self._kinds, self._listing), self.usage)

    def waiting(self) -> list[Workload]:
        """Every workload not admitted, in Kueue's order (priority, then creation): what
        `Workloads.of` lists as pending. Reads the whole backlog: for tests and tools."""
        listed = [*self.running.values()]
        for queue in self.backlog.queues.values():
            for group in queue.groups.values():
                listed += group.members()  # type: ignore[arg-type]  # the backlog holds workloads
        return sorted(listed, key=_pending_order)

    def group_key(self, workload: Workload) -> GroupKey:
        """`workload`'s group: its queue, request, priority, preemptor state and, where its
        queue's candidates depend on it (withinClusterQueue LowerOrNewerEqualPriority), creation.
        Where no priority changes a judgment (the queue's policy never preempts, no fair
        sharing), its priority is left out: a queue of a thousand priorities keeps one group."""
        queue = self.config.cluster_queues.get(workload.queue)
        newer = queue is not None and queue.preemption.within_cluster_queue == "LowerOrNewerEqualPriority"
        blind = queue is not None and never_preempts(queue, self.config)
        priority = 0 if blind else workload.priority
        return (workload.queue, tuple(sorted(workload.request.items())), priority, workload.seq if newer else None, workload.preempting)

    def take_requeued(self) -> dict[str, None]:
        """The ClusterQueues whose workloads changed (submitted, admitted, evicted, bound,
        released, finished) since the last call: what could admit a blocked workload of their
        cohort tree."""
        requeued, self.requeued = self.requeued, {}
        return requeued

    def _read(self, p: PartitionState, app_id: str) -> None:
        old = self.by_app.pop(app_id, None)
        if old is not None:
            self._drop(old)
            self.requeued[old.queue] = None
        app = p.apps.get(app_id)
        new = workload_of(p, app) if app is not None else None
        if new is None:
            return
        self.requeued[new.queue] = None
        self.by_app[app_id] = new
        if new.flavors is None and new.running:
            self.running[new.id] = new
            return
        if new.flavors is None:
            self.backlog.add(new.queue, self.group_key(new), new, p.tasks[new.first_task].blocked)
            return
        self.admitted.setdefault(new.queue, {})[new.id] = new
        self._listed.pop(new.queue, None)
        self._kinds.pop(new.queue, None)
        charge(self.usage.setdefault(new.queue, {}), new.usage, +1)
        self._charge_tree(new, +1)

    def _drop(self, old: Workload) -> None:
        if old.flavors is None and old.running:
            del self.running[old.id]
            return
        if old.flavors is None:
            self.backlog.remove(old.queue, self.group_key(old), old)
            return
        queue = self.admitted[old.queue]
        del queue[old.id]
        self._listed.pop(old.queue, None)
        self._kinds.pop(old.queue, None)
        charge(self.usage[old.queue], old.usage, -1)
        self._charge_tree(old, -1)
        if not queue:
            del self.admitted[old.queue], self.usage[old.queue]

    def _charge_tree(self, workload: Workload, sign: int) -> None:
        node = self.tree.queues.get(workload.queue)
        if node is not None:  # an inactive queue is in no tree
            self.tree.change(self.node_usage, node, workload.usage, sign)

    def _listing(self, queue: str) -> tuple[Workload, ...]:
        listed = self._listed.get(queue)
        if listed is None:
            listed = self._listed[queue] = tuple(sorted(self.admitted[queue].values(), key=lambda w: w.seq))
        return listed
