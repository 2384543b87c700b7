"""YuniKorn's preemption, by the seven laws of its design, kept strictly.

For a pending task (the ask) that cannot be placed:

1. Preconditions: preemption enabled in the partition, the ask may preempt (its policy is not
   `Never`), it has waited its leaf's `preemption.delay`.
2. Scope. Walking up from the ask's leaf: `guard` is the lowest queue with a guarantee on a
   resource the ask requests (none: law 4 refuses). Victims must come from outside the guard's
   subtree, so that the ask's gain serves that guarantee, and from inside the subtree of `top`,
   the lowest of: the first queue whose guarantee the ask would overflow (law 4: above it the
   ask is not under its guarantee), the first `preemption.policy: fence` (law 7), the first
   queue at its max (victims elsewhere would not make room under it), and the root.
3. Candidates: running tasks in that scope, in queues that are not `disabled`, sharing a
   resource with the ask, not in its application (law 3), not of higher priority as seen from
   the queue both share (law 6), whose removal keeps every queue at or above its guarantee
   (laws 5 and 2, checked for the whole victim set, the ask's own arrival counted).
4. Per node (no cross-node preemption): the fewest candidates that make room for the ask on the
   node and under its queues' maxes; originators only when no node can do without them, and
   opted-out tasks only when no node can do without those either (law 1; YuniKorn orders
   allow-preemption before the originator flag). The best node has the fewest opted-out victims,
   then the fewest originators, the fewest victims, the lowest highest-priority, the youngest
   oldest victim, then the lowest name.

`Refusal.quiet` marks outcomes that are waits, not refusals: the delay has not passed, or
victims already leaving will make the room.

Required-node (DaemonSet) preemption follows other rules: `_daemonset`. What both share (the
outcomes, candidates, law 1's resorts, node room, the victim order) is `_victims`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from preemptd.projections import NodeState, PartitionState, QueueState, TaskState, positive

from .._explain import amounts, counted, listing
from ._config import config_of
from ._ordering import effective_priority
from ._victims import (
    OPTED_OUT,
    ORDINARY,
    ORIGINATOR,
    RESORT_WHY,
    Candidate,
    Plan,
    Refusal,
    exclusions,
    minimise,
    node_available,
    resort_of,
    summed,
    too_small,
    victim_order,
)

__all__ = ["committed", "frees_unclaimed_room", "landed", "plan_for_guarantee", "scope_refusal"]


@dataclass
class _Solution:
    node: NodeState
    victims: list[Candidate]
    key: tuple[int, int, int, int, int, str] = field(init=False)

    def __post_init__(self) -> None:
        # Best first: fewest opted-out victims, fewest originators, fewest victims, lowest top
        # priority, youngest oldest victim, then node name (the final tie-break).
        self.key = (
            sum(c.resort == OPTED_OUT for c in self.victims),
            sum(c.resort == ORIGINATOR for c in self.victims),
            len(self.victims),
            max(c.priority for c in self.victims),
            -min(c.task.bound_at or 0 for c in self.victims),
            self.node.name,
        )


def landed(queue: QueueState) -> dict[str, int]:
    """A queue's usage as a victim's queue: victims in flight are gone, and reserved asks do not
    count until they land, since a reservation can still be dropped (laws 5 and 2)."""
    out = dict(queue.allocated)
    for name, amount in queue.preempting.items():
        out[name] = out.get(name, 0) - amount
    return out


def committed(queue: QueueState) -> dict[str, int]:
    """A queue's usage as the asking side sees it (law 4): landed, and reserved asks are in."""
    out = landed(queue)
    for name, amount in queue.reserved.items():
        out[name] = out.get(name, 0) + amount
    return out


def frees_unclaimed_room(node: NodeState) -> bool:
    """Victims leaving `node` will free room that no reservation claims."""
    return any(amount > 0 for amount in node_available(node).values())


# -- generic (guarantee) preemption ----------------------------------------------------------


@dataclass
class _Scope:
    path: list[QueueState]
    guard: int
    top: int
    why_top: str
    queue_need: dict[str, int]
    law4: str


def plan_for_guarantee(p: PartitionState, task: TaskState, now: int, draining: list[NodeState]) -> Plan | Refusal:
    """Find victims so that `task` gets room that its queue's guarantee entitles it to.
    `draining` are the nodes where victims in flight will free more than their preemptors
    claim: that room is waited for rather than taken again from someone else."""
    scope = _scope_of(p, task, now)
    if isinstance(scope, Refusal):
        return scope
    search = _GuaranteeSearch(p, task, scope)
    if any(search.will_fit(node) for node in draining):
        return Refusal(("victims in flight will make room",), quiet=True)
    return search.run()


def scope_refusal(p: PartitionState, task: TaskState, now: int) -> Refusal | None:
    """The refusal `task` gets before any victim is searched for, if it gets one: its
    preconditions', or its scope's. Alike for every task of a leaf with the same ask and
    preemption policy, whatever its priority, once its delay has passed."""
    scope = _scope_of(p, task, now)
    return scope if isinstance(scope, Refusal) else None


def _scope_of(p: PartitionState, task: TaskState, now: int) -> _Scope | Refusal:
    return _preconditions(p, task, now) or _scope(p, task)


def _preconditions(p: PartitionState, task: TaskState, now: int) -> Refusal | None:
    if not config_of(p).enabled:
        return Refusal((f"preemption is disabled in partition {p.name} (preemption.enabled: false)",), depends_on=())
    if not task.may_preempt:
        return Refusal(("the task's preemption policy is Never: it may not trigger preemption",), depends_on=())
    delay = p.queues[task.queue].props.preemption_delay
    if now < task.submitted_at + delay:
        return Refusal(("preemption.delay has not passed",), quiet=True)
    return None


def _scope(p: PartitionState, task: TaskState) -> _Scope | Refusal:
    ask = positive(task.resources)
    path = [p.queues[name] for name in p.queues[task.queue].lineage]
    guard = full = fence = at_max = None
    for index, queue in enumerate(path):
        usage = committed(queue)
        guaranteed = {name: queue.guaranteed[name] for name in ask if name in queue.guaranteed}
        if guaranteed and guard is None:
            guard = index
        if guaranteed and full is None and _not_under(usage, guaranteed):
            full = index
        if fence is None and queue.props.preemption_policy == "fence" and index < len(path) - 1:
            fence = index
        if at_max is None and queue.max is not None and _overflows(usage, ask, queue.max):
            at_max = index
    if guard is None:
        return Refusal((f"law 4: neither {task.queue} nor its parents guarantee {listing(sorted(ask))}: no guarantee to restore",), depends_on=())
    if full == guard:
        return _law4_refusal(path[guard], ask)
    bounds = [
        (full, "law 4: it is not under its guarantee"),
        (fence, "law 7: its preemption fence"),
        (at_max, "it is at its max"),
        (len(path) - 1, "no fence or max below it"),
    ]
    top, why_top = min((index, why) for index, why in bounds if index is not None)
    if top <= guard:
        return _empty_scope(path, guard, top, fence, task)
    need = _queue_need(path[top:], ask) if at_max is not None else {}
    guarded = [name for name in ask if name in path[guard].guaranteed]
    law4 = (
        f"law 4: {path[guard].path} is under its guarantee: it uses {amounts(committed(path[guard]), guarded)} "
        f"of {amounts(path[guard].guaranteed, guarded)}; the task asks {amounts(ask)}"
    )
    return _Scope(path=path, guard=guard, top=top, why_top=f"{path[top].path} ({why_top})", queue_need=need, law4=law4)


def _empty_scope(path: list[QueueState], guard: int, top: int, fence: int | None, task: TaskState) -> Refusal:
    if top == fence:
        return Refusal(
            (f"law 7: the preemption fence of {path[fence].path} leaves no queue outside {path[guard].path} to preempt from",), depends_on=(path[top].path,)
        )
    queue = path[top]
    return Refusal(
        (
            f"max: {queue.path} is at its max for {listing(_over_names(committed(queue), task.resources, queue.max))}, and only tasks inside "
            f"{path[guard].path} could make room",
        ),
        depends_on=(queue.path,),
    )


def _not_under(usage: dict[str, int], guaranteed: dict[str, int]) -> bool:
    """Law 4: a queue is under its guarantee while it uses less than it in every resource the
    task asks for and the queue guarantees."""
    return any(usage.get(name, 0) >= limit for name, limit in guaranteed.items())


def _law4_refusal(queue: QueueState, ask: dict[str, int]) -> Refusal:
    usage = committed(queue)
    guarded = [name for name in ask if name in queue.guaranteed]
    full = [name for name in guarded if usage.get(name, 0) >= queue.guaranteed[name]]
    where = "over" if any(usage.get(name, 0) > queue.guaranteed[name] for name in full) else "at"
    # The reason stays the same whether the queue is at or over its guarantee, so that a queue
    # moving around it does not make every waiting task publish a new decision.blocked.
    return Refusal(
        (f"law 4: {queue.path} is not under its guarantee of {amounts(queue.guaranteed, full)}",),
        (f"{queue.path} is {where} its guarantee: it uses {amounts(usage, guarded)} of {amounts(queue.guaranteed, guarded)}; the task asks {amounts(ask)}",),
        depends_on=(queue.path,),
    )


def _overflows(usage: dict[str, int], ask: dict[str, int], limit: dict[str, int]) -> bool:
    return any(name in limit and usage.get(name, 0) + amount > limit[name] for name, amount in ask.items())


def _over_names(usage: dict[str, int], ask: dict[str, int], limit: dict[str, int] | None) -> list[str]:
    return [name for name, amount in ask.items() if limit and name in limit and usage.get(name, 0) + amount > limit[name]]


def _queue_need(path: list[QueueState], ask: dict[str, int]) -> dict[str, int]:
    """How much the victims must free, per resource, for the ask to fit every max above `top`."""
    need: dict[str, int] = {}
    for queue in path:
        if queue.max is None:
            continue
        usage = committed(queue)
        for name, amount in ask.items():
            if name in queue.max:
                beyond = usage.get(name, 0) + amount - queue.max[name]
                if beyond > need.get(name, 0):
                    need[name] = beyond
    return need


class _GuaranteeSearch:
    """Candidates within the scope, grouped per node, and the best node's minimal victim set."""

    def __init__(self, p: PartitionState, task: TaskState, scope: _Scope) -> None:
        self.p, self.task, self.scope = p, task, scope
        self.ask = positive(task.resources)
        self.on_path = {queue.path: index for index, queue in enumerate(scope.path)}
        self.excluded: Counter[str] = Counter()  # reasons tasks were not candidates
        self.spared: list[str] = []  # queues not over their guarantee: not searched (law 5)
        self.disabled: list[str] = []  # queues with preemption.policy: disabled
        self._surplus: dict[str, dict[str, int]] = {}
        self._ask_priority: dict[str, int] = {}

    def run(self) -> Plan | Refusal:
        by_node = self._candidates()
        for resort in (ORDINARY, ORIGINATOR, OPTED_OUT):  # law 1: the later resorts only if need be
            solution, considered = self._best(by_node, resort)
            if solution is not None:
                break
        else:
            return self._refusal(by_node, considered)
        return self._plan(solution, considered, by_node[solution.node.name])

    # -- candidates --

    def _candidates(self) -> dict[str, list[Candidate]]:
        by_node: dict[str, list[Candidate]] = {}
        guard = self.scope.path[self.scope.guard].path
        stack = [self.scope.path[self.scope.top].path]
        while stack:
            queue = self.p.queues[stack.pop()]
            if queue.path == guard or self._prunable(queue):
                continue
            if queue.leaf:
                self._collect(queue, by_node)
            else:
                stack.extend(reversed(queue.children))
        return by_node

    def _prunable(self, queue: QueueState) -> bool:
        """Off the ask's path, a queue guaranteed on every asked resource and not above its
        guarantee on any can lose nothing useful (law 2). Inline arithmetic: this runs for
        every queue in scope."""
        if queue.path in self.on_path:
            return False
        guaranteed, allocated, preempting = queue.guaranteed, queue.allocated, queue.preempting
        for name in self.ask:
            limit = guaranteed.get(name)
            if limit is None or allocated.get(name, 0) - preempting.get(name, 0) > limit:
                return False
        self.spared.append(queue.path)
        return True

    def _collect(self, leaf: QueueState, by_node: dict[str, list[Candidate]]) -> None:
        if leaf.props.preemption_policy == "disabled":
            self.disabled.append(leaf.path)
            return
        shared, fenced, offset = self._relation(leaf)
        ask_priority = self._ask_priority_at(shared)
        lineage = [self.p.queues[path] for path in leaf.lineage]
        for task_id in leaf.running:
            task = self.p.tasks[task_id]
            if task.status != "running":
                continue  # already leaving
            assert task.node is not None, task.id  # a running task is on a node
            priority = offset if fenced else task.priority + offset
            reason = self._exclusion(task, priority, ask_priority, lineage)
            if reason:
                self.excluded[reason] += 1
                continue
            by_node.setdefault(task.node, []).append(Candidate(task, priority, resort_of(task), lineage))

    def _relation(self, leaf: QueueState) -> tuple[str, bool, int]:
        """The queue shared with the ask, the leaf's queues below it, and the priority shift
        they apply (`fenced`: a priority fence replaces task priorities by `offset`)."""
        chain = []
        for path in leaf.lineage:
            if path in self.on_path:
                shared = path
                break
            chain.append(path)
        fenced, offset = False, 0
        for path in chain:
            props = self.p.queues[path].props
            if props.priority_policy == "fence":
                fenced, offset = True, props.priority_offset
            else:
                offset += props.priority_offset
        return shared, fenced, offset

    def _ask_priority_at(self, shared: str) -> int:
        if shared not in self._ask_priority:
            self._ask_priority[shared] = effective_priority(self.p, self.task.priority, self.task.queue, shared)
        return self._ask_priority[shared]

    def _exclusion(self, task: TaskState, priority: int, ask_priority: int, lineage: list[QueueState]) -> str | None:
        if task.required_node is not None:
            return "required-node (DaemonSet) tasks are not victims of queue preemption"
        if task.app == self.task.app:
            return f"law 3: tasks of the task's own application {task.app}"
        if not any(task.resources.get(name, 0) > 0 for name in self.ask):
            return f"tasks in {task.queue} that free none of {listing(list(self.ask))}"
        if priority > ask_priority:
            return f"law 6: tasks in {task.queue} of higher priority ({priority} > {ask_priority})"
        broken = self._law2({}, task, lineage)
        if broken:
            return f"law 2: tasks in {task.queue} whose removal would take {broken[0]} below its guarantee for {broken[1]}"
        return None

    def surplus(self, queue: QueueState) -> dict[str, int]:
        """How far the queue's landed usage is above its guarantee, per guaranteed resource."""
        if queue.path not in self._surplus:
            usage = landed(queue)
            self._surplus[queue.path] = {name: usage.get(name, 0) - g for name, g in queue.guaranteed.items()}
        return self._surplus[queue.path]

    def _law2(self, removed: dict[str, dict[str, int]], task: TaskState, lineage: list[QueueState]) -> tuple[str, str] | None:
        """The (queue, resource) that would fall below its guarantee if `task` joined the
        victims already `removed`; the ask's arrival offsets removals on its own path."""
        for queue in lineage:
            if not queue.guaranteed:
                continue
            taken = removed.get(queue.path, {})
            arriving = self.ask if queue.path in self.on_path else {}
            surplus = self.surplus(queue)
            for name, amount in task.resources.items():
                if amount <= 0 or name not in surplus:
                    continue
                loss = taken.get(name, 0) + amount - arriving.get(name, 0)
                if loss > 0 and surplus[name] - loss < 0:
                    return queue.path, name
        return None

    # -- nodes --

    def _best(self, by_node: dict[str, list[Candidate]], resort: int) -> tuple[_Solution | None, dict[str, str]]:
        """The best node and its victims, taking candidates up to `resort` (law 1)."""
        best, considered = None, {}
        for name in sorted(by_node):
            node = self.p.nodes[name]
            outcome = self._solve(node, by_node[name], resort)
            if isinstance(outcome, str):
                considered[name] = outcome
                continue
            considered[name] = counted(len(outcome.victims), "victim")
            if best is None or outcome.key < best.key:
                best = outcome
        return best, considered

    def will_fit(self, node: NodeState) -> bool:
        """The ask fits `node` once its victims in flight are gone, without preempting more."""
        fits = node.schedulable and not too_small(node, self.ask)
        return fits and not self._need(node)

    def _need(self, node: NodeState) -> dict[str, int]:
        available = node_available(node)
        need = dict(self.scope.queue_need)
        for name, amount in self.ask.items():
            short = amount - available.get(name, 0)
            if short > need.get(name, 0):
                need[name] = short
        return need

    def _solve(self, node: NodeState, candidates: list[Candidate], resort: int) -> _Solution | str:
        if not node.schedulable:
            return "not schedulable"
        small = too_small(node, self.ask)
        if small:
            return f"too small for the task: it has {amounts(node.capacity, small)}"
        need = self._need(node)
        pool = [c for c in candidates if c.resort <= resort]
        pool.sort(key=victim_order)
        search = _VictimSearch(self, pool, need)
        chosen = search.run()
        if chosen is None:
            return search.failure()
        return _Solution(node, minimise(chosen, need))

    # -- outcome --

    def _plan(self, solution: _Solution, considered: dict[str, str], on_node: list[Candidate]) -> Plan:
        victims = [c.task for c in solution.victims]
        freed = summed(victim.resources for victim in victims)
        explanation = [
            self.scope.law4,
            f"scope: victims searched under {self.scope.why_top}, outside {self.scope.path[self.scope.guard].path}",
            f"node {solution.node.name}: {counted(len(victims), 'victim')} free {amounts(freed, self.ask)}; "
            f"it had {amounts(node_available(solution.node), self.ask)} for the task",
            *self._queue_need_line(),
            *_spared(solution, on_node),
            *_others(considered, solution.node.name),
            *self._not_searched(),
        ]
        whys = {c.task.id: self._why(c) for c in solution.victims}
        return Plan(solution.node, victims, whys, explanation, "guarantee")

    def _not_searched(self) -> list[str]:
        lines = exclusions(self.excluded)
        if self.spared:
            lines.append(f"not searched (law 5: not over their guarantee for {listing(list(self.ask))}): {listing(self.spared)}")
        if self.disabled:
            lines.append(f"not searched (preemption.policy: disabled): {listing(self.disabled)}")
        return lines

    def _queue_need_line(self) -> list[str]:
        if not self.scope.queue_need:
            return []
        return [f"max: the victims must free {amounts(self.scope.queue_need)} under {self.scope.path[self.scope.top].path} for the task to fit its max"]

    def _why(self, candidate: Candidate) -> str:
        freed = [name for name in self.ask if candidate.task.resources.get(name, 0) > 0]
        parts = []
        leaf = candidate.lineage[0]
        unguaranteed = [name for name in freed if name not in leaf.guaranteed]
        if unguaranteed:
            parts.append(f"{leaf.path} guarantees no {listing(unguaranteed)}")
        for queue in candidate.lineage:
            over = [name for name in freed if name in queue.guaranteed]
            if over and queue.path not in self.on_path:
                parts.append(f"{queue.path} is over its guarantee for {listing(over)} ({amounts(landed(queue), over)} of {amounts(queue.guaranteed, over)})")
        return (
            f"{'; '.join(parts)}; every queue stays at or above its guarantee, the task's arrival counted (laws 5, 2); "
            f"priority {candidate.priority} is not above the task's (law 6){RESORT_WHY[candidate.resort]}; "
            "the most preferred set on its node that keeps law 2 (not opted out, lower priority, then younger first)"
        )

    def _refusal(self, by_node: dict[str, list[Candidate]], considered: dict[str, str]) -> Refusal:
        top = self.scope.path[self.scope.top].path
        if not any(node.schedulable and not too_small(node, self.ask) for node in self.p.nodes.values()):
            reason = f"no schedulable node has room for the task even empty: it asks {amounts(self.ask)}"
        elif not by_node:
            reason = f"no running task under {top} may be preempted for it"
        elif any(outcome.startswith("law 2") for outcome in considered.values()):
            reason = f"law 2: no node has a set of victims that makes room under {top} without taking a queue below its guarantee"
        else:
            reason = f"no node has a set of victims that makes room under {top}"
        details = (self.scope.law4, *_others(considered, None), *self._not_searched())
        return Refusal((reason,), details)


_SEARCH_STEPS = 256  # victims tried per node; bounds the backtracking that law 2 can require


class _VictimSearch:
    """The most preferred set of candidates on one node that covers `need` without taking a
    queue below its guarantee.

    Depth-first in preference order, each candidate taken before it is left out, so the first
    descent is the greedy choice. Backtracking is needed for law 2 only: a preferred small victim
    can use up its queue's surplus and rule out a larger one that would do alone. Without law 2
    the greedy descent finds a set whenever one exists."""

    def __init__(self, search: _GuaranteeSearch, pool: list[Candidate], need: dict[str, int]) -> None:
        self.search, self.pool = search, pool
        self.need = {name: short for name, short in need.items() if short > 0}
        self.reach: list[dict[str, int]] | None = None  # computed once the search backtracks
        self.removed: dict[str, dict[str, int]] = {}  # per queue, per resource: the chosen victims
        self.steps = 0
        self.law2 = False  # a candidate was left out for law 2

    def run(self) -> list[Candidate] | None:
        return self._extend(0, self.need, []) if self.need else None

    def failure(self) -> str:
        if self.steps >= _SEARCH_STEPS:
            return f"no set found in {_SEARCH_STEPS} tries (search bounded)"
        if self.law2 and _covers(self.pool, self.need):
            return "law 2: every set of candidates that makes room takes a queue below its guarantee"
        return "no set of candidates makes room"

    def _extend(self, start: int, missing: dict[str, int], chosen: list[Candidate]) -> list[Candidate] | None:
        for index in range(start, len(self.pool)):
            candidate = self.pool[index]
            resources = candidate.task.resources
            if not any(resources.get(name, 0) > 0 for name, short in missing.items() if short > 0):
                continue
            if self.reach is not None and any(short > self.reach[index][name] for name, short in missing.items()):
                return None  # the rest of the pool cannot cover what is missing
            if self.search._law2(self.removed, candidate.task, candidate.lineage):
                self.law2 = True
                continue
            if self.steps >= _SEARCH_STEPS:
                return None
            self.steps += 1
            left = {name: short - resources.get(name, 0) for name, short in missing.items()}
            if all(short <= 0 for short in left.values()):
                return [*chosen, candidate]
            _take(self.removed, candidate, 1)
            found = self._extend(index + 1, left, [*chosen, candidate])
            _take(self.removed, candidate, -1)
            if found is not None:
                return found
            if not self.law2:
                return None  # the greedy descent took every candidate that helps: no set exists
            if self.reach is None:
                self.reach = _reach(self.pool, self.need)
        return None


def _covers(pool: list[Candidate], need: dict[str, int]) -> bool:
    """All of the pool together frees at least `need`."""
    return all(sum(c.task.resources.get(name, 0) for c in pool) >= short for name, short in need.items())


def _reach(pool: list[Candidate], need: dict[str, int]) -> list[dict[str, int]]:
    """What `pool[i:]` frees together, per needed resource, for every i."""
    reach = [dict.fromkeys(need, 0)]
    for candidate in reversed(pool):
        after = reach[-1]
        reach.append({name: after[name] + candidate.task.resources.get(name, 0) for name in need})
    reach.reverse()
    return reach


def _take(removed: dict[str, dict[str, int]], candidate: Candidate, sign: int) -> None:
    """Add (1) or give back (-1) the candidate's resources to what its queues lose."""
    for queue in candidate.lineage:
        taken = removed.setdefault(queue.path, {})
        for name, amount in candidate.task.resources.items():
            taken[name] = taken.get(name, 0) + sign * amount


def _spared(solution: _Solution, on_node: list[Candidate]) -> list[str]:
    """The candidates on the chosen node that were not taken, and why."""
    chosen = {c.task.id for c in solution.victims}
    last = max(victim_order(c) for c in solution.victims)
    spared = sorted((c for c in on_node if c.task.id not in chosen), key=victim_order)
    later = [c.task.id for c in spared if victim_order(c) > last]
    earlier = [c.task.id for c in spared if victim_order(c) < last]
    lines = []
    if later:
        lines.append(
            f"not needed on {solution.node.name}: {listing(later)} (the victims make room and come first: opted out last, lower priority, then younger)"
        )
    if earlier:
        lines.append(
            f"passed over on {solution.node.name}: {listing(earlier)} (the victims make room without them, or law 2 forbids taking them together with "
            "the victims)"
        )
    return lines


def _others(considered: dict[str, str], chosen: str | None) -> list[str]:
    others = [f"{name}: {outcome}" for name, outcome in considered.items() if name != chosen]
    label = "nodes" if chosen is None else "other nodes"
    return [f"{label}: {listing(others, 4)}"] if others else []
