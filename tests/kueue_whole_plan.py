"""The Kueue cycle as it was before waiting workloads were kept in groups between cycles
(preemptd 81d46e5): every waiting workload planned every cycle, in the order rebuilt each
cycle. `test_kueue_backlog.py` runs it beside the model's own cycle, which must make exactly the
same decisions; nothing else uses it."""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from preemptd.events import Admitted, Evicted, format_human
from preemptd.scheduling._model import Cycle, bounded
from preemptd.scheduling.kueue._assign import Assignment, Mode, assign
from preemptd.scheduling.kueue._backlog import gist
from preemptd.scheduling.kueue._classic import CycleMemo, Plan, Search, classic, reason_text
from preemptd.scheduling.kueue._config import ClusterQueue, KueueConfig
from preemptd.scheduling.kueue._fair import NO_SHARE, Share, fair, share
from preemptd.scheduling.kueue._quota import enforce_quotas
from preemptd.scheduling.kueue._tree import Node, QuotaTree
from preemptd.scheduling.kueue._workloads import Workload, Workloads, usage_of


def schedule(cycle: Cycle) -> None:
    enforce_quotas(cycle)  # first: what it evicts is in the state the admissions plan on
    _Admission(cycle).run()


class _Admission:
    def __init__(self, cycle: Cycle) -> None:
        self.cycle = cycle
        self.config: KueueConfig = cycle.partition.settings
        self.tree = QuotaTree(self.config)
        self.workloads = Workloads.of(cycle.partition)
        self.earlier: dict[str, Outcome] = {}  # nothing kept: every waiting workload planned
        self.blocked: dict[str, Outcome] = {}
        self.requeued: set[Node | str] = set()
        self.ranks: dict[str, tuple[bool, Share]] = {}  # a waiting workload planned this cycle: its borrows and share at the start
        self.usage = self.tree.usage(self.workloads.usage)
        self.preempted_in: set[Node] = set()  # roots of the cohort trees with a preemption this cycle
        self.recorded_in: set[Node] = set()  # roots of the cohort trees with running workloads recorded this cycle
        self.admitted_now: dict[str, list[Workload]] = {}  # by ClusterQueue: in the usage, not candidates
        self.memo = CycleMemo()  # what its searches share; told when the usage changes

    def run(self) -> None:
        waiting = []
        for workload in self.workloads.pending:
            if workload.running:
                self._record_running(workload)
            else:
                waiting.append(workload)
        for workload in self._in_order(waiting):
            if not self.cycle.may_place():
                return
            self._consider(workload)

    def _in_order(self, waiting: list[Workload]) -> list[Workload]:
        """`waiting` (by priority, then creation): preemptors waiting for their victims first,
        then in turns of one workload per queue, those that would not borrow first in each
        turn; only the head of a StrictFIFO queue.

        A workload of a cohort tree where nothing changed since a cycle blocked it, as it
        blocked every other offered there, is not planned again (as Kueue's queue manager keeps
        it aside until something could admit it): its rank and reasons are those it had then; and
        once it was told them, it is left out."""
        turns: dict[str, int] = {}
        offered: list[tuple[int, int, Workload, Node | str]] = []
        for index, workload in enumerate(waiting):
            queue = self.config.cluster_queues[workload.queue]
            turn = turns[queue.name] = turns.get(queue.name, -1) + 1
            if queue.queueing_strategy == "StrictFIFO" and turn > 0:
                continue
            offered.append((index, turn, workload, self._tree_of(workload.queue)))
        stale = self.requeued | {tree for *_, workload, tree in offered if workload.id not in self.earlier}
        tasks = self.cycle.partition.tasks
        ranked: list[tuple[bool, int, bool, Share, int, Workload]] = []
        for index, turn, workload, tree in offered:
            if tree in stale:
                borrows, share = self.ranks[workload.id] = self._rank(workload)
            else:
                outcome = self.blocked[workload.id] = self.earlier[workload.id]
                if gist(tasks[workload.first_task].blocked) == gist(outcome.reasons):
                    continue  # told already, and nothing could change it
                borrows, share = outcome.borrows, outcome.share
            ranked.append((not workload.preempting, turn, borrows, share, index, workload))
        return [workload for *_, workload in sorted(ranked, key=lambda r: r[:5])]

    def _tree_of(self, queue: str) -> Node | str:
        """The root of `queue`'s cohort tree; an inactive or unknown queue is a tree of its own."""
        node = self.tree.queues.get(queue)
        return node.path()[-1] if node is not None else queue

    def _rank(self, workload: Workload) -> tuple[bool, Share]:
        """Whether `workload` would borrow, and the share its queue would have then."""
        queue, node = self.config.cluster_queues[workload.queue], self.tree.queues.get(workload.queue)
        assignment = assign(queue, node, self.tree, self.usage, workload.request) if node is not None else None
        borrows = assignment is not None and assignment.borrows
        return borrows, self._share_once_admitted(node, assignment, workload)

    def _share_once_admitted(self, node: Node | None, assignment: Assignment | None, workload: Workload) -> Share:
        """Under fair sharing, the share `workload`'s queue would have once it is admitted
        (the lower goes first); otherwise 0."""
        if node is None or assignment is None or not assignment.borrows or not self.config.fair_sharing_in(node.path()[-1].name):
            return NO_SHARE
        request = usage_of(assignment.flavors, workload.request)
        self.tree.change(self.usage, node, request, +1)
        try:
            return share(self.tree, node, self.usage)
        finally:
            self.tree.change(self.usage, node, request, -1)

    def _record_running(self, workload: Workload) -> None:
        queue, node = self.config.cluster_queues[workload.queue], self.tree.queues.get(workload.queue)
        flavors = assign(queue, node, self.tree, self.usage, workload.request).flavors if node is not None else {}
        if node is not None:
            self.recorded_in.add(node.path()[-1])
        self._admit(workload, node, flavors, ("already running in the cluster: recorded as admitted, its usage counts from now on",))

    def _consider(self, workload: Workload) -> None:
        outcome = self.blocked.get(workload.id)
        if outcome is not None:
            self._tell(workload, outcome.reasons)
            return None
        queue, node = self.config.cluster_queues[workload.queue], self.tree.queues.get(workload.queue)
        if node is None:
            return self._block(workload, (f"ClusterQueue {queue.name} is inactive: its cohort {queue.cohort} is in a cycle of cohorts",))
        if queue.stop_policy != "None":
            return self._block(workload, (f"ClusterQueue {queue.name} is stopped (stopPolicy {queue.stop_policy}): it admits nothing",))
        assignment = assign(queue, node, self.tree, self.usage, workload.request)
        if assignment.mode == Mode.FIT:
            return self._admit(workload, node, assignment.flavors, _explain_fit(assignment, queue.name))
        if assignment.mode == Mode.NO_FIT:
            return self._block(workload, assignment.passed_over or (f"ClusterQueue {queue.name} has no quota for this request",))
        root = node.path()[-1]
        if root in self.preempted_in or not self.cycle.may_preempt():
            return None  # the next cycle plans on the state with this cycle's evictions in it
        search = Search(
            workload, self.config, node, self.tree, self.usage, self.workloads.admitted, assignment.flavors, assignment.contested, self.admitted_now, self.memo
        )
        fair_sharing = self.config.fair_sharing_in(root.name)
        plan = preemption(self.config, search)
        if not plan.targets and root in self.recorded_in:
            return None  # the workloads recorded running are candidates from the next cycle on: no refusal before
        if not plan.targets:
            return self._block(
                workload, (*assignment.passed_over, _no_room(workload, queue, assignment, plan, fair_sharing), *plan.considered, *plan.not_candidates)
            )
        self.preempted_in.add(root)
        self._evict(workload, plan)
        self.tree.change(self.usage, node, usage_of(assignment.flavors, workload.request), +1)
        self.memo.usage_changed()
        return None

    def _admit(self, workload: Workload, node: Node | None, flavors: dict[str, str], explanation: tuple[str, ...]) -> None:
        self.cycle.emit(Admitted, app=workload.id, queue=workload.queue, flavors=flavors, explanation=explanation)
        if node is not None:
            self.tree.change(self.usage, node, usage_of(flavors, workload.request), +1)
        self.memo.usage_changed()  # the admitted-now counts of the summaries change too
        self.admitted_now.setdefault(workload.queue, []).append(replace(workload, flavors=flavors))

    def _evict(self, preemptor: Workload, plan: Plan) -> None:
        for target in plan.targets:
            victim = target.workload
            if victim.evicted:
                continue
            message = f"preempted to admit {preemptor.id} (ClusterQueue {preemptor.queue}, priority {preemptor.priority}) by {reason_text(target.reason)}"
            if target.why:
                message += f"; {target.why}"
            self.cycle.emit(
                Evicted,
                app=victim.id,
                queue=victim.queue,
                reason=target.reason,
                preemptor=preemptor.id,
                message=message,
                explanation=(*plan.considered, *plan.not_candidates),
            )

    def _block(self, workload: Workload, reasons: tuple[str, ...]) -> None:
        """Tell `workload` why it waits (`Cycle.block`: when that changed, within the cycle's
        budget), and keep how this cycle found it for the next ones."""
        borrows, share = self.ranks[workload.id]
        self.blocked[workload.id] = Outcome(borrows, share, bounded(reasons))
        self._tell(workload, reasons)

    def _tell(self, workload: Workload, reasons: tuple[str, ...]) -> None:
        """`Cycle.block`, when the reasons' gist changed (as the kept backlog tells)."""
        task = self.cycle.partition.tasks[workload.first_task]
        if gist(bounded(reasons)) != gist(task.blocked):
            self.cycle.block(task, app=workload.id, queue=workload.queue, reasons=reasons)


class Outcome(NamedTuple):
    """How a cycle found a workload it blocked: its rank among the waiting (whether it would
    borrow, the share it would have) and why it waits, its reasons `bounded` as told."""

    borrows: bool
    share: Share
    reasons: tuple[str, ...]


def preemption(config: KueueConfig, search: Search) -> Plan:
    """The victims for `search.preemptor`: by fair sharing where it is on, else classic."""
    if config.fair_sharing_in(search.node.path()[-1].name):
        return fair(search, config.fair_sharing.strategies)
    return classic(search)


def _explain_fit(assignment: Assignment, queue: str) -> tuple[str, ...]:
    flavors = ", ".join(f"{resource} in {flavor}" for resource, flavor in sorted(assignment.flavors.items()))
    how = "borrowing from its cohort" if assignment.borrows else "within its nominal quota"
    return (f"fits ClusterQueue {queue} {how}: {flavors or 'no resources'}", *assignment.passed_over)


def _no_room(workload: Workload, queue: ClusterQueue, assignment: Assignment, plan: Plan, fair_sharing: bool) -> str:
    contested = ", ".join(f"{format_human(r, workload.request[r])} {r} in {f}" for f, r in assignment.contested)
    if plan.refusal:
        return f"needs preemption for {contested}; {plan.refusal}: none is evicted"
    if plan.considered and fair_sharing:
        return f"needs preemption for {contested}, and the evictions fair sharing allows (its preemptionStrategies) do not make room"
    if plan.considered:
        return f"needs preemption for {contested}, and evicting the workloads its preemption policy allows does not make room"
    p = queue.preemption
    policy = f"withinClusterQueue {p.within_cluster_queue}, reclaimWithinCohort {p.reclaim_within_cohort}, borrowWithinCohort {p.borrow_within_cohort}"
    return f"needs preemption for {contested}, and no admitted workload is a candidate (its policy: {policy})"


def _explain_fit(assignment: Assignment, queue: str) -> tuple[str, ...]:
    flavors = ", ".join(f"{resource} in {flavor}" for resource, flavor in sorted(assignment.flavors.items()))
    how = "borrowing from its cohort" if assignment.borrows else "within its nominal quota"
    return (f"fits ClusterQueue {queue} {how}: {flavors or 'no resources'}", *assignment.passed_over)


def _no_room(workload: Workload, queue: ClusterQueue, assignment: Assignment, plan: Plan, fair_sharing: bool) -> str:
    contested = ", ".join(f"{format_human(r, workload.request[r])} {r} in {f}" for f, r in assignment.contested)
    if plan.refusal:
        return f"needs preemption for {contested}; {plan.refusal}: none is evicted"
    if plan.considered and fair_sharing:
        return f"needs preemption for {contested}, and the evictions fair sharing allows (its preemptionStrategies) do not make room"
    if plan.considered:
        return f"needs preemption for {contested}, and evicting the workloads its preemption policy allows does not make room"
    p = queue.preemption
    policy = f"withinClusterQueue {p.within_cluster_queue}, reclaimWithinCohort {p.reclaim_within_cohort}, borrowWithinCohort {p.borrow_within_cohort}"
    return f"needs preemption for {contested}, and no admitted workload is a candidate (its policy: {policy})"
