"""Kueue's objects, pasted as a user has them, in every API version: what they configure, what
Kueue's API server and validation refuse (with their reason, and the field meant), and what
preemptd notes as not modelled."""

from __future__ import annotations

import pytest
import yaml

from preemptd.events import ConfigError
from preemptd.projections import PriorityClass
from preemptd.scheduling.kueue._config import FairSharing, Preemption, Quota, parse_objects

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
    assert team_a.preemption == Preemption(
        within_cluster_queue="LowerPriority", reclaim_within_cohort="Any", borrow_within_cohort="LowerPriority", max_priority_threshold=100
    )
    assert (team_a.when_can_borrow, team_a.when_can_preempt) == ("TryNextFlavor", "MayStopSearch")
    assert config.cohorts["research"].parent == "org" and config.cohorts["research"].weight == 0.5
    assert config.cohorts["org"].implicit, "a parent named but never defined exists, with no quota"
    assert config.local_queues == {"team-a/user-queue": "team-a"}
    assert config.priority_classes == {"high": PriorityClass(name="high", value=1000)}
    assert config.fair_sharing == FairSharing(enabled=True, strategies=("LessThanInitialShare",))
    assert warnings == (), "node labels are for the shim's scheduler, namespaceSelector {} selects every namespace, a description changes nothing"


def test_a_field_kueue_has_and_preemptd_does_not_model_is_one_note_saying_what_it_means() -> None:
    objects = yaml.safe_load(V1BETA2)
    for name in ("team-b", "team-c"):
        objects.append(cluster_queue({"namespaceSelector": {"matchLabels": {"team": name}}, "admissionChecks": ["prov"]}) | {"metadata": {"name": name}})
    _, notes = parse_objects(objects)
    assert notes == (
        "not modelled: ClusterQueue spec.namespaceSelector: workloads are admitted whatever their namespace (as with namespaceSelector: {})",
        "not modelled: ClusterQueue spec.admissionChecks: admission does not wait for admission checks: a workload that fits is admitted at once",
    )


def test_v1beta1_names_are_read_and_a_list_may_mix_versions() -> None:
    objects = yaml.safe_load(V1BETA2)
    objects[2] = {"apiVersion": "kueue.x-k8s.io/v1alpha2", "kind": "Cohort", "metadata": {"name": "x"}}  # no such version
    with pytest.raises(
        ConfigError, match=r"Cohort x: apiVersion 'kueue.x-k8s.io/v1alpha2' is not kueue.x-k8s.io/v1beta2 or kueue.x-k8s.io/v1beta1 or kueue.x-k8s.io/v1alpha1"
    ):
        parse_objects(objects)
    v1beta1 = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": "research"}, "spec": {"parent": "org"}}
    with pytest.raises(ConfigError, match=r"Cohort research: spec.parent: v1beta1 names it parentName"):
        parse_objects([v1beta1])  # spec.parent was v1alpha1's
    objects[2] = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort", "metadata": {"name": "research"}, "spec": {"parent": "org"}}  # Kueue up to v0.12
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
        ({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}, FairSharing()),
        (
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
            },
            FairSharing(enabled=True),
        ),
    ],
)
def test_fair_sharing_is_switched_as_each_version_of_kueues_configuration_says(configuration: dict, fair_sharing: FairSharing) -> None:
    config, _ = parse_objects([{**configuration, "metadata": {"name": "kueue"}}])
    assert config.fair_sharing == fair_sharing


def test_a_v1beta2_configuration_with_v1beta1s_enable_is_refused_as_kueue_refuses_to_start_on_it() -> None:
    configuration = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "fairSharing": {"enable": False, "preemptionStrategies": ["LessThanInitialShare"]},
    }
    with pytest.raises(ConfigError) as refused:
        parse_objects([configuration])
    assert (
        str(refused.value)
        == "Configuration: fairSharing.enable: v1beta2 has no enable: the fairSharing block itself turns fair sharing on (leave it out to keep it off)"
    )


MANAGER_CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
    "data": {
        "controller_manager_config.yaml": """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health: {healthProbeBindAddress: ":8081"}
metrics: {bindAddress: ":8443"}
webhook: {port: 9443}
leaderElection: {leaderElect: true, resourceName: c1f6bfd2.kueue.x-k8s.io}
controller: {groupKindConcurrency: {Job.batch: 5}}
clientConnection: {qps: 50, burst: 100}
integrations: {frameworks: [batch/job, kubeflow.org/pytorchjob]}
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
"""
    },
}


def test_kueues_manager_configmap_is_read_as_its_configuration() -> None:
    config, notes = parse_objects([MANAGER_CONFIGMAP])
    assert config.fair_sharing == FairSharing(enabled=True)
    assert notes == (), "the manager's own settings (webhook, metrics, leader election) have no bearing on decisions"
    misspelt = {**MANAGER_CONFIGMAP, "data": {"controller_manager_config.yml": "{}"}}
    with pytest.raises(
        ConfigError,
        match=r"ConfigMap kueue-manager-config: a ConfigMap in a Kueue configuration carries Kueue's Configuration as "
        r"data.controller_manager_config.yaml \(data.controller_manager_config.yml: did you mean controller_manager_config.yaml\?\)",
    ):
        parse_objects([misspelt])
    typo = {**MANAGER_CONFIGMAP, "data": {"controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharng: {}\n"}}
    with pytest.raises(ConfigError) as refused:
        parse_objects([typo])
    assert (
        str(refused.value)
        == "ConfigMap kueue-manager-config: data.controller_manager_config.yaml: Configuration: unknown field fairSharng (did you mean fairSharing?)"
    )


def test_priority_classes_of_kubernetes_and_of_kueue_both_define_priority_classes() -> None:
    config, _ = parse_objects(
        [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "batch-low"},
                "value": 10,
                "preemptionPolicy": "Never",
                "description": "x",
            },
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "urgent"}, "value": 1000},
        ]
    )
    assert config.priority_classes == {
        "batch-low": PriorityClass(name="batch-low", value=10, may_preempt=False),
        "urgent": PriorityClass(name="urgent", value=1000),
    }


def cluster_queue(spec: dict) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": spec}


def group(**cpu: object) -> list[dict]:
    return [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", **cpu}]}]}]


@pytest.mark.parametrize(
    ("objects", "reason"),
    [
        (
            [cluster_queue({"preemption": {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}})],
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        ),
        ([cluster_queue({"resourceGroups": group(nominalQuota=1, borrowingLimit=1)})], "borrowingLimit: must be nil when cohort is empty"),
        ([cluster_queue({"resourceGroups": group(nominalQuota=1, lendingLimit=1)})], "lendingLimit: must be nil when cohort is empty"),
        (
            [
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Cohort",
                    "metadata": {"name": "top"},
                    "spec": {"resourceGroups": group(nominalQuota=1, borrowingLimit=1)},
                }
            ],
            "Cohort top: spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: must be nil when parent is empty",
        ),
        (
            [cluster_queue({"cohortName": "c", "resourceGroups": group(nominalQuota=1, lendingLimit=2)})],
            "lendingLimit: must be less than or equal to the nominalQuota",
        ),
        (
            [
                cluster_queue(
                    {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}
                )
            ],
            "must list the coveredResources ['cpu', 'memory'] in that order",
        ),
        ([cluster_queue({"resourceGroups": [*group(nominalQuota=1), *group(nominalQuota=2)]})], "resource cpu is in more than one resource group"),
        ([cluster_queue({"resourceGroups": [{"coveredResources": ["cpu", "cpu"], "flavors": []}]})], "spec.resourceGroups[0].coveredResources lists cpu twice"),
        ([cluster_queue({"resourceGroups": [None]})], "ClusterQueue q: spec.resourceGroups[0] must be a mapping, got null"),
        ([cluster_queue({"resourceGroups": [{"coveredResources": "cpu", "flavors": []}]})], "coveredResources must be a list of resource names"),
        (
            [cluster_queue({"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"resources": [{"name": "cpu", "nominalQuota": 1}]}]}]})],
            "flavors[0].name is required",
        ),
        ([cluster_queue({"resourceGroups": group(nominalQuota="lots")})], "resources[0].nominalQuota:"),
        (
            [cluster_queue({"preemption": {"withinClusterQueue": "Sometimes"}})],
            "spec.preemption.withinClusterQueue: Unsupported value: 'Sometimes': supported values: 'Never', 'LowerPriority', 'LowerOrNewerEqualPriority'",
        ),
        ([cluster_queue({"fairSharing": {"weight": "-1"}})], "weight must be a number of at least 0"),
        (
            [cluster_queue({"preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": "high"}}})],
            "maxPriorityThreshold must be a 32-bit integer",
        ),
        ([cluster_queue({"flavorFungibility": {"whenCanBorrow": "Sometimes"}})], "spec.flavorFungibility.whenCanBorrow: Unsupported value: 'Sometimes'"),
        ([cluster_queue({"fairSharing": {"weight": "1e-10"}})], "weight must be 0 or above 1e-9"),
        ([cluster_queue({}), cluster_queue({})], "ClusterQueue q is defined twice"),
        (
            [{"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "metadata": {"name": "k"}, "fairSharing": {}}],
            "fairSharing.preemptionStrategies is required",
        ),
        (
            [
                {
                    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                    "kind": "Configuration",
                    "metadata": {"name": "k"},
                    "fairSharing": {"preemptionStrategies": ["LessThanInitialShare", "LessThanOrEqualToFinalShare"]},
                }
            ],
            "is not one of [LessThanOrEqualToFinalShare]; [LessThanInitialShare]; [LessThanOrEqualToFinalShare, LessThanInitialShare]",
        ),
        ([{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "spec": {}}], "object 1 (ClusterQueue): metadata.name is required"),
        ({"spec": {}}, "a Kueue configuration is a list of Kueue objects"),
        # what Kubernetes' strict field validation refuses, with the field meant
        (
            [cluster_queue({"resourceGroups": group(nominalQuoat=48)})],
            "ClusterQueue q: unknown field spec.resourceGroups[0].flavors[0].resources[0].nominalQuoat (did you mean nominalQuota?)",
        ),
        (
            [
                cluster_queue(
                    {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "nominalQuota": 48, "resources": [{"name": "cpu"}]}]}]}
                )
            ],
            "ClusterQueue q: nominalQuota is not a field of spec.resourceGroups[].flavors[]: it belongs under spec.resourceGroups[].flavors[].resources[]",
        ),
        ([cluster_queue({"resourceGroups": group()})], "ClusterQueue q: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota is required"),
        ([cluster_queue({"cohort": "c"})], "ClusterQueue q: spec.cohort: v1beta2 names it cohortName"),
        ([cluster_queue({"preemption": {"withinClusterQueue": "LowerPriorty"}})], "Unsupported value: 'LowerPriorty' (did you mean LowerPriority?)"),
        ([cluster_queue({"queueingStrategy": "StrictFifo"})], "Unsupported value: 'StrictFifo' (did you mean StrictFIFO?)"),
        (
            [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Localqueue", "metadata": {"name": "l"}, "spec": {"clusterQueue": "q"}}],
            "object 1: unknown kind 'Localqueue' (did you mean LocalQueue?)",
        ),
        (
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}],
            "object 1: unknown kind 'Namespace' (a Kueue configuration holds Kueue objects",
        ),
        (
            [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"}, "spec": {}}],
            "Workload w: a Workload is what a shim publishes as events",
        ),
        (
            [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "l"}, "spec": {"clusterQueu": "q"}}],
            "LocalQueue l: unknown field spec.clusterQueu (did you mean clusterQueue?)",
        ),
        # names a terminal, a log line, a metric label and a page show as they are, as Kubernetes checks them
        ([cluster_queue({}) | {"metadata": {"name": "team\x1b[31m"}}], "metadata.name 'team\\x1b[31m' is not a Kubernetes name (lower-case letters, digits"),
        ([cluster_queue({"cohortName": "<b>all</b>"})], "ClusterQueue q: spec.cohortName '<b>all</b>' is not a Kubernetes name"),
        (
            [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "l", "namespace": "ml\nteam"}, "spec": {"clusterQueue": "q"}}],
            "metadata.namespace 'ml\\nteam' is not a Kubernetes name",
        ),
    ],
)
def test_what_kueues_validation_refuses_is_refused_with_its_reason(objects: object, reason: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_objects(objects)
    assert reason in str(refused.value)


def test_zero_weight_is_allowed_and_a_cycle_of_cohorts_or_a_missing_flavor_is_reported_not_refused() -> None:
    cohorts = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": {"parentName": parent}}
        for name, parent in (("a", "b"), ("b", "c"), ("c", "a"))
    ]
    config, warnings = parse_objects([*cohorts, cluster_queue({"cohortName": "a", "fairSharing": {"weight": 0}, "resourceGroups": group(nominalQuota=1)})])
    assert config.cluster_queues["q"].weight == 0
    assert warnings == (
        "ClusterQueue q: flavor f is not a ResourceFlavor: as in Kueue (FlavorNotFound), that quota admits nothing until it is defined",
        "the cohorts a -> b -> c -> a form a cycle: their ClusterQueues admit nothing until it is broken",
    )


def test_kinds_kueue_has_and_preemptd_does_not_model_are_one_note() -> None:
    objects = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "a1"}, "spec": {"controllerName": "x"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "a2"}},
    ]
    _, warnings = parse_objects(objects)
    assert warnings == ("not modelled: AdmissionCheck objects: admission does not wait for admission checks",)


def test_kubectl_get_output_and_lists_of_lists_are_read() -> None:
    listed = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": yaml.safe_load(V1BETA2)}
    config, _ = parse_objects([listed, {"apiVersion": "v1", "kind": "List", "items": [cluster_queue({})]}])
    assert sorted(config.cluster_queues) == ["q", "team-a"]
