"""The Volcano model on a synthetic cluster: the time of one session, and of one reclaim decision.

    .venv/bin/python bench/volcano.py                         # 5,000 nodes, 2,000 jobs of 50 tasks, 100 queues
    .venv/bin/python bench/volcano.py --nodes 500 --jobs 200  # a tenth of it

The shape: nodes of 20 CPUs (110 pods); jobs of 50 tasks of 1 CPU (min_available 1) spread over
100 queues of weight 1 under proportion, every task running: the cluster is full. Volcano runs a
session a second.

- A session with work to do but nothing to decide: one pending job in each of 10 queues that
  already hold what they deserve (allocate finds no room, reclaim has nothing to take), after
  an event that changes nothing it decides on (a node upserted again as it is); and the same
  with nothing at all since the last session, which is passed over. Each is timed whole;
  baseline in the same run: one pass over the same tasks summing what each queue holds, the
  least a session must read.
- Reclaim: half the queues hold the cluster (the other half's jobs finished); a job of 50 tasks
  (min_available 50) arrives in each idle queue and reclaims, through proportion, what its
  queue deserves, session after session (each serves at most the cycle's budget of preemptors,
  100). Each reclaim decision (one preemptor: the nodes tried, the votes, the victims) is timed:
  p50 and p99; baseline in the same run: picking the same number of victims from one
  node's running tasks in victim order, with no vote and no accounting.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

from _figures import ms, percentiles

from preemptd import events as ev
from preemptd.projections import ClusterState, LogRecord
from preemptd.scheduling import apply, restore, run_cycle, snapshot, tick_record
from preemptd.scheduling.volcano import _evict

QUEUES = 100
TASKS_PER_JOB = 50
NODE_CPUS = 20
ONE_CPU = ev.Resources({"cpu": 1000})
CONF = {
    "actions": "enqueue, allocate, preempt, reclaim, backfill",
    "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
        {"plugins": [{"name": "drf", "enablePreemptable": False}, {"name": "predicates"}, {"name": "proportion"}]},
    ],
}


class Builder:
    def __init__(self, nodes: int) -> None:
        self.state = ClusterState(log_id="bench")
        queues = [
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": _queue(q)}, "spec": {"weight": 1}} for q in range(QUEUES)
        ]
        self.add(ev.ConfigApplied(id="config", ts=0, model="volcano", config=[*queues, CONF]))
        for n in range(nodes):
            self.add(ev.NodeUpserted(id=f"node-{n}", ts=0, node=_node(n), capacity=ev.Resources({"cpu": NODE_CPUS * 1000, "pods": 110})))
        self.now = 0

    def add(self, event: Any) -> None:
        apply(self.state, LogRecord(self.state.seq + 1, event.ts, event))

    def tick(self) -> list:
        self.now += 1000
        return run_cycle(self.state, tick_record(self.state, self.now, "default")).decisions

    def running_job(self, job: str, queue: str, first_task: int) -> None:
        """A job of `TASKS_PER_JOB` running tasks, on the nodes in turn from `first_task`."""
        self.add(ev.AppSubmitted(id=f"a-{job}", ts=self.now, app=job, queue=queue, min_available=1))
        for t in range(TASKS_PER_JOB):
            node = _node((first_task + t) // NODE_CPUS)
            self.add(ev.TaskBound(id=f"b-{job}-{t}", ts=self.now, task=f"{job}-{t}", app=job, node=node, resources=ONE_CPU))

    def pending_job(self, job: str, queue: str, min_available: int) -> None:
        self.add(ev.AppSubmitted(id=f"a-{job}", ts=self.now, app=job, queue=queue, min_available=min_available))
        for t in range(TASKS_PER_JOB):
            self.add(ev.TaskSubmitted(id=f"s-{job}-{t}", ts=self.now, task=f"{job}-{t}", app=job, resources=ONE_CPU))


def _queue(q: int) -> str:
    return f"queue-{q:03d}"


def _node(n: int) -> str:
    return f"node-{n:05d}"


def full_cluster(nodes: int, jobs: int, queues: list[int]) -> Builder:
    """`jobs` running jobs spread over `queues`, filling `nodes` (their tasks must fit)."""
    assert jobs * TASKS_PER_JOB <= nodes * NODE_CPUS, "the running tasks must fit the nodes"
    b = Builder(nodes)
    for j in range(jobs):
        b.running_job(f"job-{j:04d}", _queue(queues[j % len(queues)]), j * TASKS_PER_JOB)
    return b


def bench_session(nodes: int, jobs: int) -> tuple[float, float, float, float]:
    """(session seconds, passed-over session seconds, first session after a restore, baseline
    seconds): medians of 5 sessions with nothing to decide, each after an event that changes
    nothing it decides on (a node upserted again as it is), and of 5 with nothing at all since
    the last (passed over); and the first session on the state restored from a snapshot, which
    reads every job again (the kept jobs are not in snapshots)."""
    b = full_cluster(nodes, jobs, list(range(QUEUES)))
    for q in range(10):
        b.pending_job(f"late-{q}", _queue(q), min_available=1)
    b.tick()  # the late jobs say once why they wait; from then on, nothing changes
    timings, passed_over = [], []
    gc.collect()
    for round_ in range(5):
        b.add(ev.NodeUpserted(id=f"again-{round_}", ts=0, node=_node(0), capacity=ev.Resources({"cpu": NODE_CPUS * 1000, "pods": 110})))
        started = time.perf_counter()
        assert b.tick() == [], "a session with nothing to decide decides nothing"
        timings.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert b.tick() == []
        passed_over.append(time.perf_counter() - started)
    b.state = restore(snapshot(b.state))
    b.add(ev.NodeUpserted(id="again-restored", ts=0, node=_node(0), capacity=ev.Resources({"cpu": NODE_CPUS * 1000, "pods": 110})))
    started = time.perf_counter()
    assert b.tick() == []
    restored = time.perf_counter() - started
    return statistics.median(timings), statistics.median(passed_over), restored, _baseline_session(b)


def _baseline_session(b: Builder) -> float:
    """One pass over the partition's tasks, summing what each queue holds."""
    p = b.state.partitions["default"]
    started = time.perf_counter()
    held: dict[str, int] = {}
    for task in p.tasks.values():
        if task.status == "running":
            held[task.queue] = held.get(task.queue, 0) + task.resources.get("cpu", 0)
    elapsed = time.perf_counter() - started
    assert sum(held.values()) > 0
    return elapsed


def bench_reclaim(nodes: int, jobs: int) -> tuple[list[float], list[float], int, int]:
    """(decision timings, baseline timings, decisions, sessions): sessions until the idle queues
    reclaim no more (each within the cycle's budget of preemptors)."""
    busy = list(range(0, QUEUES, 2))
    b = full_cluster(nodes, jobs, busy)
    idle = [q for q in range(QUEUES) if q not in busy]
    for q in idle:
        b.pending_job(f"new-{q}", _queue(q), min_available=TASKS_PER_JOB)
    timings: list[float] = []
    original = _evict.make_room

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        found = original(*args, **kwargs)
        timings.append(time.perf_counter() - started)
        return found

    _evict.make_room = timed
    gc.collect()
    preempted: list[ev.Preempted] = []
    sessions = 0
    try:
        while True:
            found = [d for d in b.tick() if isinstance(d, ev.Preempted)]
            if not found:
                break
            preempted += found
            sessions += 1
    finally:
        _evict.make_room = original
    assert preempted and all(d.reason.startswith("reclaim") for d in preempted), "the idle queues reclaim"
    return timings, _baseline_victims(b, [len(d.victims) for d in preempted]), len(preempted), sessions


def _baseline_victims(b: Builder, counts: list[int]) -> list[float]:
    """For each decision, taking as many victims from one node's running tasks, newest first."""
    p = b.state.partitions["default"]
    node = next(iter(p.nodes.values()))
    timings = []
    for count in counts:
        started = time.perf_counter()
        running = sorted((p.tasks[t] for t in node.tasks if p.tasks[t].status == "running"), key=lambda t: -t.seq)
        victims = running[:count]
        timings.append(time.perf_counter() - started)
        assert len(victims) <= count
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=2000)
    args = parser.parse_args()
    if args.jobs < QUEUES or args.jobs * TASKS_PER_JOB > args.nodes * NODE_CPUS:
        parser.error(f"--jobs must be at least {QUEUES} (a job in every queue) and fit the nodes ({NODE_CPUS} CPUs each, {TASKS_PER_JOB} per job)")
    shape = f"{args.nodes:,} nodes, {args.jobs:,} jobs of {TASKS_PER_JOB} tasks, {QUEUES} queues"
    session, passed_over, restored, baseline = bench_session(args.nodes, args.jobs)
    print(f"session ({shape}, nothing to decide): {ms(session)} = {session / baseline:.1f}x one pass summing what the queues hold ({ms(baseline)})")
    print(f"  the same with nothing at all since the last session (passed over): {passed_over * 1e6:.1f} µs")
    print(f"  the first session after a restore from a snapshot (every job read again): {ms(restored)}")
    timings, baselines, decisions, sessions = bench_reclaim(args.nodes, args.jobs)
    p50, p99 = percentiles(timings)
    b50, _ = percentiles(baselines)
    print(
        f"reclaim ({shape}, half the queues idle): {decisions:,} decisions in {sessions} sessions, p50 {ms(p50)}, p99 {ms(p99)}; p50 = "
        f"{p50 / b50:.0f}x picking the victims from one node ({b50 * 1e6:.1f} µs)"
    )


if __name__ == "__main__":
    main()
