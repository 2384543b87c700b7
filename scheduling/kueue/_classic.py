"""Classic preemption: which admitted workloads to evict so that a pending one fits.

1. Candidates: workloads of the preemptor's own ClusterQueue under `withinClusterQueue`, and,
   under `reclaimWithinCohort`, workloads of ClusterQueues that borrow, found by walking the
   cohorts from the queue's parent up to the root. A cohort candidate is *reclaimed* when the
   preemptor's side of the cohort where it was found would stay within its quota (it takes back
   what it lent); otherwise it is taken only while the preemptor does not borrow, unless
   `borrowWithinCohort` allows it (lower priority, at most `maxPriorityThreshold`).
2. Order: workloads already evicted first, then other queues before the preemptor's own, lower
   priority, the most recently admitted, the name.
3. One or two passes, with and without borrowing; each removes valid candidates in order until
   the preemptor fits, then gives back, from the second-to-last to the first, every victim it
   fits without. A pass that never fits evicts nothing, nor does one whose victims taken while
   borrowing include one that, requeued, would take its queue's nominal quota back from the
   preemptor at once (its queue's reclaimWithinCohort allowing): the two would evict each other
   without end.

Every candidate ends in the plan's `considered` lines, taken or spared and why; the admitted
workloads of the cohort tree that were never candidates are summed up by why.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from ._config import KueueConfig
from ._tree import FlavorResource, Node, QuotaTree
from ._workloads import Admitted, Workload, usage_of

__all__ = [
    "Candidate",
    "CycleMemo",
    "candidate_order",
    "Plan",
    "Reason",
    "Search",
    "allowed",
    "classic",
    "considered",
    "in_order",
    "node_name",
    "not_candidates",
    "own_queue_candidates",
    "queues_under",
    "reason_text",
    "refuse",
    "resource_names",
]

Reason = Literal["InClusterQueue", "InCohortReclamation", "InCohortFairSharing", "InCohortReclaimWhileBorrowing"]
Usage = dict[Node, dict[FlavorResource, int]]


@dataclass(frozen=True)
class Candidate:
    """A workload that may be evicted; `lca` is the cohort a cross-queue candidate was found
    under; `without_borrowing`: it may be taken only while the preemptor does not borrow;
    under fair sharing, the `strategy` that let it be taken; `why` it may be taken from another
    queue (how the shares compared, or why it is a reclamation), for its eviction's message."""

    workload: Workload
    reason: Reason
    lca: Node | None = None
    without_borrowing: bool = False
    strategy: str = ""
    why: str = ""
    ranked: str = ""  # under fair sharing, why its queue's side went before the next (the shares compared)


@dataclass(frozen=True)
class Plan:
    """The victims (none: no set makes room, or the set found may not go, and `refusal` says
    why), whether the preemptor may borrow once they are gone, a line per candidate, and the
    admitted workloads that were never candidates, summed up by why."""

    targets: tuple[Candidate, ...]
    borrowing: bool
    considered: tuple[str, ...]
    refusal: str = ""
    not_candidates: tuple[str, ...] = ()


def allowed(policy: str, preemptor: Workload, candidate: Workload) -> bool:
    """`candidate` may be preempted by `preemptor` under one of Kueue's policies."""
    return allows(policy, preemptor, candidate.priority, candidate.seq)


def allowed_by_kind(policy: str, preemptor: Workload, priority: int) -> bool | None:
    """`allowed` for every candidate of `priority`; None if the policy looks at age too."""
    return None if policy == "LowerOrNewerEqualPriority" else allows(policy, preemptor, priority, 0)


def allows(policy: str, preemptor: Workload, priority: int, seq: int) -> bool:
    """`allowed` for a candidate of `priority`, created at `seq`."""
    if policy == "Any":
        return True
    if policy == "LowerPriority":
        return priority < preemptor.priority
    if policy == "LowerOrNewerEqualPriority":
        return priority < preemptor.priority or (priority == preemptor.priority and preemptor.seq < seq)
    return False


@dataclass
class CycleMemo:
    """What the preemption searches of one cycle share: per queue, the counts of workloads never
    candidates (they hold whatever the usage); and, until the cycle's usage changes
    (`usage_changed`), which queues borrow and whole never-candidate summaries."""

    counted: dict[tuple[object, ...], dict[str, int]] = field(default_factory=dict)
    borrowing: dict[tuple[str, frozenset[FlavorResource]], bool] = field(default_factory=dict)
    summaries: dict[tuple[object, ...], tuple[str, ...]] = field(default_factory=dict)

    def usage_changed(self) -> None:
        self.borrowing.clear()
        self.summaries.clear()


class Search:
    """What every preemption strategy simulates on: the usage of the tree, changed as
    candidates are taken and given back (always restored), and the preemptor's fit."""

    def __init__(
        self,
        preemptor: Workload,
        config: KueueConfig,
        node: Node,
        tree: QuotaTree,
        usage: Usage,
        admitted: Mapping[str, Sequence[Workload]],
        flavors: dict[str, str],
        contested: tuple[FlavorResource, ...],
        admitted_now: dict[str, list[Workload]] | None = None,
        memo: CycleMemo | None = None,
    ) -> None:
        self.preemptor, self.config, self.node, self.tree, self.usage = preemptor, config, node, tree, usage
        self.admitted = admitted if isinstance(admitted, Admitted) else Admitted(admitted)
        self.admitted_now = admitted_now or {}  # admitted earlier in the cycle: in the usage, no candidates
        self.memo = memo  # what the cycle's searches share (see `CycleMemo`)
        self.queue = config.cluster_queues[preemptor.queue]
        self.request = usage_of(flavors, preemptor.request)
        self.contested = frozenset(contested)
        self.holding = False  # the usage counts the preemptor's request (fair sharing's shares do)

    @contextmanager
    def preemptor_admitted(self) -> Iterator[None]:
        """Count the preemptor's request in the usage while inside."""
        self.tree.change(self.usage, self.node, self.request, +1)
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
            self.tree.change(self.usage, self.node, self.request, -1)

    def fits(self, borrowing: bool = True) -> bool:
        """The preemptor fits now; without `borrowing`, within its queue's quota too."""
        if self.holding:
            self.tree.change(self.usage, self.node, self.request, -1)
            try:
                return self._fits(borrowing)
            finally:
                self.tree.change(self.usage, self.node, self.request, +1)
        return self._fits(borrowing)

    def _fits(self, borrowing: bool) -> bool:
        used = self.usage.get(self.node, {})
        for fr, amount in self.request.items():
            if amount > self.tree.available(self.node, fr, self.usage):
                return False
            if not borrowing and used.get(fr, 0) + amount > self.node.subtree.get(fr, 0):
                return False
        return True

    def take(self, workload: Workload) -> None:
        self.tree.change(self.usage, self.tree.queues[workload.queue], workload.usage, -1)

    def give_back(self, workload: Workload) -> None:
        self.tree.change(self.usage, self.tree.queues[workload.queue], workload.usage, +1)

    def contests(self, workload: Workload) -> bool:
        """`workload` holds some of what the preemptor needs preemption for."""
        return not self.contested.isdisjoint(workload.usage)

    def borrows(self, node: Node) -> bool:
        return self.tree.borrows(node, self.contested, self.usage)

    def borrows_now(self, node: Node) -> bool:
        """`borrows`, outside any simulation: with the cycle's usage, kept until it changes."""
        if self.memo is None:
            return self.borrows(node)
        key = (node.name, self.contested)
        found = self.memo.borrowing.get(key)
        if found is None:
            found = self.memo.borrowing[key] = self.borrows(node)
        return found

    def within_quota_with_request(self, node: Node) -> bool:
        """`node` (the queue or a cohort above it) would not borrow were the preemptor admitted."""
        with self.preemptor_admitted():
            return not self.tree.borrows(node, self.request, self.usage)

    def borrowing_queues(self, top: Node) -> Iterator[Node]:
        """The ClusterQueues under `top` that borrow a contested resource, skipping every
        subtree that does not."""
        if not self.borrows(top):
            return
        if not top.is_cohort:
            yield top
        for child in top.children:
            yield from self.borrowing_queues(child)

    def still_borrowing(self, candidate: Candidate) -> bool:
        """A cross-queue candidate's queue, and every cohort between it and where it was found,
        still borrow a contested resource."""
        node: Node | None = self.tree.queues[candidate.workload.queue]
        while node is not None and node is not candidate.lca:
            if not self.borrows(node):
                return False
            node = node.parent
        return True

    def taken_back(self, targets: list[Candidate], *, only: Reason | None = None, by_policy: bool, fair: bool = False) -> str | None:
        """With `targets` taken: why the first victim from another queue (of reason `only`, if
        given) would, requeued, take its room back at once (and, `by_policy`, its queue's
        reclaimWithinCohort lets it evict the preemptor), so that they would evict each other
        without end; None if there is none. Property tests found such cycles; Kueue does not
        check. It would when it fits within its queue's nominal quota once it evicted the
        workloads of its own queue that its queue's withinClusterQueue lets it evict (see
        `requeued_usage`)."""
        taken = {target.workload.id for target in targets}
        for target in targets:
            victim = target.workload
            if target.reason == "InClusterQueue" or (only is not None and target.reason != only):
                continue
            if by_policy and not allowed(self.config.cluster_queues[victim.queue].preemption.reclaim_within_cohort, victim, self.preemptor):
                continue
            queue = self.tree.queues[victim.queue]
            used = self.requeued_usage(victim, taken, fair=fair)
            if all(used.get(fr, 0) + amount <= queue.subtree.get(fr, 0) for fr, amount in victim.usage.items()):
                return f"{victim.id} would fit within the nominal quota of ClusterQueue {queue.name} once evicted, and take its room back at once"
        return None

    def requeued_usage(self, victim: Workload, taken: set[str], *, fair: bool) -> dict[FlavorResource, int]:
        """What `victim`'s queue would use, with `taken` gone, were `victim` to evict the
        workloads of its queue it may (withinClusterQueue; those admitted earlier in the cycle
        included). Under fair sharing, only if its queue is then below its nominal quota of what
        `victim` holds: otherwise, requeued and evicting them, it fits before its queue is back
        within its quota, and so takes nothing from another queue without a share test."""
        queue = self.tree.queues[victim.queue]
        used = dict(self.usage.get(queue, {}))
        if fair and all(used.get(fr, 0) >= queue.subtree.get(fr, 0) for fr in victim.usage):
            return used
        policy = self.config.cluster_queues[victim.queue].preemption.within_cluster_queue
        for other in (*self.admitted.get(victim.queue, ()), *self.admitted_now.get(victim.queue, ())):
            if other.id not in taken and allowed(policy, victim, other):
                for fr, amount in other.usage.items():
                    used[fr] = used.get(fr, 0) - amount
        return used

    def greedy(self, candidates: list[Candidate], borrowing: bool, skipped: dict[str, str]) -> list[Candidate] | None:
        """Take valid candidates in order until the preemptor fits, then give back those it
        fits without; None if it never fits. The usage is left as it was."""
        taken: list[Candidate] = []
        try:
            for candidate in candidates:
                name = candidate.workload.id
                if candidate.without_borrowing and borrowing:
                    skipped[name] = "the preemptor would borrow, and reclaiming it is allowed only without borrowing (borrowWithinCohort)"
                    continue
                if candidate.lca is not None and not self.still_borrowing(candidate):
                    skipped[name] = f"ClusterQueue {candidate.workload.queue} no longer borrows once the workloads before it are gone"
                    continue
                self.take(candidate.workload)
                taken.append(candidate)
                if self.fits(borrowing):
                    return self.minimise(taken, borrowing)
            return None
        finally:
            for candidate in taken:
                self.give_back(candidate.workload)

    def minimise(self, taken: list[Candidate], borrowing: bool) -> list[Candidate]:
        """Give back, from the second-to-last victim to the first, each one the preemptor fits
        without; `taken` keeps the victims still out."""
        needed = list(taken)
        for candidate in reversed(taken[:-1]):
            self.give_back(candidate.workload)
            if self.fits(borrowing):
                needed.remove(candidate)
            else:
                self.take(candidate.workload)
        taken[:] = needed
        return list(needed)


def classic(search: Search) -> Plan:
    """Kueue's classic preemption for `search.preemptor`."""
    s, policy = search, search.queue.preemption
    own = own_queue_candidates(s)
    reclaimed, priority = _cohort_candidates(s) if policy.reclaim_within_cohort != "Never" else ([], [])
    candidates = in_order(s.preemptor, reclaimed, priority, own)
    skipped: dict[str, str] = {}
    targets: list[Candidate] = []
    borrowing, refusal = True, ""
    for borrowing in _passes(s, cross=bool(reclaimed or priority), reclaimed=bool(reclaimed)):
        targets, refused = _not_taken_back(s, s.greedy(candidates, borrowing, skipped) or [], skipped)
        refusal = "" if targets else refused or refusal  # a later pass that finds nothing keeps the reason
        if targets:
            break
    return Plan(tuple(targets), borrowing, tuple(considered(candidates, targets, skipped, refusal)), refusal, not_candidates(s, candidates))


def _not_taken_back(s: Search, targets: list[Candidate], skipped: dict[str, str]) -> tuple[list[Candidate], str]:
    """`targets`, unless a victim taken while borrowing would, requeued, take its queue's
    nominal quota back from the preemptor at once: then none (the two would evict each other
    without end), and why."""
    for target in targets:
        s.take(target.workload)
    try:
        why = s.taken_back(targets, only="InCohortReclaimWhileBorrowing", by_policy=True)
    finally:
        for target in targets:
            s.give_back(target.workload)
    if why is None:
        return targets, ""
    return [], refuse(targets, why, skipped)


def refuse(targets: list[Candidate], why: str, skipped: dict[str, str]) -> str:
    """Spare `targets`, the fewest victims that make room, because of `why`; the refusal."""
    refusal = f"the fewest victims that make room ({', '.join(t.workload.id for t in targets)}) may not all go: {why}"
    for target in targets:
        skipped[target.workload.id] = f"{refusal}; none is evicted"
    return refusal


def in_order(preemptor: Workload, *groups: list[Candidate]) -> list[Candidate]:
    """Kueue's candidate order: each group sorted, the workloads already evicted of every group
    first, then the others, group after group."""
    ordered = [sorted(group, key=lambda c: candidate_order(preemptor.queue, c.workload)) for group in groups]
    return [c for group in ordered for c in group if c.workload.evicted] + [c for group in ordered for c in group if not c.workload.evicted]


def own_queue_candidates(s: Search) -> list[Candidate]:
    policy = s.queue.preemption.within_cluster_queue
    return [Candidate(w, "InClusterQueue") for w in s.admitted.get(s.queue.name, ()) if s.contests(w) and allowed(policy, s.preemptor, w)]


def _cohort_candidates(s: Search) -> tuple[list[Candidate], list[Candidate]]:
    """(reclaimed, by priority): cohort candidates found where the preemptor's side would stay
    within its quota, and the others."""
    policy = s.queue.preemption
    reclaimed: list[Candidate] = []
    by_priority: list[Candidate] = []
    within = s.node if s.within_quota_with_request(s.node) else None  # where the advantage starts
    child, ancestor = s.node, s.node.parent
    while ancestor is not None:
        for other in ancestor.children:
            if other is child:
                continue
            for queue in s.borrowing_queues(other):
                borrows = f"ClusterQueue {queue.name} borrows {resource_names(s.contested)} in cohort {ancestor.name}"
                # what is said of each candidate of the queue, written once for all of them
                takes_back = f"{borrows}, and {node_name(within)} stays within its quota with the preemptor: it takes back what it lent" if within else ""
                while_borrowing = f"{borrows}; the preemptor borrows too, which borrowWithinCohort allows against {_threshold(policy.max_priority_threshold)}"
                own_quota = f"{borrows}, and the preemptor fits within its own nominal quota once it is gone"
                for w in s.admitted.get(queue.name, ()):
                    if not (s.contests(w) and allowed(policy.reclaim_within_cohort, s.preemptor, w)):
                        continue
                    if within is not None:
                        reclaimed.append(Candidate(w, "InCohortReclamation", ancestor, why=takes_back))
                    elif _while_borrowing(s, w):
                        by_priority.append(Candidate(w, "InCohortReclaimWhileBorrowing", ancestor, why=while_borrowing))
                    else:
                        by_priority.append(Candidate(w, "InCohortReclamation", ancestor, without_borrowing=True, why=own_quota))
        child, ancestor = ancestor, ancestor.parent
        if within is None and s.within_quota_with_request(child):
            within = child
    return reclaimed, by_priority


def _threshold(threshold: int | None) -> str:
    return "lower priorities" if threshold is None else f"lower priorities up to its maxPriorityThreshold, {threshold}"


def node_name(node: Node) -> str:
    return f"{'cohort' if node.is_cohort else 'ClusterQueue'} {node.name}"


def resource_names(frs: Iterable[FlavorResource]) -> str:
    return ", ".join(f"{resource} in {flavor}" for flavor, resource in sorted(frs))


def _while_borrowing(s: Search, w: Workload) -> bool:
    """`borrowWithinCohort` lets the preemptor take `w` although it borrows."""
    policy = s.queue.preemption
    threshold = policy.max_priority_threshold
    return policy.borrow_within_cohort == "LowerPriority" and w.priority < s.preemptor.priority and (threshold is None or w.priority <= threshold)


def candidate_order(queue: str, w: Workload) -> tuple[bool, int, int, str]:
    """Kueue's order of candidates for a preemption in ClusterQueue `queue` (or a quota
    enforced there): other queues first, then lower priority, the most recently admitted, the
    name."""
    return (w.queue == queue, w.priority, -w.admitted_at, w.id)


def _passes(s: Search, *, cross: bool, reclaimed: bool) -> tuple[bool, ...]:
    """Whether each pass lets the preemptor borrow, in the order they are tried."""
    borrow_off = s.queue.preemption.borrow_within_cohort == "Never"
    below_nominal = all(s.usage.get(s.node, {}).get(fr, 0) < s.node.subtree.get(fr, 0) for fr in s.contested)
    if not cross or (borrow_off and not below_nominal):
        return (True,)
    if borrow_off and not reclaimed:
        return (False, True)
    return (True, False)


_REASON_TEXT = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
    "InCohortFairSharing": "fair sharing within the cohort",
}


def reason_text(reason: Reason) -> str:
    return _REASON_TEXT[reason]


def considered(candidates: list[Candidate], targets: list[Candidate], skipped: dict[str, str], refusal: str = "") -> Iterator[str]:
    taken = {c.workload.id: c for c in targets}
    for c in candidates:
        w = c.workload
        where = f"{w.id} (ClusterQueue {w.queue}, priority {w.priority}{', already evicted' if w.evicted else ''})"
        if w.id in taken:
            target = taken[w.id]
            yield f"taken: {where}: {reason_text(target.reason)}" + (f" ({target.why})" if target.why else "")
        elif w.id in skipped:
            yield f"spared: {where}: {skipped[w.id]}"
        elif targets:
            yield f"spared: {where}: not needed, the preemptor fits without it"
        elif refusal:
            yield f"spared: {where}: not needed, the fewest victims that make room are others"
        else:
            yield f"spared: {where}: evicting every valid candidate would not make room"


def not_candidates(s: Search, candidates: list[Candidate]) -> tuple[str, ...]:
    """One line summing up the admitted workloads of the preemptor's cohort tree that were
    never candidates: how many, why, and in which ClusterQueues; none if there are none."""
    seen = {c.workload.id for c in candidates}
    seen_in = {c.workload.queue for c in candidates}
    policies = (s.queue.preemption.within_cluster_queue, s.queue.preemption.reclaim_within_cohort)
    newness = s.preemptor.seq if "LowerOrNewerEqualPriority" in policies else None
    whole = (s.node.path()[-1].name, s.preemptor.queue, policies, s.preemptor.priority, newness, s.contested)
    if s.memo is not None and not seen and whole in s.memo.summaries:  # a backlog of workloads alike: said once per cycle
        return s.memo.summaries[whole]
    summary = _not_candidates(s, seen, seen_in)
    if s.memo is not None and not seen:
        s.memo.summaries[whole] = summary
    return summary


def _not_candidates(s: Search, seen: set[str], seen_in: set[str]) -> tuple[str, ...]:
    counts: dict[str, int] = {}
    queues: dict[str, set[str]] = {}
    names = resource_names(s.contested)
    for queue in queues_under(s.node.path()[-1]):
        # what holds for the whole queue is asked once, not per workload
        own = queue.name == s.preemptor.queue
        field, policy = (
            ("withinClusterQueue", s.queue.preemption.within_cluster_queue) if own else ("reclaimWithinCohort", s.queue.preemption.reclaim_within_cohort)
        )
        judge = _Why(s, names, policy, _refused_by(field, policy), own or s.borrows_now(queue))
        # Without candidates, a queue's count depends on the preemptor only through `key`: kept
        # for the cycle, so that a backlog of blocked workloads counts each queue once, not once each.
        newness = s.preemptor.seq if policy == "LowerOrNewerEqualPriority" else None
        key = (queue.name, judge.refused, judge.borrowing, s.preemptor.priority, newness, s.contested, len(s.admitted_now.get(queue.name, ())))
        counted = s.memo.counted.get(key) if s.memo is not None and not seen else None
        if counted is None:
            counted = _count_never(s, queue, judge, seen if queue.name in seen_in else set(), names)
            if s.memo is not None and not seen:
                s.memo.counted[key] = counted
        for why, n in counted.items():
            counts[why] = counts.get(why, 0) + n
            queues.setdefault(why, set()).add(queue.name)
    if not counts:
        return ()
    total = sum(counts.values())
    parts = "; ".join(f"{n} {why} ({', '.join(sorted(queues[why]))})" for why, n in counts.items())
    return (f"never candidates, {total} admitted workload{'s' if total != 1 else ''}: {parts}",)


def _count_never(s: Search, queue: Node, judge: _Why, seen: set[str], names: str) -> dict[str, int]:
    """Per reason, in the order each first comes, how many admitted workloads of `queue` were
    never candidates (none of `seen`). Counted by kind of workload where the reason depends
    only on the kind: thousands of workloads alike are one line of arithmetic."""
    counted: dict[str, int] = {}
    unborrowed = f"of ClusterQueues whose cohort does not borrow {names}"
    by_kind = not seen and allowed_by_kind(judge.policy, s.preemptor, 0) is not None
    if by_kind:
        for (held, priority), n in s.admitted.kinds(queue.name).items():
            why = judge.of_kind(held, priority) or unborrowed
            counted[why] = counted.get(why, 0) + n
    else:
        for w in s.admitted.get(queue.name, ()):
            if w.id not in seen:
                why = judge.of(w) or unborrowed
                counted[why] = counted.get(why, 0) + 1
    for w in s.admitted_now.get(queue.name, ()):
        why = judge.of(w) or "admitted earlier in this cycle"
        counted[why] = counted.get(why, 0) + 1
    return counted


@dataclass(frozen=True)
class _Why:
    """Why a workload of one ClusterQueue of the preemptor's cohort tree is no candidate: by
    what it holds, the preemptor's policy (`policy`, refused as `refused`) or its queue's
    borrowing (`borrowing`: the queue is the preemptor's own, or borrows)."""

    s: Search
    names: str
    policy: str
    refused: str
    borrowing: bool

    def of(self, w: Workload) -> str | None:
        """The reason, None if none of these stops it."""
        return self._why(self.s.contests(w), allowed(self.policy, self.s.preemptor, w))

    def of_kind(self, held: frozenset[FlavorResource], priority: int) -> str | None:
        """`of` for every workload of one kind (under a policy that looks at priority only)."""
        return self._why(not self.s.contested.isdisjoint(held), bool(allowed_by_kind(self.policy, self.s.preemptor, priority)))

    def _why(self, contests: bool, allowed: bool) -> str | None:
        if not contests:
            return f"holding none of {self.names}"
        if not allowed:
            return self.refused
        if not self.borrowing:
            return f"of ClusterQueues not borrowing {self.names}"
        return None


def _refused_by(field: str, policy: str) -> str:
    if policy == "Never":
        return f"of {'its own ClusterQueue' if field == 'withinClusterQueue' else 'other ClusterQueues'}, as {field} is Never"
    if policy == "LowerOrNewerEqualPriority":
        return f"of higher priority, or equal and not newer, as {field} is {policy}"
    return f"of priority not below its own, as {field} is {policy}"


def queues_under(node: Node) -> Iterator[Node]:
    """The ClusterQueues under `node` (itself, if it is one), in the tree's order."""
    if not node.is_cohort:
        yield node
    for child in node.children:
        yield from queues_under(child)
