"""Flavor assignment: which flavor of each resource group a workload would take in its
ClusterQueue, and whether it fits now, fits only by borrowing, or would need preemption.

The flavors of a group are tried in order. For each, every requested resource of the group is
judged: it *fits* if the request is within what the queue has available (borrowing included),
needs *preemption* if it is within what the queue could have were the tree empty, and *does not
fit* otherwise; the flavor takes the worst of its resources. The queue's flavorFungibility says
when the search stops: by default (`whenCanBorrow: MayStopSearch`, `whenCanPreempt:
TryNextFlavor`) a fit stops it, borrowing or not, and a flavor that needs preemption is kept in
case a later one fits. The best flavor found wins: a fit without borrowing, then with borrowing,
then preemption.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

from preemptd.events import format_human

from ._config import ClusterQueue, ResourceGroup
from ._tree import FlavorResource, Node, QuotaTree

__all__ = ["Assignment", "Mode", "assign"]

Usage = Mapping[Node, Mapping[FlavorResource, int]]


class Mode(IntEnum):
    """How a workload's request stands in a flavor; higher is better."""

    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


@dataclass(frozen=True)
class Assignment:
    """The flavor of each requested resource, and what taking them needs. `contested` are the
    flavor-resources that need preemption; `passed_over` says, for each flavor tried, why it
    was not taken, or what it needs when it is taken only by preemption (as Kueue's message
    lists them, for `explain` and `decision.blocked`)."""

    flavors: dict[str, str]
    mode: Mode
    borrows: bool
    contested: tuple[FlavorResource, ...]
    passed_over: tuple[str, ...]


@dataclass(frozen=True)
class _Try:
    """A flavor tried, and the line that says what it offers."""

    flavor: str
    mode: Mode
    borrows: bool
    contested: tuple[FlavorResource, ...]
    line: str = ""

    def rank(self) -> tuple[int, bool]:
        return (self.mode, not self.borrows)


def assign(queue: ClusterQueue, node: Node, tree: QuotaTree, usage: Usage, request: Mapping[str, int]) -> Assignment:
    """The flavors `request` (amounts per resource, in base units) would take in `queue`."""
    flavors: dict[str, str] = {}
    passed_over: list[str] = []
    tries: list[_Try] = []
    uncovered = sorted(set(request) - {r for g in queue.resource_groups for r in g.covered})
    if uncovered:
        passed_over.append(f"ClusterQueue {queue.name} has no quota for {', '.join(uncovered)}")
    for group in queue.resource_groups:
        wanted = {r: request[r] for r in group.covered if request.get(r)}
        if not wanted:
            continue
        chosen = _choose(queue, group, node, tree, usage, wanted, passed_over)
        if chosen is None:
            return Assignment(flavors, Mode.NO_FIT, False, (), tuple(passed_over))
        tries.append(chosen)
        flavors.update(dict.fromkeys(wanted, chosen.flavor))
    mode = Mode.NO_FIT if uncovered else min((t.mode for t in tries), default=Mode.FIT)
    return Assignment(flavors, mode, any(t.borrows for t in tries), tuple(fr for t in tries for fr in t.contested), tuple(passed_over))


def _choose(
    queue: ClusterQueue, group: ResourceGroup, node: Node, tree: QuotaTree, usage: Usage, wanted: dict[str, int], passed_over: list[str]
) -> _Try | None:
    """The best flavor of `group` the search comes to; a line in `passed_over` for each flavor
    tried and not taken, and for the one taken if it needs preemption."""
    best: _Try | None = None
    tried: list[_Try] = []
    for quotas in group.flavors:
        if quotas.flavor not in tree.flavors:
            tried.append(_Try(quotas.flavor, Mode.NO_FIT, False, (), f"flavor {quotas.flavor} is not a ResourceFlavor (FlavorNotFound)"))
            continue
        attempt = _judge(quotas.flavor, node, tree, usage, wanted)
        tried.append(attempt)
        if attempt.mode == Mode.NO_FIT:
            continue
        if best is None or attempt.rank() > best.rank():
            best = attempt
        if attempt.mode == Mode.FIT and (not attempt.borrows or queue.when_can_borrow == "MayStopSearch"):
            break
        if attempt.mode == Mode.PREEMPT and queue.when_can_preempt == "MayStopSearch":
            break
    passed_over += [t.line for t in tried if t is not best or t.mode == Mode.PREEMPT]
    return best


def _judge(flavor: str, node: Node, tree: QuotaTree, usage: Usage, wanted: dict[str, int]) -> _Try:
    mode, borrows, contested, short = Mode.FIT, False, [], []
    for resource, amount in wanted.items():
        fr = (flavor, resource)
        used = usage.get(node, {}).get(fr, 0)
        if amount <= tree.available(node, fr, usage):
            borrows |= used + amount > node.subtree.get(fr, 0)
        elif amount <= tree.potential(node, fr):
            mode = min(mode, Mode.PREEMPT)
            borrows |= amount > node.subtree.get(fr, 0)
            contested.append(fr)
            short.append(f"{format_human(resource, amount)} {resource}")
        else:
            most = format_human(resource, tree.potential(node, fr))
            return _Try(
                flavor,
                Mode.NO_FIT,
                False,
                (),
                f"flavor {flavor}: {format_human(resource, amount)} {resource} is more than ClusterQueue {node.name} can ever have ({most})",
            )
    if mode == Mode.PREEMPT:
        return _Try(
            flavor, mode, borrows, tuple(contested), f"flavor {flavor}: {', '.join(short)} is more than ClusterQueue {node.name} has unused: needs preemption"
        )
    how = "fits only by borrowing, and whenCanBorrow TryNextFlavor looks for a flavor that fits without" if borrows else "fits"
    return _Try(flavor, mode, borrows, (), f"flavor {flavor}: {how}")
