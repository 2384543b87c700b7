"""A partition whose backlog grows is said to be behind, once and every ten minutes while it
lasts, and said to keep up again once it stops growing; the gauge shows the growth."""

from __future__ import annotations

from prometheus_client import generate_latest

from preemptd.daemon.operations.behind import Behind
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
