"""One cycle of the Kueue model: pending workloads in Kueue's order are admitted by flavor
assignment, or make room by preemption, or are blocked with the quota or policy that stops them.

The order, as in Kueue's scheduler, which takes the head of each ClusterQueue in turn: each
queue's workloads by priority, then creation; across queues, the n-th workloads of every queue
before the (n+1)-th, and among those, the ones that fit without borrowing (judged on the usage at
the start of the cycle) first, then (under fair sharing, for those that borrow) by the share
their queue would have once they are admitted, the lowest first (Kueue runs a tournament of
shares up the cohort tree; this compares the queues' own), then by priority, then by creation. Each is judged again on the
usage as the cycle left it. So a workload taking back its own queue's quota goes before another
queue's that would borrow the same room, and a queue's own order is never overtaken (a
lower-priority workload does not take back the room a preemption made for a higher one).
Before all of them come the workloads that evicted others and wait for them to go: the room
being made is theirs (in Kueue the preemptor is usually its queue's head, but a blocked older
workload ahead of it in its queue can let another queue take that room, and the preemptor
evicts again, without end).

- A workload the cluster already runs (its tasks arrived as `task.bound`) and that was never
  admitted is recorded first, with the flavors assignment gives it whatever the usage, so that
  its usage counts.
- A workload that fits is admitted (`decision.admitted`) and its usage counts at once.
- One that needs preemption evicts its victims (`decision.evicted`, one per workload not
  already evicted) and waits for them to go; its request is held for the rest of the cycle, so
  later workloads do not take the room being made. Once a cohort tree has a preemption in a
  cycle, later workloads there that need one wait for the next cycle, when the evictions are
  in the state: two preemptors never plan on the same room. One that finds no victims in a
  cohort tree where running workloads were recorded in the cycle is not refused either: those
  are candidates from the next cycle on.
- A StrictFIFO ClusterQueue offers only its head in a cycle; the workloads behind it wait
  without a decision of their own. A stopped one (stopPolicy Hold or HoldAndDrain) admits
  nothing.

A cycle considers workloads while `cycle.may_place()` (the model's `Budget`: 20,000 admissions,
those recorded running counted, though they are recorded whatever the budget), plans a
preemption only while `cycle.may_preempt()` (50 preemptors, each one's evictions counting as
one) and blocks workloads anew within the cycle's budget (`Cycle.block`), so that ingest is
never held up for long and a backlog does not flood the log; the rest wait for the next cycle.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from preemptd.events import Admitted, Evicted, format_human
from preemptd.projections import PartitionState

from .._model import Cycle, bounded, rotation
from ._assign import Assignment, Mode, assign
from ._backlog import Class, Group, GroupKey, Kept, QueueBacklog, class_of, gist, queue_key
from ._classic import CycleMemo, Plan, Search, classic, reason_text
from ._config import ClusterQueue, KueueConfig, config_of
from ._fair import NO_SHARE, Share, fair, share
from ._quota import enforce_quotas, next_enforcement
from ._tree import CycleUsage, Node
from ._workloads import Workload, kept_workloads, never_preempts, usage_of

__all__ = ["next_wakeup", "preemption", "schedule"]


def schedule(cycle: Cycle) -> None:
    cycle.phase("quota")
    enforce_quotas(cycle)  # first: what it evicts is in the state the admissions plan on
    _Admission(cycle).run()


class _Admission:
    def __init__(self, cycle: Cycle) -> None:
        self.cycle = cycle
        self.config = config_of(cycle.partition)
        workloads = kept_workloads(cycle.partition)
        self.tree = workloads.tree
        self.workloads = workloads.view(cycle.partition)
        self.backlog, self.running = workloads.backlog, sorted(workloads.running.values(), key=lambda w: (-w.priority, w.seq))
        self.requeued = {self._tree_of(queue) for queue in workloads.take_requeued()}  # trees where something changed
        self.usage = CycleUsage(workloads.node_usage)
        self.preempted_in: set[Node] = set()  # roots of the cohort trees with a preemption this cycle
        self.recorded_in: set[Node] = set()  # roots of the cohort trees with running workloads recorded this cycle
        self.admitted_now: dict[str, list[Workload]] = {}  # by ClusterQueue: in the usage, not candidates
        self.memo = CycleMemo()  # what its searches share; told when the usage changes
        self.visits = _Visits(self)

    def run(self) -> None:
        for workload in self.running:
            self._record_running(workload)
        visits = self.visits
        visits.rotate_after = self.cycle.phase("admit")
        visits.start()
        while (found := visits.next()) is not None:
            if not self.cycle.may_place():
                break  # the rest in the next cycles
            visits.visit(*found)
        visits.finish()

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

    def _consider(self, workload: Workload) -> tuple[_Judged, bool]:
        """Judge `workload` on the cycle's state: admitted or evicting (the state changed), or
        the reasons it waits (told), or None: a later cycle judges it. And whether the judgment
        holds for its whole class (`_backlog.Class`): no quota fits its request, its queue is
        stopped or inactive, whatever its priority."""
        queue, node = self.config.cluster_queues[workload.queue], self.tree.queues.get(workload.queue)
        if node is None:
            return self._block(workload, (f"ClusterQueue {queue.name} is inactive: its cohort {queue.cohort} is in a cycle of cohorts",)), True
        if queue.stop_policy != "None":
            return self._block(workload, (f"ClusterQueue {queue.name} is stopped (stopPolicy {queue.stop_policy}): it admits nothing",)), True
        assignment = assign(queue, node, self.tree, self.usage, workload.request)
        if assignment.mode == Mode.FIT:
            self._admit(workload, node, assignment.flavors, _explain_fit(assignment, queue.name))
            return CHANGED, False
        if assignment.mode == Mode.NO_FIT:
            return self._block(workload, assignment.passed_over or (f"ClusterQueue {queue.name} has no quota for this request",)), True
        judged = self._preempt_for(workload, queue, node, assignment)
        return judged, isinstance(judged, tuple) and never_preempts(queue, self.config)

    def _preempt_for(self, workload: Workload, queue: ClusterQueue, node: Node, assignment: Assignment) -> _Judged:
        root = node.path()[-1]
        if root in self.preempted_in or not self.cycle.can_preempt():  # the visit is a step the cycle allowed already
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
        return CHANGED

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

    def _block(self, workload: Workload, reasons: tuple[str, ...]) -> tuple[str, ...]:
        """Why `workload` waits, `bounded` as told."""
        return bounded(reasons)

    def tell(self, workload: Workload, reasons: tuple[str, ...]) -> None:
        """Tell `workload` why it waits (`Cycle.block`: when its `gist` changed, within the cycle's budget)."""
        task = self.cycle.partition.tasks[workload.first_task]
        if gist(bounded(reasons)) != gist(task.blocked):
            self.cycle.block(task, app=workload.id, queue=workload.queue, reasons=reasons, stepped=True)  # within a visit, a step allowed


#: What judging a workload found: the state changed (it was admitted, or evicts), the reasons
#: it waits, or None (a later cycle judges it).
CHANGED = "changed"
_Judged = str | tuple[str, ...] | None


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


def next_wakeup(partition: PartitionState, now: int) -> int | None:
    """`Model.next_wakeup`: when a lowered quota is next enforced (`_quota`); nothing else in
    this model waits on time."""
    return next_enforcement(partition, now)


#: A ClusterQueue's waiting workloads that do not evict (False) or evict others and wait for
#: them (True): each lane is visited in turn order; those that evict come first.
_Lane = tuple[str, bool]
#: A waiting workload's place in the cycle's order: those that evicted and wait first, then by
#: turn (its index in its queue), whether it would borrow, its queue's share once admitted,
#: and its queue key (priority, creation).
_Key = tuple[bool, int, bool, Share, int]
_UNKNOWN = object()  # a group not judged on the tree's state as it is now


class _Visits:
    """Which waiting workload the cycle visits next: in Kueue's order (`_Key`), the first that
    could make or say something. A group of a tree where nothing changed since the cycle that
    found it blocked keeps what it found (`Group.kept`): only its members not told that are
    visited, to be told. In a tree where something changed, a group is judged once per state
    of the tree (`version`: its admissions and evictions so far): its later members are
    admitted or refused alike, so only those not told are visited, or none when it waits
    quietly. A lane whose next workload to visit lies far ahead is put back where it stood
    when its tree's state changes, if a judgment put it there."""

    def __init__(self, admission: _Admission) -> None:
        self.a = admission
        self.backlog = admission.backlog
        self.version: dict[Node | str, int] = {}
        self.judged: dict[GroupKey, tuple[int, bool, _Judged]] = {}  # per group: the tree's version and may_preempt when judged, and what was found
        self.alike: dict[Class, tuple[int, bool, _Judged]] = {}  # the same, per class, for a judgment its whole class shares
        self.ranks: dict[GroupKey, tuple[bool, Share]] = {}
        self.stale: set[Node | str] = set()
        self.trees: dict[str, Node | str] = {}
        self.lanes: dict[Node | str, list[_Lane]] = {}
        self.heap: list[tuple[_Key, int, _Lane, GroupKey, Workload]] = []
        self.tokens: dict[_Lane, int] = {}
        self.every_lane: set[_Lane] = set()
        self.leaning: dict[
            Node | str, set[_Lane]
        ] = {}  # per tree, lanes in line where they are for a judgment: passed over a group judged, or its members told
        self.made = 0
        self.live: list[str] = []  # the ClusterQueues put in line
        self.position: _Key | None = None  # the key of the last workload visited
        self.preempting = True  # the cycle may still preempt
        self.flip_at: _Key | None = None  # where it stopped being able to
        self.rotate_after: str | None = None  # after a cut: the first visit goes to the next ClusterQueue by name after it

    # -- the cycle --

    def start(self) -> None:
        """Put in line the ClusterQueues the cycle may find something to do in: those of a tree
        where something changed, and those with workloads not told how their group was kept
        (`Backlog.unquiet`); in the others, visiting anything would decide nothing."""
        a = self.a
        queues = self.backlog.queues
        live = {queue for queue in self.backlog.unquiet if queue in queues}
        for queue in live:
            tree = self.trees[queue] = a._tree_of(queue)
            if any(group.kept is None for group in queues[queue].groups.values()):
                self.stale.add(tree)
        self.stale.update(a.requeued)
        for tree in self.stale:  # a tree judged again is judged whole
            live.update(queue for queue in (a.tree.members.get(tree, ()) if isinstance(tree, Node) else (tree,)) if queue in queues)
        self.live = sorted(live)
        for queue in self.live:
            backlog = queues[queue]
            tree = self.trees[queue] = a._tree_of(queue)
            lanes = self.lanes.setdefault(tree, [])
            mine = [lane for lane in ((queue, False), (queue, True)) if any(key[4] == lane[1] for key in backlog.groups)]
            lanes += mine
            self.every_lane.update(mine)
        ranked: dict[Class, tuple[bool, Share]] = {}  # a rank depends on the queue and the request alone
        for queue in self.live:
            backlog = self.backlog.queues[queue]
            for key, group in backlog.groups.items():
                if self.trees[queue] in self.stale:
                    group.kept = None
                    alike = class_of(key)
                    if alike not in ranked:
                        ranked[alike] = a._rank(next(group.members()))  # type: ignore[arg-type]  # the backlog holds workloads
                    self.ranks[key] = ranked[alike]
                else:
                    assert group.kept is not None
                    self.ranks[key] = (group.kept.borrows, group.kept.share)
        self.preempting = a.cycle.can_preempt()  # the time is asked when a preemption is planned
        for lanes in self.lanes.values():
            for lane in lanes:
                self._push(lane, -1)

    def next(self) -> tuple[Group, Workload] | None:
        """The next workload to visit; None when the cycle has nothing more to do."""
        if self.rotate_after is not None and (rotated := self._rotated()) is not None:
            return rotated
        while self.heap:
            key, token, lane, group_key, workload = heapq.heappop(self.heap)
            if self.tokens.get(lane) != token:
                continue
            group = self.backlog.queues[lane[0]].groups[group_key]
            if self._effectful(group, workload):
                self.position = key
                self.a.cycle.begins_at(workload.queue)
                return group, workload
            self._push(lane, queue_key(workload.priority, workload.seq))  # something said since: the lane's next lies further
        return None

    def _rotated(self) -> tuple[Group, Workload] | None:
        """After a cut (`Cycle.phase`), the first visit: the next workload of the next
        ClusterQueue by name after the one the cut cycle began at; the rest keep Kueue's order."""
        live = [entry for entry in self.heap if self.tokens.get(entry[2]) == entry[1]]
        first = rotation({entry[2][0] for entry in live}, self.rotate_after)
        self.rotate_after = None
        entry = min((entry for entry in live if entry[2][0] == first), default=None)
        if entry is None:
            return None
        key, _, lane, group_key, workload = entry
        group = self.backlog.queues[lane[0]].groups[group_key]
        if not self._effectful(group, workload):
            return None
        self.heap.remove(entry)
        heapq.heapify(self.heap)
        self.position = key
        self.a.cycle.begins_at(workload.queue)
        return group, workload

    def visit(self, group: Group, workload: Workload) -> None:
        a, tree = self.a, self.trees[workload.queue]
        lane: _Lane = (workload.queue, group.preempting)
        status = self._status(group)
        changed = False
        if isinstance(status, tuple):
            a.tell(workload, status)
        else:
            version = self.version.get(tree, 0)
            judged, alike = a._consider(workload)
            if judged == CHANGED:
                self.version[tree] = version + 1
                changed = True
            else:
                self.judged[group.key] = (version, self.preempting, judged)
                if alike:
                    self.alike[class_of(group.key)] = (version, self.preempting, judged)
                if isinstance(judged, tuple):
                    a.tell(workload, judged)
        if self.preempting and not a.cycle.can_preempt():  # what needs preemption waits from now on, everywhere
            self.preempting, self.flip_at = False, self.position
            self._rewind(list(self.lanes))
        elif changed:
            self._rewind([tree], (lane, queue_key(workload.priority, workload.seq)))
        else:
            self._push(lane, queue_key(workload.priority, workload.seq))

    def finish(self) -> None:
        """What the next cycles keep of the groups judged: blocked, on the state their tree
        has at the end (unchanged this cycle), each of their members judged so, those past a cut
        too (not past the end of preemption): the next cycle tells them without judging again."""
        for queue in self.live:
            backlog = self.backlog.queues[queue]
            changed = self.version.get(self.trees[queue], 0)  # a changed tree is judged again anyway
            if self.trees[queue] in self.stale and not changed:
                self._keep(backlog)
            if not changed and backlog.quiet():
                self.backlog.unquiet.discard(queue)  # the next cycles pass it over until its waiting or its tree changes

    def _keep(self, backlog: QueueBacklog) -> None:
        for key, group in backlog.groups.items():
            judged = self.judged.get(key) or self.alike.get(class_of(key))
            if judged is None or not isinstance(judged[2], tuple):
                continue
            if judged[1] and self.flip_at is not None and self._last_key(backlog, group) > self.flip_at:
                continue  # judged while it could preempt: not so for those visited after it could not
            borrows, share = self.ranks[key]
            group.kept = Kept(borrows, share, judged[2])

    # -- the lanes --

    def _status(self, group: Group) -> object:
        """What visiting a member of `group` does now: tell it (its reasons), nothing (None),
        or judge it (`_UNKNOWN`)."""
        tree = self.trees[group.key[0]]
        if tree not in self.stale:
            assert group.kept is not None
            return group.kept.reasons
        judged = self._judged(tree, group.key)
        return judged[2] if judged is not None else _UNKNOWN

    def _judged(self, tree: Node | str, key: GroupKey) -> tuple[int, bool, _Judged] | None:
        """How the group `key` was judged on its tree's state as it is now, or its class."""
        version = self.version.get(tree, 0)
        for judged in (self.judged.get(key), self.alike.get(class_of(key))):
            if judged is not None and judged[0] == version and judged[1] == self.preempting:
                return judged
        return None

    def _effectful(self, group: Group, workload: Workload) -> bool:
        status = self._status(group)
        if status is _UNKNOWN:
            return True
        if status is None or not self._telling():
            return False
        return gist(self.a.cycle.partition.tasks[workload.first_task].blocked) != gist(status)  # type: ignore[arg-type]

    def _telling(self) -> bool:
        return self.a.cycle.telling()

    def _push(self, lane: _Lane, cursor: int) -> None:
        """Put `lane` in line at its first workload after `cursor` (a queue key) that could
        make or say something; out of line if none."""
        self.made += 1
        self.tokens[lane] = self.made
        found = self._next_in_lane(lane, cursor)
        if found is not None:
            group, workload = found
            heapq.heappush(self.heap, (self._key(group, workload), self.made, lane, group.key, workload))

    def _next_in_lane(self, lane: _Lane, cursor: int) -> tuple[Group, Workload] | None:
        queue, preempting = lane
        backlog = self.backlog.queues[queue]
        telling = self._telling()
        best: tuple[Group, Workload] | None = None
        tree = self.trees[queue]
        judging = tree in self.stale  # a status known there is a judgment
        leaning = self.leaning.setdefault(tree, set())
        leaning.discard(lane)
        for alike, keys in backlog.classes.items():
            if alike[2] != preempting:
                continue
            shared = self.alike.get(alike) if judging else None
            if shared is not None and self._judged(tree, next(iter(keys))) is shared:
                leaning.add(lane)  # judged for the whole class: its groups are known
                if shared[2] is None or not telling or (isinstance(shared[2], tuple) and backlog.all_told(alike, shared[2])):
                    continue  # nothing to say to any of them
            for key in keys:
                group = backlog.groups[key]
                status = self._status(group)
                if judging and status is not _UNKNOWN:
                    leaning.add(lane)
                if status is None or (status is not _UNKNOWN and not telling):
                    continue
                found = group.first_after(cursor, None if status is _UNKNOWN else status)  # type: ignore[arg-type]  # told reasons
                if isinstance(found, Workload) and (best is None or _queue_key(found) < _queue_key(best[1])):
                    best = (group, found)
        if best is not None and self.a.config.cluster_queues[queue].queueing_strategy == "StrictFIFO" and backlog.rank(_queue_key(best[1])) > 0:
            return None  # only the head of a StrictFIFO queue is offered
        return best

    def _key(self, group: Group, workload: Workload) -> _Key:
        borrows, share = self.ranks[group.key]
        key = _queue_key(workload)
        return (not group.preempting, self.backlog.queues[workload.queue].rank(key), borrows, share, key)

    def _rewind(self, trees: list[Node | str], visited: tuple[_Lane, int] | None = None) -> None:
        """The state of `trees` changed: each of their lanes a judgment put in line (all of them
        when `visited`, the lane and queue key of the workload just visited, is None), and the
        lanes of the visited queue (its turns moved), is put back in line at its first
        workload after the one just visited, in the cycle's order. The others stand at their
        first workload after it already."""
        for tree in trees:
            if visited is None:
                lanes = list(self.lanes.get(tree, ()))
            else:
                (queue, preempting), key = visited
                self._push((queue, preempting), key)
                lanes = sorted((self.leaning.get(tree, set()) | ({(queue, not preempting)} & self.every_lane)) - {(queue, preempting)})
            for lane in lanes:
                self._push(lane, self._lane_cursor(lane))

    def _lane_cursor(self, lane: _Lane) -> int:
        """The queue key of the last workload of `lane` at or before the position visited."""
        position = self.position
        if position is None:
            return -1
        queue, preempting = lane
        section = not preempting
        if section != position[0]:
            return -1 if section > position[0] else 1 << 200  # a later section is all ahead; an earlier one all behind
        backlog = self.backlog.queues[queue]
        at = backlog.kth(position[1])  # the queue's workload at the position's turn
        if at is None:
            return 1 << 200
        for group in backlog.groups.values():
            if group.preempting == preempting:
                found = group.first_after(at - 1)
                if isinstance(found, Workload) and _queue_key(found) == at:
                    return at if self._key(group, found) <= position else at - 1
        return at - 1

    def _last_key(self, backlog: QueueBacklog, group: Group) -> _Key:
        last = max((bucket[-1] for bucket in group.told.values()), key=_queue_key)
        assert isinstance(last, Workload)
        return self._key(group, last)


def _queue_key(workload: object) -> int:
    assert isinstance(workload, Workload)
    return queue_key(workload.priority, workload.seq)
