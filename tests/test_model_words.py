"""Errors in the model's words: a Kueue user hears of LocalQueues, ClusterQueues, workloads and
WorkloadPriorityClasses, a Volcano user of jobs and queues, each with the one probably meant; a
pod's story includes its workload's; the command line names the command or option meant."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import ROOT, partition_after, preemptd

from preemptd.projections import Rejected

KUEUE = {"type": "config.applied", "model": "kueue", "config": yaml.safe_load((ROOT / "examples" / "cluster" / "kueue.yaml").read_text().split("---\n")[1])}
VOLCANO = {
    "type": "config.applied",
    "model": "volcano",
    "config": [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "research"}}],
}


@pytest.mark.parametrize(
    ("config", "event", "reason"),
    [
        (
            KUEUE,
            {"type": "app.submitted", "app": "w", "queue": "vision/trainig"},
            "unknown LocalQueue 'vision/trainig' in partition default (LocalQueues in namespace vision: vision/training; did you mean vision/training?)",
        ),
        (
            KUEUE,
            {"type": "app.submitted", "app": "w", "queue": "robotics/training"},
            "unknown LocalQueue 'robotics/training' in partition default (no LocalQueue in namespace robotics; LocalQueues: batch/nightly, "
            "language/training, notebooks/default, serving/inference, vision/training)",
        ),
        (
            KUEUE,
            {"type": "app.submitted", "app": "w", "queue": "visoin"},
            "unknown ClusterQueue 'visoin' in partition default (ClusterQueues: batch, language, notebooks, serving, vision, or a LocalQueue as "
            "namespace/name; did you mean vision?)",
        ),
        (
            KUEUE,
            {"type": "app.submitted", "app": "w", "queue": "vision/training", "priority_class": "prodution"},
            "unknown WorkloadPriorityClass 'prodution' (did you mean production?)",
        ),
        (
            KUEUE,
            {"type": "app.submitted", "app": "w", "queue": "vision/training", "priority_class": "urgent"},
            "unknown WorkloadPriorityClass 'urgent' (known: experiment, production; add a WorkloadPriorityClass (or PriorityClass) to the "
            "configuration, or publish priorityclass.upserted)",
        ),
        (
            KUEUE,
            {"type": "task.submitted", "task": "p", "app": "w", "resources": {"cpu": 1}},
            "unknown workload 'w': publish app.submitted first, or set `queue` on the task",
        ),
        (
            VOLCANO,
            {"type": "task.submitted", "task": "p", "app": "job-1", "resources": {"cpu": 1}},
            "unknown job 'job-1': publish app.submitted first, or set `queue` on the task",
        ),
        (
            VOLCANO,
            {"type": "app.submitted", "app": "job-1", "queue": "reserch"},
            "unknown queue 'reserch' in partition default (queues jobs may use: default, research; did you mean research?)",
        ),
        (
            VOLCANO,
            {"type": "app.submitted", "app": "job-1", "queue": "research", "priority_class": "hihg"},
            "unknown PriorityClass 'hihg' (add the PriorityClass to the configuration, or publish priorityclass.upserted)",
        ),
        (
            {"type": "config.applied", "config": {}},
            {"type": "app.submitted", "app": "a", "queue": "root.x"},
            "unknown queue 'root.x' in partition default (leaf queues: root.default)",
        ),
    ],
)
def test_a_refusal_names_things_as_the_models_users_do(config: dict, event: dict, reason: str) -> None:
    with pytest.raises(Rejected) as refused:
        partition_after(config, event)
    assert refused.value.reason == reason


WORKLOAD = """\
name: a workload and its pods
model: kueue
config:
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: f}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: team}
    spec: {resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 8}]}]}]}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {namespace: ml, name: training}, spec: {clusterQueue: team}}
events:
  - {at: 0s, type: app.submitted, app: train-42, queue: ml/training}
  - {at: 0s, type: task.submitted, task: train-42-worker-0, app: train-42, resources: {cpu: 2}}
  - {at: 0s, type: task.submitted, task: train-42-worker-1, app: train-42, resources: {cpu: 2}}
until: 3s
"""


def test_explain_a_pod_tells_its_workloads_admission_too(tmp_path: Path) -> None:
    scenario, db = tmp_path / "workload.yaml", tmp_path / "workload.db"
    scenario.write_text(WORKLOAD)
    assert preemptd("simulate", str(scenario), "--quiet", "--db", str(db)).returncode == 0
    for name in ("train-42-worker-1", "train-42"):
        explained = preemptd("explain", "--task", name, "--db", str(db))
        assert explained.returncode == 0, explained.stderr
        assert "decision.admitted" in explained.stdout and "workload train-42 is admitted to ClusterQueue team: cpu in f" in explained.stdout, name


@pytest.mark.parametrize(
    ("argv", "said", "usage"),
    [
        (["simulat", "x.yaml"], "invalid choice: 'simulat' (choose from", "usage: preemptd ["),
        (["simulat", "x.yaml"], "; did you mean simulate?", "usage: preemptd ["),
        (["state", "--jsn"], "preemptd state: error: unrecognized arguments: --jsn (did you mean --json?)", "usage: preemptd state ["),
        (
            ["publish", "x.yaml", "--no-wiat"],
            "preemptd publish: error: unrecognized arguments: --no-wiat (did you mean --no-wait?)",
            "usage: preemptd publish [",
        ),
        (["db", "upgrad"], "argument ACTION: invalid choice: 'upgrad' (choose from 'upgrade'); did you mean upgrade?", "usage: preemptd db ["),
        (["--log-level", "debg", "state"], "did you mean debug?", "usage: preemptd ["),
    ],
)
def test_a_misspelt_command_or_option_names_the_one_meant_with_that_commands_usage(argv: list[str], said: str, usage: str) -> None:
    result = preemptd(*argv)
    assert result.returncode == 2
    assert said in result.stderr and result.stderr.startswith(usage), result.stderr


def test_no_explanation_shows_epoch_milliseconds() -> None:
    """A quota enforcement said `30s from 1795705085607 ms: enforced from 1795705115607 ms`.
    Times are said in UTC, or from a simulated log's start, never as raw milliseconds."""
    from preemptd.events import format_moment
    from preemptd.scheduling._quota_timers import QuotaTimer, delay_text

    assert delay_text("quota.preemption.delay", QuotaTimer(start=1_795_705_085_607, delay=90_000)) == (
        "quota.preemption.delay 1m30s from 2026-11-26 14:58:05Z: enforced from 2026-11-26 14:59:35Z"
    )
    assert (
        delay_text("quota.preemption.delay", QuotaTimer(start=10_000, delay=30_000))
        == "quota.preemption.delay 30s from 10s after the start: enforced from 40s after the start"
    )
    assert [format_moment(ms) for ms in (951_782_400_000, 4_102_444_799_000)] == ["2000-02-29 00:00:00Z", "2099-12-31 23:59:59Z"]


def test_a_kueue_quota_enforcement_speaks_of_the_nominal_quota_and_a_simulated_log_of_times_from_its_start(tmp_path: Path) -> None:
    """Kueue's decisions never say "max" (its words: nominal quota, borrowing limit, lending
    limit), Volcano's say capability; a simulated log's explanation said 1970-01-01T00:00:40Z."""
    import sqlite3

    from preemptd.daemon.cli import render
    from preemptd.events import decode_decision

    for example, limit in (("kueue/quota-enforcement", "nominal quota"), ("volcano/quota-enforcement", "capability"), ("quota-enforcement", "max")):
        db = tmp_path / f"{example.replace('/', '-')}.db"
        assert preemptd("simulate", str(ROOT / "examples" / f"{example}.yaml"), "--quiet", "--db", str(db)).returncode == 0
        with sqlite3.connect(db) as conn:
            decision_id, payload = conn.execute("select event_id, payload from log where type = 'decision.quota_enforced' limit 1").fetchone()
        explained = preemptd("explain", decision_id, "--db", str(db)).stdout
        assert f"is over its {limit} " in explained and "after the start, partition default" in explained, explained
        assert f" over its {limit} " in render.summary(decode_decision(payload)), "tail's line too"
