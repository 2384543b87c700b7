"""What `preemptd state`, the report and the metrics show of a Kueue partition, in Kueue's terms.

- `curves`: per ClusterQueue and flavor ("cpu in on-demand"), the quota its admitted workloads
  reserve (running or not), what their pods hold, and what its workloads not admitted yet ask,
  against its nominal quota and borrowing limit; the cluster's totals at the root.
- `shares`: under fair sharing, each ClusterQueue's and cohort's weighted share (`_fair.share`).
- `queue_columns` and `cohort_table`: the ClusterQueues and the cohort tree in `state`, with
  what each borrows and lends.

What workloads hold and ask is kept between samples (`Totals`): the fold says which applications
changed and only those are read again, so a sample costs about the number of ClusterQueues, not
of workloads (the report samples a log up to 2,000 times). It is kept apart from the cycle's
`KeptWorkloads`, so that reading it, whenever the metrics do, never changes what a cycle sees.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from preemptd.events import format_duration
from preemptd.projections import AppState, PartitionState

from .._views import Column, Curves, Table
from ._config import ROOT, ClusterQueue, KueueConfig, config_of
from ._fair import share
from ._kept import kept
from ._state import admission_of, eviction_of
from ._tree import FlavorResource, Node, QuotaTree
from ._workloads import charge, usage_of

__all__ = ["Totals", "cohort_table", "curves", "queue_columns", "shares"]


@dataclass(frozen=True)
class _Held:
    """One workload as the views count it: what it asks, what its running pods hold, and its
    flavors once admitted."""

    queue: str
    flavors: dict[str, str] | None
    request: dict[str, int]
    running: dict[str, int]


class Totals:
    """Per ClusterQueue: the quota admitted workloads reserve and what their pods hold, per
    flavor-resource; the requests of workloads not admitted yet, and what their pods hold
    already (arrived running, recorded at the next cycle), per resource; how many are admitted.
    Rebuilt whole when absent (a restored snapshot, a new process)."""

    def __init__(self, p: PartitionState) -> None:
        self.held: dict[str, _Held] = {}
        self.admitted: dict[str, dict[FlavorResource, int]] = {}
        self.running: dict[str, dict[FlavorResource, int]] = {}
        self.waiting: dict[str, dict[str, int]] = {}
        self.running_unadmitted: dict[str, dict[str, int]] = {}
        self.workloads: dict[str, int] = {}  # admitted, by ClusterQueue
        self.changed: dict[str, None] = dict.fromkeys(p.apps)

    def touch(self, app_id: str) -> None:
        self.changed[app_id] = None

    def read(self, p: PartitionState) -> Totals:
        """Up to date with the partition: the applications changed since are read again."""
        for app_id in self.changed:
            old = self.held.pop(app_id, None)
            if old is not None:
                self._count(old, -1)
            app = p.apps.get(app_id)
            new = _held(p, app) if app is not None else None
            if new is not None:
                self.held[app_id] = new
                self._count(new, +1)
        self.changed = {}
        return self

    def _count(self, held: _Held, sign: int) -> None:
        queue = held.queue
        if held.flavors is None:
            charge(self.waiting.setdefault(queue, {}), held.request, sign)
            charge(self.running_unadmitted.setdefault(queue, {}), held.running, sign)
            return
        charge(self.admitted.setdefault(queue, {}), usage_of(held.flavors, held.request), sign)
        charge(self.running.setdefault(queue, {}), usage_of(held.flavors, held.running), sign)
        self.workloads[queue] = self.workloads.get(queue, 0) + sign


def _held(p: PartitionState, app: AppState) -> _Held | None:
    if not app.tasks:
        return None
    request: dict[str, int] = {}
    running: dict[str, int] = {}
    for task_id in app.tasks:
        task = p.tasks[task_id]
        charge(request, task.resources, +1)
        if task.status != "pending":
            charge(running, task.resources, +1)
    admission = admission_of(p, app)
    return _Held(app.queue, admission.flavors if admission is not None else None, request, running)


def _totals(p: PartitionState) -> Totals:
    found = kept(p)
    if found.totals is None:
        found.totals = Totals(p)
    return found.totals.read(p)


@dataclass
class Settled:
    """What the views read of one configuration, made once for it: per ClusterQueue its
    bounds as curves, the flavor its resources are tried in first, and the quota tree."""

    config: KueueConfig
    bounds: dict[str, dict[str, dict[str, int]]] = field(init=False)
    first: dict[str, dict[str, str]] = field(init=False)
    tree: QuotaTree = field(init=False)

    def __post_init__(self) -> None:
        self.bounds = {name: _bounds(queue) for name, queue in self.config.cluster_queues.items()}
        self.first = {name: _first_flavors(queue) for name, queue in self.config.cluster_queues.items()}
        self.tree = QuotaTree(self.config)


def _settled(p: PartitionState) -> Settled:
    found = kept(p)
    if found.views is None or found.views.config is not config_of(p):
        found.views = Settled(config_of(p))
    return found.views


def curve_key(flavor: str, resource: str) -> str:
    """A `Curves` resource key: the resource and the flavor it is held in ("cpu in spot")."""
    return f"{resource} in {flavor}"


def _bounds(queue: ClusterQueue) -> dict[str, dict[str, int]]:
    """Its nominal quota, and its borrowing limit on top where it has one (none where it may
    borrow what its cohort has; no more than nominal without a cohort)."""
    nominal: dict[str, int] = {}
    most: dict[str, int] = {}
    for group in queue.resource_groups:
        for flavor in group.flavors:
            for resource, quota in flavor.resources.items():
                nominal[curve_key(flavor.flavor, resource)] = quota.nominal
                if queue.cohort is None or quota.borrowing_limit is not None:
                    most[curve_key(flavor.flavor, resource)] = quota.nominal + (quota.borrowing_limit or 0)
    return {"guaranteed": nominal, "max": most}


def _first_flavors(queue: ClusterQueue) -> dict[str, str]:
    """Per resource, the flavor assignment tries first: where a waiting workload's ask is drawn."""
    return {resource: group.flavors[0].flavor for group in queue.resource_groups if group.flavors for resource in group.covered}


def curves(p: PartitionState) -> Curves:
    """`Model.curves`: per ClusterQueue and flavor, admitted (quota reserved), allocated (its
    admitted workloads' running pods, by their flavors; pods running before their admission is
    recorded, in the first flavor), pending (workloads not admitted, in the flavor tried first),
    nominal quota and borrowing limit; at the root, the ClusterQueues' sums of the first three."""
    totals, settled = _totals(p), _settled(p)
    out: Curves = {}
    cluster: dict[str, dict[str, int]] = {"admitted": {}, "allocated": {}, "pending": {}}
    for name in config_of(p).cluster_queues:
        first = settled.first[name]
        running = _keyed(totals.running.get(name, {}))
        charge(running, _in_first(first, totals.running_unadmitted.get(name, {})), +1)
        amounts = {
            "admitted": _keyed(totals.admitted.get(name, {})),
            "allocated": running,
            "pending": _in_first(first, totals.waiting.get(name, {})),
            **settled.bounds[name],
        }
        for curve, total in cluster.items():
            charge(total, amounts[curve], +1)
        out[name] = amounts
    out[ROOT] = cluster
    return out


def _in_first(first: Mapping[str, str], amounts: Mapping[str, int]) -> dict[str, int]:
    """Amounts of workloads not admitted yet, in the flavor tried first for each resource (one
    that no flavor covers is never admitted: not drawn)."""
    return {curve_key(first[resource], resource): amount for resource, amount in amounts.items() if resource in first}


def _keyed(amounts: Mapping[FlavorResource, int]) -> dict[str, int]:
    return {curve_key(flavor, resource): amount for (flavor, resource), amount in amounts.items()}


def shares(p: PartitionState) -> dict[str, float]:
    """`Model.shares`: under fair sharing, each ClusterQueue's (by name) and cohort's ("cohort
    <name>") weighted share, in Kueue's thousandths; an infinite one (weight 0, borrowing) has
    no number to draw: `state` says it. None where fair sharing is off."""
    return {_share_key(node): float(value) for node, value in _shares(p).items() if isinstance(value, Fraction)}


def _share_key(node: Node) -> str:
    return f"cohort {node.name}" if node.is_cohort else node.name


def _shares(p: PartitionState) -> dict[Node, Fraction | str]:
    """Every node's weighted share in the cohort trees under fair sharing, in tree order: a
    number, or "infinite"."""
    config = config_of(p)
    settled = _settled(p)
    tree = settled.tree
    roots = [root for root in tree.roots() if config.fair_sharing_in(root.name)]
    if not roots:
        return {}
    usage = tree.usage(_totals(p).admitted)
    out: dict[Node, Fraction | str] = {}
    for root in roots:
        for node in _tree_order(root):
            weighted = share(tree, node, usage)
            out[node] = "infinite" if weighted.infinite else weighted.value
    return out


def _tree_order(node: Node) -> Iterator[Node]:
    yield node
    for child in node.children:
        yield from _tree_order(child)


@dataclass
class _Lending:
    """Per node and flavor-resource, what its admitted workloads use as Kueue counts it (a
    cohort: what its members use beyond what they keep for themselves), what it borrows from its
    parent (that usage above its subtree quota) and what it lends (what the others under its
    parent use of its quota)."""

    usage: dict[Node, dict[FlavorResource, int]]
    borrowed: dict[Node, dict[FlavorResource, int]]
    lent: dict[Node, dict[FlavorResource, int]]


def _lending(tree: QuotaTree, totals: Totals) -> _Lending:
    """Borrowing from a cohort takes from one pool, the cohort's own quota and what its members
    leave unused of what they lend: when the pool is not used up, each member is said to lend
    its part of what is taken, in proportion to what it leaves unused (rounded down)."""
    usage = tree.usage(totals.admitted)
    borrowed = {node: _above(node.subtree, usage.get(node, {})) for node in usage if node.parent is not None}
    lent: dict[Node, dict[FlavorResource, int]] = {}
    for cohort in tree.cohorts.values():
        for fr in sorted({fr for child in cohort.children for fr in child.subtree}):
            taken = {child: max(0, usage.get(child, {}).get(fr, 0) - child.local(fr)) for child in cohort.children}
            demand = sum(max(0, taken[child] - child.lends(fr)) for child in cohort.children)
            unused = {child: max(0, child.lends(fr) - taken[child]) for child in cohort.children}
            own = cohort.quotas[fr].nominal if fr in cohort.quotas else 0
            pool = own + sum(unused.values())
            for child, left in unused.items():
                part = left if demand >= pool else left * demand // pool
                if part:
                    lent.setdefault(child, {})[fr] = part
    return _Lending(usage, borrowed, lent)


def _above(quota: Mapping[FlavorResource, int], used: Mapping[FlavorResource, int]) -> dict[FlavorResource, int]:
    return {fr: amount - quota.get(fr, 0) for fr, amount in used.items() if amount > quota.get(fr, 0)}


def _by_flavor(amounts: Mapping[FlavorResource, int] | None) -> dict[str, dict[str, int]] | None:
    """Amounts per flavor, then resource (as `state` shows them), or None for none."""
    out: dict[str, dict[str, int]] = {}
    for (flavor, resource), amount in sorted((amounts or {}).items()):
        out.setdefault(flavor, {})[resource] = amount
    return out or None


def queue_columns(p: PartitionState) -> list[Column]:
    """`Model.queue_columns`: per ClusterQueue what its workloads not admitted yet ask (its
    pending: what waits for a node once admitted is not), its cohort, its fair-sharing weight (and share,
    under fair sharing), and per flavor its nominal quota, borrowing and lending limits, what
    its admitted workloads hold (quota reserved, whether their pods run yet or not), what it
    borrows and lends in its cohort, and how many workloads are admitted."""
    config = config_of(p)
    totals, settled = _totals(p), _settled(p)
    lending = _lending(settled.tree, totals)
    shared = {node.name: value for node, value in _shares(p).items() if not node.is_cohort}
    names = (
        "pending",
        "cohort",
        "weight",
        *(("share",) if shared else ()),
        "nominal",
        "borrowing_limit",
        "lending_limit",
        "admitted",
        "borrowed",
        "lent",
        "admitted_workloads",
    )
    columns: dict[str, dict[str, object]] = {name: {} for name in names}
    waiting: dict[str, int] = {}
    for name, queue in config.cluster_queues.items():
        limits: dict[str, dict[FlavorResource, int]] = {"nominal": {}, "borrowing_limit": {}, "lending_limit": {}}
        for group in queue.resource_groups:
            for flavor in group.flavors:
                for resource, quota in flavor.resources.items():
                    fr = (flavor.flavor, resource)
                    limits["nominal"][fr] = quota.nominal
                    if quota.borrowing_limit is not None:
                        limits["borrowing_limit"][fr] = quota.borrowing_limit
                    if quota.lending_limit is not None:
                        limits["lending_limit"][fr] = quota.lending_limit
        node = settled.tree.queues.get(name)
        columns["pending"][name] = dict(totals.waiting.get(name, {}))
        charge(waiting, totals.waiting.get(name, {}), +1)
        columns["cohort"][name] = queue.cohort
        columns["weight"][name] = queue.weight
        if shared:
            columns["share"][name] = shared.get(name)
        for column, amounts in limits.items():
            columns[column][name] = _by_flavor(amounts)
        columns["admitted"][name] = _by_flavor(totals.admitted.get(name))
        columns["borrowed"][name] = _by_flavor(lending.borrowed.get(node) if node is not None else None)
        columns["lent"][name] = _by_flavor(lending.lent.get(node) if node is not None else None)
        columns["admitted_workloads"][name] = totals.workloads.get(name, 0)
    columns["pending"][ROOT] = waiting
    return list(columns.items())


def cohort_table(p: PartitionState) -> list[Table]:
    """`Model.tables`: the cohort tree, a row per cohort in tree order: its parent, its own
    ClusterQueues, and per flavor its subtree's nominal quota, what its admitted workloads use
    (as Kueue counts a cohort's usage), what it borrows from its parent and what it lends there;
    under fair sharing its weight and weighted share. None without cohorts."""
    config = config_of(p)
    settled = _settled(p)
    tree = settled.tree
    lending = _lending(tree, _totals(p))
    shared = {node: value for node, value in _shares(p).items() if node.is_cohort}
    rows = []
    for root in tree.roots():
        for node in _tree_order(root):
            if not node.is_cohort:
                continue
            row: dict[str, object] = {
                "cohort": node.name,
                "parent": node.parent.name if node.parent is not None else None,
                "cluster_queues": ", ".join(child.name for child in node.children if not child.is_cohort) or None,
            }
            if shared:
                row.update(weight=config.cohorts[node.name].weight, share=shared.get(node))
            row.update(
                nominal=_by_flavor(node.subtree),
                admitted=_by_flavor(lending.usage.get(node)),
                borrowed=_by_flavor(lending.borrowed.get(node)),
                lent=_by_flavor(lending.lent.get(node)),
            )
            rows.append(row)
    return [("cohorts", rows)] if rows else []


#: `preemptd state` lists at most this many workloads (admitted ones first), then says how many more.
WORKLOADS_SHOWN = 200


def workload_table(p: PartitionState) -> list[Table]:
    """The workloads, as `kueuectl list workloads` shows them: name, LocalQueue and
    ClusterQueue, priority, whether admitted (with its flavors), evicted (its pods still going)
    or pending (with the reason of its last eviction, until it is admitted again), and age
    (from its submission to the partition's last cycle). Admitted first, then by ClusterQueue,
    priority and age."""
    listed = sorted(p.apps.values(), key=lambda app: (admission_of(p, app) is None, app.queue, -app.priority, app.submitted_at, app.id))
    shown: list[dict[str, object]] = []
    for app in listed[:WORKLOADS_SHOWN]:
        admission = admission_of(p, app)
        evicted = eviction_of(p, app)
        if admission is None:
            status = f"pending (evicted: {evicted})" if evicted else "pending"
        else:
            status = f"evicted: {evicted}, its pods going" if admission.evicted else "admitted"
        shown.append(
            {
                "workload": app.id,
                "local_queue": app.alias,
                "cluster_queue": app.queue,
                "priority": app.priority,
                "status": status,
                "flavors": ", ".join(f"{resource}: {flavor}" for resource, flavor in sorted(admission.flavors.items())) if admission is not None else None,
                "age": format_duration(max(p.last_tick - app.submitted_at, 0) // 1000 * 1000),
            }
        )
    if len(listed) > WORKLOADS_SHOWN:
        shown.append(dict.fromkeys(shown[0], None) | {"workload": f"(and {len(listed) - WORKLOADS_SHOWN:,} more)"})
    return [("workloads", shown)] if shown else []


def kueue_tables(p: PartitionState) -> list[Table]:
    """`Model.tables`: the cohort tree, then the workloads."""
    return [*cohort_table(p), *workload_table(p)]
