"""YuniKorn's queues.yaml as preemptd reads it: properties with YuniKorn's defaults, fields
preemptd does not use reported once, invalid trees refused with the reason."""

from __future__ import annotations

import pytest

from preemptd.events import ConfigError, Resources
from preemptd.projections import PriorityClass
from preemptd.scheduling.yunikorn._config import parse_config as parse_yunikorn_config

FULL = {
    "partitions": [
        {
            "name": "default",
            "placementrules": [{"name": "provided", "create": True}],
            "nodesortpolicy": {"type": "binpacking"},
            "preemption": {"enabled": True, "max_victims_per_cycle": 5},
            "queues": [
                {
                    "name": "root",
                    "submitacl": "*",
                    "properties": {"preemption.policy": "fence", "preemption.delay": "10s", "application.sort.policy": "fifo"},
                    "queues": [
                        {
                            "name": "tenant",
                            "maxapplications": 10,
                            "resources": {"guaranteed": {"vcore": 10, "memory": "10Gi"}, "max": {"vcore": 20}},
                            "properties": {"preemption.policy": "disabled", "priority.offset": "-5"},
                            "queues": [{"name": "x", "properties": {"priority.policy": "fence", "priority.offset": 7}}],
                        },
                        {"name": "later", "parent": True, "limits": [{"limit": "x"}]},
                    ],
                }
            ],
        },
        {"name": "other", "queues": [{"name": "root"}]},
    ]
}


def test_yunikorn_properties_with_their_defaults_and_inheritance() -> None:
    parsed = parse_yunikorn_config(FULL, "default")
    root = parsed.root
    tenant, later = root.children
    (x,) = tenant.children
    assert root.props.preemption_delay == 10_000 and root.props.preemption_policy == "fence"
    assert tenant.props.preemption_delay == 10_000, "the delay is inherited"
    assert tenant.props.priority_offset == -5 and x.props.priority_offset == 7
    assert x.props.preemption_policy == "disabled", "disabled is inherited"
    assert x.props.priority_policy == "fence" and tenant.props.priority_policy == "default"
    assert tenant.guaranteed.amounts == {"memory": 10 * 2**30, "vcore": 10_000}
    assert later.is_parent and not later.leaf and x.leaf
    assert parsed.settings.max_victims_per_cycle == 5


def test_fields_preemptd_does_not_use_are_reported_once_as_ignored() -> None:
    warnings = parse_yunikorn_config(FULL, "default").warnings
    ignored = [w for w in warnings if w.startswith("ignored")]
    assert ignored == [
        "ignored (not used by preemptd): partition default: nodesortpolicy, placementrules",
        "ignored (not used by preemptd): queue root: submitacl",
        "ignored (not used by preemptd): queue root properties: application.sort.policy",
        "ignored (not used by preemptd): queue root.tenant: maxapplications",
        "ignored (not used by preemptd): queue root.later: limits",
    ]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"partitions": [{"name": "default", "queus": []}]}, "partition default: unknown field queus (did you mean queues?)"),
        ({"queues": [{"name": "a", "resources": {"guarenteed": {"vcore": 1}}}]}, "queue root.a resources: unknown field guarenteed (did you mean guaranteed?)"),
        ({"queues": [{"name": "a", "propertys": {}}]}, "queue root.a: unknown field propertys (did you mean properties?)"),
        ({"preemption": {"enable": False}}, "partition preemption: unknown field enable (did you mean enabled?)"),
        ({"partitions": [{"name": "default"}], "colour": 1}, "the document: unknown field colour"),
    ],
)
def test_a_field_neither_yunikorn_nor_preemptd_knows_is_refused_with_the_closest_name(document: dict, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_yunikorn_config(document, "default")
    assert str(refused.value) == message


def test_a_misspelt_property_is_refused_though_properties_are_free_form() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_yunikorn_config({"queues": [{"name": "a", "properties": {"preemption.dealy": "5s"}}]}, "default")
    assert str(refused.value) == "queue root.a properties: unknown field preemption.dealy (did you mean preemption.delay?)"
    parsed = parse_yunikorn_config({"queues": [{"name": "a", "properties": {"application.sort.policy": "fifo"}}]}, "default")
    assert parsed.warnings == ("ignored (not used by preemptd): queue root.a properties: application.sort.policy",)


YUNIKORN_CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "yunikorn-configs", "namespace": "yunikorn"},
    "data": {
        "log.level": "info",
        "queues.yaml": "partitions:\n- name: default\n  queues:\n  - name: root\n    queues:\n    - name: a\n      resources: {guaranteed: {vcore: 2}}\n",
    },
}


def test_yunikorns_configmap_and_priority_classes_are_read_as_a_cluster_holds_them() -> None:
    low = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "low", "annotations": {"yunikorn.apache.org/allow-preemption": "false"}},
        "value": 5,
    }
    parsed = parse_yunikorn_config({"apiVersion": "v1", "kind": "List", "items": [YUNIKORN_CONFIGMAP, low]}, "default")
    assert parsed.root.children[0].guaranteed == Resources.parse({"vcore": 2})
    assert parsed.priority_classes == {"low": PriorityClass(name="low", value=5, allow_preemption=False)}
    assert parsed.warnings == ("ConfigMap yunikorn-configs: data.log.level is not read (only queues.yaml is)",)
    with pytest.raises(ConfigError, match=r"unknown kind 'Priorityclass' \(did you mean PriorityClass\?\)"):
        parse_yunikorn_config([{**low, "kind": "Priorityclass"}], "default")


@pytest.mark.parametrize("delay", ["abc", "0s", "-5s", 10])
def test_an_invalid_or_non_positive_delay_becomes_30s_with_a_warning(delay: object) -> None:
    parsed = parse_yunikorn_config({"queues": [{"name": "root", "queues": [{"name": "a", "properties": {"preemption.delay": delay}}]}]}, "default")
    assert parsed.root.children[0].props.preemption_delay == 30_000
    assert any("preemption.delay" in w and "using 30s" in w for w in parsed.warnings)


def test_unknown_policy_values_fall_back_with_a_warning() -> None:
    parsed = parse_yunikorn_config({"queues": [{"name": "a", "properties": {"preemption.policy": "sometimes", "priority.offset": "high"}}]}, "default")
    (a,) = parsed.root.children
    assert a.props.preemption_policy == "default" and a.props.priority_offset == 0
    assert len(parsed.warnings) == 2


def test_a_queue_list_without_root_gets_one() -> None:
    root = parse_yunikorn_config({"queues": [{"name": "a"}, {"name": "b"}]}, "default").root
    assert root.path == "root" and [c.path for c in root.children] == ["root.a", "root.b"]


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (
            {"queues": [{"name": "a", "resources": {"max": {"vcore": 2}}, "queues": [{"name": "b", "resources": {"guaranteed": {"vcore": 3}}}]}]},
            "root.a.b: guaranteed vcore 3 is above the max of root.a (2)",
        ),
        (
            {"queues": [{"name": "a", "resources": {"max": {"vcore": 2}}, "queues": [{"name": "b", "resources": {"max": {"vcore": 3}}}]}]},
            "root.a.b: max vcore 3 is above the max of root.a (2)",
        ),
        ({"queues": [{"name": "a"}, {"name": "a"}]}, "root has two children named 'a'"),
        (
            {
                "queues": [
                    {
                        "name": "a",
                        "resources": {"guaranteed": {"vcore": 2}},
                        "queues": [{"name": "b", "resources": {"guaranteed": {"vcore": 2}}}, {"name": "c", "resources": {"guaranteed": {"vcore": 1}}}],
                    }
                ]
            },
            "children's guarantees for vcore add up to 3, above its own guarantee 2",
        ),
        ({"queues": [{"name": "bad name"}]}, "queue name 'bad name'"),
        ({"queues": [{"name": "a", "resources": {"max": {"vcore": "many"}}}]}, "queue root.a: vcore: 'many' is not a quantity"),
        ({"partitions": [{"name": "gpu"}]}, "no partition named 'default' (it has: gpu)"),
        ({"queues": "root"}, "`queues` must be a list"),
    ],
)
def test_an_invalid_tree_is_refused_with_the_reason(config: dict, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_yunikorn_config(config, "default")
    assert reason in str(caught.value)
