"""Volcano's idle jobs kept in groups between sessions change nothing but the cost: the model's
session, which lets in (or refuses) jobs alike once per state of their queue and tells only the
tasks not told yet, makes byte for byte the decisions of the session that reads every job and
enqueues it one by one (`volcano_whole_session`, the model as it was)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import msgspec
import pytest
import volcano_whole_session
from builders import running_every_cycle
from hypothesis import HealthCheck, given, settings, strategies as st
from test_volcano_properties import scenarios

from preemptd.events import Scenario, encode
from preemptd.scheduling import _model, _registry, simulate
from preemptd.scheduling._model import BLOCKED_PER_CYCLE

ROOT = Path(__file__).resolve().parent.parent
API = "scheduling.volcano.sh/v1beta1"
SCENARIOS = sorted(p for p in [*ROOT.glob("examples/volcano/*.yaml"), *ROOT.glob("tests/scenarios/*.yaml")] if b"model: volcano" in p.read_bytes())


def whole_session(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The decisions of the session that reads and enqueues every job, run at every tick."""
    with monkeypatch.context() as patch:
        patch.setitem(_registry.MODELS, "volcano", dataclasses.replace(_registry.MODELS["volcano"], schedule=volcano_whole_session.schedule))
        running_every_cycle(patch)
        return [encode(d) for d in simulate(scenario).decisions]


def decisions(scenario: Scenario) -> list[bytes]:
    return [encode(d) for d in simulate(scenario).decisions]


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_decides_as_the_whole_session(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = msgspec.yaml.decode(path.read_bytes(), type=Scenario)
    assert decisions(scenario) == whole_session(scenario, monkeypatch)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(scenario=scenarios(requeue=True), told=st.sampled_from([1, 3, BLOCKED_PER_CYCLE]))
def test_generated_clusters_decide_as_the_whole_session(scenario: Scenario, told: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_model, "BLOCKED_PER_CYCLE", told)
    assert decisions(scenario) == whole_session(scenario, monkeypatch)


@st.composite
def backlogs(draw: st.DrawFn) -> Scenario:
    """Backlogs of idle jobs alike: queues with capabilities (some closed, some under a parent,
    hierarchy on or off), bursts of jobs of one shape and gang, jobs finishing now and then."""
    sharing = draw(st.sampled_from(["proportion", "capacity"]))
    hierarchy = sharing == "capacity" and draw(st.booleans())
    objects: list[dict[str, Any]] = []
    queues = [f"q{i}" for i in range(draw(st.integers(2, 4)))]
    if hierarchy:
        objects.append({"apiVersion": API, "kind": "Queue", "metadata": {"name": "parent"}, "spec": {"capability": {"cpu": draw(st.integers(4, 12))}}})
    for name in queues:
        spec: dict[str, Any] = {"weight": draw(st.integers(1, 3))}
        if draw(st.integers(0, 2)):
            spec["capability"] = {"cpu": draw(st.integers(2, 14))}
        if hierarchy and draw(st.booleans()):
            spec["parent"] = "parent"
        queue: dict[str, Any] = {"apiVersion": API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}
        if draw(st.integers(0, 6)) == 0:
            queue["status"] = {"state": "Closed"}
        objects.append(queue)
    actions = draw(st.sampled_from(["enqueue, allocate, preempt, reclaim, backfill", "enqueue, allocate, backfill", "allocate, enqueue, reclaim"]))
    capacity: dict[str, Any] = {"name": sharing}
    if hierarchy:
        capacity["enableHierarchy"] = True
    objects.append(
        {
            "actions": actions,
            "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]}, {"plugins": [{"name": "predicates"}, capacity]}],
        }
    )
    events: list[dict[str, Any]] = [
        {"at": "0s", "type": "node.upserted", "node": f"n{i}", "capacity": {"cpu": draw(st.integers(4, 12)), "pods": 20}}
        for i in range(draw(st.integers(1, 3)))
    ]
    count = 0
    for _ in range(draw(st.integers(2, 6))):
        at, queue, size, tasks, priority = (
            draw(st.integers(0, 8)),
            draw(st.sampled_from(queues)),
            draw(st.integers(1, 3)),
            draw(st.integers(1, 3)),
            draw(st.integers(0, 2)),
        )
        gang = draw(st.sampled_from([1, tasks]))
        for _ in range(draw(st.integers(1, 15))):
            job = f"j{count}"
            count += 1
            events.append({"at": f"{at}s", "type": "app.submitted", "app": job, "queue": queue, "priority": priority, "min_available": gang})
            events += [{"at": f"{at}s", "type": "task.submitted", "task": f"{job}-{t}", "app": job, "resources": {"cpu": size}} for t in range(tasks)]
            if draw(st.integers(0, 5)) == 0:
                events.append({"at": f"{at + draw(st.integers(1, 10))}s", "type": "app.finished", "app": job})
    shim = {"grace_period": f"{draw(st.integers(0, 2))}s", "recreate_preempted": draw(st.booleans())}
    return msgspec.convert({"name": "backlog", "model": "volcano", "config": objects, "events": events, "until": "30s", "shim": shim}, Scenario)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(scenario=backlogs(), told=st.sampled_from([2, 7, BLOCKED_PER_CYCLE]))
def test_backlogs_of_idle_jobs_decide_as_the_whole_session(scenario: Scenario, told: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a cycle's budget of `decision.blocked` small enough to run out, too."""
    monkeypatch.setattr(_model, "BLOCKED_PER_CYCLE", told)
    assert decisions(scenario) == whole_session(scenario, monkeypatch)
