"""Kueue's objects, pasted as a user has them, in either API version: what they configure, what
Kueue's validation refuses (with its reason), and what preemptd lists as ignored."""

from __future__ import annotations

import pytest
import yaml

from preemptd.events import ConfigError
from preemptd.scheduling.kueue import parse_objects
from preemptd.scheduling.kueue._objects import FairSharing, Preemption, Quota

V1BETA2 = """
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: on-demand}
  spec: {nodeLabels: {instance-type: on-demand}}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: spot}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Cohort
  metadata: {name: research}
  spec: {parentName: org, fairSharing: {weight: "0.5"}}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: team-a}
  spec:
    cohortName: research
    namespaceSelector: {}
    resourceGroups:
    - coveredResources: [cpu, memory]
      flavors:
      - name: on-demand
        resources:
        - {name: cpu, nominalQuota: 9, borrowingLimit: 6, lendingLimit: 3}
        - {name: memory, nominalQuota: 36Gi}
      - name: spot
        resources:
        - {name: cpu, nominalQuota: "500m"}
        - {name: memory, nominalQuota: 2Gi}
    preemption:
      withinClusterQueue: LowerPriority
      reclaimWithinCohort: Any
      borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
    flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: MayStopSearch}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: LocalQueue
  metadata: {name: user-queue, namespace: team-a}
  spec: {clusterQueue: team-a}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: WorkloadPriorityClass
  metadata: {name: high}
  value: 1000
  description: for production
- apiVersion: config.kueue.x-k8s.io/v1beta2
  kind: Configuration
  namespace: kueue-system
  fairSharing: {preemptionStrategies: [LessThanInitialShare]}
"""


def parse(text: str):
    return parse_objects(yaml.safe_load(text))


def test_a_v1beta2_configuration_is_read_whole() -> None:
    config, warnings = parse(V1BETA2)
    assert config.flavors == ("on-demand", "spot")
    team_a = config.cluster_queues["team-a"]
    assert team_a.cohort == "research"
    (group,) = team_a.resource_groups
    assert group.covered == ("cpu", "memory")
    assert [f.flavor for f in group.flavors] == ["on-demand", "spot"]
    assert group.flavors[0].resources == {"cpu": Quota(9000, 6000, 3000), "memory": Quota(36 * 2**30)}
    assert group.flavors[1].resources["cpu"] == Quota(500)
    assert team_a.preemption == Preemption(within_cluster_queue="LowerPriority", reclaim_within_cohort="Any", borrow_within_cohort="LowerPriority", max_priority_threshold=100)
    assert (team_a.when_can_borrow, team_a.when_can_preempt) == ("TryNextFlavor", "MayStopSearch")
    assert config.cohorts["research"].parent == "org" and config.cohorts["research"].weight == 0.5
    assert config.cohorts["org"].implicit, "a parent named but never defined exists, with no quota"
    assert config.local_queues == {"team-a/user-queue": "team-a"}
    assert config.priority_classes == {"high": 1000}
    assert config.fair_sharing == FairSharing(enabled=True, strategies=("LessThanInitialShare",))
    assert warnings == (
        "ignored: ResourceFlavor field spec.nodeLabels (preemptd does not use it)",
        "ignored: ClusterQueue field spec.namespaceSelector (preemptd does not use it)",
        "ignored: WorkloadPriorityClass field description (preemptd does not use it)",
        "ignored: Configuration field namespace (preemptd does not use it)",
    )


def test_v1beta1_names_are_read_and_a_list_may_mix_versions() -> None:
    objects = yaml.safe_load(V1BETA2)
    objects[2] = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort", "metadata": {"name": "x"}}  # not a version preemptd reads
    with pytest.raises(ConfigError, match=r"Cohort x: apiVersion 'kueue.x-k8s.io/v1alpha1' is not kueue.x-k8s.io/v1beta2 or kueue.x-k8s.io/v1beta1"):
        parse_objects(objects)
    objects[2] = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": "research"}, "spec": {"parent": "org"}}
    objects[3] = {**objects[3], "apiVersion": "kueue.x-k8s.io/v1beta1", "spec": {**objects[3]["spec"], "cohort": "research"}}
    del objects[3]["spec"]["cohortName"]
    objects[3]["spec"]["flavorFungibility"] = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}  # v1beta1's words
    config, _ = parse_objects({"apiVersion": "v1", "kind": "List", "items": objects})
    assert config.cluster_queues["team-a"].cohort == "research" and config.cohorts["research"].parent == "org"
    assert (config.cluster_queues["team-a"].when_can_borrow, config.cluster_queues["team-a"].when_can_preempt) == ("MayStopSearch", "MayStopSearch")


@pytest.mark.parametrize(
    ("configuration", "fair_sharing"),
    [
        ({"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration"}, FairSharing()),
        ({"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", "fairSharing": {"enable": False}}, FairSharing()),
        ({"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", "fairSharing": {"enable": True}}, FairSharing(enabled=True)),
        (
            {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}},
            FairSharing(enabled=True),
        ),
    ],
)
def test_fair_sharing_is_switched_as_each_version_of_kueues_configuration_says(configuration: dict, fair_sharing: FairSharing) -> None:
    config, _ = parse_objects([{**configuration, "metadata": {"name": "kueue"}}])
    assert config.fair_sharing == fair_sharing


def cluster_queue(spec: dict) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": spec}


def group(**cpu: object) -> list[dict]:
    return [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", **cpu}]}]}]


@pytest.mark.parametrize(
    ("objects", "reason"),
    [
        ([cluster_queue({"preemption": {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}})], "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"),
        ([cluster_queue({"resourceGroups": group(nominalQuota=1, borrowingLimit=1)})], "borrowingLimit: must be nil when cohort is empty"),
        ([cluster_queue({"resourceGroups": group(nominalQuota=1, lendingLimit=1)})], "lendingLimit: must be nil when cohort is empty"),
        ([{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "top"}, "spec": {"resourceGroups": group(nominalQuota=1, borrowingLimit=1)}}], "Cohort top: spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: must be nil when parent is empty"),
        ([cluster_queue({"cohortName": "c", "resourceGroups": group(nominalQuota=1, lendingLimit=2)})], "lendingLimit: must be less than or equal to the nominalQuota"),
        ([cluster_queue({"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]})], "must list the coveredResources ['cpu', 'memory'] in that order"),
        ([cluster_queue({"resourceGroups": [*group(nominalQuota=1), *group(nominalQuota=2)]})], "resource cpu is in more than one resource group"),
        ([cluster_queue({"resourceGroups": [{"coveredResources": "cpu", "flavors": []}]})], "coveredResources must be a list of resource names"),
        ([cluster_queue({"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"resources": [{"name": "cpu", "nominalQuota": 1}]}]}]})], "flavors[0].name is required"),
        ([cluster_queue({"resourceGroups": group(nominalQuota="lots")})], "resources[0].nominalQuota:"),
        ([cluster_queue({"preemption": {"withinClusterQueue": "Sometimes"}})], "spec.preemption.withinClusterQueue: Unsupported value: 'Sometimes': supported values: 'Never', 'LowerPriority', 'LowerOrNewerEqualPriority'"),
        ([cluster_queue({"fairSharing": {"weight": "-1"}})], "weight must be a number of at least 0"),
        ([cluster_queue({"preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": "high"}}})], "maxPriorityThreshold must be a 32-bit integer"),
        ([cluster_queue({"flavorFungibility": {"whenCanBorrow": "Sometimes"}})], "spec.flavorFungibility.whenCanBorrow: Unsupported value: 'Sometimes'"),
        ([cluster_queue({"fairSharing": {"weight": "1e-10"}})], "weight must be 0 or above 1e-9"),
        ([cluster_queue({}), cluster_queue({})], "ClusterQueue q is defined twice"),
        ([{"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "metadata": {"name": "k"}, "fairSharing": {}}], "fairSharing.preemptionStrategies is required"),
        (
            [{"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "metadata": {"name": "k"}, "fairSharing": {"preemptionStrategies": ["LessThanInitialShare", "LessThanOrEqualToFinalShare"]}}],
            "is not one of [LessThanOrEqualToFinalShare]; [LessThanInitialShare]; [LessThanOrEqualToFinalShare, LessThanInitialShare]",
        ),
        ([{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "spec": {}}], "object 1 (ClusterQueue): metadata.name is required"),
        ({"spec": {}}, "a Kueue configuration is a list of Kueue objects"),
    ],
)
def test_what_kueues_validation_refuses_is_refused_with_its_reason(objects: object, reason: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_objects(objects)
    assert reason in str(refused.value)


def test_zero_weight_is_allowed_and_a_cycle_of_cohorts_or_a_missing_flavor_is_reported_not_refused() -> None:
    cohorts = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": {"parentName": parent}} for name, parent in (("a", "b"), ("b", "c"), ("c", "a"))]
    config, warnings = parse_objects([*cohorts, cluster_queue({"cohortName": "a", "fairSharing": {"weight": 0}, "resourceGroups": group(nominalQuota=1)})])
    assert config.cluster_queues["q"].weight == 0
    assert warnings == (
        "ClusterQueue q: flavor f is not a ResourceFlavor: as in Kueue (FlavorNotFound), that quota admits nothing until it is defined",
        "the cohorts a -> b -> c -> a form a cycle: their ClusterQueues admit nothing until it is broken",
    )


def test_other_kinds_and_groups_are_listed_once_as_ignored() -> None:
    objects = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "a1"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "a2"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
    ]
    _, warnings = parse_objects(objects)
    assert warnings == ("ignored: kind AdmissionCheck (preemptd does not use it)", "ignored: Namespace team-a (v1) (preemptd does not use it)")
