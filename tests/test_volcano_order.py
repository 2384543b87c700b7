"""The orders of Volcano's actions: queues by priority then share, jobs as the plugins that
order them say in their tier order (priority, gang, drf's share) then age, and victims the
other way round (low-priority queues with the highest share, low-priority and newest jobs, low
task priority and newest tasks first)."""

from __future__ import annotations

from fractions import Fraction

from preemptd.scheduling.volcano._config import Plugin, Queue, SchedulerConf
from preemptd.scheduling.volcano._jobs import Job, Task
from preemptd.scheduling.volcano._order import job_key, job_orders, queue_key, victim_key

BY_PRIORITY = job_key(("priority",), {})

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
    assert [j.id for j in sorted(jobs, key=BY_PRIORITY)] == ["old-high", "new-high", "old-low"]


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
    ordered = sorted(tasks, key=victim_key(QUEUES, SHARES, jobs, BY_PRIORITY))
    assert [t.id for t in ordered] == ["b-low-new", "b-low-old", "b-low-important", "b-high-0", "a-low-0", "vip-low-0"]


def test_with_gang_order_a_job_below_its_gang_goes_first_and_is_a_victim_last() -> None:
    """Volcano issue #2622's lesson, with gang's job order: among jobs of one priority, a job
    already below its gang is served first and robbed last."""
    broken = Job(id="broken", queue="a", priority=0, min_available=3, seq=2, tasks=[task("broken-0", "broken", "a", 0, 20)])
    whole = Job(id="whole", queue="a", priority=0, min_available=1, seq=1, tasks=[task("whole-0", "whole", "a", 0, 10)])
    gang_order = job_key(("priority", "gang"), {})
    assert [j.id for j in sorted([whole, broken], key=gang_order)] == ["broken", "whole"]
    assert [j.id for j in sorted([whole, broken], key=BY_PRIORITY)] == ["whole", "broken"], "without it: the older first"
    key = victim_key(QUEUES, SHARES, {"broken": broken, "whole": whole}, gang_order)
    assert [t.id for t in sorted([*broken.tasks, *whole.tasks], key=key)] == ["whole-0", "broken-0"]


def test_the_plugins_order_jobs_in_their_tier_order_and_drf_by_dominant_share() -> None:
    conf = SchedulerConf(
        actions=("allocate",),
        tiers=((Plugin(name="priority"), Plugin(name="gang", switches={"enableJobOrder": False})), (Plugin(name="drf"), Plugin(name="proportion"))),
    )
    assert job_orders(conf) == ("priority", "drf"), "gang's switched off; proportion orders queues, not jobs"
    heavy = Job(id="heavy", queue="a", priority=0, min_available=1, seq=1)
    light = Job(id="light", queue="a", priority=0, min_available=1, seq=2)
    urgent = Job(id="urgent", queue="a", priority=5, min_available=1, seq=3)
    key = job_key(job_orders(conf), {"heavy": Fraction(1, 2), "light": Fraction(1, 8), "urgent": Fraction(3, 4)})
    assert [j.id for j in sorted([heavy, light, urgent], key=key)] == ["urgent", "light", "heavy"], "priority first, then the lower share, not age"
