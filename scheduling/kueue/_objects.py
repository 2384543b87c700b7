"""Kueue's objects, as a user pastes them from a cluster, read into one `KueueConfig`.

A configuration is a list of Kubernetes objects (or a `kind: List` with `items`, or one object):
ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass (`kueue.x-k8s.io`, in
`v1beta2`, the only version Kueue serves since v0.20, or `v1beta1`, still on older clusters; a
list may mix them) and Kueue's Configuration (`config.kueue.x-k8s.io`). The renames between the
versions are read both ways: ClusterQueue `spec.cohortName` / `spec.cohort`, Cohort
`spec.parentName` / `spec.parent`.

What Kueue's validation refuses is refused with Kueue's reason (`ConfigError`); fields and kinds
Kueue has that preemptd does not use are listed once as warnings. A cohort named only by a
ClusterQueue or as a parent exists implicitly, with no quota of its own, as in Kueue.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import msgspec

from preemptd.events import ConfigError, QuantityError, parse_quantity

from .._kubernetes import Fields, Warnings, kubernetes_objects, name_or_none, object_name, shown, unique

__all__ = [
    "ClusterQueue",
    "Cohort",
    "FAIR_SHARING_ANNOTATION",
    "FairSharing",
    "FlavorQuotas",
    "KueueConfig",
    "Preemption",
    "Quota",
    "ResourceGroup",
    "parse_objects",
]

_API_GROUP = "kueue.x-k8s.io"
_CONFIG_GROUP = "config.kueue.x-k8s.io"
_VERSIONS = ("v1beta1", "v1beta2")
_STRATEGIES = (("LessThanOrEqualToFinalShare",), ("LessThanInitialShare",), ("LessThanOrEqualToFinalShare", "LessThanInitialShare"))
_INT32 = (-(2**31), 2**31 - 1)

WithinClusterQueue = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
ReclaimWithinCohort = Literal["Never", "LowerPriority", "Any"]
BorrowWithinCohort = Literal["Never", "LowerPriority"]


class Quota(msgspec.Struct, frozen=True):
    """One resource of one flavor: nominal quota, and the limits (None: no limit)."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


class FlavorQuotas(msgspec.Struct, frozen=True):
    flavor: str
    resources: dict[str, Quota]


class ResourceGroup(msgspec.Struct, frozen=True):
    """Resources assigned one flavor together, and the flavors in the order they are tried."""

    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


class Preemption(msgspec.Struct, frozen=True, kw_only=True):
    within_cluster_queue: WithinClusterQueue = "Never"
    reclaim_within_cohort: ReclaimWithinCohort = "Never"
    borrow_within_cohort: BorrowWithinCohort = "Never"
    max_priority_threshold: int | None = None


class ClusterQueue(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    cohort: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    preemption: Preemption = Preemption()
    when_can_borrow: Literal["MayStopSearch", "TryNextFlavor"] = "MayStopSearch"
    when_can_preempt: Literal["MayStopSearch", "TryNextFlavor"] = "TryNextFlavor"
    weight: float = 1.0
    stop_policy: Literal["None", "Hold", "HoldAndDrain"] = "None"
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = "BestEffortFIFO"


class Cohort(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    weight: float = 1.0
    implicit: bool = False  # named by a ClusterQueue or as a parent, never defined
    fair_sharing: bool = False  # preemptd's extension: fair sharing in this root cohort's tree


class FairSharing(msgspec.Struct, frozen=True, kw_only=True):
    enabled: bool = False
    strategies: tuple[str, ...] = _STRATEGIES[2]


class KueueConfig(msgspec.Struct, frozen=True, kw_only=True):
    flavors: tuple[str, ...] = ()
    cohorts: dict[str, Cohort] = {}
    cluster_queues: dict[str, ClusterQueue] = {}
    local_queues: dict[str, str] = {}  # namespace/name -> ClusterQueue
    priority_classes: dict[str, int] = {}
    fair_sharing: FairSharing = FairSharing()

    def fair_sharing_in(self, root: str) -> bool:
        """Preemption in the tree under `root` (a root cohort, or a ClusterQueue without one)
        uses fair sharing: Kueue's Configuration turns it on everywhere, preemptd's annotation
        on one root cohort."""
        cohort = self.cohorts.get(root)
        return self.fair_sharing.enabled or (cohort is not None and cohort.fair_sharing)


#: preemptd's extension: this annotation on a root Cohort, set to "true", turns fair sharing on
#: in its tree only (Kueue's Configuration turns it on for the whole cluster).
FAIR_SHARING_ANNOTATION = "preemptd.io/fair-sharing"


def parse_objects(document: Any) -> tuple[KueueConfig, tuple[str, ...]]:
    """The configuration the objects in `document` make, and warnings worth reporting once."""
    reader = _Reader()
    for position, item in enumerate(kubernetes_objects(document, "Kueue", _KINDS), 1):
        reader.read(item, position)
    return reader.config(), tuple(reader.warnings)


class _Reader:
    """Reads one object after another; `config()` checks what needs them all (references)."""

    def __init__(self) -> None:
        self.flavors: list[str] = []
        self.cohorts: dict[str, Cohort] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.local_queues: dict[str, str] = {}
        self.priority_classes: dict[str, int] = {}
        self.fair_sharing = FairSharing()
        self.warnings = Warnings()

    def read(self, item: Any, position: int) -> None:
        if not isinstance(item, dict):
            raise ConfigError(f"object {position}: expected a Kubernetes object (apiVersion, kind, metadata, spec), got {type(item).__name__}")
        kind = item.get("kind")
        name = "" if kind == "Configuration" else object_name(item, position)  # a file, often without metadata
        where = f"{kind} {name}".strip()
        group, _, version = str(item.get("apiVersion", "")).partition("/")
        expected = _CONFIG_GROUP if kind == "Configuration" else _API_GROUP
        if group != expected or version not in _VERSIONS:
            if group in (_API_GROUP, _CONFIG_GROUP) or kind in _READERS:
                raise ConfigError(f"{where}: apiVersion {item.get('apiVersion')!r} is not {expected}/v1beta2 or {expected}/v1beta1")
            self.warnings.ignore(f"{kind} {name} ({item.get('apiVersion')})")
            return
        read = _READERS.get(kind)
        if read is None:
            self.warnings.ignore(f"kind {kind}")
            return
        read(self, name, item, Fields(where, self.warnings.ignore))


    def config(self) -> KueueConfig:
        for owner in [*self.cluster_queues.values(), *self.cohorts.values()]:
            missing = sorted({f.flavor for g in owner.resource_groups for f in g.flavors} - set(self.flavors))
            if missing:
                kind = "ClusterQueue" if isinstance(owner, ClusterQueue) else "Cohort"
                self.warnings.append(f"{kind} {owner.name}: flavor {', '.join(missing)} is not a ResourceFlavor: as in Kueue (FlavorNotFound), that quota admits nothing until it is defined")
        for queue in self.cluster_queues.values():
            if queue.cohort and queue.cohort not in self.cohorts:
                self.cohorts[queue.cohort] = Cohort(name=queue.cohort, implicit=True)
        for cohort in list(self.cohorts.values()):
            if cohort.parent and cohort.parent not in self.cohorts:
                self.cohorts[cohort.parent] = Cohort(name=cohort.parent, implicit=True)
        for local, target in self.local_queues.items():
            if target not in self.cluster_queues:
                self.warnings.append(f"LocalQueue {local} points to ClusterQueue {target}, which is not defined: its workloads stay pending")
        for cycle in _cycles(self.cohorts):
            self.warnings.append(f"the cohorts {' -> '.join(cycle)} form a cycle: their ClusterQueues admit nothing until it is broken")
        return KueueConfig(
            flavors=tuple(self.flavors),
            cohorts=dict(sorted(self.cohorts.items())),
            cluster_queues=dict(sorted(self.cluster_queues.items())),
            local_queues=dict(sorted(self.local_queues.items())),
            priority_classes=dict(sorted(self.priority_classes.items())),
            fair_sharing=self.fair_sharing,
        )

    # -- one reader per kind --

    def resource_flavor(self, name: str, item: dict[str, Any], fields: Fields) -> None:
        fields.only(item.get("spec") or {}, "spec", set())  # node labels, taints, tolerations: nodes do not limit admission here
        self.flavors.append(unique(name, self.flavors, "ResourceFlavor"))

    def cohort(self, name: str, item: dict[str, Any], fields: Fields) -> None:
        spec = fields.only(item.get("spec") or {}, "spec", {"parentName", "parent", "resourceGroups", "fairSharing"})
        unique(name, self.cohorts, "Cohort")
        parent = name_or_none(spec.get("parentName", spec.get("parent")), f"{fields.where}: spec.parentName")
        self.cohorts[name] = Cohort(
            name=name,
            parent=parent,
            resource_groups=_resource_groups(spec.get("resourceGroups"), fields, has_cohort=parent is not None),
            weight=_weight(spec.get("fairSharing"), fields),
            fair_sharing=_fair_sharing_annotation(item, parent, fields),
        )

    def cluster_queue(self, name: str, item: dict[str, Any], fields: Fields) -> None:
        spec = fields.only(
            item.get("spec") or {},
            "spec",
            {"cohortName", "cohort", "resourceGroups", "preemption", "flavorFungibility", "fairSharing", "stopPolicy", "queueingStrategy"},
            ignored={"namespaceSelector", "admissionChecks", "admissionChecksStrategy", "admissionScope"},
        )
        unique(name, self.cluster_queues, "ClusterQueue")
        cohort = name_or_none(spec.get("cohortName", spec.get("cohort")), f"{fields.where}: spec.cohortName")
        fungibility = fields.only(spec.get("flavorFungibility") or {}, "spec.flavorFungibility", {"whenCanBorrow", "whenCanPreempt"})
        borrow_fungibility = {"Borrow": "MayStopSearch"}.get(fungibility.get("whenCanBorrow"), fungibility.get("whenCanBorrow"))  # v1beta1's names
        preempt_fungibility = {"Preempt": "MayStopSearch"}.get(fungibility.get("whenCanPreempt"), fungibility.get("whenCanPreempt"))
        self.cluster_queues[name] = ClusterQueue(
            name=name,
            cohort=cohort,
            resource_groups=_resource_groups(spec.get("resourceGroups"), fields, has_cohort=cohort is not None),
            preemption=_preemption(spec.get("preemption"), fields),
            when_can_borrow=fields.choice(borrow_fungibility, "spec.flavorFungibility.whenCanBorrow", ("MayStopSearch", "TryNextFlavor")),
            when_can_preempt=fields.choice(preempt_fungibility, "spec.flavorFungibility.whenCanPreempt", ("TryNextFlavor", "MayStopSearch")),
            weight=_weight(spec.get("fairSharing"), fields),
            stop_policy=fields.choice(spec.get("stopPolicy"), "spec.stopPolicy", ("None", "Hold", "HoldAndDrain")),
            queueing_strategy=fields.choice(spec.get("queueingStrategy"), "spec.queueingStrategy", ("BestEffortFIFO", "StrictFIFO")),
        )

    def local_queue(self, name: str, item: dict[str, Any], fields: Fields) -> None:
        spec = fields.only(item.get("spec") or {}, "spec", {"clusterQueue"}, ignored={"stopPolicy", "fairSharing"})
        namespace = (item.get("metadata") or {}).get("namespace") or "default"
        target = name_or_none(spec.get("clusterQueue"), f"{fields.where}: spec.clusterQueue")
        if target is None:
            raise ConfigError(f"{fields.where}: spec.clusterQueue is required")
        key = f"{namespace}/{name}"
        unique(key, self.local_queues, "LocalQueue")
        self.local_queues[key] = target

    def workload_priority_class(self, name: str, item: dict[str, Any], fields: Fields) -> None:
        fields.only(item, "", {"apiVersion", "kind", "metadata", "value"}, ignored={"description"})
        value = item.get("value")
        if not isinstance(value, int) or isinstance(value, bool) or not _INT32[0] <= value <= _INT32[1]:
            raise ConfigError(f"{fields.where}: value must be a 32-bit integer, got {value!r}")
        unique(name, self.priority_classes, "WorkloadPriorityClass")
        self.priority_classes[name] = value

    def configuration(self, name: str, item: dict[str, Any], fields: Fields) -> None:
        block = item.get("fairSharing")
        for key in item:
            if key not in {"apiVersion", "kind", "metadata", "fairSharing"}:
                fields.ignore(key)
        if block is None:
            return
        version = str(item.get("apiVersion")).rpartition("/")[2]
        block = fields.only(block, "fairSharing", {"enable", "preemptionStrategies"} if version == "v1beta1" else {"preemptionStrategies"})
        strategies = block.get("preemptionStrategies")
        if strategies is None and version == "v1beta2":
            raise ConfigError(f"{fields.where}: fairSharing.preemptionStrategies is required")
        strategies = tuple(strategies) if strategies is not None else _STRATEGIES[2]
        if strategies not in _STRATEGIES:
            valid = "; ".join(f"[{', '.join(s)}]" for s in _STRATEGIES)
            raise ConfigError(f"{fields.where}: fairSharing.preemptionStrategies {list(strategies)} is not one of {valid}")
        enabled = bool(block.get("enable", False)) if version == "v1beta1" else True
        self.fair_sharing = FairSharing(enabled=enabled, strategies=strategies)


_KINDS = "Kueue objects (ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass, Configuration)"

_READERS = {
    "ResourceFlavor": _Reader.resource_flavor,
    "Cohort": _Reader.cohort,
    "ClusterQueue": _Reader.cluster_queue,
    "LocalQueue": _Reader.local_queue,
    "WorkloadPriorityClass": _Reader.workload_priority_class,
    "Configuration": _Reader.configuration,
}


def _fair_sharing_annotation(item: dict[str, Any], parent: str | None, fields: Fields) -> bool:
    annotations = (item.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(FAIR_SHARING_ANNOTATION) if isinstance(annotations, dict) else None
    if value is None:
        return False
    if value not in ("true", "false"):
        raise ConfigError(f"{fields.where}: annotation {FAIR_SHARING_ANNOTATION} must be \"true\" or \"false\", got {shown(value)}")
    if value == "true" and parent is not None:
        raise ConfigError(f"{fields.where}: annotation {FAIR_SHARING_ANNOTATION} turns fair sharing on for a whole cohort tree: put it on the root cohort, not on one with parent {parent}")
    return value == "true"


def _weight(block: Any, fields: Fields) -> float:
    block = fields.only(block or {}, "spec.fairSharing", {"weight"})
    if "weight" not in block:
        return 1.0
    value = block["weight"]
    try:  # a Kubernetes quantity: 2, "0.5", "1e-9", "500m"
        weight = float(Decimal(str(value))) if not isinstance(value, bool) else math.nan
    except InvalidOperation:
        try:
            weight = parse_quantity("cpu", value) / 1000
        except QuantityError as exc:
            raise ConfigError(f"{fields.where}: spec.fairSharing.weight: {exc}") from None
    if not 0 <= weight < math.inf:
        raise ConfigError(f"{fields.where}: spec.fairSharing.weight must be a number of at least 0, got {value!r}")
    if 0 < weight < 1e-9:
        raise ConfigError(f"{fields.where}: spec.fairSharing.weight must be 0 or above 1e-9")
    return weight


def _preemption(block: Any, fields: Fields) -> Preemption:
    block = fields.only(block or {}, "spec.preemption", {"withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"})
    borrow = fields.only(block.get("borrowWithinCohort") or {}, "spec.preemption.borrowWithinCohort", {"policy", "maxPriorityThreshold"})
    threshold = borrow.get("maxPriorityThreshold")
    if threshold is not None and (not isinstance(threshold, int) or isinstance(threshold, bool) or not _INT32[0] <= threshold <= _INT32[1]):
        raise ConfigError(f"{fields.where}: spec.preemption.borrowWithinCohort.maxPriorityThreshold must be a 32-bit integer, got {threshold!r}")
    preemption = Preemption(
        within_cluster_queue=fields.choice(block.get("withinClusterQueue"), "spec.preemption.withinClusterQueue", ("Never", "LowerPriority", "LowerOrNewerEqualPriority")),
        reclaim_within_cohort=fields.choice(block.get("reclaimWithinCohort"), "spec.preemption.reclaimWithinCohort", ("Never", "LowerPriority", "Any")),
        borrow_within_cohort=fields.choice(borrow.get("policy"), "spec.preemption.borrowWithinCohort.policy", ("Never", "LowerPriority")),
        max_priority_threshold=threshold,
    )
    if preemption.reclaim_within_cohort == "Never" and preemption.borrow_within_cohort != "Never":
        raise ConfigError(f"{fields.where}: spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    return preemption


def _resource_groups(groups: Any, fields: Fields, *, has_cohort: bool) -> tuple[ResourceGroup, ...]:
    if groups is None:
        return ()
    if not isinstance(groups, list):
        raise ConfigError(f"{fields.where}: spec.resourceGroups must be a list")
    parsed = tuple(_resource_group(group, index, fields, has_cohort) for index, group in enumerate(groups))
    _check_disjoint(parsed, fields.where)
    return parsed


def _resource_group(group: Any, index: int, fields: Fields, has_cohort: bool) -> ResourceGroup:
    path = f"spec.resourceGroups[{index}]"
    group = fields.only(group, path, {"coveredResources", "flavors"})
    covered = group.get("coveredResources") or []
    if not isinstance(covered, list) or not all(isinstance(name, str) and name for name in covered):
        raise ConfigError(f"{fields.where}: {path}.coveredResources must be a list of resource names")
    covered = tuple(covered)
    flavors = []
    for number, flavor in enumerate(group.get("flavors") or ()):
        flavor = fields.only(flavor, f"{path}.flavors[{number}]", {"name", "resources"})
        resources = flavor.get("resources") or []
        names = tuple(r.get("name") if isinstance(r, dict) else None for r in resources)
        if names != covered:
            raise ConfigError(f"{fields.where}: {path}.flavors[{number}].resources must list the coveredResources {list(covered)} in that order, got {list(names)}")
        quotas = {r["name"]: _quota(r, f"{path}.flavors[{number}].resources[{i}]", fields, has_cohort) for i, r in enumerate(resources)}
        name = name_or_none(flavor.get("name"), f"{fields.where}: {path}.flavors[{number}].name")
        if name is None:
            raise ConfigError(f"{fields.where}: {path}.flavors[{number}].name is required")
        flavors.append(FlavorQuotas(name, quotas))
    return ResourceGroup(covered, tuple(flavors))


def _quota(resource: dict[str, Any], path: str, fields: Fields, has_cohort: bool) -> Quota:
    fields.only(resource, path, {"name", "nominalQuota", "borrowingLimit", "lendingLimit"})
    name = resource["name"]

    def amount(key: str) -> int | None:
        if resource.get(key) is None:
            return None
        try:
            return parse_quantity(name, resource[key])
        except QuantityError as exc:
            raise ConfigError(f"{fields.where}: {path}.{key}: {exc}") from None

    nominal, borrowing, lending = amount("nominalQuota") or 0, amount("borrowingLimit"), amount("lendingLimit")
    for key, value in (("borrowingLimit", borrowing), ("lendingLimit", lending)):
        if value is not None and not has_cohort:
            missing = "parent" if fields.where.startswith("Cohort") else "cohort"
            raise ConfigError(f"{fields.where}: {path}.{key}: must be nil when {missing} is empty")
    if lending is not None and lending > nominal:
        raise ConfigError(f"{fields.where}: {path}.lendingLimit: must be less than or equal to the nominalQuota")
    return Quota(nominal, borrowing, lending)


def _check_disjoint(groups: tuple[ResourceGroup, ...], where: str) -> None:
    """A resource, and a flavor, belong to one resource group only."""
    for what, names in (("resource", [r for g in groups for r in g.covered]), ("flavor", [f.flavor for g in groups for f in g.flavors])):
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ConfigError(f"{where}: {what} {repeated[0]} is in more than one resource group")


def _cycles(cohorts: dict[str, Cohort]) -> Iterator[list[str]]:
    """Each cycle in the cohort tree once, from its alphabetically first member."""
    reported: set[str] = set()
    for start in sorted(cohorts):
        path, node = [], start
        while node is not None and node not in path and node not in reported:
            path.append(node)
            node = cohorts[node].parent if node in cohorts else None
        if node is not None and node in path:
            cycle = path[path.index(node) :]
            reported.update(cycle)
            yield [*cycle, node]
        reported.update(path)
