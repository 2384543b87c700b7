"""Volcano's allocate for one job: a gang starts whole or not at all (every tentative placement
undone), and every task takes a pod slot, so a node's pod count limits even BestEffort tasks."""

from __future__ import annotations

from conftest import partition_after

from preemptd.scheduling.volcano._allocate import allocate_job
from preemptd.scheduling.volcano._jobs import jobs_of
from preemptd.scheduling.volcano._nodes import Nodes


def job_of(tasks: int, min_available: int, cpu: int = 2) -> list[dict]:
    return [
        {"type": "app.submitted", "app": "j", "queue": "root.default", "min_available": min_available},
        *({"type": "task.submitted", "task": f"t{i}", "app": "j", "resources": {"vcore": cpu} if cpu else {}} for i in range(tasks)),
    ]


NODES = [{"type": "node.upserted", "node": f"n{i}", "capacity": {"vcore": 2, "pods": 110}} for i in (1, 2)]


def test_a_gang_that_cannot_start_whole_places_nothing_and_leaves_the_nodes_as_they_were() -> None:
    p = partition_after(*NODES, *job_of(tasks=3, min_available=3))
    nodes = Nodes.of(p)
    before = {name: dict(used) for name, used in nodes.used.items()}
    placed, why = allocate_job(jobs_of(p)["j"], nodes)
    assert placed == []
    gang = "gang: job j needs 3 tasks placed to start (min_available): 0 placed, 2 more could be now"
    assert why == {"t0": gang, "t1": gang, "t2": "no node has room for it now"}, "the tasks placed wait for the gang; the other says why itself"
    assert nodes.used == before


def test_a_gang_of_two_starts_with_the_tasks_that_fit() -> None:
    p = partition_after(*NODES, *job_of(tasks=3, min_available=2))
    placed, why = allocate_job(jobs_of(p)["j"], Nodes.of(p))
    assert [(task.id, node) for task, node in placed] == [("t0", "n1"), ("t1", "n2")] and why == {"t2": "no node has room for it now"}


def test_the_pod_count_of_a_node_limits_best_effort_tasks() -> None:
    p = partition_after({"type": "node.upserted", "node": "n1", "capacity": {"vcore": 8, "pods": 2}}, *job_of(tasks=3, min_available=1, cpu=0))
    placed, _ = allocate_job(jobs_of(p)["j"], Nodes.of(p))
    assert [task.id for task, _ in placed] == ["t0", "t1"], "two pod slots: the third BestEffort task waits"
