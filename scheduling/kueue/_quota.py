"""preemptd's extension of Kueue: a lowered quota takes effect. A ClusterQueue annotated
`preemptd.io/quota-preemption-delay: "30s"` has a lowered nominal quota, borrowingLimit or
lendingLimit enforced that long after the configuration that lowered it; Kueue itself never
evicts for a quota change (an admitted workload keeps what it holds until it finishes).

- The timers follow `.._quota_timers` (started, moved, cancelled), per ClusterQueue, against
  its limits per flavor-resource: `nominalQuota`, `borrowingLimit` and `lendingLimit` (a limit
  newly set lowers, one removed raises). They are folded here: at a configuration
  (`fold_config`), and at each tick, where the timer of a cohort tree that fits again goes.
- What a queue holds counts its admitted workloads not evicted: victims in flight are left out,
  so an enforcement is not repeated while they leave.
- A ClusterQueue is over on a flavor-resource when it uses more than the quota tree lets it
  (what it has available is negative), as far as it uses beyond its own subtree quota: a queue
  within its nominal quota is not to blame for its cohort's shortage, the queues borrowing are.
  So a timer enforces its queue's whole cohort tree: a lowered nominal quota or lendingLimit
  shrinks what the cohort lends, and the borrowers give it back.
- When the timer has fired and the tree is over, the lowered queue gives back first: an admin
  who lowers a queue means that queue. It is judged first for what it holds above what Kueue's
  arithmetic now lets it hold (its new quota plus what its cohort can still lend it), and its
  own admitted workloads, not evicted and with all their pods running, are taken in Kueue's
  candidate order (`_classic.candidate_order`: lower priority, the most recently admitted, the
  name) while it is over on something they hold. Only if the tree is still over are the other
  queues' workloads taken, in the same order, each while its queue is over on something it
  holds, until no queue of the tree is over; then, as Kueue's preemption minimises, each victim
  the tree fits without is given back, from the second-to-last to the first.
- One `decision.quota_enforced` per timer and cycle: its victims are the pods of the workloads
  taken (the fold marks those workloads evicted, as `decision.evicted` does); `max` is the
  queue's nominal quota plus its borrowingLimit where it has one, `target` what the tree holds
  beyond what it may, `short` what stays over once every candidate is taken (said once).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from preemptd.events import LogEvent, QuotaEnforced, Resources, Tick, Victim, format_human
from preemptd.projections import PartitionState

from .._explain import amounts_by_name
from .._model import Cycle
from .._quota_timers import Limit, QuotaTimer, timeline
from ._classic import candidate_order, queues_under
from ._config import QUOTA_DELAY_ANNOTATION, ClusterQueue, config_of
from ._state import fold_event as fold_admissions, state_of
from ._tree import FlavorResource, Node, QuotaTree
from ._workloads import Workload, Workloads, charge, kept_workloads

__all__ = ["enforce_quotas", "fold_config", "fold_event", "limit_of", "next_enforcement", "over_in"]

Usage = dict[Node, dict[FlavorResource, int]]


def limit_of(queue: ClusterQueue) -> Limit:
    """`queue`'s limits as the timers compare them (`<field>/<flavor>/<resource>`) and its delay."""
    limits: dict[str, int] = {}
    for group in queue.resource_groups:
        for flavor in group.flavors:
            for resource, quota in flavor.resources.items():
                limits[f"nominalQuota/{flavor.flavor}/{resource}"] = quota.nominal
                if quota.borrowing_limit is not None:
                    limits[f"borrowingLimit/{flavor.flavor}/{resource}"] = quota.borrowing_limit
                if quota.lending_limit is not None:
                    limits[f"lendingLimit/{flavor.flavor}/{resource}"] = quota.lending_limit
    return Limit(max=dict(sorted(limits.items())), delay=queue.quota_preemption_delay)


def fold_config(p: PartitionState, received: int) -> None:
    """A configuration applied at `received`: the timers it starts, moves or cancels."""
    state = state_of(p)
    if p.document == state.quota.document:
        return  # before the picture is drawn
    config = config_of(p)
    limits = {name: limit_of(queue) for name, queue in config.cluster_queues.items()}
    picture = _Picture.of(p) if any(limit.delay > 0 for limit in limits.values()) else None
    state.quota.reconcile(p.document, limits, lambda name: picture is not None and picture.tree_over(name), received)


def fold_event(p: PartitionState, event: LogEvent) -> None:
    """The model's fold, once the generic fold accepted `event`: the admissions'
    (`_state.fold_event`); then, at a tick, the timers without those of cohort trees that fit
    again; at an enforcement, its timer gone, or, when it fell short, the shortfall, so that it
    is said once."""
    fold_admissions(p, event)
    state = state_of(p)
    if isinstance(event, QuotaEnforced) and event.short:
        state.quota.short[event.queue] = dict(event.short)
    elif isinstance(event, QuotaEnforced):  # done: a timer left would start a later lowering's countdown early
        state.quota.drop(_fired_in_tree(p, event.queue, event.ts))
    elif isinstance(event, Tick) and state.quota.timers:
        state.quota.drop_fitting(_Picture.of(p).tree_over)


def _fired_in_tree(p: PartitionState, queue: str, now: int) -> list[str]:
    """The ClusterQueues of `queue`'s cohort tree whose timers have fired by `now`: an
    enforcement that fits the tree does their work too."""
    state = state_of(p)
    node = QuotaTree(config_of(p)).queues.get(queue)
    under = [n.name for n in queues_under(node.path()[-1])] if node is not None else [queue]
    return [name for name in under if name in state.quota.timers and state.quota.timers[name].fires <= now]


def next_enforcement(p: PartitionState, now: int) -> int | None:
    """When the next timer fires, after `now` (a timer is dropped once its tree fits)."""
    state = state_of(p)
    return state.quota.next_firing(now)


def enforce_quotas(cycle: Cycle) -> None:
    """Each cohort tree whose queue's timer has fired and which is still over sheds the rest."""
    p = cycle.partition
    state = state_of(p)
    fired = state.quota.fired(cycle.now)
    if not fired:
        return
    picture = _Picture.of(p)
    for name, timer in fired:
        if cycle.may_preempt() and picture.tree_over(name):
            _enforce(cycle, picture, name, timer)


def over_in(tree: QuotaTree, root: Node, usage: Usage, first: str | None = None) -> dict[Node, dict[FlavorResource, int]]:
    """Per ClusterQueue under `root`, what it holds beyond what it may, the queues judged in the
    tree's order (ClusterQueue `first` before the others), each one's excess taken out before
    the next is judged (so a cohort's shortage is counted once, on the first queues judged)."""
    excess: dict[Node, dict[FlavorResource, int]] = {}
    queues = sorted(queues_under(root), key=lambda node: node.name != first)  # stable: the tree's order otherwise
    try:
        for node in queues:
            over = _over(tree, node, usage)
            if over:
                excess[node] = over
                tree.change(usage, node, over, -1)
    finally:
        for node, over in excess.items():
            tree.change(usage, node, over, +1)
    return excess


def _over(tree: QuotaTree, node: Node, usage: Usage) -> dict[FlavorResource, int]:
    """What ClusterQueue `node` holds beyond what it may use, as far as it uses beyond its
    subtree quota (a queue within it is not to blame for its cohort's shortage)."""
    over: dict[FlavorResource, int] = {}
    for fr, used in sorted(usage.get(node, {}).items()):
        amount = min(-tree.available(node, fr, usage), used - node.subtree.get(fr, 0))
        if amount > 0:
            over[fr] = amount
    return over


@dataclass
class _Picture:
    """The quota tree of the configuration in force and what its queues hold, evicted
    workloads left out."""

    tree: QuotaTree
    workloads: Workloads
    usage: Usage

    @classmethod
    def of(cls, p: PartitionState) -> _Picture:
        tree, workloads = QuotaTree(config_of(p)), kept_workloads(p).view(p)
        held: dict[str, dict[FlavorResource, int]] = {}
        for queue, admitted in workloads.admitted.items():
            for workload in admitted:
                if not workload.evicted:
                    charge(held.setdefault(queue, {}), workload.usage, +1)
        return cls(tree, workloads, tree.usage(held))

    def root(self, queue: str) -> Node | None:
        """The root of `queue`'s cohort tree; None for a queue gone or inactive."""
        node = self.tree.queues.get(queue)
        return node.path()[-1] if node is not None else None

    def tree_over(self, queue: str) -> bool:
        root = self.root(queue)
        return root is not None and bool(over_in(self.tree, root, self.usage))


@dataclass
class _Choice:
    """What an enforcement takes, and says."""

    taken: list[Workload] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    spared: dict[str, str] = field(default_factory=dict)


def _enforce(cycle: Cycle, picture: _Picture, name: str, timer: QuotaTimer) -> None:
    p = cycle.partition
    state = state_of(p)
    tree, usage = picture.tree, picture.usage
    root = picture.root(name)
    assert root is not None  # tree_over found it
    excess = over_in(tree, root, usage, first=name)
    cut = _cut(timer.was, state.quota.limits[name].max or {})
    choice = _Choice(lines=[_timeline(name, state.quota.limits[name], timer)])
    for node, over in excess.items():
        choice.lines.append(f"ClusterQueue {node.name} holds {_frs(over)} beyond what it may use ({_limits(config_of(p).cluster_queues[node.name], over)})")
    own = sorted((w for w in picture.workloads.admitted.get(name, ()) if not w.evicted), key=lambda w: candidate_order(name, w))
    others = sorted(
        (w for node in excess if node.name != name for w in picture.workloads.admitted.get(node.name, ()) if not w.evicted),
        key=lambda w: candidate_order(name, w),
    )
    candidates = [*own, *others] if any(node.name == name for node in excess) else others
    for workload in candidates:
        _consider(p, tree, usage, root, workload, choice)
    short = _per_resource([over for over in over_in(tree, root, usage).values()])
    if not short:
        _minimise(tree, usage, root, choice)
    for workload in candidates:
        choice.lines.append(_line(workload, choice))
    if short:
        choice.lines.append(f"short by {amounts_by_name(short)}: no other admitted workload of the ClusterQueues over, not evicted, has all its pods running")
    victims = tuple(_victims(p, choice.taken, name, cut))
    if not victims and short == state.quota.short.get(name):
        return  # said already
    queue = config_of(p).cluster_queues[name]
    cycle.emit(
        QuotaEnforced,
        queue=name,
        max=Resources(_max(queue)),
        target=Resources(_per_resource(list(excess.values()))),
        victims=victims,
        short=Resources(short) if short else None,
        model=p.model,
        reason="quota",
        explanation=tuple(choice.lines),
    )


def _consider(p: PartitionState, tree: QuotaTree, usage: Usage, root: Node, workload: Workload, choice: _Choice) -> None:
    """Take `workload` if its queue is still over on something it holds and its pods all run."""
    node = tree.queues[workload.queue]
    if not over_in(tree, root, usage):
        choice.spared[workload.id] = "not needed, the ClusterQueues fit without it"
    elif _over(tree, node, usage).keys().isdisjoint(workload.usage):
        choice.spared[workload.id] = f"ClusterQueue {workload.queue} is no longer over on what it holds"
    elif any(p.tasks[task].status != "running" for task in p.apps[workload.id].tasks):
        choice.spared[workload.id] = "its pods are not all running yet (a later cycle may take it)"
    else:
        tree.change(usage, node, workload.usage, -1)
        choice.taken.append(workload)


def _minimise(tree: QuotaTree, usage: Usage, root: Node, choice: _Choice) -> None:
    """Give back, from the second-to-last victim to the first, each one the tree fits without."""
    for workload in reversed(choice.taken[:-1]):
        node = tree.queues[workload.queue]
        tree.change(usage, node, workload.usage, +1)
        if over_in(tree, root, usage):
            tree.change(usage, node, workload.usage, -1)
        else:
            choice.taken.remove(workload)
            choice.spared[workload.id] = "given back: the ClusterQueues fit without it once the later victims are gone"


def _line(workload: Workload, choice: _Choice) -> str:
    where = f"{workload.id} (ClusterQueue {workload.queue}, priority {workload.priority}, admitted in cycle {workload.admitted_at})"
    if workload in choice.taken:
        return f"taken: {where}"
    return f"spared: {where}: {choice.spared[workload.id]}"


def _victims(p: PartitionState, taken: list[Workload], name: str, cut: str) -> list[Victim]:
    victims = []
    for workload in taken:
        if workload.queue == name:
            held = f"ClusterQueue {name}'s {cut}: it holds more than that quota and what its cohort can still lend it; Kueue's candidate order within it"
        else:
            held = (
                f"ClusterQueue {name}'s {cut}, and its own workloads did not free enough: ClusterQueue {workload.queue} holds more than "
                "its cohort lends it now; Kueue's candidate order: other ClusterQueues first, then"
            )
        why = f"quota: {held}: priority {workload.priority}, admitted in cycle {workload.admitted_at}"
        for task_id in p.apps[workload.id].tasks:
            task = p.tasks[task_id]
            assert task.node is not None  # running
            victims.append(
                Victim(task=task.id, app=task.app, queue=task.queue, node=task.node, priority=task.priority, resources=Resources(task.resources), why=why)
            )
    return victims


def _timeline(name: str, limit: Limit, timer: QuotaTimer) -> str:
    was = f"was {_limit_text(timer.was)}" if timer.was else "newly enforced"
    return timeline(f"ClusterQueue {name}'s quota", _limit_text(limit.max or {}), was, QUOTA_DELAY_ANNOTATION, timer)


def _cut(was: dict[str, int] | None, now: dict[str, int]) -> str:
    """How a queue's limits were lowered: each one set lower or newly set."""
    if was is None:
        return f"quota is now enforced ({_limit_text(now)})"
    parts = []
    for key, amount in now.items():
        kind, flavor, resource = key.split("/", 2)
        if key not in was:
            parts.append(f"{kind} of {resource} in {flavor} was set to {format_human(resource, amount)}")
        elif amount < was[key]:
            parts.append(f"{kind} of {resource} in {flavor} was lowered from {format_human(resource, was[key])} to {format_human(resource, amount)}")
    return ", ".join(parts) or f"quota is {_limit_text(now)}"


def _limit_text(limits: dict[str, int]) -> str:
    parts = []
    for key, amount in limits.items():
        kind, flavor, resource = key.split("/", 2)
        parts.append(f"{kind} {format_human(resource, amount)} {resource} in {flavor}")
    return ", ".join(parts) or "none"


def _limits(queue: ClusterQueue, over: dict[FlavorResource, int]) -> str:
    """`queue`'s quota of what it is over on."""
    limit = limit_of(queue).max or {}
    parts = []
    for flavor, resource in over:
        named = [key for key in limit if key.split("/", 2)[1:] == [flavor, resource]]
        parts.append(_limit_text({key: limit[key] for key in named}) if named else f"no quota of {resource} in {flavor}")
    return "; ".join(parts)


def _max(queue: ClusterQueue) -> dict[str, int]:
    """Per resource, over its flavors, `queue`'s nominal quota plus its borrowingLimit where it has one."""
    most: dict[str, int] = {}
    for group in queue.resource_groups:
        for flavor in group.flavors:
            for resource, quota in flavor.resources.items():
                most[resource] = most.get(resource, 0) + quota.nominal + (quota.borrowing_limit or 0)
    return most


def _per_resource(amounts: list[dict[FlavorResource, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for over in amounts:
        for (_, resource), amount in over.items():
            total[resource] = total.get(resource, 0) + amount
    return dict(sorted(total.items()))


def _frs(amounts: dict[FlavorResource, int]) -> str:
    return ", ".join(f"{format_human(resource, amount)} {resource} in {flavor}" for (flavor, resource), amount in sorted(amounts.items()))
