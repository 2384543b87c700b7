"""What Volcano's queues deserve: proportion's water-filling by weight (clamped to what a queue
asks and to its real capability, raised to its guarantee) and capacity's deserved; and the share
reclaim compares. Figures computed by hand; the first is the research notes' example."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings, strategies as st

from preemptd.scheduling.volcano._config import Queue
from preemptd.scheduling.volcano._shares import Demand, capacity_deserved, proportion_deserved, share


def cpu(cores: float) -> dict[str, int]:
    return {"cpu": int(cores * 1000)}


def demand(allocated: float, request: float) -> Demand:
    return Demand(allocated=cpu(allocated), request=cpu(request))


def test_water_filling_gives_a_small_queue_what_it_asks_and_the_rest_to_the_other() -> None:
    queues = {"q1": Queue(name="q1"), "q2": Queue(name="q2")}
    deserved = proportion_deserved(queues, {"q1": demand(3, 3), "q2": demand(0, 1)}, {**cpu(3), "pods": 110})
    # round 1 offers 1.5 each; q2 asks 1 and is met; round 2 gives q1 the 0.5 left
    assert deserved == {"q1": {"cpu": 2000}, "q2": {"cpu": 1000}}
    assert share(cpu(3), deserved["q1"]) == Fraction(3, 2), "q1 holds 3 of the 2 it deserves: reclaimable down to 2"


def test_weights_split_what_both_ask_for_and_a_capability_caps_a_queue() -> None:
    queues = {"heavy": Queue(name="heavy", weight=2), "light": Queue(name="light", weight=1), "capped": Queue(name="capped", weight=3, capability=cpu(1))}
    deserved = proportion_deserved(queues, {"heavy": demand(0, 10), "light": demand(0, 10), "capped": demand(0, 10)}, cpu(9))
    # round 1: heavy 3, light 1.5, capped 4.5 -> 1 (capability); round 2 splits 3.5 by 2:1
    assert deserved["capped"] == {"cpu": 1000}
    assert deserved["heavy"]["cpu"] == 3000 + Fraction(7000, 3)
    assert deserved["light"]["cpu"] == 1500 + Fraction(3500, 3)


def test_a_guarantee_is_deserved_whatever_the_weights_and_reserved_from_the_others() -> None:
    queues = {"a": Queue(name="a", guarantee=cpu(6)), "b": Queue(name="b", weight=10)}
    deserved = proportion_deserved(queues, {"a": demand(0, 8), "b": demand(0, 10)}, cpu(10))
    assert deserved["a"]["cpu"] >= 6000
    assert deserved["b"]["cpu"] <= 4000, "b's real capability is the cluster less a's guarantee"


def test_capacity_deserves_spec_deserved_capped_and_raised_to_the_guarantee() -> None:
    queues = {
        "plain": Queue(name="plain", deserved=cpu(4)),
        "capped": Queue(name="capped", deserved=cpu(8), capability=cpu(8)),
        "guaranteed": Queue(name="guaranteed", deserved=cpu(1), guarantee=cpu(2)),
        "none": Queue(name="none"),
    }
    deserved = capacity_deserved(queues, {name: demand(0, 1) for name in queues}, cpu(9))
    assert deserved["plain"] == {"cpu": 4000}
    assert deserved["capped"] == {"cpu": 7000}, "9 less the other queue's guarantee of 2"
    assert deserved["guaranteed"] == {"cpu": 2000}
    assert deserved["none"] == {}
    assert share(cpu(1), deserved["none"]) == 1, "a queue that deserves nothing is at share 1 once it holds anything"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 5), st.integers(0, 12), st.integers(0, 3), st.one_of(st.none(), st.integers(1, 12))), min_size=1, max_size=6),
    st.integers(0, 20),
)
def test_water_filling_shares_out_no_more_than_the_cluster_and_respects_each_bound(specs: list[tuple[int, int, int, int | None]], cores: int) -> None:
    queues, demands = {}, {}
    for i, (weight, asks, guarantee, capability) in enumerate(specs):
        queues[f"q{i}"] = Queue(name=f"q{i}", weight=weight, guarantee=cpu(guarantee), capability=cpu(capability) if capability else None)
        demands[f"q{i}"] = demand(0, asks)
    deserved = proportion_deserved(queues, demands, cpu(cores))
    guaranteed = sum(q.guarantee["cpu"] for q in queues.values())  # raised to, even beyond the cluster, as Volcano does
    for name, amounts in deserved.items():
        q, got = queues[name], amounts.get("cpu", 0)
        assert got >= q.guarantee["cpu"]
        assert got <= max(demands[name].request["cpu"], q.guarantee["cpu"]), "never more than it asks, unless guaranteed"
        if q.capability:
            assert got <= max(q.capability["cpu"], q.guarantee["cpu"])
    assert sum(a.get("cpu", 0) for a in deserved.values()) <= cores * 1000 + guaranteed, "the cluster shared out, plus what guarantees raise"
