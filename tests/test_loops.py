"""No preemption loops in the design's ReplicaSet cases (tests/scenarios/replicaset-*.yaml).

Each scenario runs with `shim.recreate_preempted`: a preempted pod comes back as a new pending pod
`<pod>~<n>`, as a ReplicaSet controller re-creates it. That is what turns a rule that is too loose
into a loop: a law 2 that lets a victim's queue drop below its guarantee makes the re-created pod
an under-guarantee preemptor that takes the room back; a law 4 that lets a queue at or over its
guarantee trigger preemption makes either side take from the other's surplus again and again.

A loop shows up as one of:
- the same ReplicaSet member preempted twice. A re-created pod `x~n` counts as the member `x` it
  replaces: the set's slot is the same, and a loop that keeps evicting the youngest pods hits the
  re-created ones (they started last);
- the victims' side preempting back: a re-created pod as a preemptor, or a queue that both gains
  and loses by preemption;
- the same preemptor preempting twice: its room went to someone else and the eviction is repeated;
- preemptions still happening in the second half of a run that is long enough to settle.

Each victim must be re-created exactly once per preemption (so the scenarios really exercise the
loop risk, and the shim does not multiply pods), and the log must replay to the same decisions.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import msgspec
import pytest

from preemptd.events import Preempted, Scenario, TaskSubmitted, parse_duration
from preemptd.scheduling import SimulationResult, replay, simulate

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(ROOT.glob("tests/scenarios/replicaset-*.yaml"))


def member(task: str) -> str:
    """The ReplicaSet member a pod stands for: `x~n` (the shim's re-creation of `x`) is `x`."""
    return task.split("~", 1)[0]


@cache
def _load(path: Path) -> tuple[Scenario, SimulationResult]:
    scenario = msgspec.yaml.decode(path.read_bytes(), type=Scenario)
    return scenario, simulate(scenario)


def _preemptions(result: SimulationResult) -> list[Preempted]:
    return [d for d in result.decisions if isinstance(d, Preempted)]


def _recreations(result: SimulationResult) -> list[TaskSubmitted]:
    return [r.event for r in result.records if isinstance(r.event, TaskSubmitted) and "~" in r.event.task]


params = pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)


def test_the_three_design_cases_are_present() -> None:
    names = {path.stem for path in FILES}
    assert {"replicaset-1", "replicaset-2", "replicaset-3"} <= names
    for path in FILES:
        scenario, _ = _load(path)
        assert scenario.shim.recreate_preempted, f"{path.name} must re-create preempted pods"
        assert parse_duration(scenario.until) >= 120_000, f"{path.name} must run long enough for a loop to show"


@params
def test_no_member_is_preempted_twice(path: Path) -> None:
    _, result = _load(path)
    hits = Counter(member(victim.task) for d in _preemptions(result) for victim in d.victims)
    assert [name for name, count in hits.items() if count > 1] == [], f"members preempted more than once: {hits}"


@params
def test_no_preemptor_preempts_twice(path: Path) -> None:
    _, result = _load(path)
    preemptors = Counter(d.preemptor for d in _preemptions(result))
    assert [name for name, count in preemptors.items() if count > 1] == [], f"tasks that preempted more than once: {preemptors}"


@params
def test_the_victims_side_never_preempts_back(path: Path) -> None:
    _, result = _load(path)
    preemptions = _preemptions(result)
    assert [d.preemptor for d in preemptions if "~" in d.preemptor] == [], "a re-created pod preempted"
    gaining = {d.queue for d in preemptions}
    losing = {victim.queue for d in preemptions for victim in d.victims}
    assert gaining & losing == set(), f"queues that both gained and lost by preemption: {gaining & losing}"


@params
def test_preemption_stops(path: Path) -> None:
    scenario, result = _load(path)
    until = parse_duration(scenario.until)
    # The count of decision.preempted reached by mid-run is the final count: it stopped growing.
    late = [(d.ts, d.preemptor) for d in _preemptions(result) if d.ts >= until // 2]
    assert late == [], f"preemptions in the second half of the run ({until // 2000}s to {until // 1000}s): {late}"


@params
def test_each_victim_is_recreated_once_per_preemption(path: Path) -> None:
    _, result = _load(path)
    preempted = Counter(member(victim.task) for d in _preemptions(result) for victim in d.victims)
    recreations = _recreations(result)
    names = Counter(event.task for event in recreations)
    assert [name for name, count in names.items() if count > 1] == [], "a re-created pod was submitted twice"
    assert Counter(member(event.task) for event in recreations) == preempted
    first_preempted = {}
    for d in _preemptions(result):
        for victim in d.victims:
            first_preempted.setdefault(member(victim.task), d.ts)
    assert all(event.ts >= first_preempted[member(event.task)] for event in recreations)


@params
def test_the_log_replays_to_every_decision(path: Path) -> None:
    _, result = _load(path)
    report = replay(result.records, log_id="sim")
    assert report.divergence is None, report.divergence.differences() if report.divergence else None
    assert report.reproduced == len(result.decisions)
    assert report.stored_decisions == report.new_decisions == len(result.decisions)
