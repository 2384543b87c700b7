"""Fair-sharing preemption: evict from the ClusterQueues that borrow the most for their weight,
and only while that leaves the preemptor's share no higher than the target's.

A node's *share* (Kueue's dominant resource share): per resource, what the node borrows (uses
beyond its subtree quota, summed over flavors) in thousandths of what its parent could lend it
(`QuotaTree.lendable`); the largest of these, divided by the node's weight. A node that does not
borrow has share 0; one with weight 0 that borrows has an infinite share (two infinite shares
compare by the unweighted value). Resources a node has no quota entry for are left out. Every
share here counts the preemptor's request as admitted.

1. Candidates: the preemptor queue's own workloads under `withinClusterQueue`, and, under
   `reclaimWithinCohort`, those of every ClusterQueue in its cohort tree that borrows a
   contested resource; in classic preemption's order, grouped by ClusterQueue.
2. The target queue: from the root of the tree, descend to the child with the highest share (a
   cohort before a ClusterQueue on a tie, tied queues by their first candidate), leaving out
   queues that do not borrow (the preemptor's own excepted) or have no candidate left, and
   cohorts that do not borrow and do not hold the preemptor.
3. From the preemptor's own queue the next candidate goes (InClusterQueue). From another, when
   the preemptor's queue would stay within its nominal quota of the contested resources, the
   next candidate goes too (InCohortReclamation: it takes back what it lent). Otherwise its
   candidates are tried in order until one passes the first strategy (InCohortFairSharing);
   those that fail are kept for a retry. Then the target is chosen again.
   The strategies compare the two *sides*: the children of the lowest cohort holding both
   queues, on the way to each.
   - LessThanOrEqualToFinalShare: the preemptor's side's share is at most the target side's
     once the candidate is gone.
   - LessThanInitialShare: the preemptor's side's share is below the target side's now.
   A preemptor side with an infinite share against a finite one passes neither: that queue's
   candidates go straight to the retry.
4. If the preemptor still does not fit and a second strategy is configured, each queue with
   candidates kept for the retry, chosen the same way, is tested once under it and gives at
   most one victim.
5. On a fit, every victim the preemptor fits without is given back, as in classic preemption,
   and the others are tested again in order on the shares they now meet (a victim of the
   preemptor's side given back raises that side's share); if one fails, or a victim from another
   queue would fit within that queue's nominal quota once evicted (it would take its room back
   at once), nothing is evicted (Kueue checks neither); nor when the preemptor's side of some
   cohort would have weight 0 and borrow against a sibling of positive weight: it would be the
   first to be taken back. Without a fit nothing is evicted either.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction

from ._classic import (
    Candidate,
    Plan,
    Search,
    allowed,
    considered,
    in_order,
    node_name,
    not_candidates,
    own_queue_candidates,
    queues_under,
    refuse,
    resource_names,
)
from ._tree import FlavorResource, Node, QuotaTree

__all__ = ["NO_SHARE", "STRATEGIES", "Share", "borrowed", "fair", "share", "sides"]


@dataclass(frozen=True, order=True)
class Share:
    """A weighted share in thousandths, exact; when `infinite` (weight 0), `value` is the
    unweighted one."""

    infinite: bool
    value: Fraction

    def __str__(self) -> str:
        shown = _number(self.value)
        return f"infinite (weight 0, unweighted {shown})" if self.infinite else shown


def _number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):.2f}"


NO_SHARE = Share(False, Fraction(0))


def share(tree: QuotaTree, node: Node, usage: Mapping[Node, Mapping[FlavorResource, int]]) -> Share:
    """`node`'s dominant resource share, exact (Kueue compares shares as precise numbers and
    reports them rounded up)."""
    over = borrowed(node, usage)
    if node.parent is None or not over:
        return NO_SHARE
    lendable = tree.lendable(node.parent)
    ratio = max((Fraction(amount * 1000, lendable[r]) for r, amount in over.items() if lendable.get(r, 0) > 0), default=Fraction(0))
    if node.weight == 0:
        return Share(True, ratio)
    return Share(False, ratio / node.weight)


def borrowed(node: Node, usage: Mapping[Node, Mapping[FlavorResource, int]]) -> dict[str, int]:
    """Per resource, what `node` uses beyond its subtree quota, summed over flavors."""
    used = usage.get(node, {})
    over: dict[str, int] = {}
    for fr, quota in node.subtree.items():
        beyond = used.get(fr, 0) - quota
        if beyond > 0:
            over[fr[1]] = over.get(fr[1], 0) + beyond
    return over


def sides(a: Node, b: Node) -> tuple[Node, Node, Node]:
    """The lowest cohort holding two ClusterQueues of one tree, and its children on the way
    to `a` and to `b`."""
    path_b = b.path()
    above_b = set(path_b)
    path_a = a.path()
    for i, node in enumerate(path_a):
        if node in above_b:
            return node, path_a[i - 1], path_b[path_b.index(node) - 1]
    raise ValueError(f"{a.name} and {b.name} are not in one cohort tree")


Strategy = Callable[[Share, Share, Share], bool]

#: (the preemptor side's share, the target side's before and after the eviction) -> allowed
STRATEGIES: dict[str, Strategy] = {
    "LessThanOrEqualToFinalShare": lambda preemptor, before, after: preemptor <= after,
    "LessThanInitialShare": lambda preemptor, before, after: preemptor < before,
}


def fair(search: Search, strategies: tuple[str, ...]) -> Plan:
    """Kueue's fair-sharing preemption for `search.preemptor`."""
    candidates = in_order(search.preemptor, _cohort_candidates(search), own_queue_candidates(search))
    skipped: dict[str, str] = {}
    with search.preemptor_admitted():
        walk = _Walk(search, candidates, skipped)
        targets = walk.run(strategies)
        targets, refusal = _not_first_to_go(search, targets, skipped) if targets else ([], walk.refusal)
    return Plan(tuple(targets), True, tuple(considered(candidates, targets, skipped, refusal)), refusal, not_candidates(search, candidates))


def _not_first_to_go(s: Search, targets: list[Candidate], skipped: dict[str, str]) -> tuple[list[Candidate], str]:
    """`targets`, unless once they are gone the preemptor would be the first to be taken back
    (`_exposed`): then none, and why. A property test found a weight-0 queue's preemptor, a
    workload of another queue that evicted it at once, and the workloads it had evicted,
    requeued and reclaiming, evicting each other without end (Kueue does not check)."""
    for target in targets:
        s.take(target.workload)
    try:
        exposed = _exposed(s.tree, s.node, s.usage)
    finally:
        for target in targets:
            s.give_back(target.workload)
    if exposed is None:
        return targets, ""
    side, rival = exposed
    why = (
        f"{node_name(side)} has weight 0 and would borrow: its infinite share is above any of {node_name(rival)}, whose workloads could take the "
        "room back at once"
    )
    return [], refuse(targets, why, skipped)


def _exposed(tree: QuotaTree, queue: Node, usage: Mapping[Node, Mapping[FlavorResource, int]]) -> tuple[Node, Node] | None:
    """The side of `queue` (it or a cohort above it) with an infinite share (weight 0,
    borrowing) and a sibling of positive weight, if any: every strategy lets the sibling's
    workloads, whose share is finite, evict from it. A side that does not borrow (share 0),
    or whose siblings all have weight 0 (infinite shares compare unweighted), is not."""
    for side in queue.path()[:-1]:
        rival = next((c for c in side.parent.children if c is not side and c.weight > 0), None) if side.parent else None
        if rival is not None and share(tree, side, usage).infinite:
            return side, rival
    return None


def _cohort_candidates(s: Search) -> list[Candidate]:
    policy = s.queue.preemption.reclaim_within_cohort
    if policy == "Never" or s.node.parent is None:
        return []
    found: list[Candidate] = []
    for queue in queues_under(s.node.path()[-1]):  # a queue may borrow where its cohort does not
        if queue is not s.node and s.borrows(queue):
            lca = sides(s.node, queue)[0]
            found += [Candidate(w, "InCohortFairSharing", lca) for w in s.admitted.get(queue.name, ()) if s.contests(w) and allowed(policy, s.preemptor, w)]
    return found


class _Walk:
    """The walk of steps 2 to 5 over one preemptor's candidates; the usage is left as found."""

    def __init__(self, search: Search, candidates: list[Candidate], skipped: dict[str, str]) -> None:
        self.s = search
        self.candidates = candidates
        self.skipped = skipped
        self.rank = {c.workload.id: i for i, c in enumerate(candidates)}
        self.root = search.node.path()[-1]
        self.holds_preemptor = set(search.node.path())
        self.taken: list[Candidate] = []
        self.refusal = ""  # why the fewest victims that make room may not go
        self.ranked = ""  # why the target's queue goes before the next (the shares compared), for its victims' why

    def run(self, strategies: tuple[str, ...]) -> list[Candidate]:
        try:
            fits, retry = self._first(_by_queue(self.s.tree, self.candidates), strategies[0])
            if not fits and len(strategies) > 1:
                fits = self._second(_by_queue(self.s.tree, retry), strategies[1])
            if fits:
                return self._minimal()
            self._unreached()
            return []
        finally:
            for candidate in self.taken:
                self.s.give_back(candidate.workload)

    def _first(self, pending: dict[Node, deque[Candidate]], strategy: str) -> tuple[bool, list[Candidate]]:
        retry: list[Candidate] = []
        while (queue := self._target(pending)) is not None:
            waiting = pending[queue]
            if queue is self.s.node:
                if self._take(waiting.popleft()):
                    return True, retry
                continue
            lca, mine, theirs = sides(self.s.node, queue)
            preemptor, before = self._share(mine), self._share(theirs)
            if self._reclaims():
                why = self._reclaiming(lca, mine, theirs, preemptor, before)
                if self._take(replace(waiting.popleft(), reason="InCohortReclamation", why=why)):
                    return True, retry
                continue
            if preemptor.infinite and not before.infinite:
                for candidate in waiting:
                    self.skipped[candidate.workload.id] = (
                        f"{node_name(mine)} has an infinite share (weight 0), {node_name(theirs)} a finite one ({before}): no strategy allows it"
                    )
                retry += waiting
                waiting.clear()
                continue
            while waiting:
                candidate = waiting.popleft()
                after = self._share_without(candidate, theirs)
                if STRATEGIES[strategy](preemptor, before, after):
                    if self._take_by(candidate, strategy, lca, mine, theirs, preemptor, before, after):
                        return True, retry
                    break
                self.skipped[candidate.workload.id] = f"{strategy} refuses it: {_comparison(lca, mine, theirs, preemptor, before, after)}"
                retry.append(candidate)
        return False, retry

    def _take_by(self, candidate: Candidate, strategy: str, lca: Node, mine: Node, theirs: Node, preemptor: Share, before: Share, after: Share) -> bool:
        """`_take` the candidate a strategy allows, with why: the shares compared, and why its
        queue went first."""
        why = _ordered(_compared(strategy, lca, mine, theirs, preemptor, before, after), self.ranked)
        return self._take(replace(candidate, strategy=strategy, why=why, ranked=self.ranked))

    def _second(self, pending: dict[Node, deque[Candidate]], strategy: str) -> bool:
        while (queue := self._target(pending)) is not None:
            waiting = pending[queue]
            lca, mine, theirs = sides(self.s.node, queue)
            preemptor, before = self._share(mine), self._share(theirs)
            passes = STRATEGIES[strategy](preemptor, before, before)
            if passes:
                candidate = waiting.popleft()
                after = self._share_without(candidate, theirs)
                if self._take_by(candidate, strategy, lca, mine, theirs, preemptor, before, after):
                    return True
            for candidate in waiting:
                why = f"{strategy} takes at most one victim from each queue" if passes else f"{strategy} refuses it too"
                self.skipped[candidate.workload.id] = f"{why}: {_comparison(lca, mine, theirs, preemptor, before, None)}"
            waiting.clear()  # one test per queue under the second strategy
        return False

    def _minimal(self) -> list[Candidate]:
        """The victims the preemptor fits without are given back, as in classic preemption;
        then the rest are taken again one after another, each tested again on the shares it
        meets now. A victim of the preemptor's own side given back raises that side's share:
        if a test fails, nothing is evicted (Kueue evicts without checking again), so that no
        eviction breaks its strategy and the shares each names are those of the final set."""
        minimal = self.s.minimise(self.taken, True)
        restated, failure = self._restated(minimal)
        if failure is None:
            self.taken[:] = restated
            return restated
        self.refusal = refuse(minimal, failure, self.skipped)
        return []

    def _restated(self, targets: list[Candidate]) -> tuple[list[Candidate], str | None]:
        """`targets` (all taken) taken again one after another with the shares each meets now,
        and the first failed test, if any. All are taken on return."""
        for target in targets:
            self.s.give_back(target.workload)
        restated: list[Candidate] = []
        failure = None
        for target in targets:
            if failure is None and target.reason != "InClusterQueue":
                target, passes = self._tested_again(target)
                if not passes:
                    failure = f"{target.workload.id}: {target.why}"
            self.s.take(target.workload)
            restated.append(target)
        return restated, failure or self.s.taken_back(restated, by_policy=False, fair=True)

    def _tested_again(self, target: Candidate) -> tuple[Candidate, bool]:
        lca, mine, theirs = sides(self.s.node, self.s.tree.queues[target.workload.queue])
        preemptor, before = self._share(mine), self._share(theirs)
        if target.reason == "InCohortReclamation":
            return replace(target, why=self._reclaiming(lca, mine, theirs, preemptor, before)), self._reclaims()
        after = self._share_without(target, theirs)
        passes = STRATEGIES[target.strategy](preemptor, before, after)
        return replace(target, why=_ordered(_compared(target.strategy, lca, mine, theirs, preemptor, before, after), target.ranked)), passes

    def _unreached(self) -> None:
        """Say why the walk, with every eviction it made, never came to the candidates it left:
        their ClusterQueue, or a cohort above it that does not hold the preemptor, does not
        borrow (any more), and the walk goes only where a share can be taken."""
        taken = {c.workload.id for c in self.taken}
        for candidate in self.candidates:
            name = candidate.workload.id
            if name in taken or name in self.skipped:
                continue
            path = self.s.tree.queues[candidate.workload.queue].path()[:-1]
            closed = next((n for n in reversed(path) if n not in self.holds_preemptor and not self._borrows(n)), None)
            if closed is not None and closed.parent is not None:
                then = ", once the workloads taken before are gone" if self.taken else ""
                self.skipped[name] = f"{node_name(closed)} does not borrow in cohort {closed.parent.name} (share 0){then}: fair sharing takes nothing from it"

    def _reclaiming(self, lca: Node, mine: Node, theirs: Node, preemptor: Share, before: Share) -> str:
        return (
            f"{node_name(self.s.node)} stays within its nominal quota of {resource_names(self.s.contested)}: it takes back what it lent, without a "
            f"share test ({_comparison(lca, mine, theirs, preemptor, before, None)})"
        )

    def _take(self, candidate: Candidate) -> bool:
        """Evict `candidate` in the simulation; whether the preemptor fits now."""
        self.s.take(candidate.workload)
        self.taken.append(candidate)
        self.skipped.pop(candidate.workload.id, None)
        return self.s.fits()

    def _reclaims(self) -> bool:
        """The preemptor's queue, with its request, stays within its nominal quota of the
        contested resources: it takes back its own."""
        used = self.s.usage.get(self.s.node, {})
        return all(used.get(fr, 0) <= self.s.node.subtree.get(fr, 0) for fr in self.s.contested)

    def _share(self, node: Node) -> Share:
        return share(self.s.tree, node, self.s.usage)

    def _share_without(self, candidate: Candidate, node: Node) -> Share:
        """`node`'s share were `candidate` evicted."""
        self.s.take(candidate.workload)
        try:
            return self._share(node)
        finally:
            self.s.give_back(candidate.workload)

    def _borrows(self, node: Node) -> bool:
        return bool(borrowed(node, self.s.usage))

    def _target(self, pending: dict[Node, deque[Candidate]]) -> Node | None:
        self.ranked = ""
        if not self.root.is_cohort:
            return self.root if pending.get(self.root) else None
        return self._descend(self.root, pending)

    def _descend(self, cohort: Node, pending: dict[Node, deque[Candidate]]) -> Node | None:
        ranked: list[tuple[Share, bool, int, Node]] = []
        for child in cohort.children:
            if child.is_cohort:
                if child in self.holds_preemptor or self._borrows(child):
                    ranked.append((self._share(child), True, 0, child))
            elif pending.get(child) and (child is self.s.node or self._borrows(child)):
                ranked.append((self._share(child), False, -self.rank[pending[child][0].workload.id], child))
        ranked.sort(key=lambda r: r[:3], reverse=True)  # stable: tied cohorts keep their order
        for place, (share_of, *_, child) in enumerate(ranked):
            found = self._descend(child, pending) if child.is_cohort else child
            if found is not None:
                if not self.ranked and place + 1 < len(ranked):  # the choice nearest the victim: why its side goes before the next
                    other_share, *_, other = ranked[place + 1]
                    self.ranked = (
                        f"{node_name(child)} (share {share_of}) goes before {node_name(other)} (share {other_share}) in cohort "
                        f"{cohort.name}: the highest share first"
                    )
                return found
        return None


def _by_queue(tree: QuotaTree, candidates: Iterable[Candidate]) -> dict[Node, deque[Candidate]]:
    grouped: dict[Node, deque[Candidate]] = {}
    for candidate in candidates:
        grouped.setdefault(tree.queues[candidate.workload.queue], deque()).append(candidate)
    return grouped


def _comparison(lca: Node, mine: Node, theirs: Node, preemptor: Share, before: Share, after: Share | None) -> str:
    then = f", {after} after" if after is not None else ""
    return f"in cohort {lca.name}, {node_name(mine)} (the preemptor's side) would have share {preemptor}; {node_name(theirs)} has {before}{then}"


def _ordered(why: str, ranked: str) -> str:
    """`why`, and why the victim's side went before the next (`ranked`), when there was a choice."""
    return f"{why}; {ranked}" if ranked else why


def _compared(strategy: str, lca: Node, mine: Node, theirs: Node, preemptor: Share, before: Share, after: Share) -> str:
    return f"{strategy}: {_comparison(lca, mine, theirs, preemptor, before, after)}"
