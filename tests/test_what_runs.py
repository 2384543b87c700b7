"""What runs, said in one line whenever a configuration is applied: the model and what is on
(fair sharing and its strategies, Volcano's actions and plugins per tier), and plainly when the
configuration can preempt nothing. The same line heads `state`, marks the report and answers
`explain` of a configuration change."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import fold_events
from conftest import ROOT, preemptd

from preemptd import events as ev
from preemptd.scheduling import Timeline, describe

QUEUE = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}}
CLUSTER_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "team-a"},
    "spec": {
        "cohortName": "all",
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}],
    },
}
FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
FAIR = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]}}
RECLAIM = {"actions": "enqueue, allocate, reclaim", "tiers": [{"plugins": [{"name": "gang"}]}, {"plugins": [{"name": "proportion"}]}]}


def with_preemption(policy: str) -> dict:
    return {**CLUSTER_QUEUE, "spec": {**CLUSTER_QUEUE["spec"], "preemption": {"reclaimWithinCohort": policy}}}


@pytest.mark.parametrize(
    ("model", "config", "line"),
    [
        (None, {"queues": [{"name": "a"}]}, "yunikorn: 2 queues (1 leaf); preemption on, at most 100 victims and 10% of the cluster a cycle"),
        (
            None,
            {"preemption": {"enabled": False}},
            "yunikorn: 2 queues (1 leaf); preemption off (partition preemption.enabled: false): nothing will be preempted",
        ),
        (
            None,
            {
                "queues": [
                    {"name": "root", "properties": {"preemption.policy": "fence"}, "queues": [{"name": "a", "properties": {"preemption.policy": "disabled"}}]}
                ]
            },
            "yunikorn: 2 queues (1 leaf); preemption on, at most 100 victims and 10% of the cluster a cycle; preemption.policy fence: root; "
            "preemption.policy disabled: root.a",
        ),
        (
            "kueue",
            [FLAVOR, CLUSTER_QUEUE],
            "kueue: 1 ClusterQueue in 1 cohort, 0 LocalQueues, 0 priority classes; classic preemption (fair sharing off); "
            "no ClusterQueue may preempt (withinClusterQueue and reclaimWithinCohort Never): nothing will be preempted",
        ),
        (
            "kueue",
            [FLAVOR, with_preemption("Any"), FAIR],
            "kueue: 1 ClusterQueue in 1 cohort, 0 LocalQueues, 0 priority classes; fair sharing on (LessThanInitialShare); 1 of 1 ClusterQueues may preempt",
        ),
        (
            "volcano",
            [QUEUE],
            "volcano: 2 queues under root; actions enqueue, allocate, backfill; plugins by tier [priority, gang, conformance] [drf, predicates, proportion]; "
            "no preempt or reclaim action: nothing will be preempted",
        ),
        ("volcano", [QUEUE, RECLAIM], "volcano: 2 queues under root; actions enqueue, allocate, reclaim; plugins by tier [gang] [proportion]"),
    ],
)
def test_a_configuration_says_what_runs(model: str | None, config: object, line: str) -> None:
    applied = ev.ConfigApplied(id="c", ts=0, config=config, **({"model": model} if model else {}))
    state = fold_events(applied)
    assert describe(state.partitions["default"]) == line
    timeline = Timeline("log", 1)
    timeline.step(state_record(applied))
    [marker] = timeline.result("t")["partitions"][0]["markers"]
    assert marker["text"] == f"configuration applied: {line}", "the report marks the change with the same line"


def state_record(event: ev.ConfigApplied):
    from preemptd.projections import LogRecord

    return LogRecord(1, 0, event)


def test_state_and_explain_say_what_a_configuration_runs(tmp_path: Path) -> None:
    db = tmp_path / "volcano.db"
    assert preemptd("simulate", str(ROOT / "examples" / "volcano" / "reclaimable-false.yaml"), "--quiet", "--db", str(db)).returncode == 0
    runs = (
        "volcano: 4 queues under root; actions enqueue, allocate, preempt, reclaim, backfill; plugins by tier [priority, gang, conformance] [drf, "
        "predicates, proportion]"
    )
    state = preemptd("state", "--db", str(db))
    assert state.stdout.splitlines()[:2] == ["partition default at log seq 64", runs]
    explained = preemptd("explain", "config", "--db", str(db))
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.splitlines()[2:] == [f"  runs: {runs}", "  the partition's first configuration"]
