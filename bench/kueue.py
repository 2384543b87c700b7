"""The Kueue model on a synthetic cluster: admission throughput and preemption latency.

    .venv/bin/python bench/kueue.py                     # 1,000 ClusterQueues; scaling at 100, 1,000, 3,000
    .venv/bin/python bench/kueue.py --sizes 1000        # one size only

The shape, for N ClusterQueues in 10 cohorts: each queue has 60 CPUs of nominal quota and 50
admitted workloads of 1 CPU (50,000 at N = 1,000); 10 pending workloads per queue (10,000).

Admission: the pending workloads all fit; cycles admit them (at most 20,000 a cycle). Reported as admissions per
second (each decided and folded into the state), against a baseline in the same run: a plain
loop over the same workloads checking and charging each queue's remaining quota, the least
any quota admission must do.

Backlog: every queue full and 10 workloads each waiting that may preempt nothing; once each
was told why, a cycle with nothing changed since the last, against a cycle of the same
partition with no workload at all; a cycle after a workload finished in one cohort (a waiting
one takes its place); the first cycle after a restore. How these grow with the backlog, up to a
million waiting: `bench/backlog.py`.

Preemption: the same queues, but in each cohort a tenth of them borrow (their 50 workloads on
10 CPUs of quota) and every other queue is full; the pending workloads come to the queues whose
quota was lent, and reclaim it (reclaimWithinCohort Any), first under classic preemption, then
under fair sharing. Each planning of a preemption is timed: p50 and p99. Baseline in the same
run: collecting the same candidates (the admitted workloads of the borrowing queues of the
cohort) and sorting them in Kueue's order, without simulating anything.
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

from _figures import ms, percentiles

from preemptd import events as ev
from preemptd.projections import ClusterState, LogRecord
from preemptd.scheduling import apply, restore, run_cycle, snapshot, tick_record
from preemptd.scheduling.kueue import _cycle as kueue_cycle

API = "kueue.x-k8s.io/v1beta2"
COHORTS = 10
ADMITTED_PER_QUEUE = 50
PENDING_PER_QUEUE = 10
ONE_CPU = ev.Resources({"cpu": 1000})


def _objects(queues: int, *, borrowers: set[int], fair_sharing: bool, preemption: bool = True) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [{"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
    if fair_sharing:
        objects.append(
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
            }
        )
    for q in range(queues):
        nominal = 10 if q in borrowers else 60
        objects.append(
            {
                "apiVersion": API,
                "kind": "ClusterQueue",
                "metadata": {"name": f"cq-{q:04d}"},
                "spec": {
                    "cohortName": f"cohort-{q % COHORTS}",
                    "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
                    if preemption
                    else {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
                    "resourceGroups": [
                        {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]}
                    ],
                },
            }
        )
    return objects


class Builder:
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.state = ClusterState(log_id="bench")
        self.add(ev.ConfigApplied(id="config", ts=0, model="kueue", config=objects))
        self.add(ev.NodeUpserted(id="node", ts=0, node="node-0", capacity=ev.Resources({"cpu": 10**9})))
        self.now = 0

    def add(self, event: Any) -> None:
        apply(self.state, LogRecord(self.state.seq + 1, event.ts, event))

    def tick(self) -> list:
        self.now += 1000
        return run_cycle(self.state, tick_record(self.state, self.now, "default")).decisions


def _running(b: Builder, counts: dict[str, int]) -> None:
    """`counts[queue]` running workloads of 1 CPU, then cycles until all are recorded as admitted."""
    for queue, count in counts.items():
        for w in range(count):
            b.add(ev.TaskBound(id=f"r-{queue}-{w}", ts=0, task=f"run-{queue}-{w}", node="node-0", app=f"run-{queue}-{w}", queue=queue, resources=ONE_CPU))
    while b.tick():
        pass


def _pending(b: Builder, counts: dict[str, int]) -> int:
    """`counts[queue]` pending workloads of 1 CPU, submitted round-robin over the queues."""
    submitted = 0
    for round_ in range(max(counts.values())):
        for queue, count in counts.items():
            if round_ < count:
                b.add(
                    ev.TaskSubmitted(id=f"p{submitted}", ts=b.now, task=f"new-{submitted}", app=f"new-{submitted}", queue=queue, priority=0, resources=ONE_CPU)
                )
                submitted += 1
    return submitted


def _name(q: int) -> str:
    return f"cq-{q:04d}"


def bench_admission(queues: int) -> tuple[float, float]:
    """(admissions per second, baseline admissions per second)."""
    b = Builder(_objects(queues, borrowers=set(), fair_sharing=False))
    _running(b, {_name(q): ADMITTED_PER_QUEUE for q in range(queues)})
    pending = _pending(b, {_name(q): PENDING_PER_QUEUE for q in range(queues)})
    gc.collect()
    admitted, elapsed = 0, 0.0
    while admitted < pending:  # a cycle admits at most the model's Budget.placements
        started = time.perf_counter()
        decisions = b.tick()
        elapsed += time.perf_counter() - started
        made = sum(isinstance(d, ev.Admitted) for d in decisions)
        assert made, f"admitted {admitted} of {pending}"
        admitted += made
    return admitted / elapsed, _baseline_admission(b, queues)


def _baseline_admission(b: Builder, queues: int) -> float:
    """A plain loop over the same pending workloads: check and charge the queue's quota."""
    p = b.state.partitions["default"]
    remaining = {_name(q): (60 - ADMITTED_PER_QUEUE) * 1000 for q in range(queues)}
    pending = [(app.id, app.queue, 1000) for app in p.apps.values() if app.id.startswith("new-")]
    admitted = []
    started = time.perf_counter()
    for app, queue, cpu in sorted(pending, key=lambda w: w[0]):
        if remaining[queue] >= cpu:
            remaining[queue] -= cpu
            admitted.append((app, queue, {"cpu": "default"}))
    elapsed = time.perf_counter() - started
    assert len(admitted) == len(pending)
    return len(admitted) / elapsed


def bench_preemption(queues: int, *, fair_sharing: bool, limit: int = 300) -> tuple[list[float], list[float], int, int]:
    """(plan timings, baseline timings, preemptions, admitted workloads) over up to `limit`
    preemptions. In each cohort a tenth of the queues borrow 40 CPUs each (50 workloads on 10
    of quota) from as many lenders (20 workloads on 60), the others are full (60 on 60); the
    pending workloads go to the lenders."""
    borrowers = [q for q in range(queues) if (q // COHORTS) % 10 == 0]
    lenders = [q for q in range(queues) if (q // COHORTS) % 10 == 1]
    b = Builder(_objects(queues, borrowers=set(borrowers), fair_sharing=fair_sharing))
    counts = {_name(q): 60 for q in range(queues)} | {_name(q): 50 for q in borrowers} | {_name(q): 20 for q in lenders}
    _running(b, counts)
    _pending(b, {_name(q): PENDING_PER_QUEUE * queues // len(lenders) for q in lenders})
    timings: list[float] = []
    baselines: list[float] = []
    original = kueue_cycle.preemption

    def timed(config: Any, search: Any) -> Any:
        started = time.perf_counter()
        plan = original(config, search)
        timings.append(time.perf_counter() - started)
        baselines.append(_baseline_candidates(search))
        return plan

    kueue_cycle.preemption = timed
    gc.collect()
    try:
        preempted = 0
        while preempted < limit:
            evicted = [d for d in b.tick() if isinstance(d, ev.Evicted)]
            if not evicted:
                break
            preempted += len({d.preemptor for d in evicted})
            for d in evicted:  # the shim stops the victims' pods (each workload here has one, named after it)
                b.add(ev.TaskReleased(id=f"released-{d.app}", ts=b.now, task=d.app, reason="preempted"))
    finally:
        kueue_cycle.preemption = original
    assert preempted >= min(limit, 10), f"only {preempted} preemptions at {queues} queues"
    return timings, baselines, preempted, sum(counts.values())


def _baseline_candidates(search: Any) -> float:
    """The time to gather the admitted workloads of the borrowing queues in the preemptor's
    cohort and sort them in Kueue's order: what any preemption must at least look at."""
    started = time.perf_counter()
    root = search.node.path()[-1]
    candidates = []
    for node in root.children:
        used = search.usage.get(node, {})
        if any(amount > node.subtree.get(fr, 0) for fr, amount in used.items()):
            candidates += search.admitted.get(node.name, ())
    candidates.sort(key=lambda w: (w.priority, -w.admitted_at, w.id))
    return time.perf_counter() - started


def bench_backlog(queues: int, rounds: int = 20) -> tuple[float, float, float, float, int, float]:
    """(median time of a cycle with nothing changed since the last, of the same cycle on an
    empty partition, of a cycle after a workload finished in one cohort, of the first cycle
    after a restore from a snapshot (every workload read again: what a cycle keeps beside the
    state is not in snapshots), blocked workloads, seconds until each was told why): every
    queue full, 10 pending workloads each that fit nowhere and may preempt nothing."""
    b = Builder(_objects(queues, borrowers=set(), fair_sharing=False, preemption=False))
    _running(b, {_name(q): 60 for q in range(queues)})
    blocked = _pending(b, {_name(q): PENDING_PER_QUEUE for q in range(queues)})
    started = time.perf_counter()
    while b.tick():  # each cycle tells at most 1,000 of them why
        pass
    telling = time.perf_counter() - started
    empty = Builder(_objects(queues, borrowers=set(), fair_sharing=False, preemption=False))
    quiet, nothing = _median_cycle(b, rounds), _median_cycle(empty, rounds)
    after_change = _after_a_change(b, range(rounds))
    b.state = restore(snapshot(b.state))
    b.add(ev.NodeUpserted(id="again-restored", ts=b.now, node="node-0", capacity=ev.Resources({"cpu": 10**9})))
    started = time.perf_counter()
    b.tick()
    restored = time.perf_counter() - started
    return quiet, nothing, after_change, restored, blocked, telling


def _after_a_change(b: Builder, rounds: range) -> float:
    """The median cycle after one running workload of the first queue finishes: a waiting one of
    its cohort takes its place, and those whose reasons changed are told again."""
    timings = []
    for round_ in rounds:
        b.add(ev.AppFinished(id=f"done-{b.now}", ts=b.now, app=f"run-{_name(0)}-{round_}"))
        started = time.perf_counter()
        decisions = b.tick()
        timings.append(time.perf_counter() - started)
        assert any(isinstance(d, ev.Admitted) for d in decisions), "the room freed is taken"
    return sorted(timings)[len(timings) // 2]


def _median_cycle(b: Builder, rounds: int) -> float:
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        assert not b.tick()
        timings.append(time.perf_counter() - started)
    return sorted(timings)[len(timings) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,3000", help="numbers of ClusterQueues")
    args = parser.parse_args()
    for queues in (int(size) for size in args.sizes.split(",")):
        rate, baseline = bench_admission(queues)
        shape = f"{queues:,} ClusterQueues, {queues * ADMITTED_PER_QUEUE:,} admitted, {queues * PENDING_PER_QUEUE:,} pending"
        print(f"admission, {shape}: {rate:,.0f} admissions/s = {rate / baseline:.3f} of a plain quota loop ({baseline:,.0f}/s)")
        for fair_sharing in (False, True):
            timings, baselines, preempted, admitted = bench_preemption(queues, fair_sharing=fair_sharing)
            p50, p99 = percentiles(timings)
            b50, _ = percentiles(baselines)
            kind = "fair sharing" if fair_sharing else "classic"
            print(
                f"  preemption ({kind}, {admitted:,} admitted): {preempted} decisions, p50 {ms(p50)}, p99 {ms(p99)}; p50 = {p50 / b50:.1f}x gathering "
                f"and sorting the candidates ({ms(b50)})"
            )
        quiet, empty, after_change, restored, blocked, telling = bench_backlog(queues)
        print(f"  a backlog of {blocked:,} blocked workloads (each told why, 1,000 a cycle, in {telling:.1f} s):")
        print(
            f"    nothing changed since the last cycle: a cycle takes {quiet * 1e6:.1f} µs (a cycle of the same partition with no workload: "
            f"{empty * 1e6:.1f} µs)"
        )
        print(f"    a workload finished in one cohort: {ms(after_change)}")
        print(f"    the first cycle after a restore from a snapshot (every workload read again, each group judged once): {ms(restored)}")


if __name__ == "__main__":
    main()
