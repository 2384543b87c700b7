"""Jobs and tasks as the Volcano model sees them: gang size, task priority within a job,
preemptable (missing means true), BestEffort, the pod slot every task takes, and starving as
the gang and priority plugins vote it."""

from __future__ import annotations

from conftest import partition_after

from preemptd.scheduling.volcano._jobs import jobs_of


def test_a_job_is_an_application_with_its_gang_and_its_tasks_in_volcanos_task_order() -> None:
    p = partition_after(
        {"type": "node.upserted", "node": "n1", "capacity": {"vcore": 8}},
        {"type": "app.submitted", "app": "train", "queue": "root.default", "priority": 100, "min_available": 2},
        {"type": "task.submitted", "task": "ps", "app": "train", "resources": {"vcore": 1}, "task_priority": 10},
        {"type": "task.submitted", "task": "worker-0", "app": "train", "resources": {"vcore": 2}, "preemptable": False, "task_priority": 5},
        {"type": "task.submitted", "task": "worker-2", "app": "train", "resources": {"vcore": 2}},
        {"type": "task.bound", "task": "worker-1", "app": "train", "node": "n1", "resources": {}},
    )
    job = jobs_of(p)["train"]
    assert (job.queue, job.priority, job.min_available, job.running) == ("root.default", 100, 2, 1)
    assert [t.id for t in job.pending] == ["worker-2", "ps", "worker-0"], "the pod's priority (the job's, 100) unless task_priority overrides it"
    ps, worker0, worker2, worker1 = job.tasks
    assert ps.resources == {"vcore": 1000, "pods": 1}, "every task takes a pod slot"
    assert ps.preemptable and not worker0.preemptable
    assert worker1.best_effort and not ps.best_effort
    assert (ps.priority, worker0.priority, worker2.priority) == (10, 5, 100)
    assert not job.ready
    assert job.starving(gang=True, priority=True) and job.starving(gang=False, priority=True)
    assert not job.starving(gang=False, priority=False), "no plugin votes: not starving"


def test_a_job_without_min_available_is_a_gang_of_all_its_tasks() -> None:
    p = partition_after(
        {"type": "node.upserted", "node": "n1", "capacity": {"vcore": 8}},
        {"type": "task.submitted", "task": "a", "app": "j", "queue": "root.default", "resources": {"vcore": 1}},
        {"type": "task.bound", "task": "b", "app": "j", "node": "n1", "resources": {"vcore": 1}},
    )
    job = jobs_of(p)["j"]
    assert job.min_available == 2 and job.running == 1 and job.starving(gang=True, priority=False)
