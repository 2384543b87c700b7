"""Volcano in Volcano's terms beyond `state`: the report draws what each queue deserves (the
first bound, so that the summary ranks the queues short of it) beside its guarantee and
capability, and the shares allocate and reclaim order queues by; the metrics gauge what each
queue deserves. Each is the number `preemptd state` gives for the same log."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import msgspec
import pytest
from conftest import ROOT, preemptd

from preemptd.daemon.operations.metrics import reading
from preemptd.events import Scenario
from preemptd.scheduling import Timeline, describe, simulate

HIERARCHICAL = ROOT / "examples" / "volcano" / "hierarchical-capacity.yaml"
PROPORTION = ROOT / "examples" / "volcano" / "reclaim-weighted-queues.yaml"
SHORT = {HIERARCHICAL: "eng", PROPORTION: "training"}  # the queue that waits for what it deserves


def scenario_of(path: Path, **changes: object) -> Scenario:
    document = msgspec.yaml.decode(path.read_bytes())
    return msgspec.convert({**document, **changes}, type=Scenario)


def page_of(scenario: Scenario) -> dict:
    """The report's data of the scenario's one partition."""
    records = simulate(scenario).records
    timeline = Timeline("sim", len(records))
    for record in records:
        timeline.step(record)
    (partition,) = timeline.result("t")["partitions"]
    return partition


def state_of(path: Path, tmp_path: Path) -> dict:
    """`preemptd state --json`'s queues after simulating `path`."""
    db = tmp_path / "log.db"
    assert preemptd("simulate", str(path), "--quiet", "--db", str(db)).returncode == 0
    return json.loads(preemptd("state", "--db", str(db), "--json").stdout)["queues"]


def last(series: list) -> object:
    return series[-1]


@pytest.mark.parametrize("path", [HIERARCHICAL, PROPORTION], ids=["capacity", "proportion"])
def test_the_report_draws_what_each_queue_deserves_as_state_says_and_ranks_the_queue_short_of_it(path: Path, tmp_path: Path) -> None:
    page = page_of(scenario_of(path))
    state = state_of(path, tmp_path)
    bounds = [curve for curve in page["curves"] if curve["kind"] == "bound"]
    words = [(c["name"], c["words"]) for c in bounds]
    assert words == [("deserved", "deserved"), ("guaranteed", "guarantee"), ("max", "capability")], "deserved first: the summary's"
    drawn = {queue["path"]: queue["series"] for queue in page["queues"]}
    for name, queue in state.items():
        deserved = {resource: last(series["deserved"]) for resource, series in drawn[name].items() if last(series["deserved"]) is not None}
        assert deserved == {resource: float(amount) for resource, amount in (queue["deserved"] or {}).items()}, f"{name}: the line ends where state says"
        capability = {resource: last(series["max"]) for resource, series in drawn[name].items() if last(series["max"]) is not None}
        assert capability == {resource: float(amount) for resource, amount in (queue["capability"] or {}).items()}
    under = page["summary"]["under_guarantee"]
    assert under and under[0]["queue"] == SHORT[path] and under[0]["seconds"] >= 1, "it waits below what it deserves while others hold the room"


@pytest.mark.parametrize("path", [HIERARCHICAL, PROPORTION], ids=["capacity", "proportion"])
def test_the_report_draws_each_queues_share_as_state_says(path: Path, tmp_path: Path) -> None:
    page = page_of(scenario_of(path))
    state = state_of(path, tmp_path)
    shares = page["shares"]
    assert "allocated over deserved" in shares["words"]
    said = {name: queue["share"] for name, queue in state.items() if queue["share"] is not None}
    assert said, "state gives shares"
    assert {name: round(last(series), 4) for name, series in shares["series"].items()} == said


def test_a_share_is_drawn_over_time() -> None:
    """eng holds eng-ci's 2 CPUs of the 6 it deserves, then reclaims 3 more for eng-dev."""
    page = page_of(scenario_of(HIERARCHICAL))
    eng = page["shares"]["series"]["eng"]
    assert (eng[0], eng[-1]) == (pytest.approx(2 / 6), pytest.approx(5 / 6))


def test_without_a_sharing_plugin_no_queue_deserves_anything_and_nothing_is_shared() -> None:
    conf = {"actions": "enqueue, allocate, preempt, backfill", "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "predicates"}]}]}
    document = msgspec.yaml.decode(HIERARCHICAL.read_bytes())
    scenario = scenario_of(HIERARCHICAL, config=[*document["config"][:-1], conf], expect=None)
    page = page_of(scenario)
    assert all(value is None for queue in page["queues"] for series in queue["series"].values() for value in series["deserved"])
    assert page["shares"]["series"] == {} and page["summary"]["under_guarantee"] == []
    assert "no proportion or capacity plugin: no queue deserves anything" in describe(simulate(scenario).state.partitions["default"])


def test_the_configuration_says_which_plugin_shares_the_queues() -> None:
    hierarchical = describe(simulate(scenario_of(HIERARCHICAL)).state.partitions["default"])
    assert "[predicates, capacity]; capacity's enableHierarchy on (ancestorReclaimLevel 1)" in hierarchical
    assert "[drf, predicates, proportion]" in describe(simulate(scenario_of(PROPORTION)).state.partitions["default"])


@pytest.mark.parametrize("path", [HIERARCHICAL, PROPORTION], ids=["capacity", "proportion"])
def test_the_metrics_gauge_what_each_queue_deserves(path: Path, tmp_path: Path) -> None:
    rows = reading(simulate(scenario_of(path)).state, lag=0, waiting_decisions=0, snapshot_age=0).queues
    state = state_of(path, tmp_path)
    gauged = {(queue, resource): amount for what, _, queue, resource, amount in rows if what == "deserved"}
    said = {(name, resource): float(amount) for name, queue in state.items() for resource, amount in (queue["deserved"] or {}).items()}
    assert gauged == said and said, "preemptd_queue_deserved, in cores"


def test_state_nests_queues_under_their_parents_and_the_json_names_the_parent(tmp_path: Path) -> None:
    """Volcano's hierarchical queues were listed flat (eng-ci beside eng, not under it), and the
    JSON did not say which queue a queue is under."""
    db = tmp_path / "log.db"
    assert preemptd("simulate", str(ROOT / "examples/volcano/hierarchical-capacity.yaml"), "--quiet", "--db", str(db)).returncode == 0
    text = preemptd("state", "--db", str(db)).stdout
    names = [re.match(r"( *\S+)", line).group(1) for line in text.splitlines()[5:11]]
    assert names == ["root", "  default", "  eng", "    eng-ci", "    eng-dev", "  research"], text
    queues = json.loads(preemptd("state", "--db", str(db), "--json").stdout)["queues"]
    assert {name: queue["parent"] for name, queue in queues.items()} == {
        "root": None,
        "default": "root",
        "eng": "root",
        "eng-ci": "eng",
        "eng-dev": "eng",
        "research": "root",
    }


def test_a_node_held_for_a_preemptor_is_pipelined_in_volcanos_words(tmp_path: Path) -> None:
    """Volcano pipelines a task onto the node its victims free; explain said "reserved", YuniKorn's word."""
    db = tmp_path / "log.db"
    assert preemptd("simulate", str(ROOT / "examples/volcano/job-preemption-by-priority-class.yaml"), "--quiet", "--db", str(db)).returncode == 0
    with sqlite3.connect(db) as conn:
        [(decision,)] = conn.execute("select event_id from log where type = 'decision.preempted' limit 1").fetchall()
    explained = preemptd("explain", decision, "--db", str(db))
    assert explained.returncode == 0, explained.stderr
    assert "is pipelined for it" in explained.stdout and "reserved" not in explained.stdout, explained.stdout
