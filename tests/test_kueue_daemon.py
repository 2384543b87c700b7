"""The Kueue model in the daemon: `run --config` with Kueue's objects as a user pastes them, a
workload published through NATS, and its eviction received by `tail --json`."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT, preemptd

KUEUE_OBJECTS = """\
model: kueue
config:
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default-flavor}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: team-a}
    spec:
      preemption: {withinClusterQueue: LowerPriority}
      resourceGroups:
        - coveredResources: [cpu]
          flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: 4}]}]
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {namespace: ml, name: training}, spec: {clusterQueue: team-a}}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: WorkloadPriorityClass, metadata: {name: urgent}, value: 1000}
"""


def test_a_kueue_workload_evicts_a_lower_priority_one_through_the_daemon(daemon_factory, tmp_path: Path) -> None:
    config = tmp_path / "kueue.yaml"
    config.write_text(KUEUE_OBJECTS)
    daemon = daemon_factory("--config", str(config)).start()
    publish, decisions = daemon.publish, daemon.decisions

    publish("- {type: app.submitted, app: batch, queue: ml/training, priority: 0}\n- {type: task.submitted, task: batch-0, app: batch, resources: {cpu: 4}}\n")
    [admitted] = decisions(1)
    assert (admitted["type"], admitted["app"], admitted["queue"], admitted["flavors"]) == ("decision.admitted", "batch", "team-a", {"cpu": "default-flavor"})

    publish(
        "- {type: app.submitted, app: serve, queue: ml/training, priority_class: urgent}\n"
        "- {type: task.submitted, task: serve-0, app: serve, resources: {cpu: 2}}\n"
    )
    evicted = decisions(2)[1]
    assert (evicted["type"], evicted["app"], evicted["reason"], evicted["preemptor"]) == ("decision.evicted", "batch", "InClusterQueue", "serve")
    assert "prioritization in the ClusterQueue" in evicted["message"]

    publish("- {type: task.released, task: batch-0, reason: preempted}\n")
    last = decisions(3)[2]
    assert (last["type"], last["app"]) == ("decision.admitted", "serve")
    assert daemon.stop() == 0
    replay = preemptd("replay", "--db", str(daemon.state_dir / "preemptd.db"), "--quiet")
    assert "all 3 decisions reproduced" in replay.stdout, replay.stdout + replay.stderr


def test_explain_shows_a_fair_sharing_eviction_with_its_preemptor_shares_and_candidates(tmp_path: Path) -> None:
    db = tmp_path / "fair.db"
    made = preemptd("simulate", "examples/kueue/fair-sharing.yaml", "--quiet", "--db", str(db))
    assert made.returncode == 0, made.stderr
    explained = preemptd("explain", "--task", "b-1", "--db", str(db))
    assert explained.returncode == 0, explained.stderr
    admitted, _, evicted = explained.stdout.partition("decision.evicted")
    assert "workload b-1 is admitted to ClusterQueue team-b: cpu in default-flavor" in admitted
    assert "workload b-1 (ClusterQueue team-b) is evicted; reason: InCohortFairSharing; preemptor: a-5" in evicted
    assert "in cohort research, ClusterQueue team-a (the preemptor's side) would have share 250; ClusterQueue team-b has 500, 416.67 after" in evicted
    assert "spared: b-8 (ClusterQueue team-b, priority 0): not needed" in evicted


def test_a_clusters_own_objects_run_unchanged_and_the_log_says_what_runs(daemon_factory) -> None:
    """examples/cluster/kueue.yaml: `model: kueue`, then `kubectl get -o yaml` output (a kind:
    List) and Kueue's manager ConfigMap, which turns fair sharing on."""
    daemon = daemon_factory("--config", str(ROOT / "examples" / "cluster" / "kueue.yaml")).start()
    daemon.publish(
        "- {type: app.submitted, app: train-1, queue: vision/training, priority_class: production}\n- {type: task.submitted, task: train-1-0, app: "
        "train-1, resources: {cpu: 8, nvidia.com/gpu: 2}}\n"
    )
    [admitted] = daemon.decisions(1)
    assert (admitted["type"], admitted["queue"], admitted["flavors"]) == ("decision.admitted", "vision", {"cpu": "on-demand", "nvidia.com/gpu": "on-demand"})
    assert (
        'runs="kueue: 5 ClusterQueues in 2 cohorts, 5 LocalQueues, 2 priority classes; fair sharing on (LessThanOrEqualToFinalShare, '
        'LessThanInitialShare); 3 of 5 ClusterQueues may preempt"' in daemon.log_text()
    )
