"""What a Kueue or Volcano user hands over is what runs, tried as a user would, through the
installed command: each row of issue 22's table (accepted with at most a warning, then something
else ran) is now refused with the field, kind or model meant, or read as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, preemptd

CLUSTER_QUEUE = """\
model: kueue
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 48}
"""


@pytest.mark.parametrize(
    ("text", "said"),
    [
        pytest.param(
            CLUSTER_QUEUE.replace("nominalQuota", "nominalQuoat"),
            "ClusterQueue team-a: unknown field spec.resourceGroups[0].flavors[0].resources[0].nominalQuoat (did you mean nominalQuota?)",
            id="misspelt-field",
        ),
        pytest.param(
            CLUSTER_QUEUE.replace("      - {name: cpu, nominalQuota: 48}", "      nominalQuota: 48\n      resources:\n      - {name: cpu}"),
            "ClusterQueue team-a: nominalQuota is not a field of spec.resourceGroups[].flavors[]: it belongs under spec.resourceGroups[].flavors[].resources[]",
            id="field-one-level-too-shallow",
        ),
        pytest.param(
            CLUSTER_QUEUE + "---\n{apiVersion: kueue.x-k8s.io/v1beta2, kind: Localqueue, metadata: {name: q, namespace: ml}, spec: {clusterQueue: team-a}}\n",
            "object 2: unknown kind 'Localqueue' (did you mean LocalQueue?)",
            id="misspelt-kind",
        ),
        pytest.param(
            CLUSTER_QUEUE + "---\n{apiVersion: config.kueue.x-k8s.io/v1beta2, kind: Configuration, fairSharing: {enable: false, preemptionStrategies: "
            "[LessThanInitialShare]}}\n",
            "Configuration: fairSharing.enable: v1beta2 has no enable",
            id="v1beta1-switch-in-v1beta2",
        ),
        pytest.param(
            "model: volcano\n---\nactions: 'enqueue, allocate, reclaime'\n",
            "the scheduler configuration: actions: unknown action 'reclaime' (did you mean reclaim?)",
            id="misspelt-action",
        ),
        pytest.param(
            "model: volcano\n---\nactions: 'allocate, reclaim'\ntiers: [{plugins: [{name: propotion}]}]\n",
            "unknown plugin 'propotion' (did you mean proportion?)",
            id="misspelt-plugin",
        ),
        pytest.param(
            "model: volcano\n---\n{apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q}, spec: {capabilty: {cpu: 4}}}\n",
            "Queue q: unknown field spec.capabilty (did you mean capability?)",
            id="misspelt-queue-field",
        ),
        pytest.param(
            CLUSTER_QUEUE.replace("model: kueue\n---\n", ""),
            "these are kueue objects, and the file names no model: add a first YAML document `model: kueue`",
            id="no-model-line",
        ),
        pytest.param(
            "config:\n- {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q}}\n",
            "`config` needs `model` beside it (model: volcano)",
            id="config-without-model",
        ),
    ],
)
def test_run_refuses_to_start_on_what_it_would_read_as_something_else(tmp_path: Path, text: str, said: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    result = preemptd("run", "--config", str(config), "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 2, result.stderr
    assert said in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "state").exists(), "nothing was started"


def test_simulate_says_when_volcanos_default_can_preempt_nothing(tmp_path: Path) -> None:
    scenario = tmp_path / "volcano.yaml"
    scenario.write_text(
        "name: no scheduler conf\nmodel: volcano\nconfig:\n- {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q}}\nevents: "
        "[]\nuntil: 1s\n"
    )
    result = preemptd("simulate", str(scenario))
    assert result.returncode == 0
    assert "no preempt or reclaim action, nothing will be preempted" in result.stderr


def test_kueues_manager_configmap_turns_fair_sharing_on_as_in_kueue(tmp_path: Path) -> None:
    [configmap] = [doc for doc in (ROOT / "examples" / "cluster" / "kueue.yaml").read_text().split("---\n") if "kueue-manager-config" in doc]
    scenario = tmp_path / "kueue.yaml"
    scenario.write_text(
        "name: fair sharing from the manager's ConfigMap\nmodel: kueue\nconfig:\n"
        + "".join(f"- {json.dumps(obj)}\n" for obj in __import__("yaml").safe_load_all(configmap))
        + "events: []\nuntil: 1s\n"
    )
    db = tmp_path / "kueue.db"
    assert preemptd("simulate", str(scenario), "--db", str(db)).returncode == 0
    assert "fair sharing on (LessThanOrEqualToFinalShare, LessThanInitialShare)" in preemptd("state", "--db", str(db)).stdout


@pytest.mark.parametrize(
    ("event", "said"),
    [
        (
            {"type": "app.submitted", "app": "resnet", "queue": "training", "minAvailable": 4},
            "app.submitted: unknown field `minAvailable` (did you mean `min_available`?)",
        ),
        (
            {"type": "app.submitted", "app": "resnet", "queue": "training", "priorityClassName": "high"},
            "app.submitted: unknown field `priorityClassName` (did you mean `priority_class`?)",
        ),
    ],
)
def test_publish_refuses_a_podgroups_words_before_sending_anything(tmp_path: Path, event: dict, said: str) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps(event) + "\n")
    result = preemptd("publish", str(events), "--nats-url", "nats://127.0.0.1:1")
    assert result.returncode == 2 and said in result.stderr and "nothing was published" in result.stderr


@pytest.mark.parametrize(
    ("model", "objects", "said"),
    [
        (
            "kueue",
            [
                {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta1",
                    "kind": "ClusterQueue",
                    "metadata": {"name": "a", "annotations": {"preemptd.io/quota-preemtion-delay": "30s"}},
                    "spec": {
                        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]
                    },
                },
            ],
            "ClusterQueue a: unknown annotation 'preemptd.io/quota-preemtion-delay' (did you mean preemptd.io/quota-preemption-delay?)",
        ),
        (
            "volcano",
            [
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {"name": "q", "annotations": {"preemptd.io/fair-sharing": "true"}},
                    "spec": {"weight": 1},
                }
            ],
            "Queue q: unknown annotation 'preemptd.io/fair-sharing' (Volcano reads preemptd.io/quota-preemption-delay)",
        ),
    ],
)
def test_a_misspelt_or_foreign_preemptd_annotation_is_refused_not_ignored(model: str, objects: list, said: str) -> None:
    """A switch of preemptd's in an annotation, misspelt, would silently stay off."""
    from preemptd.events import ConfigError
    from preemptd.scheduling import model_named

    with pytest.raises(ConfigError) as refused:
        model_named(model).parse_config(objects, "default")
    assert said in str(refused.value)
