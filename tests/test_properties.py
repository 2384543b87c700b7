"""Invariants over generated clusters (hypothesis): queue trees with guarantees, maxes, fences,
offsets and opt-outs; nodes; tasks arriving over time; a shim that carries out decisions and
re-creates preempted tasks as a ReplicaSet does.

- No decision ever breaks a law (judged by an oracle written apart from the engine).
- Preemption stops: no storm, no cycle; the run ends in a state with no further preemption.
- Replay of the produced log reproduces every decision.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings, strategies as st
from laws import violations

from preemptd.events import Preempted, PriorityClassSpec, Resources, Scenario, ShimSettings, Victim
from preemptd.projections import ClusterState
from preemptd.scheduling import apply, replay, simulate

RUN_SECONDS = 240
QUIET_SECONDS = 60


@st.composite
def queue_tree(draw: st.DrawFn, depth: int = 0, max_vcore: int = 40, guarantee: int = 40) -> list[dict[str, Any]]:
    """Children of one queue, each within its parent's max and guarantee."""
    children = []
    left = guarantee
    for index in range(draw(st.integers(1, 3) if depth else st.integers(2, 4))):
        queue: dict[str, Any] = {"name": f"q{depth}{index}", "resources": {}, "properties": {}}
        own_max = draw(st.one_of(st.none(), st.integers(3, max_vcore)))
        cap = max_vcore if own_max is None else own_max
        if left and draw(st.integers(0, 3)):
            g = draw(st.integers(1, min(left, cap)))
            queue["resources"]["guaranteed"] = {"vcore": g}
            if depth == 0 and draw(st.integers(0, 2)) == 0:  # top level only: children stay within it
                queue["resources"]["guaranteed"]["memory"] = f"{draw(st.integers(1, 16))}Gi"
            left -= g
        if own_max is not None:
            queue["resources"]["max"] = {"vcore": own_max}
        queue["properties"] = draw(_properties())
        if depth < 2 and draw(st.booleans()):
            inner = queue["resources"].get("guaranteed", {}).get("vcore", 0) if "guaranteed" in queue["resources"] else 0
            queue["queues"] = draw(queue_tree(depth + 1, cap, inner))
        children.append(queue)
    return children


def _properties() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "preemption.policy": st.sampled_from(["default"] * 6 + ["fence", "disabled"]),
            "priority.offset": st.sampled_from([-10, 0, 5, 10]),
            "priority.policy": st.sampled_from(["default"] * 4 + ["fence"]),
        },
    )


def _leaves(queues: list[dict[str, Any]], prefix: str = "root") -> list[str]:
    out = []
    for queue in queues:
        path = f"{prefix}.{queue['name']}"
        out += _leaves(queue["queues"], path) if queue.get("queues") else [path]
    return out


@st.composite
def clusters(draw: st.DrawFn) -> Scenario:
    tree = draw(queue_tree())
    leaves = _leaves(tree)
    nodes = draw(st.lists(st.integers(2, 8), min_size=1, max_size=3))
    events: list[dict[str, Any]] = [
        {"at": 0, "type": "node.upserted", "node": f"n{i}", "capacity": {"vcore": v, "memory": f"{4 * v}Gi"}} for i, v in enumerate(nodes)
    ]
    for app in range(draw(st.integers(3, 8))):
        queue = draw(st.sampled_from(leaves))
        at = f"{draw(st.sampled_from([0, 0, 5, 10, 15, 20]))}s"
        for task in range(draw(st.integers(1, 8))):
            spec = {
                "at": at,
                "type": "task.submitted",
                "task": f"a{app}-t{task}",
                "app": f"a{app}",
                "queue": queue,
                "resources": {"vcore": draw(st.integers(1, 3)), "memory": f"{draw(st.sampled_from([0, 1, 2, 4]))}Gi"},
            }
            spec.update(
                draw(st.sampled_from([{"priority": 0}, {"priority": 5}, {"priority": 10}, {"priority_class": "never"}, {"priority_class": "opted-out"}]))
            )
            if draw(st.integers(0, 9)) == 0:
                spec["allow_preemption"] = False
            if draw(st.integers(0, 3)) == 0:  # common: each pod its own application makes every pod one
                spec["originator"] = True
            if draw(st.integers(0, 19)) == 0:
                spec["required_node"] = f"n{draw(st.integers(0, len(nodes) - 1))}"
            events.append(spec)
    config = {"queues": [{"name": "root", "properties": {"preemption.delay": f"{draw(st.integers(1, 5))}s"}, "queues": tree}]}
    shim = ShimSettings(grace_period=f"{draw(st.integers(0, 2))}s", recreate_preempted=draw(st.booleans()))
    classes = [PriorityClassSpec(name="never", value=5, preemption_policy="Never"), PriorityClassSpec(name="opted-out", value=0, allow_preemption=False)]
    return Scenario(name="generated", config=config, events=events, shim=shim, until=f"{RUN_SECONDS}s", priority_classes=classes)


def _check_laws(result) -> list[str]:
    """Fold the log again, judging each preemption on the state just before it."""
    state = ClusterState(log_id="sim")
    found = []
    for record in result.records:
        if isinstance(record.event, Preempted):
            partition = state.partitions[record.event.partition]
            found += [f"{record.event.id}: {v}" for v in violations(partition, record.event, record.event.ts)]
        apply(state, record)
    return found


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(clusters())
def test_no_decision_breaks_a_law(scenario: Scenario) -> None:
    result = simulate(scenario)
    assert not result.rejected, result.rejected
    preemptions = sum(isinstance(d, Preempted) for d in result.decisions)
    event(f"preemptions: {'none' if not preemptions else '1-3' if preemptions < 4 else '4+'}")
    assert _check_laws(result) == []


@SETTINGS
@given(clusters())
def test_preemption_comes_to_rest(scenario: Scenario) -> None:
    result = simulate(scenario)
    preemptions = [d for d in result.decisions if isinstance(d, Preempted)]
    late = [d.id for d in preemptions if d.ts > (RUN_SECONDS - QUIET_SECONDS) * 1000]
    assert late == [], f"still preempting at the end: {late}"
    victims = [v.task for d in preemptions for v in d.victims]
    assert len(victims) == len(set(victims)), "a task was preempted twice"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters())
def test_replay_reproduces_every_decision(scenario: Scenario) -> None:
    result = simulate(scenario)
    report = replay(result.records, log_id="sim")
    assert report.divergence is None
    assert report.reproduced == len(result.decisions)


def test_the_oracle_catches_a_broken_law() -> None:
    """The oracle is only worth its silence if it speaks up: a hand-made preemption that takes
    a queue below its guarantee and crosses nodes is reported."""
    scenario = Scenario(
        name="bad",
        config={"queues": [{"name": "a", "resources": {"guaranteed": {"vcore": 2}}}, {"name": "b", "resources": {"guaranteed": {"vcore": 2}}}]},
        events=[
            {"type": "node.upserted", "node": "n1", "capacity": {"vcore": 2}},
            {"type": "node.upserted", "node": "n2", "capacity": {"vcore": 2}},
            {"type": "task.bound", "task": "b1", "app": "b", "queue": "root.b", "node": "n1", "resources": {"vcore": 1}},
            {"type": "task.bound", "task": "b2", "app": "b", "queue": "root.b", "node": "n2", "resources": {"vcore": 1}},
            {"type": "task.submitted", "task": "a1", "app": "a", "queue": "root.a", "resources": {"vcore": 2}},
        ],
        until="1s",
    )
    state = ClusterState(log_id="sim")
    for record in simulate(scenario).records:
        apply(state, record)
    p = state.partitions["default"]
    bad = Preempted(
        id="x",
        ts=100_000,
        partition="default",
        cycle=1,
        preemptor="a1",
        app="a",
        queue="root.a",
        node="n1",
        resources=Resources({"vcore": 2000}),
        victims=tuple(
            Victim(task=t, app="b", queue="root.b", node=n, priority=0, resources=Resources({"vcore": 1000})) for t, n in (("b1", "n1"), ("b2", "n2"))
        ),
        model="yunikorn",
        reason="test",
    )
    found = violations(p, bad, 100_000)
    assert any("law 2: root.b" in v for v in found) and any("cross-node" in v for v in found)


def test_the_oracle_catches_an_opted_out_victim_taken_before_an_originator() -> None:
    """Law 1's order (ordinary, originators, then opted-out tasks): on the state of the law-1
    scenario where every pod is an originator, taking beta's opted-out task is reported, since
    alpha's could stand in for it; the engine's own choice is not."""
    from pathlib import Path

    import msgspec

    path = Path(__file__).parent / "scenarios" / "law-1-opted-out-after-originators.yaml"
    result = simulate(msgspec.yaml.decode(path.read_bytes(), type=Scenario))
    state = ClusterState(log_id="sim")
    for record in result.records:
        if isinstance(record.event, Preempted):
            p = state.partitions["default"]
            assert violations(p, record.event, record.event.ts) == []
            b2 = p.tasks["b-2"]
            wrong = Victim(task="b-2", app=b2.app, queue=b2.queue, node=b2.node, priority=0, resources=Resources(b2.resources))
            found = violations(p, msgspec.structs.replace(record.event, victims=(wrong,)), record.event.ts)
            assert found == ["law 1: victim b-2 (opted out) taken while a-1 (an originator) could stand in for it"]
            return
        apply(state, record)
    raise AssertionError("the scenario made no preemption")
