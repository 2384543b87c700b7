"""A model is a wing of `scheduling` and one line in the registry; nothing else names it.

A stub model, registered by this test only, proves the recipe: the fold takes its
configuration, keeps its settings and state (through snapshots too) and folds its own decisions;
scenario files, replay and the daemon's configuration files reach it through the registry. It
decides nothing: its cycle runs and makes no decision.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest
from builders import R, node, task

from preemptd import events as ev
from preemptd.daemon.config_file import config_events
from preemptd.daemon.errors import UsageError
from preemptd.events import ConfigError, Scenario
from preemptd.projections import ClusterState, Folds, LogRecord, ParsedConfig, PartitionState, QueueConfig, Rejected, SnapshotError
from preemptd.scheduling import MODELS, Budget, Cycle, Model, Replayer, apply, restore, run_cycle, simulate, snapshot, tick_record

ROOT = Path(__file__).resolve().parent.parent


class StubProps(msgspec.Struct, frozen=True):
    weight: int = 1


class StubSettings(msgspec.Struct, frozen=True):
    strict: bool = False


class StubState(msgspec.Struct):
    admitted: list[str] = []


def parse_stub(document: dict[str, Any], partition: str) -> ParsedConfig:
    """`{queues: {name: {weight, guaranteed}}, strict}`: one level of queues under the root."""
    queues = document.get("queues", {"default": {}})
    if not isinstance(queues, dict) or not queues:
        raise ConfigError("stub: `queues` must map names to queues")
    children = tuple(
        QueueConfig(name=name, path=f"root.{name}", guaranteed=R(**spec.get("guaranteed", {})), props=StubProps(spec.get("weight", 1)))
        for name, spec in queues.items()
    )
    settings = StubSettings(strict=bool(document.get("strict", False)))
    return ParsedConfig(root=QueueConfig(name="root", path="root", children=children), settings=settings, warnings=("stub: weights are ignored",))


def fold_stub_decision(p: PartitionState, decision: ev.DecisionEvent) -> None:
    if not isinstance(decision, ev.Admitted):
        raise Rejected(f"the stub model does not make {decision.__struct_config__.tag}")
    p.model_state.admitted.append(decision.app)


STUB = Model(
    name="stub",
    parse_config=parse_stub,
    schedule=lambda cycle: None,
    next_wakeup=lambda partition, now: None,
    partitions=lambda document: document.get("partitions", ["default"]),
    fold=Folds(decision=fold_stub_decision, state_type=StubState),
)


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Model:
    monkeypatch.setitem(MODELS, STUB.name, STUB)
    return STUB


def stub_config(**document: Any) -> ev.ConfigApplied:
    return ev.ConfigApplied(id="stub-config", ts=0, model="stub", config=document or {"queues": {"a": {"weight": 3, "guaranteed": {"vcore": 2}}, "b": {}}})


def folded(*events: Any, state: ClusterState | None = None) -> ClusterState:
    state = state if state is not None else ClusterState()
    for event in events:
        apply(state, LogRecord(state.seq + 1, event.ts, event))
    return state


def test_the_fold_takes_a_registered_models_configuration(stub: Model) -> None:
    state = ClusterState()
    warnings = apply(state, LogRecord(1, 0, stub_config()))
    p = state.partitions["default"]
    assert warnings == ("stub: weights are ignored",)
    assert (p.model, p.settings, p.model_state) == ("stub", StubSettings(), StubState())
    assert list(p.queues) == ["root", "root.a", "root.b"]
    assert p.queues["root.a"].props == StubProps(3) and p.queues["root.a"].guaranteed == {"vcore": 2000}


def test_a_models_refusal_is_the_reason_of_the_dead_letter(stub: Model) -> None:
    with pytest.raises(Rejected, match="configuration refused, the previous one stays: stub: `queues` must map names to queues"):
        folded(stub_config(queues=[]))


def test_a_model_that_fails_to_read_a_configuration_refuses_it_without_a_rebuild(stub: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading changes nothing: a model's own error while reading is a refusal (a dead letter),
    never an internal error that folds the whole log again for each such message."""

    def broken(document: object, partition: str) -> object:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setitem(MODELS, "stub", dataclasses.replace(stub, parse_config=broken))
    with pytest.raises(Rejected, match=r"the stub model failed to read it \(ZeroDivisionError: division by zero\); please report it"):
        folded(stub_config())


def test_an_unregistered_model_is_refused_by_name() -> None:
    with pytest.raises(Rejected, match=r"model 'stub' is not supported by this version \(supported: kueue, volcano, yunikorn\)"):
        folded(stub_config())


def test_the_model_folds_its_own_decisions_and_refuses_others(stub: Model) -> None:
    state = folded(stub_config(), node("n1", vcore=4), task("t1", "app-1", "root.a"))
    admitted = ev.Admitted(id="log:9.0", ts=0, partition="default", cycle=9, app="app-1", queue="root.a")
    folded(admitted, state=state)
    assert state.partitions["default"].model_state.admitted == ["app-1"]
    evicted = ev.Evicted(id="log:9.1", ts=0, partition="default", cycle=9, app="app-1", queue="root.a", reason="InClusterQueue")
    with pytest.raises(Rejected, match="the stub model does not make decision.evicted"):
        folded(evicted, state=state)


def greedy_fold(p: PartitionState, event: ev.LogEvent) -> None:
    """A model's fold that keeps a note of every event it is handed, whatever it is."""
    p.model_state.admitted.append(f"saw {event.id}")


@pytest.mark.parametrize("event", [ev.TaskReleased(id="r", ts=0, task="nobody"), ev.AppFinished(id="f", ts=0, app="nothing")], ids=lambda e: e.id)
def test_a_refused_record_changes_nothing_whatever_the_models_fold_does(stub: Model, monkeypatch: pytest.MonkeyPatch, event: Any) -> None:
    """The model's fold runs once the generic fold accepted the record: a record refused
    leaves the state as it was, even under a model that keeps a note of everything."""
    monkeypatch.setitem(
        MODELS, STUB.name, dataclasses.replace(STUB, fold=dataclasses.replace(STUB.fold, event=greedy_fold, events=typing.get_args(ev.LogEvent)))
    )
    state = folded(stub_config())
    before = snapshot(state)
    with pytest.raises(Rejected):
        folded(event, state=state)
    assert snapshot(state) == before and state.partitions["default"].model_state.admitted == []
    folded(node("n-1", vcore=4), state=state)
    assert state.partitions["default"].model_state.admitted[-1].startswith("saw e")  # what the fold accepted, it saw


def refused_records(p: PartitionState) -> list[ev.LogEvent]:
    """Records the generic fold refuses, against a partition with running tasks: a decision
    naming a victim that is not running (or not there), what names unknown tasks or applications."""
    running = next(t for t in p.tasks.values() if t.status == "running")
    assert running.node is not None
    gone = ev.Victim(task="nobody", app=running.app, queue=running.queue, node=running.node, priority=0, resources=ev.Resources({}))
    here = ev.Victim(task=running.id, app=running.app, queue=running.queue, node=running.node, priority=0, resources=ev.Resources({}))
    common = {"ts": 0, "partition": p.name, "cycle": 999_999}
    return [
        ev.QuotaEnforced(
            id="x:1", **common, queue=running.queue, max=ev.Resources({}), target=ev.Resources({}), victims=(here, gone), model=p.model, reason="quota"
        ),
        ev.Preempted(
            id="x:2",
            **common,
            preemptor="nobody",
            app=running.app,
            queue=running.queue,
            node=running.node,
            resources=ev.Resources({}),
            victims=(here,),
            model=p.model,
            reason="r",
        ),
        ev.TaskReleased(id="x:3", ts=0, partition=p.name, task="nobody"),
        ev.AppFinished(id="x:4", ts=0, partition=p.name, app="nothing"),
    ]


@pytest.mark.parametrize("example", ["examples/quota-enforcement.yaml", "examples/kueue/quota-enforcement.yaml", "examples/volcano/quota-enforcement.yaml"])
def test_no_wing_folds_a_record_the_fold_refuses(example: str) -> None:
    """Each model's fold of a record the generic fold then refuses (a quota enforcement with a
    victim gone, a preemption for a task that is not there) leaves its state as it was: its
    timers, admissions and evictions."""
    scenario = msgspec.yaml.decode((ROOT / example).read_bytes(), type=Scenario)
    state = simulate(scenario).state
    p = state.partitions[scenario.partition]
    before = snapshot(state)
    for record in refused_records(p):
        with pytest.raises(Rejected):
            apply(state, LogRecord(state.seq + 1, 0, record))
        assert snapshot(state) == before, f"{type(record).__name__} was refused but changed the {p.model} model's state"


def test_the_default_model_refuses_decisions_it_does_not_make() -> None:
    admitted = ev.Admitted(id="log:9.0", ts=0, partition="default", cycle=9, app="app-1", queue="root.default")
    with pytest.raises(Rejected, match="decision.admitted is not produced by the yunikorn model"):
        folded(admitted)


def test_a_snapshot_gives_the_model_back_its_settings_props_and_state(stub: Model) -> None:
    state = folded(stub_config(strict=True, queues={"a": {"weight": 5}}), node("n1", vcore=4), task("t1", "app-1", "root.a"))
    state.partitions["default"].model_state.admitted.append("app-1")
    restored = restore(snapshot(state))
    p = restored.partitions["default"]
    assert p.settings == StubSettings(strict=True) and p.queues["root.a"].props == StubProps(5)
    assert isinstance(p.model_state, StubState) and p.model_state.admitted == ["app-1"]
    assert restored == state


class StubStateWithMore(msgspec.Struct):
    admitted: list[str] = []
    evicted: list[str] = []


def test_a_snapshot_is_not_restored_into_a_model_state_of_another_shape(stub: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    data = snapshot(folded(stub_config()))
    monkeypatch.setitem(MODELS, "stub", dataclasses.replace(stub, fold=dataclasses.replace(stub.fold, state_type=StubStateWithMore)))
    with pytest.raises(SnapshotError, match="snapshot of models whose state had another shape"):
        restore(data)


def test_a_snapshot_whose_model_parts_cannot_be_given_back_is_refused_not_half_restored(stub: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    state = folded(stub_config())
    state.partitions["default"].model_state = {"admitted": 5}
    with pytest.raises(SnapshotError, match="partition default: Expected `array`, got `int`"):
        restore(snapshot(state))
    monkeypatch.setitem(MODELS, "stub", dataclasses.replace(stub, fold=dataclasses.replace(stub.fold, state_type=None)))
    data = snapshot(folded(stub_config()))
    monkeypatch.delitem(MODELS, "stub")
    with pytest.raises(SnapshotError, match="partition default: model 'stub' is not supported by this version"):
        restore(data)


def test_a_partition_changes_model_and_back_keeping_its_tasks(stub: Model) -> None:
    yunikorn_config = ev.ConfigApplied(id="yk", ts=0, config={"queues": [{"name": "a"}]})
    state = folded(stub_config(), node("n1", vcore=4), task("t1", "app-1", "root.a"), yunikorn_config)
    p = state.partitions["default"]
    assert (p.model, type(p.model_state).__name__, p.queues["root.a"].pending) == ("yunikorn", "YuniKornState", {"vcore": 1000}), "the stub's state is gone"
    folded(stub_config(), state=state)
    assert p.model == "stub" and p.model_state == StubState() and p.pending_count == 1


def test_a_scenario_runs_a_registered_model_which_decides_nothing(stub: Model) -> None:
    scenario = Scenario(
        name="stub",
        model="stub",
        config={"queues": {"a": {}}},
        events=[
            {"type": "node.upserted", "node": "n1", "capacity": {"vcore": 4}},
            {"type": "task.submitted", "task": "t1", "app": "app-1", "queue": "root.a", "resources": {"vcore": 1}},
        ],
        until="5s",
    )
    result = simulate(scenario)
    assert result.rejected == [] and result.decisions == []
    ticks = [r for r in result.records if isinstance(r.event, ev.Tick)]
    assert len(ticks) == 6, "its cycle ran every second, a task pending"
    assert result.view("default")["model"] == "stub"
    replayer = Replayer("sim")
    for record in result.records:
        assert replayer.step(record)
    replayer.finish()
    assert replayer.report.cycles == 6 and replayer.report.divergence is None


def test_a_configuration_file_names_the_model_and_its_partitions(stub: Model, tmp_path: Path) -> None:
    path = tmp_path / "stub.yaml"
    path.write_text("model: stub\nconfig:\n  partitions: [east, west]\n  queues: {a: {}}\n")
    events = config_events(path, now=7)
    assert [(e.partition, e.model) for e in events] == [("east", "stub"), ("west", "stub")]
    path.write_text("model: stub\nconfig: {queues: []}\n")
    with pytest.raises(UsageError, match="stub: `queues` must map names to queues"):
        config_events(path, now=7)
    path.write_text("model: [stub]\nconfig: {}\n")
    with pytest.raises(UsageError, match=r"`model` must be a model's name, such as yunikorn; got \['stub'\]"):
        config_events(path, now=7)


def test_a_decision_the_fold_refuses_is_reported_as_the_models_bug_not_as_bad_input(stub: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    def allocate_a_ghost(cycle: Cycle) -> None:
        cycle.emit(ev.Allocated, task="ghost", app="app", queue="root.a", node="n1", resources=R(vcore=1))

    monkeypatch.setitem(MODELS, "stub", dataclasses.replace(stub, schedule=allocate_a_ghost))
    state = folded(stub_config(), node("n1", vcore=4), task("t1", "app-1", "root.a"))
    with pytest.raises(RuntimeError, match="the stub model made a decision the fold refuses, a bug: unknown task 'ghost'"):
        run_cycle(state, tick_record(state, 1000, "default"))


def test_a_cycle_counts_its_decisions_against_the_models_budget(stub: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Cycle.emit` counts admissions and allocations as placements, and a preemption, or the
    evictions for one preemptor together, as one preemption; a model asks `may_place` and
    `may_preempt` before it goes on, and the engine gives the cycle the model's budget."""
    asked = []

    def schedule(cycle: Cycle) -> None:
        for app in ("app-1", "app-2", "app-3"):
            if cycle.may_place():
                cycle.emit(ev.Admitted, app=app, queue="root.a")
        for victim, preemptor in (("app-1", "app-3"), ("app-2", "app-3"), ("app-1", "app-4"), ("app-2", "app-5")):
            asked.append(cycle.may_preempt())
            cycle.emit(ev.Evicted, app=victim, queue="root.a", reason="InClusterQueue", preemptor=preemptor)

    def fold_decision(p: PartitionState, decision: ev.DecisionEvent) -> None:
        if isinstance(decision, ev.Admitted):
            p.model_state.admitted.append(decision.app)

    budgeted = dataclasses.replace(
        stub, schedule=schedule, fold=dataclasses.replace(stub.fold, decision=fold_decision), budget=Budget(placements=2, preemptions=2)
    )
    monkeypatch.setitem(MODELS, "stub", budgeted)
    state = folded(stub_config(), node("n1", vcore=4), task("t1", "app-1", "root.a"))
    run_cycle(state, tick_record(state, 1000, "default"))
    assert state.partitions["default"].model_state.admitted == ["app-1", "app-2"]
    assert asked == [True, True, True, False], "app-3's two evictions are one preemption, app-4's the second"


def test_the_models_keep_the_budgets_their_wings_had() -> None:
    assert MODELS["yunikorn"].budget == Budget(placements=20_000, preemptions=100) == Budget()
    assert MODELS["kueue"].budget == Budget(placements=20_000, preemptions=50)


# -- the structure that keeps a model in its wing ------------------------------------------------

PACKAGES = ("events", "projections", "scheduling", "daemon")


def sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


WINGS = ["yunikorn", "kueue", "volcano"]


@pytest.mark.parametrize("wing", WINGS)
def test_the_model_name_literal_exists_once_in_its_wing(wing: str) -> None:
    found = [
        str(path.relative_to(ROOT))
        for path in sources()
        for node_ in ast.walk(ast.parse(path.read_text()))
        if isinstance(node_, ast.Constant) and node_.value == wing
    ]
    assert found == [f"scheduling/{wing}/__init__.py"]


@pytest.mark.parametrize("wing", WINGS)
def test_only_the_registry_imports_a_wing(wing: str) -> None:
    importers = []
    for path in sources():
        if path.is_relative_to(ROOT / "scheduling" / wing):
            continue
        for node_ in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node_, ast.ImportFrom):
                names = [node_.module or ""] + [f"{node_.module or ''}.{a.name}" for a in node_.names]
            elif isinstance(node_, ast.Import):
                names = [a.name for a in node_.names]
            if any(n.split(".")[-1] == wing or f".{wing}." in n for n in names):
                importers.append(str(path.relative_to(ROOT)))
    assert importers == ["scheduling/_registry.py"]


# -- the fences around every wing: no other wing, nothing impure, no set order, one skeleton ----

#: What a wing may not import: clocks, randomness, the environment, I/O, concurrency, and the
#: daemon's transports and stores (a cycle decides from the state alone, the same on a replay).
IMPURE = {"time", "datetime", "random", "os", "secrets", "uuid", "asyncio", "anyio", "socket", "threading", "nats", "sqlalchemy"}
#: Builtins whose results differ from run to run: `hash` of a str is salted, `id` is an address.
UNSTABLE_CALLS = {"hash", "id"}

Modules = list[tuple[str, ast.Module]]  # (preemptd.scheduling.<wing>.<module>, its code)


def wing_modules(wing: str) -> Modules:
    """Each module of `wing`, named as it installs (`preemptd.scheduling.kueue.__init__`)."""
    return [
        (".".join(["preemptd", *path.relative_to(ROOT).with_suffix("").parts]), ast.parse(path.read_text(), str(path)))
        for path in sorted((ROOT / "scheduling" / wing).rglob("*.py"))
    ]


def imports(module: str, code: ast.Module) -> set[str]:
    """The modules `code` (that of `module`) imports, relative imports resolved; `from X
    import y` counts as both X and X.y, since y may be a module."""
    package = module.rsplit(".", 1)[0].split(".")
    names: set[str] = set()
    for node_ in ast.walk(code):
        if isinstance(node_, ast.Import):
            names |= {alias.name for alias in node_.names}
        elif isinstance(node_, ast.ImportFrom):
            base = node_.module or ""
            if node_.level:
                anchor = package[: len(package) - node_.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names |= {base, *(f"{base}.{alias.name}" for alias in node_.names)}
    return names


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def other_wings_imported(wing: str, modules: Modules) -> list[str]:
    others = [f"preemptd.scheduling.{other}" for other in WINGS if other != wing]
    return sorted(f"{module}: {name}" for module, code in modules for name in imports(module, code) if any(within(name, other) for other in others))


def impurities(wing: str, modules: Modules) -> list[str]:
    found = []
    for module, code in modules:
        found += [f"{module}: {name}" for name in imports(module, code) if name.split(".")[0] in IMPURE or within(name, "preemptd.daemon")]
        found += [
            f"{module}:{node_.lineno}: {node_.func.id}()"
            for node_ in ast.walk(code)
            if isinstance(node_, ast.Call) and isinstance(node_.func, ast.Name) and node_.func.id in UNSTABLE_CALLS
        ]
    return sorted(found)


def is_set(expression: ast.expr) -> bool:
    """A set by its syntax: `{a, b}`, `{x for ...}`, `set(...)`, `frozenset(...)`."""
    if isinstance(expression, (ast.Set, ast.SetComp)):
        return True
    return isinstance(expression, ast.Call) and isinstance(expression.func, ast.Name) and expression.func.id in {"set", "frozenset"}


def sorted_generators(code: ast.Module) -> set[ast.comprehension]:
    """The `for ... in` of comprehensions given straight to `sorted(...)`: their order is sorted away."""
    return {
        generator
        for call in ast.walk(code)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "sorted" and call.args
        if isinstance(call.args[0], (ast.GeneratorExp, ast.ListComp))
        for generator in call.args[0].generators
    }


def set_iterations(wing: str, modules: Modules) -> list[str]:
    """`for ... in <a set>`, in a loop or a comprehension, unless the comprehension goes straight
    to `sorted(...)`. Only what the syntax shows: a name bound to a set, or a set operation
    (`a | b`), is beyond a walk of the code."""
    found = []
    for module, code in modules:
        fine = sorted_generators(code)
        found += [
            f"{module}:{node_.iter.lineno}: for ... in {ast.unparse(node_.iter)}"
            for node_ in ast.walk(code)
            if isinstance(node_, (ast.For, ast.AsyncFor, ast.comprehension)) and is_set(node_.iter) and node_ not in fine
        ]
    return found


@pytest.mark.parametrize("wing", WINGS)
def test_no_wing_imports_another(wing: str) -> None:
    """A wing reaches past itself only to what `scheduling` shares (`_model`, `_kubernetes`,
    ...), so that one model can change without another."""
    assert other_wings_imported(wing, wing_modules(wing)) == []


@pytest.mark.parametrize("wing", WINGS)
def test_a_wing_is_pure(wing: str) -> None:
    """A cycle is a function of the state: no clock, randomness, environment, I/O, threads or
    daemon in a wing, and nothing whose value changes from run to run (`hash`, `id`)."""
    assert impurities(wing, wing_modules(wing)) == []


@pytest.mark.parametrize("wing", WINGS)
def test_no_wing_iterates_over_a_set(wing: str) -> None:
    """A set of strings is iterated in an order that changes from run to run (hash
    randomisation), so decisions taken in that order would not replay: go over `sorted(...)`
    of it, or keep a dict or a list."""
    assert set_iterations(wing, wing_modules(wing)) == []


@pytest.mark.parametrize("wing", WINGS)
def test_every_wing_has_the_one_skeleton(wing: str) -> None:
    """`__init__.py` defines `MODEL` (what the registry lists), `_config.py` reads the model's
    configuration, `_cycle.py` runs its cycle: every wing is laid out alike."""
    folder = ROOT / "scheduling" / wing
    assert [name for name in ("__init__.py", "_config.py", "_cycle.py") if not (folder / name).is_file()] == []
    init = ast.parse((folder / "__init__.py").read_text())
    assigned = [target for node_ in init.body if isinstance(node_, ast.Assign) for target in node_.targets]
    assigned += [node_.target for node_ in init.body if isinstance(node_, ast.AnnAssign)]
    assert "MODEL" in [target.id for target in assigned if isinstance(target, ast.Name)]


@pytest.mark.parametrize(
    ("source", "check"),
    [
        ("from ..kueue import MODEL", other_wings_imported),
        ("from .. import kueue", other_wings_imported),
        ("from preemptd.scheduling.volcano._config import VolcanoConfig", other_wings_imported),
        ("import preemptd.scheduling.kueue", other_wings_imported),
        ("import time", impurities),
        ("from datetime import datetime", impurities),
        ("import os.path", impurities),
        ("from ...daemon import store", impurities),
        ("from preemptd.daemon.log import Store", impurities),
        ("key = hash('a')", impurities),
        ("where = id(object())", impurities),
        ("for name in {'a', 'b'}:\n    pass", set_iterations),
        ("names = [n for n in set(['a', 'b'])]", set_iterations),
        ("names = {n: 1 for n in {x for x in 'ab'}}", set_iterations),
        ("names = sorted([n for n in 'ab'] + [n for n in {'c', 'd'}])", set_iterations),
    ],
)
def test_the_fences_catch_what_they_forbid(source: str, check: Any) -> None:
    """Each check finds a violation planted in a module of the yunikorn wing."""
    planted = [("preemptd.scheduling.yunikorn._planted", ast.parse(source))]
    assert check("yunikorn", planted) != []


def test_the_fences_let_a_wing_use_itself_and_what_scheduling_shares() -> None:
    source = (
        "from . import _ordering\nfrom .._model import Cycle\nfrom preemptd.events import Tick\n"
        "for name in sorted({'b', 'a'}):\n    pass\nnames = sorted(n for n in {'b', 'a'} if n)\nthe_id = task.id\n"
    )
    planted = [("preemptd.scheduling.yunikorn._planted", ast.parse(source))]
    assert [check("yunikorn", planted) for check in (other_wings_imported, impurities, set_iterations)] == [[], [], []]
