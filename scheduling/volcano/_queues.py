"""The queue rules of the plugin that shares the cluster among queues: capacity if the tiers
name it, else proportion, else none (no queue limits, every queue deserves nothing).

- **allocatable** (allocate, and enough evicted in preempt): proportion lets a queue hold up to
  what it deserves; capacity up to its real capability (and, with `enableHierarchy`, every
  ancestor's), so that it may borrow idle resources beyond what it deserves.
- **overused** (reclaim skips the queue): it holds at least what it deserves of every
  resource it deserves (a capacity queue that deserves nothing is always overused: it runs on
  what others leave).
- **preemptive** (may this queue reclaim for a task): proportion, if it would hold no more than
  it deserves; capacity, if it stays within its own real capability (not its ancestors') and
  would hold no more than it deserves of some resource the task asks for, or an ancestor up to
  `ancestorReclaimLevel` levels above it would.

Only the resources a task asks for are compared, as Volcano's LessEqualWithDimension does; a
queue's limits leave the pod count out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from preemptd.events import format_human
from preemptd.projections import PartitionState, add, subtract

from .._views import Column, Curves
from ._config import Plugin, Queue, VolcanoConfig, config_of, sharing_plugin
from ._jobs import POD_SLOT
from ._kept import kept
from ._nodes import queues_held
from ._shares import QUEUE_EXEMPT, Demand, capacity_deserved, capped_deserved, proportion_deserved, real_capability, share, summed

__all__ = ["Quotas", "curves", "demands_of", "deserved_now", "queue_columns", "session_quotas", "shares"]

Limits = Mapping[str, Fraction]


class Quotas:
    def __init__(
        self,
        config: VolcanoConfig,
        total: Mapping[str, int],
        demands: Mapping[str, Demand],
        held: Mapping[str, Mapping[str, int]],
        memo: dict[object, object] | None = None,
    ) -> None:
        """`demands`: what each queue with jobs holds and asks (`demands_of`); `held`: what
        each holds, live as the session's statements change it; `memo`: where rules that rest
        on the configuration and the total alone (capacity's, without hierarchy) are kept for
        the next sessions of the same configuration."""
        self.queues = config.queues
        self.held = held  # live: per leaf queue, as the session's statements change it
        self.plugin = sharing_plugin(config.scheduler)
        name = self.plugin.name if self.plugin else None
        self.hierarchy = name == "capacity" and self.plugin is not None and self.plugin.enabled("enableHierarchy")
        self.reclaim_level = _level(self.plugin) if self.hierarchy else 0  # Volcano reads it under hierarchy only
        self.children: dict[str, list[str]] = {}
        for queue in self.queues.values():
            if queue.parent is not None:
                self.children.setdefault(queue.parent, []).append(queue.name)
        # what each queue's most (`real`) rests on beside the configuration and the total, when
        # nothing else (None under hierarchy, or without a sharing plugin)
        self.guarantees: dict[str, int] | None = None
        if name == "proportion":
            self.deserved = proportion_deserved(self.queues, demands, total)
            guarantees = self.guarantees = summed(self.queues[q].guarantee or {} for q in demands)
            self.real = {q: real_capability(self.queues[q], total, guarantees) for q in demands}
        elif name == "capacity" and self.hierarchy:
            self.real = self._real_top_down(total)
            self.deserved = {q: capped_deserved(self.queues[q], {}) for q in self.queues}  # not capped by what it may have, as Volcano's hierarchy
        elif name == "capacity":
            key = ("capacity", tuple(sorted(total.items())))
            if memo is None or key not in memo:
                everyone = dict.fromkeys(self.queues, Demand({}, {}))
                guarantees = summed(self.queues[q].guarantee or {} for q in everyone)
                real = {q: real_capability(self.queues[q], total, guarantees) for q in self.queues}
                found = (capacity_deserved(self.queues, everyone, total), guarantees, real)
                if memo is not None:
                    memo.clear()
                    memo[key] = found
            else:
                found = memo[key]  # type: ignore[assignment]  # kept by the branch above
            self.deserved, self.guarantees, self.real = found
        else:
            self.deserved, self.real = {}, {}

    @property
    def name(self) -> str:
        return self.plugin.name if self.plugin else "none"

    def holds(self, queue: str) -> dict[str, int]:
        """What `queue` holds: its own, or its leaves' under a parent."""
        return self._summed_below(queue, self.held)

    def share(self, queue: str) -> Fraction:
        return share(self.holds(queue), self.deserved.get(queue, {}))

    def allocatable(self, queue: str, request: Mapping[str, int]) -> str | None:
        """Why `queue` may not hold `request` more (None: it may)."""
        if self.name == "proportion":
            return self._over(queue, request, self.deserved.get(queue, {}), "deserves")
        if self.name == "capacity":
            for ancestor in self._limited(queue):
                refusal = self._over(ancestor, request, self.real.get(ancestor, {}), "may have (its capability)")
                if refusal:
                    return refusal
        return None

    def enqueueable(
        self, queue: str, request: Mapping[str, int], inqueue: Mapping[str, Mapping[str, int]], elastic: Mapping[str, Mapping[str, int]]
    ) -> str | None:
        """Why a job asking `request` to start may not be let into `queue` (None: it may),
        beside what was let in before it (`inqueue`, per queue and ancestor), counting what
        each queue holds less what preemption could take back (`elastic`, per leaf queue: an
        ancestor's is its leaves'). A sharing plugin with `enableJobEnqueued: false` lets every
        job in, as Volcano's vote does."""
        if self.plugin is None or not self.plugin.enabled("enableJobEnqueued"):
            return None
        for limited in self._limited(queue):
            wanted = dict(request)
            add(wanted, inqueue.get(limited, {}))
            refusal = self._over(limited, wanted, self.real.get(limited, {}), "may have (its capability)", self._summed_below(limited, elastic))
            if refusal:
                return refusal
        return None

    def _summed_below(self, queue: str, amounts: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
        """`amounts` of `queue`, or of its leaves under a parent."""
        if queue not in self.children:
            return dict(amounts.get(queue, {}))
        total: dict[str, int] = {}
        for child in self.children[queue]:
            add(total, self._summed_below(child, amounts))
        return total

    def reclaim_ancestors(self, queue: str) -> tuple[str, ...]:
        """The ancestors of `queue` that capacity's reclaim checks: up to `ancestorReclaimLevel`."""
        return tuple(self._lineage(queue)[1 : self.reclaim_level + 1])

    def kinship(self, reclaimer: str, queue: str) -> int:
        """How far up from `reclaimer` the lowest queue holding both is (1: siblings): under
        hierarchy capacity takes victims from the reclaimer's nearest relatives first."""
        above = self._lineage(reclaimer) + ["root"]
        mine = set(self._lineage(queue))
        return next(steps for steps, ancestor in enumerate(above) if ancestor in mine or ancestor == "root")

    def lineage(self, queue: str) -> list[str]:
        """The queues whose limits `queue`'s tasks count against: it, and under hierarchy its ancestors."""
        return self._limited(queue)

    def overused(self, queue: str) -> bool:
        """So is every ancestor up to the reclaim level, for capacity. Without a sharing
        plugin, nothing votes: no queue is."""
        return self.plugin is not None and all(self._holds_all_it_deserves(q) for q in self._lineage(queue)[: self.reclaim_level + 1])

    def _holds_all_it_deserves(self, queue: str) -> bool:
        held, deserved = self.holds(queue), self.deserved.get(queue, {})
        return all(held.get(r, 0) >= amount for r, amount in deserved.items() if r not in QUEUE_EXEMPT)

    def preemptive(self, queue: str, request: Mapping[str, int]) -> str | None:
        """Why `queue` may not reclaim for `request` (None: it may). As Volcano's capacity
        plugin, the reclaiming queue is judged by its own real capability only: an ancestor
        full of a sibling's borrowed tasks is what reclaim is there to empty."""
        if self.name == "proportion":
            return self._over(queue, request, self.deserved.get(queue, {}), "deserves")
        if self.name != "capacity":
            return None
        refusal = self._over(queue, request, self.real.get(queue, {}), "may have (its capability)")
        if refusal:
            return refusal
        lineage = self._lineage(queue)[: self.reclaim_level + 1]
        if any(self._within_somewhere(q, request) for q in lineage):
            return None
        named = (
            f"queue {queue}" if len(lineage) == 1 else f"queue {queue} nor its ancestors {', '.join(lineage[1:])} (ancestorReclaimLevel {self.reclaim_level})"
        )
        return (
            f"capacity: neither {named} would stay within what it deserves of any resource the task asks for"
            if len(lineage) > 1
            else f"capacity: queue {queue} would hold more than it deserves of every resource the task asks for"
        )

    def _within_somewhere(self, queue: str, request: Mapping[str, int]) -> bool:
        held, deserved = self.holds(queue), self.deserved.get(queue, {})
        return any(r in deserved and held.get(r, 0) + amount <= deserved[r] for r, amount in request.items() if amount and r not in QUEUE_EXEMPT)

    def _over(self, queue: str, request: Mapping[str, int], limit: Limits, what: str, elastic: Mapping[str, int] | None = None) -> str | None:
        held = self.holds(queue)
        for r, amount in (elastic or {}).items():
            held[r] = held.get(r, 0) - amount
        for r, amount in request.items():
            if not amount or r in QUEUE_EXEMPT or r not in limit:
                continue
            if held.get(r, 0) + amount > limit[r]:
                return (
                    f"{self.name}: queue {queue} would hold {format_human(r, held.get(r, 0) + amount)} of {r}, more than the "
                    f"{format_human(r, int(limit[r]))} it {what}"
                )
        return None

    def _lineage(self, queue: str) -> list[str]:
        """`queue`, then its ancestors below root."""
        lineage = [queue]
        while (parent := self.queues[lineage[-1]].parent) not in (None, "root"):
            lineage.append(parent)
        return lineage

    def _limited(self, queue: str) -> list[str]:
        return self._lineage(queue) if self.hierarchy else [queue]

    def _real_top_down(self, total: Mapping[str, int]) -> dict[str, dict[str, Fraction]]:
        """Under hierarchy, from the root down: a queue may have what its parent may, less its
        siblings' guarantees, capped by its capability."""
        real = {"root": {r: Fraction(a) for r, a in total.items() if r not in QUEUE_EXEMPT}}
        siblings: dict[str, list[Queue]] = {}
        for queue in self.queues.values():
            if queue.name != "root":
                siblings.setdefault(queue.parent or "root", []).append(queue)
        for name in _parents_first(self.queues):
            if name == "root":
                continue
            queue = self.queues[name]
            others = summed(q.guarantee or {} for q in siblings[queue.parent or "root"] if q.name != name)
            amounts = {r: a - others.get(r, 0) for r, a in real[queue.parent or "root"].items()}
            for r, cap in (queue.capability or {}).items():
                if r in amounts:
                    amounts[r] = min(amounts[r], Fraction(cap))
            real[name] = amounts
        return real


def _level(plugin: Plugin | None) -> int:
    return int((plugin.arguments if plugin else {}).get("ancestorReclaimLevel", 0))  # checked when read


def demands_of(p: PartitionState, queues: Iterable[str]) -> dict[str, Demand]:
    """Per queue of `queues` (those with jobs), what it holds (running tasks, and preemptors
    waiting on a node held for them) and what it asks in all (those and its pending tasks);
    victims in flight are neither. Read from the fold's aggregates, not task by task."""
    demands = {}
    for name in sorted(queues):
        queue = p.queues[name]
        running = dict(queue.allocated)
        subtract(running, queue.preempting)
        held, asked = dict(running), running
        add(held, queue.reserved)
        add(asked, queue.pending)
        demands[name] = Demand(held, asked)
    return demands


def _parents_first(queues: Mapping[str, Queue]) -> list[str]:
    depth: dict[str, int] = {}

    def of(name: str) -> int:
        if name not in depth:
            parent = queues[name].parent
            depth[name] = 0 if parent is None else of(parent) + 1
        return depth[name]

    return sorted(queues, key=lambda name: (of(name), name))


def session_quotas(p: PartitionState) -> Quotas:
    """The queue rules as a session would find them now (not to be changed), read from the
    fold's aggregates (the queues with tasks are those with jobs; what each holds and asks): no
    pass over the jobs, tasks or nodes, so that the report may ask at every sample of a long log.
    The last ones found are kept with what they were found from (the configuration, the
    cluster's capacity, the demands, which say what each queue holds too): the report asks for
    its curves and shares of one moment in turn, and proportion's water-filling is most of it."""
    with_jobs = [name for name, queue in p.queues.items() if queue.running or queue.waiting]
    demands = demands_of(p, with_jobs)
    found = kept(p)
    last = found.quotas
    if last is not None and last[0] is config_of(p) and last[1] == p.capacity and last[2] == demands:
        return last[3]
    quotas = Quotas(config_of(p), p.capacity, demands, queues_held(p))
    found.quotas = (config_of(p), dict(p.capacity), demands, quotas)
    return quotas


def deserved_now(quotas: Quotas) -> dict[str, dict[str, int]]:
    """What each queue deserves, in whole resource units (the pod count left out); no entry for
    a queue that deserves nothing by its sharing plugin, nor for any without one."""
    return {q: {r: int(a) for r, a in amounts.items() if r != POD_SLOT} for q, amounts in quotas.deserved.items()}


def queue_columns(p: PartitionState) -> list[Column]:
    """`Model.queue_columns`: per queue its weight, capability and guarantee as configured, and
    what it deserves and its share (what it holds over what it deserves) as a session would
    find them now, by the sharing plugin (none without one)."""
    quotas = session_quotas(p)
    deserved = deserved_now(quotas)
    queues = quotas.queues
    return [
        ("weight", {q: queue.weight for q, queue in queues.items()}),
        ("capability", {q: dict(queue.capability) if queue.capability is not None else None for q, queue in queues.items()}),
        ("guarantee", {q: dict(queue.guarantee) if queue.guarantee is not None else None for q, queue in queues.items()}),
        ("deserved", {q: deserved.get(q) for q in queues}),
        ("share", {q: quotas.share(q) if q in deserved else None for q in queues}),
    ]


def curves(p: PartitionState) -> Curves:
    """`Model.curves`: per queue what it deserves now (as `queue_columns` says), and its
    guarantee and capability as configured; what it allocates and asks are its own."""
    deserved = deserved_now(session_quotas(p))
    config = config_of(p)
    return {
        q: {
            **({"deserved": deserved[q]} if q in deserved else {}),
            **({"guaranteed": dict(queue.guarantee)} if queue.guarantee is not None else {}),
            **({"max": dict(queue.capability)} if queue.capability is not None else {}),
        }
        for q, queue in config.queues.items()
    }


def shares(p: PartitionState) -> dict[str, float]:
    """`Model.shares`: per queue that deserves something, its share as `queue_columns` says
    (the order of allocate and reclaim); none without a sharing plugin."""
    quotas = session_quotas(p)
    return {q: float(quotas.share(q)) for q in sorted(quotas.deserved)}
