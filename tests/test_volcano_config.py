"""Volcano's configuration as a user pastes it: Queue objects and the scheduler configuration,
bare or in its ConfigMap, read with Volcano's defaults; what Volcano refuses is refused with its
reason, a misspelt field, action or plugin with the one meant, and what preemptd does not model
is one note saying what that means."""

from __future__ import annotations

import pytest
from conftest import partition_after

from preemptd.events import ConfigError
from preemptd.scheduling.volcano._config import DEFAULT_CONF, describe, parse_objects

QUEUE_API = "scheduling.volcano.sh/v1beta1"

CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
    "data": {
        "volcano-scheduler.conf": """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
    arguments:
      predicate.GPUSharingEnable: true
  - name: capacity
    enableHierarchy: true
    arguments:
      ancestorReclaimLevel: 1
  - name: nodeorder
configurations:
- name: preempt
  arguments:
    enableTopologyAwarePreemption: false
"""
    },
}


def queue(name: str, **spec: object) -> dict:
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def test_a_configmap_and_queues_are_read_whole() -> None:
    config, warnings = parse_objects(
        [
            CONFIGMAP,
            queue("research", weight=10, capability={"cpu": 100, "memory": "100Gi"}, reclaimable=True, priority=100),
            queue("batch", weight=1, deserved={"cpu": "20"}, guarantee={"resource": {"cpu": "4"}}, reclaimable=False, parent="research"),
            {**queue("old"), "status": {"state": "Closed"}},
        ]
    )
    research, batch = config.queues["research"], config.queues["batch"]
    assert (research.weight, research.capability, research.priority) == (10, {"cpu": 100_000, "memory": 100 * 2**30}, 100)
    assert (batch.deserved, batch.guarantee, batch.reclaimable, batch.parent) == ({"cpu": 20_000}, {"cpu": 4000}, False, "research")
    assert config.queues["old"].closed and not research.closed
    assert config.queues["root"].implicit and config.queues["default"].implicit, "Volcano creates root and default"
    conf = config.scheduler
    assert conf.actions == ("enqueue", "allocate", "preempt", "reclaim", "backfill")
    assert [[p.name for p in tier] for tier in conf.tiers] == [["priority", "gang", "conformance"], ["drf", "predicates", "capacity"]]
    gang, capacity = conf.tiers[0][1], conf.tiers[1][2]
    assert not gang.enabled("enablePreemptable") and gang.enabled("enableJobStarving"), "a switch left out is on"
    assert capacity.enabled("enableHierarchy") and not conf.tiers[1][0].enabled("enableHierarchy"), "except enableHierarchy"
    assert capacity.arguments == {"ancestorReclaimLevel": 1}
    assert warnings == (
        "not modelled: plugin overcommit: enqueue lets a job in against the queue's capability, without an overcommit factor",
        "not modelled: plugin predicates argument predicate.GPUSharingEnable: preemptd does not read it",
        "not modelled: plugin nodeorder: nodes are tried by name, not scored",
        "not modelled: action preempt argument enableTopologyAwarePreemption: preemptd does not read it",
    )


def test_the_bare_conf_file_is_read_too_and_without_one_volcanos_default_applies() -> None:
    bare, _ = parse_objects([{"actions": "allocate, reclaim", "tiers": [{"plugins": [{"name": "proportion"}]}]}])
    assert bare.scheduler.actions == ("allocate", "reclaim")
    assert [p.name for p in bare.scheduler.tiers[0]] == ["proportion"]
    default, notes = parse_objects([queue("q")])
    assert default.scheduler == DEFAULT_CONF
    assert default.scheduler.actions == ("enqueue", "allocate", "backfill"), "Volcano's default runs neither preempt nor reclaim"
    assert notes == (
        "no scheduler configuration (volcano-scheduler.conf or its ConfigMap): Volcano's default applies, actions enqueue, allocate, backfill: "
        "no preempt or reclaim action, nothing will be preempted",
    )


def test_actions_and_plugins_volcano_has_and_preemptd_does_not_model_are_one_note() -> None:
    _, notes = parse_objects([{"actions": "enqueue, shuffle, allocate, shuffle", "tiers": [{"plugins": [{"name": "binpack"}, {"name": "nodeorder"}]}]}])
    assert notes == (
        "not modelled: action shuffle: nothing is evicted to rebalance nodes",
        "not modelled: plugin binpack: nodes are tried by name, not scored",
        "not modelled: plugin nodeorder: nodes are tried by name, not scored",
    )


def test_priority_classes_in_the_list_define_priority_classes() -> None:
    config, _ = parse_objects(
        [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}, {"actions": "allocate"}]
    )
    assert config.priority_classes["high"].value == 1000


@pytest.mark.parametrize(
    ("objects", "reason"),
    [
        ([queue("q", weight=0)], "Queue q: queue weight must be a positive integer, got 0"),
        ([queue("q", capability={"cpu": 4}, deserved={"cpu": 8})], "Queue q: deserved cpu must be less than or equal to capability cpu"),
        ([queue("q", capability={"cpu": 4}, guarantee={"resource": {"cpu": 8}})], "Queue q: guarantee cpu must be less than or equal to capability cpu"),
        ([queue("q", capability={"cpu": "lots"})], "Queue q: spec.capability"),
        ([queue("q", parent="nowhere")], "Queue q: its parent queue nowhere does not exist"),
        ([queue("q"), queue("q")], "Queue q is defined twice"),
        ([{**queue("q"), "apiVersion": "scheduling.volcano.sh/v1alpha1"}], "is not scheduling.volcano.sh/v1beta1"),
        ([{**queue("q"), "status": {"state": "Sleeping"}}], "status.state: Unsupported value: 'Sleeping'"),
        ([{"actions": ["allocate"]}], "actions must be Volcano's comma-separated string"),
        ([{"actions": "allocate, allocate"}], "action allocate is listed twice"),
        ([{"actions": "allocate"}, {"actions": "reclaim"}], "a second scheduler configuration"),
        ([{"tiers": [{"plugins": [{"name": "gang", "enablePreemptable": "maybe"}]}]}], "plugin gang: enablePreemptable must be true or false"),
        ([{**CONFIGMAP, "data": {"volcano-scheduler.conf": "actions: [unclosed"}}], "data.volcano-scheduler.conf is not YAML"),
        ({"spec": {}}, "a Volcano configuration is a list of Volcano objects"),
        # misspellings, refused with the word meant
        ([{"actions": "enqueue, allocate, reclaime"}], "the scheduler configuration: actions: unknown action 'reclaime' (did you mean reclaim?)"),
        (
            [{"actions": "reclaim", "tiers": [{"plugins": [{"name": "propotion"}]}]}],
            "the scheduler configuration: tiers[0]: plugins[0].name: unknown plugin 'propotion' (did you mean proportion?)",
        ),
        (
            [{"tiers": [{"plugins": [{"name": "gang", "enablePreemtable": False}]}]}],
            "the scheduler configuration: unknown field tiers[0].plugins[0].enablePreemtable (did you mean enablePreemptable?)",
        ),
        ([{"actions": "reclaim", "tires": []}], "the scheduler configuration: unknown field tires (did you mean tiers?)"),
        (
            [{"tiers": [{"plugins": [{"name": "capacity", "arguments": {"ancestorReclaimLvl": 1}}]}]}],
            "plugin capacity: unknown argument 'ancestorReclaimLvl' (did you mean ancestorReclaimLevel?)",
        ),
        ([queue("q", capabilty={"cpu": 4})], "Queue q: unknown field spec.capabilty (did you mean capability?)"),
        ([{**queue("q"), "spec": {}, "capability": {"cpu": 4}}], "Queue q: capability is not a field of the object: it belongs under spec"),
        ([{"apiVersion": QUEUE_API, "kind": "Queu", "metadata": {"name": "q"}}], "unknown kind 'Queu' (did you mean Queue?)"),
        ([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}], "unknown kind 'Pod'"),
        (
            [{"apiVersion": QUEUE_API, "kind": "PodGroup", "metadata": {"name": "pg"}, "spec": {"minMember": 2}}],
            "PodGroup pg: a PodGroup is a job: publish it as events",
        ),
        (
            [{**CONFIGMAP, "data": {"volcano-scheduler.yaml": "actions: allocate"}}],
            "carries the scheduler configuration as data.volcano-scheduler.conf (data.volcano-scheduler.yaml: did you mean volcano-scheduler.conf?)",
        ),
        ([queue("q", parent="reserch"), queue("research")], "Queue q: its parent queue reserch does not exist (did you mean research?)"),
        ([queue('q"\n')], "metadata.name 'q\"\\n' is not a Kubernetes name"),
        ([{"tiers": [{"plugins": [None]}]}], "the scheduler configuration: tiers[0].plugins[0] must be a mapping, got null"),
        ([queue(f"q{i}", parent=f"q{i - 1}" if i else None) for i in range(70)], "Queue q65: 65 levels below root; the limit is 64"),
        ([queue("a", parent="b"), queue("b", parent="a")], "Queue a: its parents make a cycle: a -> b -> a"),
        # plugins Volcano does not run together
        (
            [{"tiers": [{"plugins": [{"name": "proportion"}]}, {"plugins": [{"name": "capacity"}]}]}],
            "the capacity and proportion plugins cannot be used together",
        ),
        (
            [{"tiers": [{"plugins": [{"name": "drf", "enableHierarchy": True}, {"name": "proportion"}]}]}],
            "tiers[0]: proportion and drf with enableHierarchy conflict",
        ),
    ],
)
def test_what_volcano_refuses_is_refused_with_its_reason(objects: object, reason: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_objects(objects)
    assert reason in str(refused.value)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000 + "]" * 200_000,  # libyaml (msgspec.yaml) crashes the process on this
        "- " * 100_000 + "x",
        "a: &a [*a]",
        "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)),
        # tuples the bound's walk did not see: 405 bytes took 12 s to quote in a refusal
        "actions: !!pairs\n- k: &a0 [1,1,1,1,1,1,1,1,1,1]\n" + "".join(f"- k: &a{i + 1} [{', '.join([f'*a{i}'] * 10)}]\n" for i in range(8)),
    ],
    ids=["flow-bomb", "block-bomb", "self-alias", "billion-laughs", "pairs-bomb"],
)
def test_a_configmap_nested_too_deep_or_expanding_without_end_is_refused(text: str) -> None:
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "volcano-scheduler-configmap"}, "data": {"volcano-scheduler.conf": text}}
    with pytest.raises(
        ConfigError,
        match="ConfigMap volcano-scheduler-configmap: data.volcano-scheduler.conf (nests deeper than 64 levels|holds itself|holds more than 100,000 "
        "values|is not YAML: tag:yaml.org,2002:pairs makes no JSON value)",
    ):
        parse_objects([configmap])


def test_what_preemptd_does_not_model_of_drf_and_capacity_is_said() -> None:
    """drf's enableHierarchy (hierarchical DRF) runs as plain drf: said in a note and in the
    configuration's line; ancestorReclaimLevel without enableHierarchy checks no ancestor, as in
    Volcano: said in a note."""
    config, notes = parse_objects([{"actions": "preempt", "tiers": [{"plugins": [{"name": "drf", "enableHierarchy": True}]}]}])
    assert any("plugin drf: enableHierarchy (hierarchical DRF)" in note for note in notes)
    partition = partition_after(
        {"type": "config.applied", "model": "volcano", "config": [{"actions": "preempt", "tiers": [{"plugins": [{"name": "drf", "enableHierarchy": True}]}]}]}
    )
    assert "drf's enableHierarchy (hierarchical DRF) is not modelled" in describe(partition)
    _, notes = parse_objects([{"actions": "reclaim", "tiers": [{"plugins": [{"name": "capacity", "arguments": {"ancestorReclaimLevel": 1}}]}]}])
    assert any("ancestorReclaimLevel is read only with enableHierarchy: true" in note for note in notes)


def test_an_ancestor_reclaim_level_must_be_a_small_integer() -> None:
    conf = {"actions": "reclaim", "tiers": [{"plugins": [{"name": "capacity", "arguments": {"ancestorReclaimLevel": "two"}}]}]}
    with pytest.raises(ConfigError, match="plugin capacity: ancestorReclaimLevel must be an integer from 0 to 64, got 'two'"):
        parse_objects([conf])
