"""The YuniKorn model on a synthetic cluster: allocation throughput and preemption latency.

    .venv/bin/python bench/yunikorn.py                  # 5,000 nodes; scaling at 500, 5,000, 20,000
    .venv/bin/python bench/yunikorn.py --sizes 5000     # one size only

Allocation: 5,000 nodes, 100,000 running tasks, 1,000 leaf queues (20 parents of 50), and
10,000 pending tasks that all fit; one cycle places them. Reported as allocation decisions per
second (each decision made and folded into the state).

Preemption: a full cluster of N nodes. 2,000 running tasks sit in 10 queues over their
guarantee (the candidates); every other queue is exactly at its guarantee; 20 queues under
their guarantee have 10,000 pending tasks. Cycles run until nothing more can be preempted, and
each call of the victim search is timed: p50 and p99 per preemption decision. The candidates
stay the same while N grows, so the search time should stay flat. Then one more cycle, which
decides nothing, is timed: what a backlog of pending tasks costs every cycle.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from _figures import ms

from preemptd import events as ev
from preemptd.projections import ClusterState, LogRecord
from preemptd.scheduling import apply, run_cycle, tick_record
from preemptd.scheduling.yunikorn import _cycle as yunikorn_cycle

LEAVES_PER_PARENT = 50
PARENTS = 20


def _config(guarantees: dict[str, int], preemption: dict | None = None) -> ev.ConfigApplied:
    parents = []
    for parent in range(PARENTS):
        leaves = []
        for leaf in range(LEAVES_PER_PARENT):
            path = f"root.p{parent}.l{leaf}"
            queue = {"name": f"l{leaf}"}
            if path in guarantees:
                queue["resources"] = {"guaranteed": {"vcore": guarantees[path]}}
            leaves.append(queue)
        parents.append({"name": f"p{parent}", "queues": leaves})
    body = {"queues": [{"name": "root", "properties": {"preemption.delay": "1s"}, "queues": parents}]}
    if preemption:
        body["preemption"] = preemption
    return ev.ConfigApplied(id="config", ts=0, config=body)


def _leaf(index: int) -> str:
    return f"root.p{index // LEAVES_PER_PARENT}.l{index % LEAVES_PER_PARENT}"


class Builder:
    def __init__(self) -> None:
        self.state = ClusterState(log_id="bench")

    def add(self, event: object) -> None:
        apply(self.state, LogRecord(self.state.seq + 1, event.ts, event))

    def tick(self, now: int) -> list:
        return run_cycle(self.state, tick_record(self.state, now, "default")).decisions


def bench_allocation(nodes: int = 5000, running: int = 100_000, pending: int = 10_000) -> float:
    b = Builder()
    b.add(_config({}))
    for n in range(nodes):
        b.add(ev.NodeUpserted(id=f"n{n}", ts=0, node=f"node-{n:05d}", capacity=ev.Resources({"vcore": 64_000})))
    one = ev.Resources({"vcore": 1000})
    for t in range(running):
        b.add(ev.TaskBound(id=f"r{t}", ts=0, task=f"run-{t}", node=f"node-{t % nodes:05d}", app=f"app-{t % 2000}", queue=_leaf(t % 2000 % 1000), resources=one))
    for t in range(pending):
        leaf = (t * 7) % 1000
        b.add(ev.TaskSubmitted(id=f"p{t}", ts=0, task=f"new-{t}", app=f"new-app-{leaf}", queue=_leaf(leaf), resources=one))
    gc.collect()
    started = time.perf_counter()
    decisions = b.tick(1000)
    elapsed = time.perf_counter() - started
    placed = sum(isinstance(d, ev.Allocated) for d in decisions)
    assert placed == pending, f"placed {placed} of {pending}"
    return placed / elapsed


def build_full_cluster(nodes: int, pool_tasks: int = 2000, needy_queues: int = 20, pending: int = 10_000, per_node: int = 8) -> Builder:
    """Every node full with `per_node` tasks of 4 vcores. Pool queues (no guarantee) hold
    `pool_tasks`; the other tasks fill queues exactly at their guarantee; needy queues wait
    under theirs."""
    task_size = 4000
    total = nodes * per_node
    pool = [_leaf(i) for i in range(10)]
    needy = [_leaf(i) for i in range(10, 10 + needy_queues)]
    rest = [_leaf(i) for i in range(10 + needy_queues, 1000)]
    filler = total - pool_tasks
    counts = {leaf: filler // len(rest) + (1 if i < filler % len(rest) else 0) for i, leaf in enumerate(rest)}
    guarantees = {leaf: count * 4 for leaf, count in counts.items()}
    guarantees.update({leaf: pool_tasks // needy_queues * 4 for leaf in needy})
    b = Builder()
    b.add(_config(guarantees, {"max_victims_per_cycle": 100_000, "max_share_per_cycle": 1.0}))
    for n in range(nodes):
        b.add(ev.NodeUpserted(id=f"n{n}", ts=0, node=f"node-{n:05d}", capacity=ev.Resources({"vcore": per_node * task_size})))
    size = ev.Resources({"vcore": task_size})
    owners = [leaf for leaf in pool for _ in range(pool_tasks // len(pool))] + [leaf for leaf, count in counts.items() for _ in range(count)]
    for t, leaf in enumerate(owners):
        b.add(ev.TaskBound(id=f"r{t}", ts=0, task=f"run-{t}", node=f"node-{t // per_node:05d}", app=f"app-{leaf}", queue=leaf, resources=size))
    for t in range(pending):
        leaf = needy[t % len(needy)]
        b.add(ev.TaskSubmitted(id=f"p{t}", ts=0, task=f"new-{t}", app=f"new-{leaf}", queue=leaf, resources=size))
    return b


def bench_preemption(nodes: int) -> tuple[list[float], int, float, int]:
    """Per-decision search times, the preemptions made, and then the time of one more cycle
    that decides nothing, with the pending tasks left (the steady cost of a backlog)."""
    b = build_full_cluster(nodes)
    timings: list[float] = []
    original = yunikorn_cycle.plan_for_guarantee

    def timed(*args, **kwargs):
        started = time.perf_counter()
        outcome = original(*args, **kwargs)
        if not hasattr(outcome, "quiet"):  # a plan, not a refusal
            timings.append(time.perf_counter() - started)
        return outcome

    yunikorn_cycle.plan_for_guarantee = timed
    gc.collect()
    try:
        preempted, now = 0, 2000
        while True:
            decisions = b.tick(now)
            made = sum(isinstance(d, ev.Preempted) for d in decisions)
            if not made:
                break
            preempted += made
            now += 1000
    finally:
        yunikorn_cycle.plan_for_guarantee = original
    while b.tick(now := now + 1000):  # until the refusals are all reported
        pass
    started = time.perf_counter()
    b.tick(now + 1000)
    idle = time.perf_counter() - started
    return timings, preempted, idle, b.state.partitions["default"].pending_count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500,5000,20000", help="node counts for the preemption runs")
    parser.add_argument("--skip-allocation", action="store_true")
    args = parser.parse_args()
    if not args.skip_allocation:
        rate = bench_allocation()
        print(f"allocation: {rate:,.0f} decisions/s (5,000 nodes, 100,000 running, 1,000 leaves, 10,000 pending)")
    for nodes in (int(size) for size in args.sizes.split(",")):
        timings, preempted, idle, pending = bench_preemption(nodes)
        timings.sort()
        p50 = statistics.median(timings)
        p99 = timings[min(len(timings) - 1, int(len(timings) * 0.99))]
        print(f"preemption at {nodes:>6,} nodes ({nodes * 8:>7,} running): {preempted:,} decisions, p50 {ms(p50)}, p99 {ms(p99)}")
        print(f"  then a cycle that decides nothing, {pending:,} pending: {ms(idle)} ({idle / pending * 1e6:.1f} us per pending task)")


if __name__ == "__main__":
    main()
