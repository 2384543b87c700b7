"""Every scenario file (the user guide's examples and the behavioural tests under
tests/scenarios) runs offline, meets its `expect`, and replays to the same decisions."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from preemptd.events import Scenario
from preemptd.scheduling import check, replay, simulate

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(
    [
        *ROOT.glob("examples/*.yaml"),
        *ROOT.glob("examples/kueue/*.yaml"),
        *ROOT.glob("examples/volcano/*.yaml"),
        *ROOT.glob("examples/quota/*.yaml"),
        *ROOT.glob("tests/scenarios/*.yaml"),
    ]
)


def load(path: Path) -> Scenario:
    return msgspec.yaml.decode(path.read_bytes(), type=Scenario)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_scenario_meets_its_expectations(path: Path) -> None:
    scenario = load(path)
    assert scenario.expect is not None, f"{path.name} has no expect section"
    result = simulate(scenario)
    assert check(result, scenario.expect, scenario.partition) == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_scenario_log_replays_to_the_same_decisions(path: Path) -> None:
    result = simulate(load(path))
    report = replay(result.records, log_id="sim")
    assert report.divergence is None
    assert report.reproduced == len(result.decisions)


def test_a_victims_why_names_the_resources_that_make_it_one() -> None:
    """root.w guarantees memory only; its vcore task is a victim because w guarantees no vcore,
    not because w is over its (memory) guarantee, which it is not."""
    result = simulate(load(ROOT / "tests/scenarios/law-2-other-resource.yaml"))
    [preempted] = [d for d in result.decisions if d.__struct_config__.tag == "decision.preempted"]
    [victim] = preempted.victims
    assert victim.queue == "root.w"
    assert victim.why.startswith("root.w guarantees no vcore; every queue stays at or above its guarantee")
    assert "over its guarantee" not in victim.why


def test_a_victims_why_gives_its_queues_usage_against_the_guarantee() -> None:
    result = simulate(load(ROOT / "examples/general.yaml"))
    preempted = [d for d in result.decisions if d.__struct_config__.tag == "decision.preempted"]
    assert preempted[0].victims[0].why.startswith("root.normal.queue-1 is over its guarantee for vcore (vcore 10 of vcore 5); every queue stays")


def test_a_preemption_says_why_the_other_candidates_on_its_node_stayed() -> None:
    general = simulate(load(ROOT / "examples/general.yaml"))
    first = next(d for d in general.decisions if d.__struct_config__.tag == "decision.preempted")
    assert any(line.startswith("not needed on node-1: app-1-9, app-1-8") for line in first.explanation)
    backtracked = simulate(load(ROOT / "tests/scenarios/law-2-search-backtracks.yaml"))
    [preempted] = [d for d in backtracked.decisions if d.__struct_config__.tag == "decision.preempted"]
    assert any(line.startswith("passed over on node-1: a-small") for line in preempted.explanation)


def test_an_expected_decision_naming_what_no_decision_has_says_so_and_the_one_meant() -> None:
    """Left alone, a misspelt type or field would only fail as a decision not found."""
    scenario = msgspec.yaml.decode((ROOT / "tests/scenarios/volcano-enqueue-judges-again-when-the-cluster-grows.yaml").read_bytes(), type=Scenario)
    assert scenario.expect is not None
    wanted = [
        {"type": "decision.allocatd", "task": "big-0"},
        {"type": "decision.allocated", "task": "big-0", "at": "5s"},
        {"type": "decision.allocated", "nodde": "node-1"},
    ]
    expect = msgspec.structs.replace(scenario.expect, decisions=wanted)
    assert check(simulate(scenario), expect, "default") == [
        "expected decision 1: no decision type 'decision.allocatd' (did you mean 'decision.allocated'?)",
        "expected decision 2: decision.allocated has no field 'at' (did you mean 'ts'?)",
        "expected decision 3: decision.allocated has no field 'nodde' (did you mean 'node'?)",
    ]
