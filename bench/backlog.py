"""What a backlog costs: the cycles of each model with 10,000 to 1,000,000 tasks waiting.

    .venv/bin/python bench/backlog.py                                  # every model, 10k to 1M
    .venv/bin/python bench/backlog.py --models yunikorn --sizes 10000 100000

The shape, the same in each model's terms: 100 nodes of 64 CPUs. Queue `busy` is held at its
limit (YuniKorn's max, Kueue's nominal quota, Volcano's capability) by 3,000 running 1-CPU tasks,
and N more arrive in it, 1,000 a second with a cycle each second, as a backlog builds; queue
`other` runs 3,300; 100 CPUs of the nodes stay free; queue `room` holds nothing. Once the backlog
was told why it waits (a minute past the last arrival, every preemption.delay run out), three
cycles are measured, each the median CPU time of five:

- **idle**: a cycle with nothing new since one that decided nothing;
- **finished**: one of busy's running tasks finished (released) just before: one waiting
  task takes its place;
- **arrival**: one task arrived in `room` just before: it is placed;
- **restored**: the first cycle after the state was restored from a snapshot (once): what the
  model keeps between cycles is not in snapshots, so this one reads the backlog again.

Each is reported against the same cycle with 10,000 waiting, in the same run (the aim: at most
3x at every size, flat rather than linear). Each task above is its own application (a Kueue
workload, a Volcano job). Memory is measured apart, in a process of its own for each: the RSS
the process grew by while the backlog built up and was told, over the tasks waiting, with each
application (workload, job) of one task and of ten.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from _figures import ms

from preemptd import events as ev
from preemptd.projections import ClusterState, LogRecord
from preemptd.scheduling import apply, restore, run_cycle, snapshot, tick_record
from preemptd.scheduling._model import BLOCKED_PER_CYCLE

NODES = 100
NODE_CPUS = 64
BUSY_LIMIT = 3000
OTHER = 3300
ONE = 1000  # a CPU, in millicores
REPEATS = 5
ARRIVALS = 1000  # tasks arriving a second as the backlog builds


def _yunikorn() -> dict[str, Any]:
    queues = [
        {"name": "busy", "resources": {"max": {"vcore": BUSY_LIMIT}}},
        {"name": "other"},
        {"name": "room", "resources": {"guaranteed": {"vcore": 100}}},
    ]
    return {"model": "yunikorn", "config": {"queues": [{"name": "root", "queues": queues}]}, "resource": "vcore", "queue": lambda q: f"root.{q}"}


def _kueue() -> dict[str, Any]:
    api = "kueue.x-k8s.io/v1beta2"

    def cluster_queue(name: str, nominal: int) -> dict[str, Any]:
        flavors = [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]
        return {
            "apiVersion": api,
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": flavors}]},
        }

    config = [
        {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        cluster_queue("busy", BUSY_LIMIT),
        cluster_queue("other", OTHER),
        cluster_queue("room", 100),
    ]
    return {"model": "kueue", "config": config, "resource": "cpu", "queue": lambda q: q}


def _volcano() -> dict[str, Any]:
    api = "scheduling.volcano.sh/v1beta1"
    config = [
        {"apiVersion": api, "kind": "Queue", "metadata": {"name": "busy"}, "spec": {"capability": {"cpu": BUSY_LIMIT}}},
        {"apiVersion": api, "kind": "Queue", "metadata": {"name": "other"}},
        {"apiVersion": api, "kind": "Queue", "metadata": {"name": "room"}},
        {
            "actions": "enqueue, allocate, preempt, reclaim, backfill",
            "tiers": [
                {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
                {"plugins": [{"name": "predicates"}, {"name": "capacity"}]},
            ],
        },
    ]
    return {"model": "volcano", "config": config, "resource": "cpu", "queue": lambda q: q}


MODELS: dict[str, Callable[[], dict[str, Any]]] = {"yunikorn": _yunikorn, "kueue": _kueue, "volcano": _volcano}


class Cluster:
    """A partition built event by event, as the daemon folds them."""

    def __init__(self, shape: dict[str, Any], nodes: int = NODES) -> None:
        self.state = ClusterState(log_id="bench")
        self.shape = shape
        self.now = 0
        self.submitted = 0
        self.add(ev.ConfigApplied(id="config", ts=0, model=shape["model"], config=shape["config"]))
        for n in range(nodes):
            self.add(ev.NodeUpserted(id=f"node-{n}", ts=0, node=f"node-{n:03d}", capacity=ev.Resources({shape["resource"]: NODE_CPUS * ONE, "pods": 10_000})))

    def add(self, event: Any) -> None:
        apply(self.state, LogRecord(self.state.seq + 1, self.now, event))

    def one(self) -> ev.Resources:
        return ev.Resources({self.shape["resource"]: ONE})

    def run(self, queue: str, count: int) -> None:
        """`count` tasks bound in `queue`, each its own application (a workload, a job)."""
        for i in range(count):
            task = f"{queue}-run-{i}"
            self.add(ev.AppSubmitted(id=f"app-{task}", ts=self.now, app=task, queue=self.shape["queue"](queue)))
            self.add(ev.TaskBound(id=task, ts=self.now, task=task, app=task, node=f"node-{i % NODES:03d}", resources=self.one()))

    def submit(self, queue: str, count: int, per_app: int = 1) -> None:
        """`count` tasks waiting in `queue`, `per_app` to an application."""
        for _ in range(count):
            task = f"{queue}-wait-{self.submitted}"
            app = f"{queue}-app-{self.submitted // per_app}"
            if self.submitted % per_app == 0:
                self.add(ev.AppSubmitted(id=f"app-{app}", ts=self.now, app=app, queue=self.shape["queue"](queue)))
            self.submitted += 1
            self.add(ev.TaskSubmitted(id=task, ts=self.now, task=task, app=app, resources=self.one()))

    def build(self, queue: str, count: int, per_app: int = 1) -> None:
        """`count` tasks arriving in `queue`, `ARRIVALS` a second, a cycle each second; then a
        minute later, cycles until the backlog was told why it waits."""
        for start in range(0, count, ARRIVALS):
            self.submit(queue, min(ARRIVALS, count - start), per_app)
            self.cycle()
        self.now += 60_000
        self.settle(count // BLOCKED_PER_CYCLE + 200)

    def cycle(self) -> tuple[float, int]:
        """One cycle a second after the last: its CPU time and how many decisions it made."""
        self.now += 1000
        started = time.process_time()
        decided = run_cycle(self.state, tick_record(self.state, self.now, "default")).decided
        return time.process_time() - started, len(decided)

    def settle(self, cycles: int = 200) -> None:
        """Cycles until one decides nothing (the backlog told why it waits)."""
        for _ in range(cycles):
            if not self.cycle()[1]:
                return
        raise RuntimeError("the partition does not come to rest")


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def measure(model: str, waiting: int) -> dict[str, float]:
    """The three cycles' CPU time with `waiting` tasks waiting."""
    cluster = Cluster(MODELS[model]())
    cluster.run("busy", BUSY_LIMIT)
    cluster.run("other", OTHER)
    cluster.settle()
    cluster.build("busy", waiting)
    idle, finished, arrival = [], [], []
    for i in range(REPEATS):
        idle.append(cluster.cycle()[0])
        task = f"busy-run-{i}"
        cluster.add(ev.TaskReleased(id=f"done-{task}", ts=cluster.now, task=task))
        spent, decided = cluster.cycle()
        assert decided, "a waiting task takes the finished one's place"
        finished.append(spent)
        cluster.settle()
        cluster.submit("room", 1)
        spent, decided = cluster.cycle()
        assert decided, "the arrival is placed"
        arrival.append(spent)
        cluster.settle()
    cluster.state = restore(snapshot(cluster.state))
    restored = cluster.cycle()[0]
    return {"idle": statistics.median(idle), "finished": statistics.median(finished), "arrival": statistics.median(arrival), "restored": restored}


def memory(model: str, waiting: int, per_app: int) -> float:
    """The RSS a backlog of `waiting` tasks, `per_app` to an application, grows the process by,
    per task: built as it arrives and told why it waits."""
    cluster = Cluster(MODELS[model]())
    cluster.run("busy", BUSY_LIMIT)
    cluster.run("other", OTHER)
    cluster.settle()
    gc.collect()
    before = rss()
    cluster.build("busy", waiting, per_app)
    gc.collect()
    return (rss() - before) / waiting


def apart(*args: object) -> Any:
    """`--one` or `--memory` with `args`, in a process of its own: what a size costs is its own,
    not what an earlier size left to the allocator."""
    out = subprocess.run([sys.executable, __file__, *map(str, args)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000, 500_000, 1_000_000])
    parser.add_argument("--one", nargs=2, metavar=("MODEL", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--memory", nargs=3, metavar=("MODEL", "SIZE", "PER_APP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]))))
        return
    if args.memory:
        print(json.dumps(memory(args.memory[0], int(args.memory[1]), int(args.memory[2]))))
        return
    for model in args.models:
        base: dict[str, float] | None = None
        for size in args.sizes:
            figures = apart("--one", model, size)
            base = base or figures
            cells = [f"{what} {ms(figures[what])} ({figures[what] / base[what]:.1f}x)" for what in ("idle", "finished", "arrival", "restored")]
            sizes = ", ".join(f"{apart('--memory', model, size, per_app):.0f} B ({per_app} per application)" for per_app in (1, 10))
            print(f"{model:9} {size:>9,} waiting: {', '.join(cells)}; RSS per waiting task {sizes}", flush=True)


if __name__ == "__main__":
    main()
