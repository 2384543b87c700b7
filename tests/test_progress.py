"""Every partition keeps deciding however busy it is (`Cycle`): a cycle cut short by its time
(`run --cycle-time`) still takes the first step of each of its phases, and each phase it stopped
begins, in the next cycle, at the next queue by name after the one it began at. So a cycle that
cannot finish never decides nothing, and no queue waits for ever behind others.

Cycles are cut here as a busy daemon's are, but deterministically: the n-th cycle of a simulation
passes a drawn number of checks of its time (0: only the first step of each phase), under every
model, on the clusters each model's property tests generate.

- Replay stays exact: the log's ticks say where each cycle was cut (after how many decisions)
  and where its phases began; so it does when the daemon restarted in between, its kept
  structures (what saves work between cycles) made again from a snapshot.
- What could be decided is decided: once arrivals stop, the cut cycles come to rest within the
  run, where a whole cycle (not cut) finds nothing more to decide.
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st
from test_kueue_properties import scenarios as kueue_scenarios
from test_properties import clusters as yunikorn_scenarios
from test_volcano_properties import scenarios as volcano_scenarios

from preemptd.events import Scenario, Tick
from preemptd.projections import ClusterState, LogRecord
from preemptd.scheduling import _simulation, replay, restore, run_cycle, simulate, snapshot, tick_record

SCENARIOS = {"yunikorn": yunikorn_scenarios(), "kueue": kueue_scenarios(), "volcano": volcano_scenarios()}
#: Checks a cycle passes: mostly none or a few, so that nearly every cycle is cut somewhere.
ALLOWED = st.lists(st.sampled_from([0, 0, 0, 1, 2, 3, 5, 8, None]), min_size=1, max_size=12)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def busy(scenario: Scenario, allowed: list[int | None]) -> Any:
    """`scenario` run with its cycles cut as `allowed` says, in turn; the run lasts long enough
    for cycles of one step a phase to reach every task (twice the run, at least 120 cycles)."""
    until = max(2 * _seconds(scenario.until), 120)
    longer = msgspec.structs.replace(scenario, until=f"{until}s")
    return simulate(longer, checks=lambda n: allowed[n % len(allowed)])


def _seconds(duration: str) -> int:
    assert duration.endswith("s"), duration
    return int(duration[:-1])


def cut(result: Any) -> int:
    return sum(1 for record in result.records if isinstance(record.event, Tick) and record.event.stopped)


@SETTINGS
@given(model=st.sampled_from(sorted(SCENARIOS)), data=st.data(), allowed=ALLOWED)
def test_a_log_of_cut_cycles_replays_exactly(model: str, data: st.DataObject, allowed: list[int | None]) -> None:
    result = busy(data.draw(SCENARIOS[model]), allowed)
    event(f"{model}: {'cut' if cut(result) else 'never cut'}")
    report = replay(result.records, log_id="sim")
    assert report.divergence is None, report.divergence
    assert report.reproduced == len(result.decisions)


@SETTINGS
@given(model=st.sampled_from(sorted(SCENARIOS)), data=st.data(), allowed=ALLOWED, every=st.integers(2, 7))
def test_a_log_of_cut_cycles_with_restarts_in_between_replays_exactly(model: str, data: st.DataObject, allowed: list[int | None], every: int) -> None:
    """A restart rebuilds what a model keeps between cycles (from a snapshot, here before every
    `every`-th cycle): the cut cycles after it must decide what a replay that never restarted
    decides, however differently the kept structures save their work."""
    cycles = itertools.count()

    def restarting(state: ClusterState, tick: LogRecord, out_of_time: Any = None) -> Any:
        if next(cycles) % every == every - 1:
            state.partitions = restore(snapshot(state)).partitions
        return run_cycle(state, tick, out_of_time)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_simulation, "run_cycle", restarting)
        result = busy(data.draw(SCENARIOS[model]), allowed)
    report = replay(result.records, log_id="sim")
    assert report.divergence is None, report.divergence
    assert report.reproduced == len(result.decisions)


@SETTINGS
@given(model=st.sampled_from(sorted(SCENARIOS)), data=st.data(), allowed=ALLOWED)
def test_cut_cycles_decide_whatever_could_be_decided(model: str, data: st.DataObject, allowed: list[int | None]) -> None:
    scenario = data.draw(SCENARIOS[model])
    result = busy(scenario, allowed)
    event(f"{model}: {'cut' if cut(result) else 'never cut'}")
    left = whole_cycle(result.state, scenario.partition)
    assert left == [], f"a whole cycle at the end still decides: {left[:5]}"


def whole_cycle(state: ClusterState, partition: str) -> list[str]:
    """What a cycle not cut decides at the end of the run, on a copy of the state (a restored
    snapshot: its first cycle runs whatever the last decided)."""
    if partition not in state.partitions:
        return []
    copy = restore(snapshot(state))
    cycle = run_cycle(copy, tick_record(copy, copy.partitions[partition].last_tick + 1, partition))
    return [f"{type(d).__name__} {getattr(d, 'task', None) or getattr(d, 'app', None) or getattr(d, 'preemptor', None)}" for d in cycle.decisions]
