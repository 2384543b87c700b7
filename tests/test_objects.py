"""Their objects in (issue 40): `try`, `publish` and `simulate` take what a user holds, as
`kubectl get -o yaml` prints it, by the one mapping the contract documents: a Kueue Workload, a
Pod or batch/v1 Job with Kueue's queue label, a Volcano Job or PodGroup, a Pod with YuniKorn's
labels. A user asked "would this job start now?" with its YAML and was told `missing field
type`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, preemptd

from preemptd.events import ObjectError, object_events

WORKLOAD = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: urgent, namespace: ml}
spec:
  queueName: training
  priorityClassName: high
  podSets:
  - name: main
    count: 2
    template:
      spec:
        containers:
        - {name: c, image: busybox, resources: {requests: {cpu: 1}}}
        initContainers:
        - {name: warm, resources: {requests: {cpu: 1500m}}}
status: {conditions: []}
"""

VOLCANO_JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: mpi}
spec:
  minAvailable: 3
  queue: research
  priorityClassName: high
  tasks:
  - name: master
    replicas: 1
    template: {spec: {containers: [{name: m, resources: {requests: {cpu: 500m}}}]}}
  - name: worker
    replicas: 2
    template: {spec: {containers: [{name: w, resources: {limits: {cpu: "2", nvidia.com/gpu: 1}}}]}}
"""


def _objects(text: str) -> list[dict]:
    import yaml

    return list(yaml.safe_load_all(text))


def test_each_kind_is_the_events_a_shim_makes_of_it() -> None:
    [workload] = _objects(WORKLOAD)
    assert object_events(workload) == [
        {"type": "app.submitted", "app": "urgent", "queue": "ml/training", "namespace": "ml", "priority_class": "high"},
        *({"type": "task.submitted", "task": f"urgent-main-{i}", "app": "urgent", "resources": {"cpu": "1500m"}} for i in range(2)),
    ], "a pod asks its containers' sum, at least its largest init container's"
    [job] = _objects(VOLCANO_JOB)
    assert object_events(job) == [
        {"type": "app.submitted", "app": "mpi", "queue": "research", "namespace": "default", "priority_class": "high", "min_available": 3},
        {"type": "task.submitted", "task": "mpi-master-0", "app": "mpi", "resources": {"cpu": "500m"}},
        *({"type": "task.submitted", "task": f"mpi-worker-{i}", "app": "mpi", "resources": {"cpu": 2, "nvidia.com/gpu": 1}} for i in range(2)),
    ], "a limit stands for a missing request"
    batch = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sample", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "training", "kueue.x-k8s.io/priority-class": "high"}},
        "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}},
    }
    assert [e["type"] for e in object_events(batch)] == ["app.submitted", "task.submitted", "task.submitted"]
    assert object_events(batch)[0] == {"type": "app.submitted", "app": "sample", "queue": "ml/training", "namespace": "ml", "priority_class": "high"}
    yunikorn_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"applicationId": "app-1", "queue": "root.a"}},
        "spec": {"containers": [{"resources": {"requests": {"cpu": "2"}}}]},
    }
    assert object_events(yunikorn_pod) == [
        {"type": "task.submitted", "task": "p", "app": "app-1", "queue": "root.a", "namespace": "default", "resources": {"cpu": 2}}
    ]
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"}, "spec": {"minMember": 4, "queue": "research"}}
    assert object_events(group) == [{"type": "app.submitted", "app": "g", "queue": "research", "namespace": "default", "min_available": 4}]


@pytest.mark.parametrize(
    ("item", "said"),
    [
        (
            {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"minAvalable": 1, "tasks": []}},
            "unknown field spec.'minAvalable' (did you mean minAvailable?)",
        ),
        (
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}},
            "Job j has no kueue.x-k8s.io/queue-name label: Kueue would not admit it",
        ),
        (
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"requests": {"cpu": 1}}}]}},
            "no model knows where it goes",
        ),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}, "Deployment (apps/v1) is not an object preemptd reads as events"),
        (
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {"name": "w"},
                "spec": {"queueName": "q", "podSets": [{"name": "m", "count": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}]},
            },
            "its containers request nothing",
        ),
    ],
)
def test_an_object_that_cannot_be_read_says_why(item: dict, said: str) -> None:
    with pytest.raises(ObjectError, match=None) as refused:
        object_events(item)
    assert said in str(refused.value), str(refused.value)


@pytest.fixture(scope="module")
def kueue_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("kueue") / "log.db"
    assert preemptd("simulate", str(ROOT / "examples/kueue/within-cluster-queue.yaml"), "--quiet", "--db", str(db)).returncode == 0
    return db


def test_would_this_job_start_now_is_asked_with_the_jobs_yaml(kueue_log: Path, tmp_path: Path) -> None:
    workload = tmp_path / "workload.yaml"
    workload.write_text(WORKLOAD)
    asked = preemptd("try", str(workload), "--db", str(kueue_log), "--at", "1", "--json", "--show-events")
    assert asked.returncode == 0, asked.stderr
    lines = asked.stdout.splitlines()
    shown = [json.loads(line) for line in lines[:3]]
    assert [e["type"] for e in shown] == ["app.submitted", "task.submitted", "task.submitted"], "--show-events prints the events first"
    answer = json.loads("\n".join(lines[3:]))
    assert [(d["type"], d["app"]) for d in answer["decisions"]][:1] == [("decision.admitted", "urgent")], answer


def test_a_list_of_objects_and_a_configuration_object_among_events(tmp_path: Path) -> None:
    listed = tmp_path / "vcjobs.yaml"
    listed.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        + "".join("- " + line + "\n" if i == 0 else "  " + line + "\n" for i, line in enumerate(VOLCANO_JOB.splitlines()))
    )
    shown = preemptd("publish", str(listed), "--show-events", "--nats-url", "nats://127.0.0.1:1")
    assert [json.loads(line)["type"] for line in shown.stdout.splitlines()] == ["app.submitted", "task.submitted", "task.submitted", "task.submitted"], (
        shown.stderr
    )
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(
        "- {type: node.upserted, node: n1, capacity: {cpu: 4}}\n- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ClusterQueue, metadata: {name: q}, spec: {}}\n"
    )
    refused = preemptd("publish", str(mixed), "--nats-url", "nats://127.0.0.1:1")
    assert (
        refused.returncode == 2 and "item 2 is a ClusterQueue: configuration, not events: hand it to the running daemon with `preemptd apply`" in refused.stderr
    ), refused.stderr


def test_a_scenario_takes_objects_among_its_events(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        (ROOT / "examples/kueue/within-cluster-queue.yaml").read_text().split("events:")[0]
        + "events:\n  - {at: 0s, type: node.upserted, node: node-1, capacity: {cpu: 64}}\n  - at: 1s\n"
        + "".join(f"    {line}\n" for line in WORKLOAD.splitlines())
        + "until: 5s\n"
    )
    simulated = preemptd("simulate", str(scenario))
    assert simulated.returncode == 0, simulated.stderr
    decisions = [json.loads(line) for line in simulated.stdout.splitlines()]
    assert [(d["type"], d["app"]) for d in decisions] == [("decision.admitted", "urgent")]
