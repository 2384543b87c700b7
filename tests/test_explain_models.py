"""`preemptd explain NAME` reads like the model: under Kueue a workload's decisions are found from
the workload or any of its pods, under Volcano from the job or a task, each said in the model's
words; amounts are in human units (cores, millicores below one, binary units of memory); an
unknown name is refused in one line with the name probably meant."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, preemptd

from preemptd.events import format_human
from preemptd.scheduling import model_named

#: What Kueue's words call a workload's tasks (its pods, once its words say so).
POD = model_named("kueue").parse_config({}, "default").words.task


def simulated(tmp_path: Path, scenario: Path) -> Path:
    db = tmp_path / f"{scenario.stem}.db"
    made = preemptd("simulate", str(scenario), "--quiet", "--db", str(db))
    assert made.returncode == 0, made.stderr
    return db


def explain(db: Path, name: str) -> str:
    explained = preemptd("explain", name, "--db", str(db))
    assert explained.returncode == 0, explained.stderr
    return explained.stdout


def test_kueue_a_workload_and_any_of_its_pods_find_the_same_decisions(tmp_path: Path) -> None:
    """low-1 (pods low-1-1, low-1-2) is admitted, then evicted for urgent (pod urgent-1): the
    eviction is urgent's story too, as its preemptor."""
    db = simulated(tmp_path, ROOT / "examples" / "kueue" / "within-cluster-queue.yaml")
    low = explain(db, "low-1")
    assert low.splitlines()[0] == f"workload low-1 ({POD}s low-1-1, low-1-2) in partition default: 2 decisions"
    assert (
        "workload low-1 is admitted to ClusterQueue team-a" in low
        and "workload low-1 (ClusterQueue team-a) is evicted; reason: InClusterQueue; preemptor: urgent" in low
    )
    assert explain(db, "low-1-1") == low == explain(db, "low-1-2")
    urgent = explain(db, "urgent-1")
    assert urgent == explain(db, "urgent")
    assert urgent.splitlines()[0] == f"workload urgent ({POD}s urgent-1) in partition default: 2 decisions"
    assert [line.split()[1] for line in urgent.splitlines()[1:] if not line.startswith(" ")] == ["decision.evicted", "decision.admitted"]
    blocked = explain(db, "low-2-1")
    assert f"{POD} low-2-1 (workload low-2, ClusterQueue team-a) waits:" in blocked


def test_volcano_a_job_finds_its_tasks_decisions_and_a_task_its_own(tmp_path: Path) -> None:
    """Within job train, ps-0 preempts worker-2, then is allocated where it went."""
    db = simulated(tmp_path, ROOT / "examples" / "volcano" / "task-preemption-within-a-job.yaml")
    job = explain(db, "train")
    assert job.splitlines()[0] == "job train (tasks worker-0, worker-1, worker-2, ps-0) in partition default: 2 decisions"
    preemptor = explain(db, "ps-0")
    assert preemptor.splitlines()[0] == "job train, task ps-0 in partition default: 2 decisions"
    assert preemptor.splitlines()[1:] == job.splitlines()[1:]
    assert "preemptor task ps-0 (job train, queue default) asks cpu 1" in preemptor
    assert "task ps-0 (job train, queue default) asks cpu 1: allocated to node-1" in preemptor
    victim = explain(db, "worker-2")
    assert victim.splitlines()[0] == "job train, task worker-2 in partition default: 1 decision"
    assert "decision.preempted" in victim and "decision.allocated" not in victim
    assert "    - task worker-2 (job train, queue default, priority 0, cpu 1)" in victim


MEMORY = """\
name: memory in human units
model: yunikorn
config:
  queues:
    - name: root
      properties: {preemption.delay: 1s}
      queues:
        - {name: team-a, resources: {guaranteed: {vcore: 1, memory: 10Gi}}}
        - {name: team-b, resources: {guaranteed: {vcore: 1, memory: 5Gi}}}
events:
  - {at: 0s, type: node.upserted, node: node-1, capacity: {vcore: 2, memory: 20Gi}}
  - {at: 0s, type: task.submitted, repeat: 4, task: "b-{i}", app: batch-b, queue: root.team-b, resources: {vcore: 500m, memory: 5Gi}}
  - {at: 2s, type: task.submitted, task: a-1, app: train-a, queue: root.team-a, resources: {vcore: 500m, memory: 1.5G}}
until: 10s
"""


def test_yunikorn_memory_and_cores_are_explained_in_human_units(tmp_path: Path) -> None:
    scenario = tmp_path / "memory.yaml"
    scenario.write_text(MEMORY)
    out = explain(simulated(tmp_path, scenario), "a-1")
    assert out.splitlines()[0] == "application train-a, task a-1 in partition default: 2 decisions"
    assert "preemptor task a-1 (application train-a, queue root.team-a) asks memory 1500M, vcore 500m" in out
    assert "law 4: root.team-a is under its guarantee: it uses memory 0, vcore 0 of memory 10Gi, vcore 1" in out
    assert "(memory 20Gi, vcore 2 of memory 5Gi, vcore 1)" in out
    assert "1500000000" not in out and "5368709120" not in out and "0.5" not in out


@pytest.mark.parametrize(
    ("resource", "amount", "shown"),
    [
        ("cpu", 2000, "2"),
        ("cpu", 1500, "1.5"),
        ("vcore", 500, "500m"),
        ("cpu", 0, "0"),
        ("memory", 10 * 2**30, "10Gi"),
        ("memory", 3 * 2**29, "1536Mi"),
        ("memory", 10**9, "1G"),
        ("memory", 1234567890, "~1.15Gi"),
        ("memory", 512, "512"),
        ("ephemeral-storage", 2**40, "1Ti"),
        ("hugepages-2Mi", 2**22, "4Mi"),
        ("nvidia.com/gpu", 1024, "1024"),
        ("pods", 2048, "2048"),
    ],
)
def test_amounts_read_in_human_units(resource: str, amount: int, shown: str) -> None:
    assert format_human(resource, amount) == shown


def test_an_unknown_name_is_refused_in_one_line_with_the_name_meant(tmp_path: Path) -> None:
    db = simulated(tmp_path, ROOT / "examples" / "volcano" / "task-preemption-within-a-job.yaml")
    refused = preemptd("explain", "wroker-2", "--db", str(db))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"preemptd: no decision with id 'wroker-2' and no application, task or queue named 'wroker-2' in {db} (did you mean worker-2?)"
    ]


@pytest.mark.parametrize(
    ("example", "name", "heading"),
    [
        ("kueue/reclaim-within-cohort", "team-b", "ClusterQueue team-b in partition default: 3 decisions: placed or admitted 2; taken from it 1"),
        (
            "kueue/reclaim-within-cohort",
            "prod",
            "cohort prod (ClusterQueues svc-a, svc-b) in partition default: 3 decisions: placed or admitted 2; waits told 1",
        ),
        ("kueue/within-cluster-queue", "ml/training", "LocalQueue ml/training (ClusterQueues team-a) in partition default:"),
        ("general", "root.normal.queue-1", "queue root.normal.queue-1 in partition default: 13 decisions: placed or admitted 10; taken from it 3"),
        ("volcano/hierarchical-capacity", "eng", "queue eng (queues jobs may use eng-ci, eng-dev)"),
    ],
)
def test_explain_takes_a_queue_of_any_model_and_tells_its_story(example: str, name: str, heading: str, tmp_path: Path) -> None:
    """`explain team-a` said there was no application or task of that name: a Kueue admin asks
    about ClusterQueues, LocalQueues and cohorts, a YuniKorn operator about queues."""
    db = tmp_path / "log.db"
    assert preemptd("simulate", str(ROOT / "examples" / f"{example}.yaml"), "--quiet", "--db", str(db)).returncode == 0
    explained = preemptd("explain", name, "--db", str(db))
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.startswith(heading), explained.stdout[:300]


@pytest.mark.parametrize(
    ("example", "name", "said"),
    [
        (
            "kueue/reclaim-within-cohort",
            "team-a",
            [
                "  team-a cpu in default-flavor: admitted (quota reserved) 0 at the start, at most 4 (6s after the start), 4 at the end; nominal quota 4",
                "  used beyond their nominal quota while team-a held under its own: team-b (for 5s, at most 4 cpu in default-flavor beyond)",
            ],
        ),
        (
            "kueue/reclaim-within-cohort",
            "prod",
            [
                "  svc-a cpu in default-flavor: admitted (quota reserved) nothing; nominal quota 4",
                "  used beyond their nominal quota while svc-a held under its own: svc-b (for 19s, at most 4 cpu in default-flavor beyond)",
                "  no other queue used beyond its nominal quota while svc-b held under its own",
            ],
        ),
        (
            "general",
            "root.normal",
            [
                "  root.normal vcore: allocated 10 at the start, at most 12 (3s after the start), 12 at the end; max 12",
                "  root.normal has no guaranteed: nothing of its own left unused for others",
            ],
        ),
        (
            "volcano/hierarchical-capacity",
            "eng",
            [
                "  eng cpu: allocated 2 at the start, at most 5 (6s after the start), 5 at the end; deserved 6, capability 8",
                "  used beyond their deserved while eng held under its own: research (for 6s, at most 4 cpu beyond)",
            ],
        ),
    ],
)
def test_a_queue_story_tells_its_usage_against_its_quotas_and_who_used_what_it_left(example: str, name: str, said: list[str], tmp_path: Path) -> None:
    """Under its heading a queue's story says what it held over the log against its bounds, in
    the model's words, and which queues used beyond their own first bound (Kueue's nominal
    quota, Volcano's deserved) while it held under its own: who borrowed what it left."""
    db = tmp_path / "log.db"
    assert preemptd("simulate", str(ROOT / "examples" / f"{example}.yaml"), "--quiet", "--db", str(db)).returncode == 0
    explained = preemptd("explain", name, "--db", str(db))
    assert explained.returncode == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert lines[1].startswith("usage from 0s after the start to "), lines[:3]
    for line in said:
        assert line in lines, (line, lines[:8])


def test_who_borrowed_is_timed_once_whatever_the_resources_and_each_said_in_its_own_unit() -> None:
    """A queue under its guarantee in cpu and memory for 10 s while another is above its own in
    both: 10 s, not 20, and the most of each resource beyond, each in its unit."""
    from preemptd.scheduling import queue_usage

    gi = float(2**30)

    def series(held: float, bound: float) -> dict:
        return {"allocated": [held] * 4, "guaranteed": [bound] * 4}

    drawn = {
        "times": [0.0, 5.0, 10.0, 11.0],  # the last: the report's hold, not a moment
        "curves": [{"name": "allocated", "words": "allocated", "kind": "held"}, {"name": "guaranteed", "words": "guaranteed", "kind": "bound"}],
        "queues": [
            {"path": "root.a", "series": {"vcore": series(0, 4), "memory": series(0, 8 * gi)}},
            {"path": "root.b", "series": {"vcore": series(6, 2), "memory": series(10 * gi, 2 * gi)}},
        ],
    }
    lines = queue_usage(drawn, ("root.a",), ("root.b",))
    assert lines[0] == "usage from 0s after the start to 10s after the start (3 moments sampled):"
    assert lines[-1] == "  used beyond their guaranteed while root.a held under its own: root.b (for 10s, at most 8Gi memory, 4 vcore beyond)"
