"""Kueue's waiting workloads kept in groups between cycles change nothing but the cost: the
model's cycle, which judges alike workloads once per state of their cohort tree and passes over
those told already, makes byte for byte the decisions of the cycle that plans every waiting
workload every cycle (`kueue_whole_plan`, the model as it was)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import kueue_whole_plan
import msgspec
import pytest
from builders import running_every_cycle
from hypothesis import HealthCheck, given, settings, strategies as st
from test_kueue_properties import scenarios

from preemptd.events import Scenario, encode
from preemptd.scheduling import _model, _registry, simulate
from preemptd.scheduling._model import BLOCKED_PER_CYCLE

ROOT = Path(__file__).resolve().parent.parent
API = "kueue.x-k8s.io/v1beta2"
SCENARIOS = sorted(p for p in [*ROOT.glob("examples/kueue/*.yaml"), *ROOT.glob("tests/scenarios/*.yaml")] if b"model: kueue" in p.read_bytes())


def whole_plan(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The decisions of the cycle that plans every waiting workload, run at every tick."""
    with monkeypatch.context() as patch:
        patch.setitem(_registry.MODELS, "kueue", dataclasses.replace(_registry.MODELS["kueue"], schedule=kueue_whole_plan.schedule))
        running_every_cycle(patch)
        return [encode(d) for d in simulate(scenario).decisions]


def decisions(scenario: Scenario) -> list[bytes]:
    return [encode(d) for d in simulate(scenario).decisions]


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_decides_as_the_whole_plan(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = msgspec.yaml.decode(path.read_bytes(), type=Scenario)
    assert decisions(scenario) == whole_plan(scenario, monkeypatch)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(scenario=scenarios(requeue=True), told=st.sampled_from([1, 2, BLOCKED_PER_CYCLE]))
def test_generated_cohorts_decide_as_the_whole_plan(scenario: Scenario, told: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a cycle's budget of `decision.blocked` small enough to spill over several cycles, too."""
    monkeypatch.setattr(_model, "BLOCKED_PER_CYCLE", told)
    assert decisions(scenario) == whole_plan(scenario, monkeypatch)


WITHIN = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM = ("Never", "LowerPriority", "Any")


@st.composite
def backlogs(draw: st.DrawFn) -> Scenario:
    """Backlogs of alike workloads: ClusterQueues in one or two cohorts (some StrictFIFO, some
    with preemption, fair sharing or not), bursts of workloads of one request and priority,
    and workloads finishing now and then, freeing quota."""
    objects: list[dict[str, Any]] = [{"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "f"}}]
    if draw(st.booleans()):
        objects.append(
            {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]}}
        )
    queues = [f"cq{i}" for i in range(draw(st.integers(2, 5)))]
    for name in queues:
        spec: dict[str, Any] = {
            "cohortName": f"c{draw(st.integers(0, 1))}",
            "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": draw(st.integers(0, 8))}]}]}
            ],
            "preemption": {"withinClusterQueue": draw(st.sampled_from(WITHIN)), "reclaimWithinCohort": draw(st.sampled_from(RECLAIM))},
        }
        if draw(st.integers(0, 3)) == 0:
            spec["queueingStrategy"] = "StrictFIFO"
        objects.append({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    events: list[dict[str, Any]] = [{"at": "0s", "type": "node.upserted", "node": "n", "capacity": {"cpu": 1000}}]
    count = 0
    for burst in range(draw(st.integers(2, 6))):
        at, queue, size, priority = draw(st.integers(0, 10)), draw(st.sampled_from(queues)), draw(st.integers(1, 3)), draw(st.integers(0, 2))
        for _ in range(draw(st.integers(1, 20))):
            name = f"w{count}"
            count += 1
            events.append(
                {"at": f"{at}s", "type": "task.submitted", "task": name, "app": name, "queue": queue, "priority": priority, "resources": {"cpu": size}}
            )
            if draw(st.integers(0, 5)) == 0:
                events.append({"at": f"{at + draw(st.integers(1, 12))}s", "type": "app.finished", "app": name})
    shim = {"grace_period": f"{draw(st.integers(0, 3))}s", "recreate_preempted": draw(st.booleans())}
    return msgspec.convert({"name": "backlog", "model": "kueue", "config": objects, "events": events, "until": "40s", "shim": shim}, Scenario)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(scenario=backlogs(), told=st.sampled_from([2, 7, BLOCKED_PER_CYCLE]))
def test_backlogs_of_alike_workloads_decide_as_the_whole_plan(scenario: Scenario, told: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a cycle's budget of `decision.blocked` small enough to run out, too."""
    monkeypatch.setattr(_model, "BLOCKED_PER_CYCLE", told)
    assert decisions(scenario) == whole_plan(scenario, monkeypatch)
