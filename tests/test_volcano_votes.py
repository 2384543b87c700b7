"""The plugins' votes on victims, combined tier by tier: gang protects a job at its gang size,
priority keeps lower-priority jobs (lower task priority within a job), proportion takes from a
queue only what it holds beyond its deserved share; the first tier with victims decides, and a
tier where one plugin keeps none yields none."""

from __future__ import annotations

from fractions import Fraction

from conftest import partition_after

from preemptd.scheduling.volcano._config import DEFAULT_CONF, parse_objects
from preemptd.scheduling.volcano._jobs import jobs_of
from preemptd.scheduling.volcano._votes import Ballot, victims


def jobs(*events: dict):
    return jobs_of(partition_after({"type": "node.upserted", "node": "n1", "capacity": {"vcore": 64}}, *events))


def running(job: str, queue: str, count: int, min_available: int, priority: int) -> list[dict]:
    return [
        {"type": "app.submitted", "app": job, "queue": queue, "priority": priority, "min_available": min_available},
        *({"type": "task.bound", "task": f"{job}-{i}", "app": job, "node": "n1", "resources": {"vcore": 1}} for i in range(count)),
    ]


JOBS = jobs(
    *running("low", "root.default", 3, 2, priority=0),
    *running("same", "root.default", 1, 1, priority=10),
    {"type": "app.submitted", "app": "high", "queue": "root.default", "priority": 10, "min_available": 1},
    {"type": "task.submitted", "task": "high-0", "app": "high", "resources": {"vcore": 1}},
)
CANDIDATES = [*JOBS["low"].tasks, *JOBS["same"].tasks]
PREEMPTOR = JOBS["high"].tasks[0]
BALLOT = Ballot(
    jobs=JOBS,
    held={"root.default": {"vcore": 4000}},
    deserved={"root.default": {"vcore": Fraction(3000)}},
    ready={job.id: job.running for job in JOBS.values()},
)


def conf(*tiers: list[dict]):
    return parse_objects([{"actions": "preempt, reclaim", "tiers": [{"plugins": plugins} for plugins in tiers]}])[0].scheduler


def test_the_default_tiers_let_priority_decide_and_gang_does_not_vote_on_preemption() -> None:
    verdict = victims(DEFAULT_CONF, "preemptable", BALLOT, PREEMPTOR, CANDIDATES)
    assert [t.id for t in verdict.allowed] == ["low-0", "low-1", "low-2"]
    assert verdict.voters == ("priority", "conformance")
    assert verdict.dropped == {"same-0": "priority: job priority 10 is not below the preemptor job's 10"}


def test_gang_protects_a_job_at_its_gang_size() -> None:
    verdict = victims(conf([{"name": "priority"}, {"name": "gang"}]), "preemptable", BALLOT, PREEMPTOR, CANDIDATES)
    assert [t.id for t in verdict.allowed] == ["low-0"], "low runs 3 with min_available 2: one may go"
    assert verdict.dropped["low-1"] == "gang: job low would drop below min_available 2 (2 ready)"


def test_a_tier_where_one_plugin_keeps_none_yields_none_and_the_next_tier_decides() -> None:
    priority_first = conf([{"name": "priority"}, {"name": "conformance"}], [{"name": "conformance"}])
    verdict = victims(priority_first, "preemptable", BALLOT, PREEMPTOR, JOBS["same"].tasks)
    assert [t.id for t in verdict.allowed] == ["same-0"], "tier 1 keeps nothing (priority refuses); conformance in tier 2 keeps it"
    assert verdict.voters == ("conformance",)


def test_a_gang_the_gang_plugin_protects_is_not_given_up_by_a_later_tier() -> None:
    gang_first = conf([{"name": "gang"}, {"name": "priority"}], [{"name": "conformance"}])
    verdict = victims(gang_first, "preemptable", BALLOT, PREEMPTOR, JOBS["same"].tasks)
    assert verdict.allowed == [], "Volcano would let conformance in tier 2 take same-0; gang guards every tier"
    assert verdict.dropped["same-0"] == "gang: job same would drop below min_available 1 (1 ready)"


def test_proportion_reclaims_only_what_a_queue_holds_beyond_its_deserved_share() -> None:
    verdict = victims(conf([{"name": "proportion"}]), "reclaimable", BALLOT, PREEMPTOR, CANDIDATES)
    assert [t.id for t in verdict.allowed] == ["low-0"], "root.default holds 4 and deserves 3"
    assert verdict.dropped["low-1"] == "proportion: queue root.default holds no more than it deserves"


def test_capacity_reclaims_what_a_queue_holds_beyond_deserved_never_below_its_guarantee() -> None:
    beyond = Ballot(jobs=JOBS, held={"root.default": {"vcore": 4000}}, deserved={"root.default": {"vcore": Fraction(3000)}}, ready=BALLOT.ready)
    verdict = victims(conf([{"name": "capacity"}]), "reclaimable", beyond, PREEMPTOR, CANDIDATES)
    assert [t.id for t in verdict.allowed] == ["low-0"], "4 held, 3 deserved: one of 1 goes"
    assert verdict.dropped["low-1"] == "capacity: queue root.default holds no more than it deserves of what the task uses"
    guarded = Ballot(jobs=JOBS, held=beyond.held, deserved={}, ready=BALLOT.ready, guarantees={"root.default": {"vcore": 2000}})
    verdict = victims(conf([{"name": "capacity"}]), "reclaimable", guarded, PREEMPTOR, CANDIDATES)
    assert [t.id for t in verdict.allowed] == ["low-0", "low-1"], "no deserved: best effort, taken down to the guarantee of 2"
    assert verdict.dropped["low-2"] == "capacity: queue root.default would drop below its guarantee"
