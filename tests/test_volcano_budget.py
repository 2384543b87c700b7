"""A Volcano session within the cycle's budget (`Model.budget`): it stops between jobs at the
first budget spent, and the next session goes on from there; nothing is lost on the way."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from preemptd.events import Allocated, Preempted, Scenario
from preemptd.scheduling import MODELS, Budget, simulate

QUEUES = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": {"weight": 1}} for name in ("a", "b")]
CONF = {
    "actions": "enqueue, allocate, preempt, reclaim",
    "tiers": [{"plugins": [{"name": "priority"}]}, {"plugins": [{"name": "proportion"}]}],
}  # no gang: single-task jobs may be victims


def scenario(events: list[dict]) -> Scenario:
    nodes = [{"type": "node.upserted", "node": f"n{i}", "capacity": {"cpu": 2, "pods": 110}} for i in range(4)]
    return msgspec.convert({"name": "budget", "model": "volcano", "config": [*QUEUES, CONF], "events": nodes + events, "until": "10s"}, Scenario)


def jobs(queue: str, count: int, first: int = 0, cpu: int = 1) -> list[dict]:
    return [
        {"type": "task.submitted", "task": f"{queue}-{i}", "app": f"{queue}-{i}", "queue": queue, "resources": {"cpu": cpu}}
        for i in range(first, first + count)
    ]


@pytest.fixture
def budget(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def set_budget(**bounds: int) -> None:
        monkeypatch.setitem(MODELS, "volcano", dataclasses.replace(MODELS["volcano"], budget=Budget(**bounds)))

    return set_budget


def test_a_session_places_at_most_its_budget_and_the_next_go_on(budget) -> None:  # type: ignore[no-untyped-def]
    budget(placements=3)
    result = simulate(scenario(jobs("a", 8)))
    per_cycle = [sum(1 for d in result.decisions if isinstance(d, Allocated) and d.cycle == cycle) for cycle in sorted({d.cycle for d in result.decisions})]
    assert per_cycle == [3, 3, 2], "three a session, the rest in the next"
    assert sorted(d.task for d in result.decisions if isinstance(d, Allocated)) == [f"a-{i}" for i in range(8)]


def test_a_session_serves_at_most_its_budget_of_preemptors(budget) -> None:  # type: ignore[no-untyped-def]
    """Queue a holds the whole cluster; three jobs of queue b reclaim, one a session."""
    budget(preemptions=1)
    later = [{**event, "at": "2s"} for event in jobs("b", 3, cpu=2)]
    result = simulate(scenario([*jobs("a", 4, cpu=2), *later]))
    reclaims = [d for d in result.decisions if isinstance(d, Preempted) and d.victims]
    assert [d.app for d in reclaims] == ["b-0", "b-1"] and len({d.cycle for d in reclaims}) == 2, "one preemptor a session, until b holds what it deserves"
