"""The limits of what a shim may send (events/_limits.py): each one refused with a reason that
names it and says by how much, and within them any accepted history snapshots and restores."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from preemptd.events import (
    INT32,
    MAX_LABEL_KEY,
    MAX_QUANTITY,
    MAX_TIMESTAMP,
    DecodeError,
    decode_cluster_event,
)
from preemptd.projections import ClusterState, LogRecord, Rejected
from preemptd.scheduling import apply, restore, run_cycle, snapshot, tick_record


def raw(**event: Any) -> bytes:
    return json.dumps({"id": "e1", "ts": 1, **event}).encode()


def node(name: str = "n1", **capacity: Any) -> bytes:
    return raw(type="node.upserted", node=name, capacity=capacity or {"vcore": 4})


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b'{"x": "' + b"x" * (1 << 20) + b'"}', "message of 1,048,585 bytes; the limit is 1,048,576 bytes"),
        (node()[:-1] + b', "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "objects and arrays nested 100,001 levels deep; the limit is 64"),
        (node(memory="16Ei"), "memory: '16Ei' is 18,446,744,073,709,551,616 units (bytes, counts); the limit is 1,152,921,504,606,846,976 (2^60)"),
        (node(vcore="1e18"), "vcore: '1e18' is 1,000,000,000,000,000,000,000 millicores; the limit is 1,152,921,504,606,846,976 (2^60)"),
        (node(memory="1e400"), "memory: '1e400' is 1.000e+400 units"),
        (node(**{f"r{i}": 1 for i in range(70_000)}), "70,000 resource names; the limit is 64"),
        (node(**{"r" * 300: 1}), "a resource name of 300 characters; the limit is 256"),
        (
            raw(type="node.upserted", node="n1", capacity={}, labels={"k" * 400: "v"}),
            f"a string of 400 characters; the limit is {MAX_LABEL_KEY} - at `$.labels`",
        ),
        (raw(type="node.upserted", node="n1", capacity={}, labels={str(i): "v" for i in range(300)}), "300 entries; the limit is 256 - at `$.labels`"),
        (
            raw(type="node.upserted", node="n1", capacity={}, ts=MAX_TIMESTAMP + 1),
            f"{MAX_TIMESTAMP + 1:,} is beyond the limit of {MAX_TIMESTAMP:,} - at `$.ts`",
        ),
        (raw(type="priorityclass.upserted", name="p", value=INT32[1] + 1), f"{INT32[1] + 1:,} is beyond the limit of {INT32[1]:,} - at `$.value`"),
        (
            raw(type="task.submitted", task="t", app="a", queue="root.default", resources={}, task_priority=INT32[0] - 1),
            f"{INT32[0] - 1:,} is below the least allowed, {INT32[0]:,} - at `$.task_priority`",
        ),
        (
            raw(type="app.submitted", app="a", queue="root.default", min_available=1 << 40),
            f"{1 << 40:,} is beyond the limit of {INT32[1]:,} - at `$.min_available`",
        ),
        (b'{"type": "node.upserted", "id": "e1", "ts": 1, "node": "a\x85", "capacity": {}}', "not UTF-8: byte b'\\x85' in a string"),
    ],
    ids=[
        "size",
        "depth",
        "quantity",
        "millicores",
        "exponent",
        "names",
        "name length",
        "label key",
        "labels",
        "ts",
        "priority",
        "task priority",
        "min available",
        "utf-8",
    ],
)
def test_a_message_beyond_a_limit_is_refused_saying_which_and_by_how_much(message: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as refused:
        decode_cluster_event(message)
    assert reason in refused.value.reason


def test_a_message_too_big_or_deep_to_parse_still_names_its_type_and_id() -> None:
    with pytest.raises(DecodeError) as refused:
        decode_cluster_event(b'{"type": "task.submitted", "id": "deep-1", "x": ' + b"[" * 1000 + b"]" * 1000 + b"}")
    assert (refused.value.event_type, refused.value.event_id) == ("task.submitted", "deep-1")


def fold(*messages: bytes) -> ClusterState:
    state = ClusterState()
    for message in messages:
        apply(state, LogRecord(state.seq + 1, 1, decode_cluster_event(message)))
    return state


def test_quantities_at_their_limit_are_accepted_but_not_a_total_beyond_its_own() -> None:
    nodes = [json.dumps({"type": "node.upserted", "id": f"n{i}", "ts": 1, "node": f"n{i}", "capacity": {"memory": MAX_QUANTITY}}).encode() for i in range(5)]
    state = fold(*nodes[:4])
    assert state.partitions["default"].capacity == {"memory": 4 * MAX_QUANTITY}
    with pytest.raises(
        Rejected,
        match=r"node 'n4' would bring the capacity of partition default in memory to 5,764,607,523,034,234,880; the limit is 4,611,686,018,427,387,904 "
        r"\(2\^62\)",
    ):
        fold(*nodes)
    assert restore(snapshot(state)) == state


def test_tasks_cannot_together_hold_and_ask_more_than_the_total_limit() -> None:
    tasks = [raw(type="task.submitted", id=f"t{i}", task=f"t{i}", app="a", queue="root.default", resources={"memory": MAX_QUANTITY}) for i in range(5)]
    with pytest.raises(Rejected, match="task 't4' would bring what the tasks of partition default hold and ask in memory to"):
        fold(*tasks)


# -- within the limits, any accepted history snapshots and restores -------------------------------

text = st.text(min_size=1, max_size=40)  # any code point but surrogates: controls, bidi overrides, emoji
names = st.sampled_from(["n1", "n2", "t1", "t2", "a1", "\x1b[2J", "\u202eexe.txt", "🚀"]) | text
quantities = st.sampled_from([MAX_QUANTITY, MAX_QUANTITY - 1, 1]) | st.integers(0, MAX_QUANTITY)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=20,
)


@st.composite
def accepted_history(draw: st.DrawFn) -> list[bytes]:
    queues = [{"name": "a", "resources": {"guaranteed": {"memory": draw(quantities)}}, "maxapplications": draw(json_values)}, {"name": "default"}]
    events: list[dict[str, Any]] = [
        {"type": "config.applied", "config": {"queues": [{"name": "root", "queues": queues}], "partitions_note": draw(json_values)}}
    ]
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["node", "task", "bound", "app", "class", "released"]))
        task, node_, app = draw(names), draw(names), draw(names)
        copies = draw(st.sampled_from([1, 1, 1, 20]))  # many alike, so that totals reach their limit
        resources = draw(st.dictionaries(st.sampled_from(["memory", "pods", "nvidia.com/gpu", "x" * 256]), quantities, min_size=1, max_size=3))
        priority = draw(st.integers(*INT32))
        events += [
            {
                "node": {"type": "node.upserted", "node": node_, "capacity": resources, "labels": draw(st.dictionaries(text, text, max_size=3))},
                "task": {
                    "type": "task.submitted",
                    "task": task,
                    "app": app,
                    "queue": draw(st.sampled_from(["root.a", "root.default"])),
                    "resources": resources,
                    "priority": priority,
                },
                "bound": {"type": "task.bound", "task": task, "node": node_, "app": app, "queue": "root.a", "resources": resources, "task_priority": priority},
                "app": {"type": "app.submitted", "app": app, "queue": "root.default", "priority": priority, "min_available": draw(st.integers(0, INT32[1]))},
                "class": {"type": "priorityclass.upserted", "name": draw(names), "value": priority},
                "released": {"type": "task.released", "task": task},
            }[kind]
            for task, node_ in ((f"{task}-{i}" if i else task, f"{node_}-{i}" if i else node_) for i in range(copies))
        ]
    return [json.dumps({"id": f"e{i}", "ts": draw(st.integers(0, MAX_TIMESTAMP)), **event}).encode() for i, event in enumerate(events)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(accepted_history())
def test_a_snapshot_of_any_accepted_history_restores_an_equal_state(history: list[bytes]) -> None:
    state = ClusterState(log_id="prop")
    for message in history:
        try:
            apply(state, LogRecord(state.seq + 1, 1, decode_cluster_event(message)))
        except (DecodeError, Rejected):
            continue
    run_cycle(state, tick_record(state, 100_000, "default"))  # and with the decisions of a cycle
    assert restore(snapshot(state)) == state


def test_a_decision_about_thousands_of_flavors_is_bounded_and_not_made_again_each_cycle() -> None:
    """A ClusterQueue of 5,500 flavors made each `decision.blocked` 384 KB (a line per flavor
    tried), and 200 pending workloads 75 MB of decisions: a decision keeps 100 lines of at most
    1,000 characters, saying how many it left out, and the same reasons are not said again."""
    from preemptd.events import Blocked, Scenario
    from preemptd.scheduling import BLOCKED_PER_CYCLE, simulate

    flavors = 5_500
    config = [
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f"f{i}"}} for i in range(flavors)),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "q"},
            "spec": {
                "resourceGroups": [
                    {"coveredResources": ["cpu"], "flavors": [{"name": f"f{i}", "resources": [{"name": "cpu", "nominalQuota": 1}]} for i in range(flavors)]}
                ]
            },
        },
    ]
    events = [{"at": "0s", "type": "task.submitted", "task": f"w{i}", "app": f"w{i}", "queue": "q", "resources": {"cpu": 2}} for i in range(20)]
    result = simulate(Scenario(name="many flavors", model="kueue", config=config, events=events, until="3s"))
    blocked = [d for d in result.decisions if isinstance(d, Blocked)]
    assert len(blocked) == 20 <= BLOCKED_PER_CYCLE, "each workload told once, not again every cycle"
    assert all(len(d.reasons) <= 100 and all(len(line) <= 1000 for line in d.reasons) for d in blocked)
    assert blocked[0].reasons[-1].startswith("... and ") and blocked[0].reasons[-1].endswith(" more lines")
    assert max(len(json.dumps(list(d.reasons))) for d in blocked) < 110_000


def test_a_reason_longer_than_a_line_is_told_once_not_again_every_cycle() -> None:
    """The never-candidates line of a workload in a cohort of 120 full ClusterQueues names them
    all (about 4,000 characters): cut to 1,000 when told, it compares equal to the same reason cut
    again, so the workload is told once, not again every cycle."""
    from preemptd.events import Blocked, Scenario
    from preemptd.scheduling import simulate

    spec = {
        "cohortName": "everyone",
        "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}],
    }
    queues = [f"a-team-with-a-rather-long-name-{i:03d}" for i in range(120)]
    config = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}},
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": q}, "spec": spec} for q in queues),
    ]
    events: list[dict] = [{"at": "0s", "type": "node.upserted", "node": "n", "capacity": {"cpu": 1000}}]
    events += [{"at": "0s", "type": "task.bound", "task": f"run-{q}", "app": f"run-{q}", "queue": q, "node": "n", "resources": {"cpu": 1}} for q in queues]
    events.append({"at": "2s", "type": "task.submitted", "task": "late", "app": "late", "queue": queues[0], "resources": {"cpu": 1}})
    result = simulate(Scenario(name="long reasons", model="kueue", config=config, events=events, until="10s"))
    told = [d for d in result.decisions if isinstance(d, Blocked)]
    assert len(told) == 1 and any(line.endswith("more characters)") for line in told[0].reasons), "cut, and told once"


def test_bounded_lines_say_what_they_left_out_and_nothing_more() -> None:
    from preemptd.scheduling import bounded

    assert bounded(("short",)) == ("short",)
    (cut,) = bounded(("x" * 1500,))
    kept = cut.index(".")
    assert len(cut) == 1000 and cut == "x" * kept + f"... ({1500 - kept} more characters)", (
        "one long line is cut to 1,000 characters, saying how many it left out"
    )
    for length in (1001, 1030, 10_000, 1_000_000):
        cut = bounded(("x" * length,))
        assert len(cut[0]) == 1000 and bounded(cut) == cut, "a line cut is not cut again: a blocked task is told its reasons once"
    many = bounded(tuple(f"line {i}" for i in range(250)))
    assert len(many) == 100 and many[-1] == "... and 151 more lines" and many[98] == "line 98"
    assert bounded(many) == many, "bounding what is bounded changes nothing"
