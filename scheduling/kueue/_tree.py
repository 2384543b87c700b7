"""The quota tree: ClusterQueues as leaves of (nested) cohorts, and what each node may use.

Quotas and usage are kept per flavor-resource (`("on-demand", "cpu")`). The arithmetic, as Kueue
defines it (see the research notes):

- A node's *subtree quota* is its own nominal quota plus, for each child, what the child lends:
  its subtree quota less its *local* quota. The local quota is what a node keeps for itself:
  its subtree quota less its lendingLimit (never below 0), or nothing without a lendingLimit.
- A cohort's usage is what its children use beyond their local quota.
- What a node has *available* is its unused local quota plus what its parent has available,
  capped by its borrowingLimit; at the root, its subtree quota less its usage. It may be
  negative: the node is over what it may use.

Cohorts in a cycle, and their ClusterQueues, are inactive: they are left out of the tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ._config import KueueConfig, Quota, ResourceGroup

__all__ = ["FlavorResource", "Node", "QuotaTree"]

FlavorResource = tuple[str, str]


@dataclass(eq=False)
class Node:
    """A cohort or a ClusterQueue in the tree."""

    name: str
    is_cohort: bool
    quotas: dict[FlavorResource, Quota]
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    weight: Fraction = Fraction(1)  # fairSharing.weight, exact: shares are compared exactly

    def local(self, fr: FlavorResource) -> int:
        """What this node keeps for itself of its subtree quota."""
        quota = self.quotas.get(fr)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - quota.lending_limit)

    def lends(self, fr: FlavorResource) -> int:
        return self.subtree.get(fr, 0) - self.local(fr)

    def path(self) -> list[Node]:
        """This node and its ancestors, up to the root."""
        nodes: list[Node] = []
        node: Node | None = self
        while node is not None:
            nodes.append(node)
            node = node.parent
        return nodes


class QuotaTree:
    """The cohorts and ClusterQueues of a configuration, with their subtree quotas."""

    def __init__(self, config: KueueConfig) -> None:
        self.flavors = frozenset(config.flavors)  # quota in any other flavor admits nothing
        cycles = _in_cycles(config)
        self.cohorts = {name: Node(name, True, _quotas(c.resource_groups)) for name, c in config.cohorts.items() if name not in cycles}
        self.queues = {name: Node(name, False, _quotas(q.resource_groups)) for name, q in config.cluster_queues.items() if q.cohort not in cycles}
        for nodes, objects in ((self.cohorts, config.cohorts), (self.queues, config.cluster_queues)):
            for name, node in nodes.items():
                node.weight = Fraction(repr(objects[name].weight))  # the decimal the user wrote
        for name, cohort in config.cohorts.items():
            if name in self.cohorts and cohort.parent is not None:
                self._attach(self.cohorts[name], self.cohorts[cohort.parent])
        for name, queue in config.cluster_queues.items():
            if name in self.queues and queue.cohort is not None:
                self._attach(self.queues[name], self.cohorts[queue.cohort])
        for root in self.roots():
            _sum_subtree(root)
        self._lendable: dict[Node, dict[str, int]] = {}
        self.members: dict[Node, list[str]] = {}  # each root's ClusterQueues
        for name, node in self.queues.items():
            self.members.setdefault(node.path()[-1], []).append(name)

    @staticmethod
    def _attach(child: Node, parent: Node) -> None:
        child.parent = parent
        parent.children.append(child)

    def roots(self) -> list[Node]:
        """The nodes without a parent, cohorts first, each kind by name."""
        return [node for nodes in (self.cohorts, self.queues) for _, node in sorted(nodes.items()) if node.parent is None]

    def usage(self, queue_usage: Mapping[str, Mapping[FlavorResource, int]]) -> dict[Node, dict[FlavorResource, int]]:
        """Every node's usage, from the ClusterQueues' (by name)."""
        usage: dict[Node, dict[FlavorResource, int]] = {}
        for root in self.roots():
            _sum_usage(root, queue_usage, usage)
        return usage

    def available(self, node: Node, fr: FlavorResource, usage: Mapping[Node, Mapping[FlavorResource, int]]) -> int:
        """What `node` may still use of `fr`, borrowing included (negative when over)."""
        used = usage.get(node, {}).get(fr, 0)
        if node.parent is None:
            return node.subtree.get(fr, 0) - used
        local = node.local(fr)
        from_parent = self.available(node.parent, fr, usage)
        quota = node.quotas.get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            used_in_parent = max(0, used - local)
            from_parent = min(from_parent, node.lends(fr) - used_in_parent + quota.borrowing_limit)
        return max(0, local - used) + from_parent

    def potential(self, node: Node, fr: FlavorResource) -> int:
        """The most `node` could use of `fr` if nothing else in the tree used any."""
        if node.parent is None:
            return node.subtree.get(fr, 0)
        from_parent = self.potential(node.parent, fr)
        quota = node.quotas.get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            from_parent = min(from_parent, node.lends(fr) + quota.borrowing_limit)
        return node.local(fr) + from_parent

    def lendable(self, cohort: Node) -> dict[str, int]:
        """Per resource, the most `cohort` could give its children: the sum over every flavor
        of the tree (the root's subtree holds them all) of its potential; the denominator of
        its children's shares."""
        cached = self._lendable.get(cohort)
        if cached is None:
            cached = {}
            for fr in sorted(cohort.path()[-1].subtree):
                cached[fr[1]] = cached.get(fr[1], 0) + self.potential(cohort, fr)
            self._lendable[cohort] = cached
        return cached

    def within_nominal(self, node: Node, fr: FlavorResource, usage: Mapping[Node, Mapping[FlavorResource, int]]) -> bool:
        return usage.get(node, {}).get(fr, 0) <= node.subtree.get(fr, 0)

    def borrows(self, node: Node, frs: Iterable[FlavorResource], usage: Mapping[Node, Mapping[FlavorResource, int]]) -> bool:
        """`node` uses more than its subtree quota of one of `frs`."""
        return any(not self.within_nominal(node, fr, usage) for fr in frs)

    @staticmethod
    def change(usage: dict[Node, dict[FlavorResource, int]], queue: Node, amounts: Mapping[FlavorResource, int], sign: int) -> None:
        """Add (`sign` +1) or take away (-1) `amounts` used by `queue`, and what that changes in
        its cohorts' usage (each counts what a child uses beyond its local quota)."""
        node: Node | None = queue
        changes = {fr: sign * amount for fr, amount in amounts.items() if amount}
        while node is not None and changes:
            used = usage.setdefault(node, {})
            passed: dict[FlavorResource, int] = {}
            for fr, delta in changes.items():
                before = used.get(fr, 0)
                used[fr] = before + delta
                local = node.local(fr)
                beyond = max(0, before + delta - local) - max(0, before - local)
                if beyond:
                    passed[fr] = beyond
            changes, node = passed, node.parent


class CycleUsage(dict[Node, dict[FlavorResource, int]]):
    """A cycle's usage of the tree's nodes: the usage kept between cycles (`base`, which the
    cycle never changes), each node's copied the first time the cycle changes it; read through
    `get`, as every reader does."""

    __slots__ = ("base",)

    def __init__(self, base: Mapping[Node, dict[FlavorResource, int]]) -> None:
        super().__init__()
        self.base = base

    def __missing__(self, node: Node) -> dict[FlavorResource, int]:
        copied = self[node] = dict(self.base.get(node, {}))
        return copied

    def get(self, node: Node, default: Any = None) -> Any:
        if node in self:
            return dict.__getitem__(self, node)
        return self.base.get(node, default)

    def setdefault(self, node: Node, default: Any = None) -> dict[FlavorResource, int]:
        return self[node]


def _quotas(groups: tuple[ResourceGroup, ...]) -> dict[FlavorResource, Quota]:
    return {(flavor.flavor, resource): quota for group in groups for flavor in group.flavors for resource, quota in flavor.resources.items()}


def _sum_subtree(node: Node) -> None:
    node.subtree = {fr: quota.nominal for fr, quota in node.quotas.items()}
    for child in node.children:
        _sum_subtree(child)
        for fr in child.subtree:
            node.subtree[fr] = node.subtree.get(fr, 0) + child.lends(fr)


def _sum_usage(node: Node, queue_usage: Mapping[str, Mapping[FlavorResource, int]], out: dict[Node, dict[FlavorResource, int]]) -> dict[FlavorResource, int]:
    if not node.is_cohort:
        out[node] = dict(queue_usage.get(node.name, {}))
        return out[node]
    total: dict[FlavorResource, int] = {}
    for child in node.children:
        for fr, used in _sum_usage(child, queue_usage, out).items():
            total[fr] = total.get(fr, 0) + max(0, used - child.local(fr))
    out[node] = total
    return total


def _in_cycles(config: KueueConfig) -> set[str]:
    """The cohorts whose chain of parents never reaches a root."""
    looping: set[str] = set()
    for start in config.cohorts:
        seen: set[str] = set()
        name: str | None = start
        while name is not None and name not in seen:
            seen.add(name)
            cohort = config.cohorts.get(name)
            name = cohort.parent if cohort else None
        if name is not None:
            looping.add(start)
    return looping
