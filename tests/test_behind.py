"""A partition whose backlog grows is said to be behind, once and every ten minutes while it
lasts, and said to keep up again once it stops growing; the gauge shows the growth."""

from __future__ import annotations

from prometheus_client import generate_latest

from preemptd.daemon.operations.behind import Behind, longest_waiting
from preemptd.daemon.operations.metrics import Metrics, reading
from preemptd.projections import ClusterState


def test_a_growing_backlog_is_said_once_then_every_ten_minutes_and_its_end_said() -> None:
    behind, said = Behind(), []
    for second in range(0, 1500):  # 100 tasks a second more than are placed, for 25 minutes
        told = behind.observe("default", second * 1000, 100 * second)
        if told is not None:
            said.append((second, told[0].split(":")[0], told[1]["last_minute"]))
    assert [(second, what) for second, what, _ in said] == [(54, "behind"), (654, "behind"), (1254, "behind")]
    assert said[0][2] == 5400 and round(behind.growth["default"]) == 100
    for second in range(1500, 1700):  # placed faster than it arrives now
        told = behind.observe("default", second * 1000, 150_000 - 50 * (second - 1500))
        if told is not None:
            said.append((second, told[0].split(":")[0], told[1]["pending"]))
    assert said[-1][1] == "keeping up again" and behind.growth["default"] < 0


def test_a_steady_or_small_backlog_is_not_behind() -> None:
    behind = Behind()
    told = [behind.observe("default", second * 1000, 50_000 + second % 7) for second in range(600)]  # wobbling, not growing
    told += [behind.observe("small", second * 1000, second // 2) for second in range(600)]  # growing, but by 30 a minute
    assert told == [None] * 1200


def test_the_growth_is_a_gauge_per_partition() -> None:
    metrics = Metrics()
    metrics.now = reading(ClusterState(), lag=0, waiting_decisions=0, snapshot_age=0, growth={"default": 140.5})
    assert 'preemptd_backlog_growth_per_second{partition="default"} 140.5' in generate_latest(metrics.registry).decode()


def test_behind_says_which_queues_wait_longest_and_for_how_long() -> None:
    """What an operator needs to find the queues a busy partition leaves waiting, not a promise."""
    from builders import R, config, fold_events, node, task

    from preemptd.scheduling import run_cycle, tick_record

    state = fold_events(
        config([{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}]),
        node("n1", vcore=1),
        *(task(f"a{i}", f"a{i}", "root.a", ts=1_000, resources=R(vcore=2)) for i in range(3)),
        task("b1", "b1", "root.b", ts=5_000, resources=R(vcore=2)),
        task("c1", "c1", "root.c", ts=9_000, resources=R(vcore=2)),
        task("d1", "d1", "root.d", ts=20_000, resources=R(vcore=2)),
    )
    run_cycle(state, tick_record(state, 95_000, "default"))
    said = longest_waiting(state.partitions["default"])
    assert said == "root.a: 3 waiting, the oldest for 94s; root.b: 1 waiting, the oldest for 90s; root.c: 1 waiting, the oldest for 86s; 1 more queue"
