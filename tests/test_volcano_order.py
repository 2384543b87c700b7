"""The orders of Volcano's actions: queues by priority then share, jobs by priority then age,
and victims the other way round (low-priority queues with the highest share, low-priority and
newest jobs, low task priority and newest tasks first)."""

from __future__ import annotations

from fractions import Fraction

from preemptd.scheduling.volcano._jobs import Job, Task
from preemptd.scheduling.volcano._objects import Queue
from preemptd.scheduling.volcano._order import job_key, queue_key, victim_key

QUEUES = {"vip": Queue(name="vip", priority=100), "a": Queue(name="a"), "b": Queue(name="b")}
SHARES = {"vip": Fraction(2), "a": Fraction(1, 2), "b": Fraction(3, 2)}


def task(name: str, job: str, queue: str, priority: int, seq: int) -> Task:
    return Task(
        id=name,
        job=job,
        queue=queue,
        resources={"cpu": 1000, "pods": 1},
        priority=priority,
        preemptable=True,
        may_preempt=True,
        status="running",
        node="n1",
        seq=seq,
    )


def test_queues_go_by_priority_then_the_lower_share() -> None:
    assert sorted(QUEUES, key=lambda q: queue_key(QUEUES[q], SHARES[q])) == ["vip", "a", "b"]


def test_jobs_go_by_priority_then_age() -> None:
    jobs = [
        Job(id="new-high", queue="a", priority=5, min_available=1, seq=9),
        Job(id="old-low", queue="a", priority=0, min_available=1, seq=1),
        Job(id="old-high", queue="a", priority=5, min_available=1, seq=2),
    ]
    assert [j.id for j in sorted(jobs, key=job_key)] == ["old-high", "new-high", "old-low"]


def test_victims_go_the_other_way_round() -> None:
    jobs = {
        "a-low": Job(id="a-low", queue="a", priority=0, min_available=1, seq=1),
        "b-low": Job(id="b-low", queue="b", priority=0, min_available=1, seq=2),
        "b-high": Job(id="b-high", queue="b", priority=9, min_available=1, seq=3),
        "vip-low": Job(id="vip-low", queue="vip", priority=0, min_available=1, seq=4),
    }
    tasks = [
        task("vip-low-0", "vip-low", "vip", 0, 10),
        task("a-low-0", "a-low", "a", 0, 11),
        task("b-high-0", "b-high", "b", 0, 12),
        task("b-low-old", "b-low", "b", 0, 13),
        task("b-low-new", "b-low", "b", 0, 14),
        task("b-low-important", "b-low", "b", 7, 15),
    ]
    ordered = sorted(tasks, key=victim_key(QUEUES, SHARES, jobs))
    assert [t.id for t in ordered] == ["b-low-new", "b-low-old", "b-low-important", "b-high-0", "a-low-0", "vip-low-0"]


def test_with_gang_order_a_job_below_its_gang_goes_first_and_is_a_victim_last() -> None:
    """Volcano issue #2622's lesson, with gang's job order: among jobs of one priority, a job
    already below its gang is served first and robbed last."""
    broken = Job(id="broken", queue="a", priority=0, min_available=3, seq=2, tasks=[task("broken-0", "broken", "a", 0, 20)])
    whole = Job(id="whole", queue="a", priority=0, min_available=1, seq=1, tasks=[task("whole-0", "whole", "a", 0, 10)])
    assert [j.id for j in sorted([whole, broken], key=lambda j: job_key(j, gang_order=True))] == ["broken", "whole"]
    assert [j.id for j in sorted([whole, broken], key=job_key)] == ["whole", "broken"], "without it: the older first"
    key = victim_key(QUEUES, SHARES, {"broken": broken, "whole": whole}, gang_order=True)
    assert [t.id for t in sorted([*broken.tasks, *whole.tasks], key=key)] == ["whole-0", "broken-0"]
