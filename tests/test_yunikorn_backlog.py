"""The YuniKorn backlog kept between cycles changes nothing but the cost: the model's cycle,
which visits tasks by group and passes over cycles with nothing new, makes byte for byte the
decisions of the cycle that visits every pending task every cycle (`yunikorn_whole_scan`, the
model as it was); and the backlog kept from record to record is the one built from the whole
partition."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yunikorn_whole_scan
from builders import running_every_cycle
from hypothesis import HealthCheck, given, settings, strategies as st
from test_properties import clusters

from preemptd.events import Scenario, ShimSettings, TaskSubmitted, encode
from preemptd.projections import ClusterState, PartitionState
from preemptd.projections._resources import _SHAPES
from preemptd.scheduling import _model, _registry, apply, simulate
from preemptd.scheduling._model import BLOCKED_PER_CYCLE
from preemptd.scheduling.yunikorn import _backlog
from preemptd.scheduling.yunikorn._backlog import Backlog
from preemptd.scheduling.yunikorn._kept import backlog

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted(
    p for p in [*ROOT.glob("examples/*.yaml"), *ROOT.glob("examples/quota/*.yaml"), *ROOT.glob("tests/scenarios/*.yaml")] if b"model: " not in p.read_bytes()
)


def whole_scan(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The decisions of the cycle that visits every pending task, run at every tick (none
    passed over)."""
    model = _registry.MODELS["yunikorn"]
    with monkeypatch.context() as patch:
        patch.setitem(_registry.MODELS, "yunikorn", dataclasses.replace(model, schedule=yunikorn_whole_scan.schedule))
        running_every_cycle(patch)
        return [encode(d) for d in simulate(scenario).decisions]


def decisions(scenario: Scenario) -> list[bytes]:
    return [encode(d) for d in simulate(scenario).decisions]


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_decides_as_the_whole_scan(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = msgspec.yaml.decode(path.read_bytes(), type=Scenario)
    assert decisions(scenario) == whole_scan(scenario, monkeypatch)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(scenario=clusters())
def test_generated_clusters_decide_as_the_whole_scan(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    assert decisions(scenario) == whole_scan(scenario, monkeypatch)


@st.composite
def backlogs(draw: st.DrawFn) -> Scenario:
    """Backlogs of many alike tasks: a few leaves with guarantees and maxes, tasks in bursts of
    one ask, priority and policy (some on a required node, some still within their delay),
    victims that take a while to leave, preemption off in some partitions."""
    leaves = [f"q{i}" for i in range(draw(st.integers(2, 4)))]
    queues = []
    for index, name in enumerate(leaves):
        resources: dict[str, Any] = {}
        if index % 2 or draw(st.integers(0, 3)) == 0:  # guaranteed leaves reclaim from the others
            resources["guaranteed"] = {"vcore": draw(st.integers(2, 8))}
        if draw(st.integers(0, 2)) == 0:
            resources["max"] = {"vcore": draw(st.integers(4, 16))}
        queues.append({"name": name, "resources": resources, "properties": {"preemption.delay": f"{draw(st.integers(0, 6))}s"}})
    nodes = draw(st.integers(1, 4))
    events: list[dict[str, Any]] = [{"at": 0, "type": "node.upserted", "node": f"n{i}", "capacity": {"vcore": 6}} for i in range(nodes)]
    for burst in range(draw(st.integers(2, 7))):
        early = burst < 2  # the first bursts fill the cluster from the leaves without a guarantee
        spec: dict[str, Any] = {
            "at": "0s" if early else f"{draw(st.sampled_from([2, 5, 9, 14]))}s",
            "type": "task.submitted",
            "queue": f"root.{draw(st.sampled_from(leaves[0::2] if early else leaves))}",
            "resources": {"vcore": draw(st.integers(1, 3))},
            "priority": draw(st.sampled_from([0, 0, 5, 10])),
        }
        if draw(st.integers(0, 4)) == 0:
            spec["required_node"] = f"n{draw(st.integers(0, nodes - 1))}"
        if draw(st.integers(0, 5)) == 0:
            spec["preemption_policy"] = "Never"
        if draw(st.integers(0, 5)) == 0:
            spec["allow_preemption"] = False
        apps = draw(st.integers(1, 3))
        events += [{**spec, "task": f"b{burst}-{i}", "app": f"b{burst}-{i % apps}"} for i in range(draw(st.integers(1, 25)))]
    config = {"preemption": {"enabled": draw(st.integers(0, 5)) > 0}, "queues": [{"name": "root", "queues": queues}]}
    shim = ShimSettings(grace_period=f"{draw(st.integers(0, 8))}s", recreate_preempted=draw(st.booleans()))
    return msgspec.convert({"name": "backlog", "config": config, "events": events, "until": "40s", "shim": msgspec.to_builtins(shim)}, Scenario)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(scenario=backlogs(), told=st.sampled_from([2, 7, BLOCKED_PER_CYCLE]), fresh_most=st.sampled_from([0, 5, _backlog.FRESH_MOST]))
def test_backlogs_of_alike_tasks_decide_as_the_whole_scan(scenario: Scenario, told: int, fresh_most: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a cycle's budget of `decision.blocked` small enough to run out, too, and bursts of
    changed tasks both tried from the fresh lists and filed at once (`FRESH_MOST`)."""
    monkeypatch.setattr(_model, "BLOCKED_PER_CYCLE", told)
    monkeypatch.setattr(_backlog, "FRESH_MOST", fresh_most)
    assert decisions(scenario) == whole_scan(scenario, monkeypatch)


def filed(p: PartitionState, kept: Backlog) -> dict[str, Any]:
    """What a backlog holds: per leaf and group, per reasons told, the task ids in order, and
    how many are within their delay; per leaf, which, and how many groups of each priority."""
    return {
        path: (
            {key: ({reasons: [task.id for task in bucket] for reasons, bucket in group.told.items()}, group.young) for key, group in leaf.groups.items()},
            sorted(leaf.young),
            leaf.priorities,
        )
        for path, leaf in kept.leaves.items()
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=clusters(), data=st.data())
def test_the_backlog_kept_record_by_record_is_the_one_built_whole(scenario: Scenario, data: st.DataObject) -> None:
    """Refreshed now and then as allocation does (a few changed tasks kept apart, not filed)."""
    records = simulate(scenario).records
    checked = sorted(data.draw(st.lists(st.integers(0, len(records) - 1), max_size=8)))
    kept_apart = set(data.draw(st.lists(st.integers(0, len(records) - 1), max_size=len(records))))
    state = ClusterState(log_id="sim")
    for index, record in enumerate(records):
        apply(state, record)
        p = state.partitions.get(record.event.partition)
        if p is None or p.model != "yunikorn":
            continue
        if index in kept_apart:
            backlog(p, record.received, fresh=True)
        if index not in checked:
            continue
        kept = filed(p, backlog(p, record.received))
        fresh = Backlog(p)
        fresh.refresh(p, record.received)
        assert kept == filed(p, fresh), record


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=backlogs())
def test_a_shared_ask_shape_is_never_changed_in_place(scenario: Scenario) -> None:
    """Tasks of one ask share one resources mapping (`projections.shared_shape`): after any run,
    every mapping shared still holds the ask it was shared for, and every task its own ask."""
    result = simulate(scenario)
    assert all(dict(key) == shared for key, shared in _SHAPES.items())
    asked = {event.task: dict(event.resources.amounts) for record in result.records if isinstance(event := record.event, TaskSubmitted)}
    for task in result.state.partitions["default"].tasks.values():
        assert task.resources == asked.get(task.id, task.resources)
