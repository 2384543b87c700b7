"""The fold: aggregates up the queue tree, rejection without half-application, and snapshots
that restore the state exactly (folding a log equals folding it in two halves)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgspec
import pytest
from builders import R, bound, config, fold_events, node, released, task
from hypothesis import given, settings, strategies as st

from preemptd import events as ev
from preemptd.projections import (
    SNAPSHOT_FORMAT,
    ClusterState,
    LogRecord,
    ParsedConfig,
    Projection,
    Rejected,
    SnapshotError,
)
from preemptd.scheduling import MODELS, apply, fold, restore, simulate, snapshot
from preemptd.scheduling.kueue._state import admission_of

ROOT = Path(__file__).resolve().parent.parent
TREE = [
    {"name": "a", "resources": {"guaranteed": {"vcore": 2}, "max": {"vcore": 4}}, "queues": [{"name": "a1"}, {"name": "a2"}]},
    {"name": "b"},
]


def test_usage_rolls_up_the_tree_as_tasks_move() -> None:
    state = fold_events(config(TREE), node("n1", vcore=8), task("t1", "app", "root.a.a1"), task("t2", "app", "root.a.a1"))
    p = state.partitions["default"]
    assert p.queues["root.a"].pending == {"vcore": 2000} and p.queues["root"].pending == {"vcore": 2000}
    fold_events(bound("t1", "n1"), state=state)
    assert p.queues["root.a.a1"].allocated == {"vcore": 1000}
    assert p.queues["root"].allocated == {"vcore": 1000} and p.queues["root"].pending == {"vcore": 1000}
    assert p.nodes["n1"].allocated == {"vcore": 1000}
    fold_events(released("t1"), released("t2"), state=state)
    assert p.queues["root"].allocated == {} and p.queues["root"].pending == {} and p.nodes["n1"].allocated == {}
    assert p.pending_count == 0 and "t1" not in p.tasks


def test_removing_a_node_releases_its_tasks() -> None:
    state = fold_events(config(TREE), node("n1", vcore=8), task("t1", "app", "root.b"), bound("t1", "n1"), ev.NodeRemoved(id="x", ts=0, node="n1"))
    p = state.partitions["default"]
    assert p.tasks == {} and p.queues["root.b"].allocated == {} and p.capacity == {}


def _base() -> ClusterState:
    return fold_events(
        config(TREE),
        node("n1", vcore=8),
        ev.PriorityClassUpserted(id="pc", ts=0, name="high", value=100),
        ev.AppSubmitted(id="app", ts=0, app="app", queue="root.a.a1"),
        task("t1", "app"),
        bound("t1", "n1"),
    )


BAD_EVENTS = [
    (task("x", "other", "root.nope"), "unknown queue 'root.nope'"),
    (task("x", "other", "root.a"), "root.a is a parent queue"),
    (task("x", "ghost"), "unknown application 'ghost'"),
    (task("x", "app", "root.b"), "its application 'app' is in root.a.a1"),
    (task("t1", "app"), "task 't1' already exists"),
    (task("x", "app", resources=R(vcore=5)), "more than the max of root.a (4): it could never run"),
    (task("x", "app", priority_class="nope"), "unknown priority class 'nope'"),
    (task("x", "app", required_node="n9"), "requires node 'n9', which is unknown"),
    (bound("t1", "n9"), "unknown node 'n9'"),
    (bound("x", "n1"), "must carry `app` and `resources`"),
    (released("ghost"), "unknown task 'ghost'"),
    (ev.AppSubmitted(id="y", ts=0, app="app", queue="root.b"), "application 'app' already exists"),
    (ev.AppFinished(id="y", ts=0, app="ghost"), "unknown application 'ghost'"),
    (ev.NodeRemoved(id="y", ts=0, node="n9"), "unknown node 'n9'"),
    (ev.PriorityClassDeleted(id="y", ts=0, name="nope"), "unknown priority class 'nope'"),
    (config([{"name": "b"}]), "queue root.a.a1 is used by application app"),
    (config([{"name": "a", "resources": {"guaranteed": {"vcore": 5}, "max": {"vcore": 4}}}]), "guaranteed vcore 5 is above its own max (4)"),
    (ev.ConfigApplied(id="y", ts=0, model="slurm", config={}), "model 'slurm' is not supported"),
]


@pytest.mark.parametrize(("event", "reason"), BAD_EVENTS, ids=[reason[:40] for _, reason in BAD_EVENTS])
def test_an_event_that_cannot_apply_is_rejected_and_changes_nothing(event: object, reason: str) -> None:
    state = _base()
    before = snapshot(state)
    with pytest.raises(Rejected) as caught:
        apply(state, LogRecord(state.seq + 1, 0, event))
    assert reason in caught.value.reason
    assert snapshot(state) == before


def _example_log(name: str) -> list[LogRecord]:
    scenario = msgspec.yaml.decode((ROOT / "examples" / f"{name}.yaml").read_bytes(), type=ev.Scenario)
    return simulate(scenario).records


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(["general", "allow-preemption", "priority-queues", "fence", "kueue/reclaim-within-cohort", "volcano/hierarchical-capacity"]),
    cut=st.floats(0, 1),
)
def test_folding_in_two_halves_with_a_snapshot_equals_folding_once(name: str, cut: float) -> None:
    records = _example_log(name)
    split = int(len(records) * cut)
    whole = fold(records)
    halfway = restore(snapshot(fold(records[:split])))
    assert snapshot(fold(records[split:], halfway)) == snapshot(whole)


@pytest.mark.parametrize("name", ["fence", "kueue/reclaim-within-cohort"])
def test_a_snapshot_restores_an_equal_state(name: str) -> None:
    state = fold(_example_log(name))
    assert restore(snapshot(state)) == state


def test_a_kueue_workload_keeps_its_admission_in_the_model_and_a_finished_one_takes_it_along() -> None:
    """Kueue's admissions are the model's state, not the shared application's: a workload whose
    pods all went waits for admission again, and one finished and submitted again under the same
    name starts without the admission of the first."""
    records = _example_log("kueue/reclaim-within-cohort")
    state = fold(records)
    p = state.partitions["default"]
    kept = p.model_state.admissions
    admitted = {app for app in kept if admission_of(p, p.apps[app]) is not None}
    assert admitted == {"b-1", "sb-1", "sb-2", "a-1"} and kept["a-1"].flavors == {"cpu": "default-flavor"}
    assert "b-2" in kept and admission_of(p, p.apps["b-2"]) is None, "evicted and gone: its entry holds nothing"
    assert not any(field in msgspec.structs.asdict(p.apps["a-1"]) for field in ("admission", "admitted_at", "evicted", "preempting"))
    cycle = kept["a-1"].cycle
    fold_events(released("a-1"), state=state)
    assert "a-1" in kept, "kept, but for the incarnation that is gone"
    fold_events(task("a-1", "a-1"), state=state)
    with pytest.raises(Rejected, match="which is not admitted"):  # the new pod's workload waits
        fold_events(ev.Evicted(id="x:1.1", ts=0, partition="default", cycle=cycle + 1, app="a-1", queue="team-a", reason="InClusterQueue"), state=state)
    fold_events(ev.AppFinished(id="fin", ts=0, app="b-1"), state=state)
    assert "b-1" not in kept


def test_a_snapshot_of_another_format_or_cut_short_is_refused_not_misread() -> None:
    data = snapshot(fold(_example_log("fence")))
    other_format = msgspec.msgpack.encode([SNAPSHOT_FORMAT + 1, None])
    with pytest.raises(SnapshotError, match=f"this version reads format {SNAPSHOT_FORMAT}"):
        restore(other_format)
    with pytest.raises(SnapshotError, match="unreadable snapshot"):
        restore(data[:100])


def test_a_configuration_with_any_json_number_in_a_field_the_model_ignores_snapshots_and_restores() -> None:
    """The applied configuration is kept (a restore parses it again), whatever a shim put in the
    fields the model does not read: an integer beyond 64 bits must not make snapshots fail."""
    raw = b'{"type": "config.applied", "id": "c", "ts": 1, "config": {"queues": [{"name": "a", "maxapplications": 100000000000000000000000000000}]}}'
    state = fold_events(ev.decode_cluster_event(raw), task("t1", "app", "root.a"))
    restored = restore(snapshot(state))
    assert restored == state and list(restored.partitions["default"].queues) == ["root", "root.a"]


def test_a_configuration_sent_again_is_parsed_once_and_a_refused_one_is_refused_again() -> None:
    """A shim that re-sends its configuration (at each of its starts) and a start that restores a
    snapshot and folds past it read one content once: a 1 MiB configuration costs ~0.1 s a parse."""
    parses: list[str] = []
    yunikorn = MODELS["yunikorn"]

    def counted(document: object, partition: str) -> ParsedConfig:
        parses.append(partition)
        return yunikorn.parse_config(document, partition)

    projection = Projection({"yunikorn": dataclasses.replace(yunikorn, parse_config=counted)}, "yunikorn")
    state = ClusterState()
    sent = [config(TREE, ts) for ts in range(5)] + [config(TREE[1:], 5), config(TREE, 6)]
    for event in sent:
        projection.apply(state, LogRecord(state.seq + 1, event.ts, event))
    assert len(parses) == 1 + 2  # the default of a new partition, then the two contents
    projection.restore(projection.snapshot(state))
    assert len(parses) == 3, "the restore reads the configuration in force from the cache"
    typo = ev.ConfigApplied(id="bad", ts=7, config={"queues": [{"name": "root", "queus": []}]})
    for seq in (8, 9):
        with pytest.raises(Rejected, match="unknown field queus \\(did you mean queues\\?\\)"):
            projection.apply(state, LogRecord(seq, 7, typo))
    assert len(parses) == 4 and list(state.partitions["default"].queues) == ["root", "root.a", "root.a.a1", "root.a.a2", "root.b"]


@pytest.mark.parametrize(
    ("model", "example"),
    [
        ("yunikorn", "examples/quota-enforcement.yaml"),
        ("kueue", "examples/kueue/quota-enforcement.yaml"),
        ("volcano", "examples/volcano/quota-enforcement.yaml"),
    ],
)
def test_a_snapshot_of_the_models_states_before_quota_timers_were_one_value_is_restored(model: str, example: str) -> None:
    """Snapshots taken by the version before `QuotaTimers` (each wing kept the timers' fields
    itself; `tests/fixtures/snapshot-layout-80ab94d0`, 20 s into each model's quota-enforcement
    example, its timers running) restore to the state this version folds from the same
    history: a daemon upgraded starts from its snapshot, and `state --at` from an archived
    segment's, instead of folding the whole history."""
    import msgspec

    from preemptd.events import Scenario
    from preemptd.scheduling import restore, simulate, snapshot

    data = msgspec.yaml.decode((ROOT / example).read_bytes())
    data.update(until="20s")
    data.pop("expect", None)
    folded = simulate(msgspec.convert(data, Scenario)).state
    restored = restore((ROOT / "tests" / "fixtures" / "snapshot-layout-80ab94d0" / f"{model}.msgpack").read_bytes())
    assert restored.partitions["default"].model_state.quota.timers, "the timers were running"
    assert snapshot(restored) == snapshot(folded)
