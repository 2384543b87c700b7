"""preemptd's extension of Volcano: a lowered capability enforced after the Queue's
`preemptd.io/quota-preemption-delay`. The rules are scenarios (examples/volcano/quota-*.yaml);
here the annotation's reading, and the invariants over generated jobs and cuts: once enforced,
the queue is within its capability unless a decision says how much stays over (`short`); no
job is left below its gang unless all of it went; replay reproduces every decision."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from preemptd.events import ConfigError, QuotaEnforced, Scenario
from preemptd.scheduling import replay, simulate
from preemptd.scheduling.volcano._config import QUOTA_DELAY_ANNOTATION, parse_objects

CONF = {
    "actions": "enqueue, allocate, preempt, reclaim, backfill",
    "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
        {"plugins": [{"name": "drf", "enablePreemptable": False}, {"name": "predicates"}, {"name": "capacity"}]},
    ],
}


def queue(capability: int, delay: str | None = "5s") -> dict:
    annotations = {QUOTA_DELAY_ANNOTATION: delay} if delay is not None else {}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q", "annotations": annotations},
        "spec": {"capability": {"cpu": capability}},
    }


def test_the_annotation_is_a_duration_off_when_left_out_or_zero() -> None:
    assert parse_objects([queue(4, "1m30s")])[0].queues["q"].quota_preemption_delay == 90_000
    assert parse_objects([queue(4, None)])[0].queues["q"].quota_preemption_delay == 0
    assert parse_objects([queue(4, "0s")])[0].queues["q"].quota_preemption_delay == 0


@pytest.mark.parametrize(("delay", "reason"), [("soon", "is not a duration"), ("-5s", "must be"), (30, "must be a string duration")])
def test_a_bad_annotation_is_refused_with_its_reason(delay: object, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        parse_objects([queue(4, delay)])  # type: ignore[arg-type]


def test_the_annotation_without_a_capability_is_a_note() -> None:
    item = queue(4)
    del item["spec"]["capability"]
    assert any("nothing to enforce" in note for note in parse_objects([item])[1])


@st.composite
def cuts(draw: st.DrawFn) -> dict:
    """Jobs of queue q (1 to 4 tasks of 1 to 3 CPUs, a gang of 0 to all of them, some tasks not
    preemptable), all running; at 10 s a cut of q's capability to between nothing and its use."""
    jobs = []
    for j in range(draw(st.integers(1, 4))):
        sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
        kept = draw(st.lists(st.booleans(), min_size=len(sizes), max_size=len(sizes)))
        jobs.append((f"j{j}", sizes, draw(st.integers(0, len(sizes))), kept))
    used = sum(sum(sizes) for _, sizes, _, _ in jobs)
    cut = draw(st.integers(0, used))
    events: list[dict] = [{"type": "node.upserted", "node": "n1", "capacity": {"cpu": 64, "pods": 110}}]
    for job, sizes, gang, kept in jobs:
        events.append({"type": "app.submitted", "app": job, "queue": "q", "min_available": gang, "priority": draw(st.integers(0, 2))})
        for i, (size, not_preemptable) in enumerate(zip(sizes, kept)):
            events.append(
                {
                    "type": "task.submitted",
                    "task": f"{job}-{i}",
                    "app": job,
                    "resources": {"cpu": size},
                    **({"preemptable": False} if not_preemptable and i else {}),
                }
            )
    events.append({"at": "10s", "type": "config.applied", "model": "volcano", "config": [queue(cut), CONF]})
    return {"name": "cut", "model": "volcano", "config": [queue(64), CONF], "events": events, "until": "30s"}


@settings(max_examples=60, deadline=None)
@given(scenario=cuts())
def test_a_cut_capability_is_met_or_said_short_no_gang_broken_unless_whole_and_replays(scenario: dict) -> None:
    result = simulate(msgspec.convert(scenario, Scenario))
    p = result.state.partitions["default"]
    cut = scenario["events"][-1]["config"][0]["spec"]["capability"]["cpu"] * 1000
    held = p.queues["q"].allocated.get("cpu", 0)
    enforced = [d for d in result.decisions if isinstance(d, QuotaEnforced)]
    assert all(d.ts == 15_000 for d in enforced), "enforced when the delay runs out"
    if held > cut:
        assert enforced and dict(enforced[-1].short or {}) == {"cpu": held - cut}, f"q holds {held - cut} over its capability and no decision says so"
    evicted: dict[str, int] = {}
    for decision in enforced:
        for victim in decision.victims:
            evicted[victim.app] = evicted.get(victim.app, 0) + 1
    gangs = {e["app"]: e["min_available"] for e in scenario["events"] if e["type"] == "app.submitted"}
    for app, gone in sorted(evicted.items()):
        tasks = sum(1 for e in scenario["events"] if e.get("app") == app and e["type"] == "task.submitted")
        assert gone == tasks or tasks - gone >= gangs[app], f"job {app} was left below its gang"
    report = replay(result.records, log_id="sim")
    assert report.divergence is None and report.reproduced == len(result.decisions)
