"""Kueue in Kueue's terms, in `state`, the report and the metrics: per ClusterQueue and flavor the
quota admitted workloads reserve (running or not) apart from what waits for admission, against
nominal quota; the cohort tree with what each cohort borrows and lends; fair sharing's weighted
shares. Admitted-but-not-running is its own state, never pending."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import yaml
from conftest import ROOT, preemptd
from prometheus_client import generate_latest

from preemptd.events import Scenario
from preemptd.projections import ClusterState
from preemptd.scheduling import Timeline, apply, describe, model_named, simulate
from preemptd.scheduling.kueue._kept import kept as kept_views

API = "kueue.x-k8s.io/v1beta2"
KUEUE = model_named("kueue")


def _queue(name: str, flavors: dict[str, int], cohort: str | None = None, **spec: Any) -> dict:
    group = {"coveredResources": ["cpu"], "flavors": [{"name": f, "resources": [{"name": "cpu", "nominalQuota": n}]} for f, n in flavors.items()]}
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {**({"cohortName": cohort} if cohort else {}), "resourceGroups": [group], **spec},
    }


def _flavor(name: str) -> dict:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}}


def _pod(at: str, name: str, queue: str, cpu: int) -> dict:
    return {"at": at, "type": "task.submitted", "task": name, "app": name, "queue": queue, "resources": {"cpu": cpu}}


#: team-a's a-1 is admitted in on-demand and its pod never bound (the shim binds nothing); a-2,
#: later, is admitted in spot and bound by hand. team-b's b-1 asks more than its nominal quota,
#: with no cohort to borrow from: it waits for admission under its quota for good.
ADMITTED_NOT_RUNNING = {
    "name": "admitted, not running",
    "model": "kueue",
    "config": [_flavor("on-demand"), _flavor("spot"), _queue("team-a", {"on-demand": 4, "spot": 4}), _queue("team-b", {"on-demand": 4})],
    "events": [
        {"at": "0s", "type": "node.upserted", "node": "n1", "capacity": {"cpu": 64}},
        _pod("1s", "a-1", "team-a", 4),
        _pod("1s", "b-1", "team-b", 6),
        _pod("4s", "a-2", "team-a", 4),
        {"at": "6s", "type": "task.bound", "task": "a-2", "node": "n1"},
    ],
    "shim": {"execute": False},
    "until": "10s",
}

#: Nested cohorts: team (in cohort lab, under org) runs 6 CPUs on a quota of 2, so lab borrows 4
#: from org, where infra leaves its 8 unused: infra lends them.
NESTED = {
    "name": "nested borrowing",
    "model": "kueue",
    "config": [
        _flavor("default"),
        {"apiVersion": API, "kind": "Cohort", "metadata": {"name": "lab"}, "spec": {"parentName": "org"}},
        _queue("infra", {"default": 8}, "org"),
        _queue("team", {"default": 2}, "lab"),
    ],
    "events": [{"at": "0s", "type": "node.upserted", "node": "n1", "capacity": {"cpu": 64}}, *(_pod("1s", f"t-{i}", "team", 2) for i in range(3))],
    "until": "5s",
}


def _timeline(scenario: dict) -> dict:
    records = simulate(msgspec.convert(scenario, Scenario)).records
    timeline = Timeline("sim", len(records))
    for record in records:
        timeline.step(record)
    (partition,) = timeline.result("views")["partitions"]
    return partition


def _series(partition: dict, queue: str) -> dict[str, dict[str, list]]:
    return next(q for q in partition["queues"] if q["path"] == queue)["series"]


def _simulated(tmp_path: Path, scenario: dict | Path, name: str = "log") -> Path:
    """A log of `scenario` (a file, or a scenario written to one)."""
    path = scenario if isinstance(scenario, Path) else tmp_path / f"{name}.yaml"
    if not isinstance(scenario, Path):
        path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / f"{name}.db"
    done = preemptd("simulate", str(path), "--quiet", "--db", str(db))
    assert done.returncode == 0, done.stderr
    return db


def test_an_admitted_workload_whose_pods_do_not_run_is_admitted_not_pending() -> None:
    partition = _timeline(ADMITTED_NOT_RUNNING)
    assert [c["name"] for c in partition["curves"]] == ["admitted", "allocated", "pending", "guaranteed", "max"]
    on_demand = _series(partition, "team-a")["cpu in on-demand"]
    times = partition["times"]
    before_a2 = max(i for i, t in enumerate(times) if t < 4)
    assert (on_demand["admitted"][before_a2], on_demand["allocated"][before_a2], on_demand["pending"][before_a2]) == (4, 0, 0), (
        "a-1 holds its quota, runs nothing, waits for no admission"
    )
    spot = _series(partition, "team-a")["cpu in spot"]
    assert (spot["admitted"][-1], spot["allocated"][-1], spot["pending"][-1]) == (4, 4, 0), "a-2 admitted in spot and running"
    assert (on_demand["guaranteed"][-1], spot["guaranteed"][-1]) == (4, 4) and on_demand["max"][-1] == 4, "without a cohort its nominal quota is its limit"
    b = _series(partition, "team-b")["cpu in on-demand"]
    assert (b["admitted"][-1], b["pending"][-1]) == (0, 6), "b-1 waits for admission, in the flavor tried first"
    assert [row["queue"] for row in partition["summary"]["under_guarantee"]] == ["team-b"], "team-a holds its nominal quota: only team-b waits under it"


def test_state_says_pending_of_what_waits_for_admission_and_admitted_of_the_rest(tmp_path: Path) -> None:
    db = _simulated(tmp_path, ADMITTED_NOT_RUNNING)
    text = preemptd("state", "--db", str(db)).stdout
    assert re.search(
        r"^  team-a\s+cpu 4\s+0\s+0\s+-\s+1\.0\s+on-demand: cpu 4; spot: cpu 4\s+-\s+-\s+on-demand: cpu 4; spot: cpu 4\s+-\s+-\s+2\s+1 run / 1 wait$",
        text,
        re.M,
    ), text
    queues = json.loads(preemptd("state", "--db", str(db), "--json").stdout)["queues"]
    assert (queues["team-a"]["pending"], queues["team-b"]["pending"], queues["(cluster)"]["pending"]) == ({}, {"cpu": 6}, {"cpu": 6})


def test_the_curves_per_flavor_end_where_state_says_admitted_workloads_are(tmp_path: Path) -> None:
    scenario = ROOT / "examples" / "kueue" / "flavor-fungibility.yaml"
    partition = _timeline(yaml.safe_load(scenario.read_text()))
    queues = json.loads(preemptd("state", "--db", str(_simulated(tmp_path, scenario)), "--json").stdout)["queues"]
    checked = 0
    for path, said in queues.items():
        if path == "(cluster)":
            continue
        drawn = {resource: amounts["admitted"][-1] for resource, amounts in _series(partition, path).items() if amounts["admitted"][-1]}
        stated = {f"{resource} in {flavor}": float(amount) for flavor, amounts in (said["admitted"] or {}).items() for resource, amount in amounts.items()}
        assert drawn == stated, path
        checked += len(stated)
    assert checked >= 2, "the example admits in more than one flavor"


def test_shares_are_drawn_under_fair_sharing_only_and_agree_with_state(tmp_path: Path) -> None:
    fair = ROOT / "examples" / "kueue" / "fair-sharing-weights.yaml"
    partition = _timeline(yaml.safe_load(fair.read_text()))
    assert "weighted share" in partition["shares"]["words"]
    series = partition["shares"]["series"]
    assert {"team-a", "team-b", "cohort lab"} <= set(series)
    assert "best-effort" not in series, "weight 0 and borrowing: an infinite share, no number to draw"
    db = _simulated(tmp_path, fair)
    state = json.loads(preemptd("state", "--db", str(db), "--json").stdout)
    assert state["queues"]["team-b"]["share"] == series["team-b"][-1] == 250, "weight 2, borrowing 6 of the 12 its cohort could lend: 500 / 2"
    assert state["queues"]["best-effort"]["share"] == "infinite"
    classic = ROOT / "examples" / "kueue" / "reclaim-within-cohort.yaml"
    assert _timeline(yaml.safe_load(classic.read_text()))["shares"]["series"] == {}
    queues = json.loads(preemptd("state", "--db", str(_simulated(tmp_path, classic, "classic")), "--json").stdout)["queues"]
    assert "share" not in queues["svc-a"], "no share column without fair sharing"


def test_the_cohort_tree_says_who_borrows_and_who_lends_in_the_text_and_json_alike(tmp_path: Path) -> None:
    db = _simulated(tmp_path, NESTED)
    text = preemptd("state", "--db", str(db)).stdout
    rows = json.loads(preemptd("state", "--db", str(db), "--json").stdout)["cohorts"]
    assert rows == [
        {
            "cohort": "org",
            "parent": None,
            "cluster_queues": "infra",
            "nominal": {"default": {"cpu": 10}},
            "admitted": {"default": {"cpu": 6}},
            "borrowed": None,
            "lent": None,
        },
        {
            "cohort": "lab",
            "parent": "org",
            "cluster_queues": "team",
            "nominal": {"default": {"cpu": 2}},
            "admitted": {"default": {"cpu": 6}},
            "borrowed": {"default": {"cpu": 4}},
            "lent": None,
        },
    ]
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("COHORT"))
    assert re.split(r"\s{2,}", lines[head]) == [key.upper().replace("_", " ") for key in rows[0]]
    for line, row in zip(lines[head + 1 : head + 1 + len(rows)], rows, strict=True):
        assert re.split(r"\s{2,}", line) == [_shown(value) for value in row.values()], line
    infra = json.loads(preemptd("state", "--db", str(db), "--json").stdout)["queues"]["infra"]
    assert (infra["lent"], infra["borrowed"]) == ({"default": {"cpu": 4}}, None), "infra's unused quota is what lab borrows"


def _shown(value: Any) -> str:
    """A JSON value as the text table shows it (whole CPUs here)."""
    if value is None:
        return "-"
    if isinstance(value, dict):
        return "; ".join(f"{flavor}: " + ", ".join(f"{r} {a}" for r, a in amounts.items()) for flavor, amounts in value.items())
    return str(value)


def test_the_cohort_table_gives_weights_and_shares_under_fair_sharing(tmp_path: Path) -> None:
    db = _simulated(tmp_path, ROOT / "examples" / "kueue" / "fair-sharing-weights.yaml")
    rows = {row["cohort"]: row for row in json.loads(preemptd("state", "--db", str(db), "--json").stdout)["cohorts"]}
    assert (rows["lab"]["weight"], rows["lab"]["share"], rows["lab"]["cluster_queues"]) == (1.0, 0, "shared, team-a, team-b"), (
        "a root cohort borrows from nobody"
    )
    assert re.search(r"^lab\s+-\s+shared, team-a, team-b\s+1\.0\s+0\.00\s+", preemptd("state", "--db", str(db)).stdout, re.M)


def test_the_admitted_gauge_shows_each_cluster_queues_quota_reserved_per_flavor() -> None:
    from preemptd.daemon.operations.metrics import Metrics, reading

    metrics = Metrics()
    metrics.now = reading(simulate(msgspec.convert(ADMITTED_NOT_RUNNING, Scenario)).state, lag=0, waiting_decisions=0, snapshot_age=0)
    scraped = generate_latest(metrics.registry).decode()
    assert 'preemptd_queue_admitted{partition="default",queue="team-a",resource="cpu in on-demand"} 4.0' in scraped, scraped
    assert 'preemptd_queue_allocated{partition="default",queue="team-a",resource="cpu in on-demand"}' not in scraped, "a-1 runs nothing"
    assert 'preemptd_queue_pending{partition="default",queue="team-b",resource="cpu in on-demand"} 6.0' in scraped


def test_what_the_views_keep_between_samples_is_what_a_whole_read_finds() -> None:
    """The totals read again only the workloads the fold changed: at every record of a log with
    admissions, evictions and releases, the curves and shares equal those of a fresh read."""
    scenario = msgspec.yaml.decode((ROOT / "examples" / "kueue" / "fair-sharing.yaml").read_bytes(), type=Scenario)
    state = ClusterState(log_id="sim")
    for record in simulate(scenario).records:
        apply(state, record)
        view = state.partitions.get(record.event.partition)
        if view is None or view.model != "kueue":
            continue
        kept = KUEUE.views.curves(view), KUEUE.views.shares(view)
        kept_views(view).totals = None
        assert (KUEUE.views.curves(view), KUEUE.views.shares(view)) == kept, record


def test_the_configuration_line_names_the_strategies_where_fair_sharing_is_on() -> None:
    scenario = msgspec.yaml.decode((ROOT / "examples" / "kueue" / "fair-sharing-one-cohort.yaml").read_bytes(), type=Scenario)
    said = describe(simulate(scenario).state.partitions["default"])
    assert (
        "fair sharing on in the cohort trees of fair, reclaim (preemptd's annotation; LessThanOrEqualToFinalShare, LessThanInitialShare), classic elsewhere"
        in said
    )


def test_the_gauges_name_first_the_clusterqueues_holding_most_quota_running_or_not() -> None:
    """The per-queue gauges name the busiest queues: under Kueue by what they hold of the quota
    (admitted), so that team-a, whose admitted workload waits for a node, comes before team-b,
    whose smaller one runs."""
    from preemptd.daemon.operations.metrics import _amounts, _busiest

    scenario = {
        "name": "busiest",
        "model": "kueue",
        "config": [_flavor("on-demand"), _queue("team-a", {"on-demand": 4}), _queue("team-b", {"on-demand": 4})],
        "events": [
            {"at": "0s", "type": "node.upserted", "node": "n1", "capacity": {"cpu": 64}},
            _pod("1s", "a-1", "team-a", 4),
            _pod("1s", "b-1", "team-b", 2),
            {"at": "2s", "type": "task.bound", "task": "b-1", "node": "n1"},
        ],
        "shim": {"execute": False},
        "until": "5s",
    }
    state = simulate(msgspec.convert(scenario, Scenario)).state
    amounts = {name: _amounts(partition) for name, partition in state.partitions.items()}
    assert _busiest(state, amounts, 2) == {("default", "(cluster)"), ("default", "team-a")}


def test_a_queue_whose_workloads_are_evicted_for_a_lowered_quota_is_shown_evicting_not_preempting(tmp_path: Path) -> None:
    """Kueue's words: a ClusterQueue whose admitted workloads are being evicted (here by its own
    lowered quota) shows them under EVICTING; no column says it preempts anything."""
    db = tmp_path / "lowered.db"
    assert preemptd("simulate", str(ROOT / "examples" / "kueue" / "quota-enforcement-lowered-queue-first.yaml"), "--quiet", "--db", str(db)).returncode == 0
    with contextlib.closing(sqlite3.connect(db)) as log:
        (seq,) = log.execute("SELECT seq FROM log WHERE type = 'decision.quota_enforced'").fetchone()
    text = preemptd("state", "--db", str(db), "--at", str(seq)).stdout
    assert "PREEMPTING" not in text and re.search(r"^QUEUE\s+ALLOCATED\s+PENDING\s+EVICTING\s", text, re.M), text
    assert re.search(r"^  training\s+nvidia\.com/gpu 8\s+0\s+nvidia\.com/gpu 4\s", text, re.M), text
    assert re.search(r"^  batch\s+nvidia\.com/gpu 4\s+0\s+0\s", text, re.M), text


def test_state_lists_workloads_as_kueuectl_does_and_an_evicted_one_says_why_until_admitted_again(tmp_path: Path) -> None:
    """A Kueue admin asked `state` which workloads run and which wait, and why: it showed
    queues only. The workloads, as `kueuectl list workloads` lists them: LocalQueue and
    ClusterQueue, priority, admitted with its flavors or pending (an evicted one with its
    eviction's reason, as Kueue's Evicted condition, until it is admitted again), age."""
    db = tmp_path / "log.db"
    assert preemptd("simulate", str(ROOT / "examples/kueue/within-cluster-queue.yaml"), "--quiet", "--db", str(db)).returncode == 0
    shown = preemptd("state", "--db", str(db), "--json")
    assert shown.returncode == 0, shown.stderr
    rows = {row["workload"]: row for row in json.loads(shown.stdout)["workloads"]}
    assert rows["urgent"] == {
        "workload": "urgent",
        "local_queue": "ml/training",
        "cluster_queue": "team-a",
        "priority": 1000,
        "status": "admitted",
        "flavors": "cpu: default-flavor",
        "age": "15s",
    }
    assert rows["low-1"]["status"] == "pending (evicted: Preempted (InClusterQueue) by urgent)"
    assert rows["low-2"]["status"] == "pending" and list(rows) == ["urgent", "low-1", "low-2"], "admitted first, then by priority and age"
    text = preemptd("state", "--db", str(db)).stdout
    assert "WORKLOAD  LOCAL QUEUE  CLUSTER QUEUE  PRIORITY  STATUS" in text
