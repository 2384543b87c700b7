"""Kueue's objects, as a user pastes them from a cluster, read into one `KueueConfig`.

A configuration is a list of Kubernetes objects (or `kind: List`s of them, or one object):
ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass (`kueue.x-k8s.io`, in
`v1beta2`, the only version Kueue serves since v0.20, or `v1beta1`, still on older clusters;
Cohorts also in `v1alpha1`, Kueue up to v0.12; a list may mix them), PriorityClass, and Kueue's
Configuration (`config.kueue.x-k8s.io`), bare or in Kueue's manager ConfigMap. Each version is
read with its own field names (ClusterQueue `spec.cohortName` in v1beta2, `spec.cohort` before;
Cohort `spec.parentName`, `spec.parent` in v1alpha1; Configuration `fairSharing.enable` in
v1beta1 only).

Fields are read as strictly as Kueue's API server reads them (see `.._kubernetes`); what
Kueue's validation refuses is refused with Kueue's reason (`ConfigError`); fields and kinds
Kueue has that preemptd does not model are one note each, saying what that means for
decisions. A cohort named only by a ClusterQueue or as a parent exists implicitly, with no
quota of its own, as in Kueue.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import msgspec

from preemptd.events import ConfigError, QuantityError, closest, parse_quantity
from preemptd.projections import ParsedConfig, PartitionState, PriorityClass, QueueConfig, Words

from .._explain import counted
from .._kubernetes import (
    ANY,
    CONFIG_MAP,
    PRIORITY_KINDS,
    QUOTA_DELAY_ANNOTATION,
    VALUE,
    Gone,
    Kind,
    ObjectReader,
    Shape,
    Unmodelled,
    choice,
    duration_annotation,
    integer,
    name_or_none,
    object_name,
    object_shape,
    shown,
    unique,
)

__all__ = [
    "config_of",
    "FAIR_SHARING_ANNOTATION",
    "QUOTA_DELAY_ANNOTATION",
    "ROOT",
    "WORDS",
    "claims",
    "ClusterQueue",
    "Cohort",
    "describe",
    "FairSharing",
    "FlavorQuotas",
    "KueueConfig",
    "parse_config",
    "parse_objects",
    "Preemption",
    "Quota",
    "ResourceGroup",
]

_API_GROUP = "kueue.x-k8s.io"
_CONFIG_GROUP = "config.kueue.x-k8s.io"
_VERSIONS = ("v1beta2", "v1beta1")
_STRATEGIES = (("LessThanOrEqualToFinalShare",), ("LessThanInitialShare",), ("LessThanOrEqualToFinalShare", "LessThanInitialShare"))

WithinClusterQueue = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
ReclaimWithinCohort = Literal["Never", "LowerPriority", "Any"]
BorrowWithinCohort = Literal["Never", "LowerPriority"]
Fungibility = Literal["MayStopSearch", "TryNextFlavor"]


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
    when_can_borrow: Fungibility = "MayStopSearch"
    when_can_preempt: Fungibility = "TryNextFlavor"
    weight: float = 1.0
    stop_policy: Literal["None", "Hold", "HoldAndDrain"] = "None"
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = "BestEffortFIFO"
    quota_preemption_delay: int = 0  # preemptd's extension: ms after a lowered quota before it is enforced; 0: never


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
    priority_classes: dict[str, PriorityClass] = {}
    fair_sharing: FairSharing = FairSharing()

    def fair_sharing_in(self, root: str) -> bool:
        """Preemption in the tree under `root` (a root cohort, or a ClusterQueue without one)
        uses fair sharing: Kueue's Configuration turns it on everywhere, preemptd's annotation
        on one root cohort."""
        cohort = self.cohorts.get(root)
        return self.fair_sharing.enabled or (cohort is not None and cohort.fair_sharing)


def config_of(p: PartitionState) -> KueueConfig:
    """The kueue model's settings of `p` (`ParsedConfig.settings`), typed."""
    settings = p.settings
    assert isinstance(settings, KueueConfig), f"partition {p.name} holds no kueue settings: {type(settings).__name__}"
    return settings


#: preemptd's extension: this annotation on a root Cohort, set to "true", turns fair sharing on
#: in its tree only (Kueue's Configuration turns it on for the whole cluster).
FAIR_SHARING_ANNOTATION = "preemptd.io/fair-sharing"


def parse_objects(document: Any) -> tuple[KueueConfig, tuple[str, ...]]:
    """The configuration the objects in `document` make, and notes worth reporting once."""
    reader = _Reader()
    reader.read_all(document)
    return reader.config(), tuple(reader.notes)


class _Reader(ObjectReader):
    """Reads one object after another; `config()` checks what needs them all (references)."""

    model = "Kueue"
    annotations = frozenset({FAIR_SHARING_ANNOTATION, QUOTA_DELAY_ANNOTATION})
    expected = "Kueue objects (ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass, PriorityClass, Configuration or its ConfigMap)"
    config_file = "controller_manager_config.yaml"  # in Kueue's manager ConfigMap
    config_file_is = "Kueue's Configuration"

    def __init__(self) -> None:
        super().__init__()
        self.flavors: dict[str, None] = {}  # an ordered set
        self.cohorts: dict[str, Cohort] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.local_queues: dict[str, str] = {}
        self.fair_sharing: FairSharing | None = None

    def name_of(self, kind: str, item: dict[str, Any], position: int) -> str:
        return "" if kind == "Configuration" else object_name(item, position)  # a file, often without metadata

    def config(self) -> KueueConfig:
        owners: list[ClusterQueue | Cohort] = [*self.cluster_queues.values(), *self.cohorts.values()]
        for owner in owners:
            missing = sorted({f.flavor for g in owner.resource_groups for f in g.flavors} - set(self.flavors))
            if missing:
                kind = "ClusterQueue" if isinstance(owner, ClusterQueue) else "Cohort"
                self.notes.add(
                    f"{kind} {owner.name}: flavor {', '.join(missing)} is not a ResourceFlavor: as in Kueue (FlavorNotFound), that quota admits "
                    "nothing until it is defined"
                )
        for queue in self.cluster_queues.values():
            if queue.cohort and queue.cohort not in self.cohorts:
                self.cohorts[queue.cohort] = Cohort(name=queue.cohort, implicit=True)
        for cohort in list(self.cohorts.values()):
            if cohort.parent and cohort.parent not in self.cohorts:
                self.cohorts[cohort.parent] = Cohort(name=cohort.parent, implicit=True)
        for local, target in self.local_queues.items():
            if target not in self.cluster_queues:
                near = closest(target, self.cluster_queues)
                hint = f" (did you mean {near}?)" if near else ""
                self.notes.add(f"LocalQueue {local} points to ClusterQueue {target}{hint}, which is not defined: its workloads stay pending")
        for cycle in _cycles(self.cohorts):
            self.notes.add(f"the cohorts {' -> '.join(cycle)} form a cycle: their ClusterQueues admit nothing until it is broken")
        return KueueConfig(
            flavors=tuple(self.flavors),
            cohorts=dict(sorted(self.cohorts.items())),
            cluster_queues=dict(sorted(self.cluster_queues.items())),
            local_queues=dict(sorted(self.local_queues.items())),
            priority_classes=dict(sorted(self.priority_classes.items())),
            fair_sharing=self.fair_sharing or FairSharing(),
        )

    # -- one reader per kind --

    def resource_flavor(self, name: str, item: dict[str, Any], where: str) -> None:
        self.flavors[unique(name, self.flavors, "ResourceFlavor")] = None

    def cohort(self, name: str, item: dict[str, Any], where: str) -> None:
        spec = item.get("spec") or {}
        unique(name, self.cohorts, "Cohort")
        parent = name_or_none(spec.get("parentName", spec.get("parent")), f"{where}: spec.parentName")
        self.cohorts[name] = Cohort(
            name=name,
            parent=parent,
            resource_groups=_resource_groups(spec.get("resourceGroups"), where, has_cohort=parent is not None),
            weight=_weight(spec.get("fairSharing"), where),
            fair_sharing=_fair_sharing_annotation(item, parent, where),
        )

    def cluster_queue(self, name: str, item: dict[str, Any], where: str) -> None:
        spec = item.get("spec") or {}
        unique(name, self.cluster_queues, "ClusterQueue")
        cohort = name_or_none(spec.get("cohortName", spec.get("cohort")), f"{where}: spec.cohortName")
        fungibility = spec.get("flavorFungibility") or {}
        v1beta1 = item["apiVersion"].endswith("/v1beta1")
        self.cluster_queues[name] = ClusterQueue(
            name=name,
            cohort=cohort,
            resource_groups=_resource_groups(spec.get("resourceGroups"), where, has_cohort=cohort is not None),
            preemption=_preemption(spec.get("preemption"), where),
            when_can_borrow=_fungibility(fungibility.get("whenCanBorrow"), where, "whenCanBorrow", "Borrow", "MayStopSearch", v1beta1),
            when_can_preempt=_fungibility(fungibility.get("whenCanPreempt"), where, "whenCanPreempt", "Preempt", "TryNextFlavor", v1beta1),
            weight=_weight(spec.get("fairSharing"), where),
            stop_policy=choice(spec.get("stopPolicy"), where, "spec.stopPolicy", ("None", "Hold", "HoldAndDrain")),
            queueing_strategy=choice(spec.get("queueingStrategy"), where, "spec.queueingStrategy", ("BestEffortFIFO", "StrictFIFO")),
            quota_preemption_delay=duration_annotation(item, QUOTA_DELAY_ANNOTATION, where),
        )

    def local_queue(self, name: str, item: dict[str, Any], where: str) -> None:
        spec = item.get("spec") or {}
        namespace = name_or_none((item.get("metadata") or {}).get("namespace"), f"{where}: metadata.namespace") or "default"
        target = name_or_none(spec.get("clusterQueue"), f"{where}: spec.clusterQueue")
        if target is None:
            raise ConfigError(f"{where}: spec.clusterQueue is required")
        key = f"{namespace}/{name}"
        unique(key, self.local_queues, "LocalQueue")
        self.local_queues[key] = target

    def configuration(self, name: str, item: dict[str, Any], where: str) -> None:
        if self.fair_sharing is not None:
            raise ConfigError(f"{where}: a second Kueue Configuration; give one")
        block = item.get("fairSharing")
        if block is None:
            self.fair_sharing = FairSharing()
            return
        version = str(item.get("apiVersion")).rpartition("/")[2]
        strategies = block.get("preemptionStrategies")
        if strategies is None and version == "v1beta2":
            raise ConfigError(f"{where}: fairSharing.preemptionStrategies is required")
        strategies = tuple(strategies) if isinstance(strategies, list) else _STRATEGIES[2] if strategies is None else strategies
        if strategies not in _STRATEGIES:
            valid = "; ".join(f"[{', '.join(s)}]" for s in _STRATEGIES)
            raise ConfigError(f"{where}: fairSharing.preemptionStrategies {shown(strategies)} is not one of {valid}")
        enable = block.get("enable", False)
        if not isinstance(enable, bool):
            raise ConfigError(f"{where}: fairSharing.enable must be true or false, got {shown(enable)}")
        self.fair_sharing = FairSharing(enabled=enable if version == "v1beta1" else True, strategies=strategies)

    def read_config_file(self, loaded: Any, where: str) -> None:
        self.read(loaded, 1, where=where)


# -- the kinds, in each API version ------------------------------------------------------------

_QUOTA = {"name": VALUE, "nominalQuota": VALUE, "borrowingLimit": VALUE, "lendingLimit": VALUE}
_RESOURCE_GROUPS = [{"coveredResources": VALUE, "flavors": [{"name": VALUE, "resources": [_QUOTA]}]}]
_FAIR_SHARING = {"weight": VALUE}
_PREEMPTION = {"withinClusterQueue": VALUE, "reclaimWithinCohort": VALUE, "borrowWithinCohort": {"policy": VALUE, "maxPriorityThreshold": VALUE}}
_ADMISSION_CHECKS = Unmodelled("admission does not wait for admission checks: a workload that fits is admitted at once", neutral=([], {}))


def _cluster_queue(cohort: str, renamed: str, version: str) -> Shape:
    return object_shape(
        spec={
            cohort: VALUE,
            renamed: Gone(f"{version} names it {cohort}"),
            "resourceGroups": _RESOURCE_GROUPS,
            "preemption": _PREEMPTION,
            "flavorFungibility": {"whenCanBorrow": VALUE, "whenCanPreempt": VALUE},
            "fairSharing": _FAIR_SHARING,
            "stopPolicy": VALUE,
            "queueingStrategy": VALUE,
            "namespaceSelector": Unmodelled("workloads are admitted whatever their namespace (as with namespaceSelector: {})", neutral=({},)),
            "admissionChecks": _ADMISSION_CHECKS,
            "admissionChecksStrategy": _ADMISSION_CHECKS,
            "admissionScope": Unmodelled("LocalQueue usage does not order workloads (admission fair sharing): priority and creation do"),
        }
    )


def _cohort(parent: str, renamed: str, version: str) -> Shape:
    return object_shape(spec={parent: VALUE, renamed: Gone(f"{version} names it {parent}"), "resourceGroups": _RESOURCE_GROUPS, "fairSharing": _FAIR_SHARING})


_RESOURCE_FLAVOR = object_shape(
    spec={
        "nodeLabels": ANY,  # for the shim's scheduler: admission counts quota, as Kueue's does
        "nodeTaints": ANY,
        "tolerations": ANY,
        "topologyName": Unmodelled("topology-aware scheduling is not modelled: admission counts quota only"),
    }
)
_LOCAL_QUEUE = object_shape(
    spec={
        "clusterQueue": VALUE,
        "stopPolicy": Unmodelled("a held LocalQueue's workloads are still admitted", neutral=("None",)),
        "fairSharing": Unmodelled("LocalQueue usage does not order workloads (admission fair sharing)"),
    }
)
_NO_EFFECT = (
    "namespace", "manageJobsWithoutQueueName", "managedJobsNamespaceSelector", "internalCertManagement", "certManagement",
    "clientConnection", "integrations", "queueVisibility", "webhook", "leaderElection", "metrics", "health", "pprofBindAddress",
    "controller", "objectRetentionPolicies", "metadata",
)  # fmt: skip  # what a shim and the cluster do: no bearing on admission or preemption


def _configuration(fair_sharing: Shape) -> Shape:
    return {
        "apiVersion": VALUE,
        "kind": VALUE,
        **dict.fromkeys(_NO_EFFECT, ANY),
        "fairSharing": fair_sharing,
        "waitForPodsReady": Unmodelled("workloads are not evicted when their pods are not ready in time", neutral=({"enable": False},)),
        "admissionFairSharing": Unmodelled("LocalQueue usage does not order workloads (admission fair sharing): priority and creation do"),
        "resources": Unmodelled("resource transformations and excluded resources are not applied: a workload counts what its tasks ask"),
        "featureGates": Unmodelled("feature gates are not read: preemptd follows Kueue's defaults (see scheduling/kueue/README.md)", neutral=({},)),
        "multiKueue": Unmodelled("workloads are not dispatched to worker clusters"),
    }


_RUNTIME = "a {0} is what a shim publishes as events (app.submitted, and its pods as task.submitted or task.bound), not configuration"

_KINDS = {
    **PRIORITY_KINDS,
    "ResourceFlavor": Kind(_API_GROUP, {"v1beta2": _RESOURCE_FLAVOR, "v1beta1": _RESOURCE_FLAVOR}, _Reader.resource_flavor),
    "Cohort": Kind(
        _API_GROUP,
        {
            "v1beta2": _cohort("parentName", "parent", "v1beta2"),
            "v1beta1": _cohort("parentName", "parent", "v1beta1"),
            "v1alpha1": _cohort("parent", "parentName", "v1alpha1"),
        },
        _Reader.cohort,
    ),
    "ClusterQueue": Kind(
        _API_GROUP,
        {"v1beta2": _cluster_queue("cohortName", "cohort", "v1beta2"), "v1beta1": _cluster_queue("cohort", "cohortName", "v1beta1")},
        _Reader.cluster_queue,
    ),
    "LocalQueue": Kind(_API_GROUP, {"v1beta2": _LOCAL_QUEUE, "v1beta1": _LOCAL_QUEUE}, _Reader.local_queue),
    "Configuration": Kind(
        _CONFIG_GROUP,
        {
            "v1beta2": _configuration(
                {
                    "preemptionStrategies": VALUE,
                    "enable": Gone("v1beta2 has no enable: the fairSharing block itself turns fair sharing on (leave it out to keep it off)"),
                }
            ),
            "v1beta1": _configuration({"enable": VALUE, "preemptionStrategies": VALUE}),
        },
        _Reader.configuration,
    ),
    "ConfigMap": CONFIG_MAP,
    "AdmissionCheck": Kind(_API_GROUP, dict.fromkeys(_VERSIONS, object_shape(spec=ANY)), meaning="admission does not wait for admission checks"),
    "ProvisioningRequestConfig": Kind(
        _API_GROUP, dict.fromkeys(_VERSIONS, object_shape(spec=ANY)), meaning="admission does not wait for provisioning requests"
    ),
    "MultiKueueConfig": Kind(
        _API_GROUP, dict.fromkeys(("v1beta2", "v1beta1", "v1alpha1"), object_shape(spec=ANY)), meaning="workloads are not dispatched to worker clusters"
    ),
    "MultiKueueCluster": Kind(
        _API_GROUP, dict.fromkeys(("v1beta2", "v1beta1", "v1alpha1"), object_shape(spec=ANY)), meaning="workloads are not dispatched to worker clusters"
    ),
    "Topology": Kind(
        _API_GROUP, dict.fromkeys(("v1beta2", "v1beta1", "v1alpha1"), object_shape(spec=ANY)), meaning="topology-aware scheduling is not modelled"
    ),
    "Workload": Kind(_API_GROUP, dict.fromkeys(_VERSIONS, object_shape(spec=ANY)), refusal=_RUNTIME.format("Workload")),
}
_Reader.kinds = _KINDS
claims = _Reader.claims


def _fungibility(value: Any, where: str, field: str, old: str, default: Fungibility, v1beta1: bool) -> Fungibility:
    """A flavorFungibility value; v1beta1 also says `Borrow` / `Preempt` for MayStopSearch."""
    allowed = (default, *({"MayStopSearch", "TryNextFlavor"} - {default}))
    if v1beta1 and value == old:
        return "MayStopSearch"
    chosen: Fungibility = choice(value, where, f"spec.flavorFungibility.{field}", (*allowed, old) if v1beta1 else allowed)  # `old` was read above
    return chosen


def _annotation(item: dict[str, Any], name: str) -> Any:
    annotations = (item.get("metadata") or {}).get("annotations") or {}
    return annotations.get(name) if isinstance(annotations, dict) else None


def _fair_sharing_annotation(item: dict[str, Any], parent: str | None, where: str) -> bool:
    value = _annotation(item, FAIR_SHARING_ANNOTATION)
    if value is None:
        return False
    if not isinstance(value, str) or value not in ("true", "false"):
        raise ConfigError(f'{where}: annotation {FAIR_SHARING_ANNOTATION} must be "true" or "false", got {shown(value)}')
    if value == "true" and parent is not None:
        raise ConfigError(
            f"{where}: annotation {FAIR_SHARING_ANNOTATION} turns fair sharing on for a whole cohort tree: put it on the root cohort, not on one with "
            f"parent {parent}"
        )
    return value == "true"


def _weight(block: Any, where: str) -> float:
    if block is None or block.get("weight") is None:
        return 1.0
    value = block["weight"]
    try:  # a Kubernetes quantity: 2, "0.5", "1e-9", "500m"
        weight = float(Decimal(str(value))) if not isinstance(value, bool) else math.nan
    except (InvalidOperation, ArithmeticError):
        try:
            weight = parse_quantity("cpu", value) / 1000
        except QuantityError as exc:
            raise ConfigError(f"{where}: spec.fairSharing.weight: {exc}") from None
    if not 0 <= weight < math.inf:
        raise ConfigError(f"{where}: spec.fairSharing.weight must be a number of at least 0, got {shown(value)}")
    if 0 < weight < 1e-9:
        raise ConfigError(f"{where}: spec.fairSharing.weight must be 0 or above 1e-9")
    return weight


def _preemption(block: Any, where: str) -> Preemption:
    block = block or {}
    borrow = block.get("borrowWithinCohort") or {}
    threshold = borrow.get("maxPriorityThreshold")
    preemption = Preemption(
        within_cluster_queue=choice(
            block.get("withinClusterQueue"), where, "spec.preemption.withinClusterQueue", ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
        ),
        reclaim_within_cohort=choice(block.get("reclaimWithinCohort"), where, "spec.preemption.reclaimWithinCohort", ("Never", "LowerPriority", "Any")),
        borrow_within_cohort=choice(borrow.get("policy"), where, "spec.preemption.borrowWithinCohort.policy", ("Never", "LowerPriority")),
        max_priority_threshold=None if threshold is None else integer(threshold, f"{where}: spec.preemption.borrowWithinCohort.maxPriorityThreshold"),
    )
    if preemption.reclaim_within_cohort == "Never" and preemption.borrow_within_cohort != "Never":
        raise ConfigError(f"{where}: spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    return preemption


def _resource_groups(groups: Any, where: str, *, has_cohort: bool) -> tuple[ResourceGroup, ...]:
    if groups is None:
        return ()
    parsed = tuple(_resource_group(group, index, where, has_cohort) for index, group in enumerate(groups))
    _check_disjoint(parsed, where)
    return parsed


def _resource_group(group: dict[str, Any], index: int, where: str, has_cohort: bool) -> ResourceGroup:
    path = f"spec.resourceGroups[{index}]"
    covered = group.get("coveredResources") or []
    if not isinstance(covered, list) or not all(isinstance(name, str) and name for name in covered):
        raise ConfigError(f"{where}: {path}.coveredResources must be a list of resource names")
    covered = tuple(covered)
    twice = sorted(name for name, times in Counter(covered).items() if times > 1)
    if twice:
        raise ConfigError(f"{where}: {path}.coveredResources lists {twice[0]} twice")
    flavors = []
    for number, flavor in enumerate(group.get("flavors") or ()):
        resources = flavor.get("resources") or []
        names = tuple(r.get("name") for r in resources)
        if names != covered:
            raise ConfigError(f"{where}: {path}.flavors[{number}].resources must list the coveredResources {list(covered)} in that order, got {list(names)}")
        quotas = {r["name"]: _quota(r, f"{path}.flavors[{number}].resources[{i}]", where, has_cohort) for i, r in enumerate(resources)}
        name = name_or_none(flavor.get("name"), f"{where}: {path}.flavors[{number}].name")
        if name is None:
            raise ConfigError(f"{where}: {path}.flavors[{number}].name is required")
        flavors.append(FlavorQuotas(name, quotas))
    return ResourceGroup(covered, tuple(flavors))


def _quota(resource: dict[str, Any], path: str, where: str, has_cohort: bool) -> Quota:
    name = resource["name"]

    def amount(key: str) -> int | None:
        if resource.get(key) is None:
            return None
        try:
            return parse_quantity(name, resource[key])
        except QuantityError as exc:
            raise ConfigError(f"{where}: {path}.{key}: {exc}") from None

    nominal, borrowing, lending = amount("nominalQuota"), amount("borrowingLimit"), amount("lendingLimit")
    if nominal is None:
        raise ConfigError(f"{where}: {path}.nominalQuota is required (the quota of {name} in this flavor)")
    for key, value in (("borrowingLimit", borrowing), ("lendingLimit", lending)):
        if value is not None and not has_cohort:
            missing = "parent" if where.startswith("Cohort") else "cohort"
            raise ConfigError(f"{where}: {path}.{key}: must be nil when {missing} is empty")
    if lending is not None and lending > nominal:
        raise ConfigError(f"{where}: {path}.lendingLimit: must be less than or equal to the nominalQuota")
    return Quota(nominal, borrowing, lending)


def _check_disjoint(groups: tuple[ResourceGroup, ...], where: str) -> None:
    """A resource, and a flavor, belong to one resource group only."""
    for what, names in (("resource", [r for g in groups for r in g.covered]), ("flavor", [f.flavor for g in groups for f in g.flavors])):
        repeated = sorted(name for name, times in Counter(names).items() if times > 1)
        if repeated:
            raise ConfigError(f"{where}: {what} {repeated[0]} is in more than one resource group")


def _cycles(cohorts: dict[str, Cohort]) -> Iterator[list[str]]:
    """Each cycle in the cohort tree once, from its alphabetically first member."""
    reported: set[str] = set()
    for start in sorted(cohorts):
        path: list[str] = []
        node: str | None = start
        while node is not None and node not in path and node not in reported:
            path.append(node)
            node = cohorts[node].parent if node in cohorts else None
        if node is not None and node in path:
            cycle = path[path.index(node) :]
            reported.update(cycle)
            yield [*cycle, node]
        reported.update(path)


#: The queue tree's root: every ClusterQueue is a leaf under it (cohorts live in the quota tree).
ROOT = "(cluster)"


def parse_config(document: Any, partition: str) -> ParsedConfig:
    """Kueue's objects (`{}`: none) as the partition's configuration: one leaf queue per
    ClusterQueue, LocalQueues (`namespace/name`) as their aliases, WorkloadPriorityClasses as
    priority classes."""
    config, warnings = parse_objects([] if document == {} else document)
    leaves = tuple(QueueConfig(name=name, path=name) for name in config.cluster_queues)
    return ParsedConfig(
        root=QueueConfig(name=ROOT, path=ROOT, children=leaves, is_parent=True),
        settings=config,
        warnings=warnings,
        aliases={local: queue for local, queue in config.local_queues.items() if queue in config.cluster_queues},
        priority_classes=config.priority_classes,
        words=WORDS,
    )


#: Kueue's words for its things, in the fold's refusals.
WORDS = Words(
    queue="ClusterQueue",
    queues="ClusterQueues",
    alias="LocalQueue",
    application="workload",
    task="pod",
    priority_class="WorkloadPriorityClass",
    define_class="add a WorkloadPriorityClass (or PriorityClass) to the configuration, or publish priorityclass.upserted",
    limit="nominal quota",
)


def describe(partition: PartitionState) -> str:
    """The quota tree's size, fair sharing or classic preemption, and which queues may preempt."""
    config = config_of(partition)
    cohorts = [c for c in config.cohorts.values() if not c.implicit or any(q.cohort == c.name for q in config.cluster_queues.values())]
    line = (
        f"kueue: {counted(len(config.cluster_queues), 'ClusterQueue')} in {counted(len(cohorts), 'cohort')}, "
        f"{counted(len(config.local_queues), 'LocalQueue')}, "
        f"{counted(len(config.priority_classes), 'priority class', 'priority classes')}; "
    )
    if config.fair_sharing.enabled:
        line += f"fair sharing on ({', '.join(config.fair_sharing.strategies)})"
    else:
        trees = [name for name, cohort in config.cohorts.items() if cohort.fair_sharing]
        line += (
            f"fair sharing on in the cohort trees of {', '.join(trees)} (preemptd's annotation; {', '.join(config.fair_sharing.strategies)}), classic elsewhere"
            if trees
            else "classic preemption (fair sharing off)"
        )
    enforced = sum(1 for queue in config.cluster_queues.values() if queue.quota_preemption_delay > 0)
    if enforced:
        line += f"; lowered quotas enforced after a delay in {counted(enforced, 'ClusterQueue')} (preemptd's annotation {QUOTA_DELAY_ANNOTATION})"
    may = [
        name for name, queue in config.cluster_queues.items() if {queue.preemption.within_cluster_queue, queue.preemption.reclaim_within_cohort} != {"Never"}
    ]
    if not may:
        return line + "; no ClusterQueue may preempt (withinClusterQueue and reclaimWithinCohort Never): nothing will be preempted"
    return line + f"; {len(may)} of {len(config.cluster_queues)} ClusterQueues may preempt"
