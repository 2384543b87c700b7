"""What a cycle costs in the shapes a multi-tenant cluster has, not only one queue's backlog
(`bench/backlog.py`): many queues with a little waiting in each, and many priorities in one.

    .venv/bin/python bench/shapes.py                          # every model, every shape
    .venv/bin/python bench/shapes.py --models yunikorn --shapes queues

- **queues**: N leaf queues (YuniKorn leaves under root, Kueue ClusterQueues, Volcano queues),
  each held at its limit (a max, a nominal quota, a capability of 1 CPU) by a running task and
  with 10 tasks waiting, each its own application; a queue `room` with room; nodes of 64 CPUs
  enough for twice the running tasks (at least 100). N = 100 and 10,000 (Kueue's own
  large-scale test has 2,000 ClusterQueues of 30 workloads).
- **priorities**: one queue held at its limit with 10,000 one-task applications waiting, of P
  priorities (P = 1 and 1,000: PriorityClass values are free integers).

Once every waiting task was told why it waits, two cycles are measured, each the median CPU time
of five: **finished** (a running task of one queue finished just before: a waiting one takes
its place) and **arrival** (a task arrived in `room`: it is placed). Each is reported against
the same cycle in the small shape (N = 100, P = 1) measured in the same run: the aim is at most
3x, a cycle's cost following what changed, not how many queues or priorities wait.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from _figures import ms
from backlog import MODELS, NODE_CPUS, NODES, Cluster

from preemptd import events as ev
from preemptd.scheduling import run_cycle, tick_record

REPEATS = 5
WAITING_PER_QUEUE = 10
PRIORITY_BACKLOG = 10_000


def _limited(model: str, names: list[str]) -> dict[str, Any]:
    """The model's shape (`backlog.MODELS`) with queues `names` each limited to one CPU."""
    shape = MODELS[model]()
    if model == "yunikorn":
        queues = [{"name": name, "resources": {"max": {"vcore": 1}}} for name in names]
        queues.append({"name": "room", "resources": {"guaranteed": {"vcore": 100}}})
        shape["config"] = {"queues": [{"name": "root", "queues": queues}]}
        return shape
    kind = shape["config"][1]
    objects = [o for o in shape["config"] if o.get("kind") != kind["kind"] or o["metadata"]["name"] == "room"]
    for name in names:
        limited = json.loads(json.dumps(kind))
        limited["metadata"]["name"] = name
        if model == "kueue":
            limited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 1
        else:
            limited["spec"] = {"capability": {"cpu": 1}}
        objects.append(limited)
    shape["config"] = objects
    return shape


def queues(model: str, count: int) -> Cluster:
    """`count` queues at their limit, each with `WAITING_PER_QUEUE` waiting."""
    names = [f"q{i:05d}" for i in range(count)]
    nodes = max(NODES, count // (NODE_CPUS // 2))  # room for every queue's running task, and as much again
    cluster = Cluster(_limited(model, names), nodes)
    for i, name in enumerate(names):
        task = f"{name}-run"
        cluster.add(ev.AppSubmitted(id=f"app-{task}", ts=0, app=task, queue=cluster.shape["queue"](name)))
        cluster.add(ev.TaskBound(id=task, ts=0, task=task, app=task, node=f"node-{i % nodes:03d}", resources=cluster.one()))
    for name in names:
        cluster.submit(name, WAITING_PER_QUEUE)
    cluster.now += 60_000
    cluster.settle(count * WAITING_PER_QUEUE // 1000 + 200)
    return cluster


def priorities(model: str, count: int) -> Cluster:
    """One queue at its limit with `PRIORITY_BACKLOG` one-task applications of `count` priorities."""
    cluster = Cluster(_limited(model, ["busy"]))
    cluster.add(ev.AppSubmitted(id="app-busy-run", ts=0, app="busy-run", queue=cluster.shape["queue"]("busy")))
    cluster.add(ev.TaskBound(id="busy-run", ts=0, task="busy-run", app="busy-run", node="node-000", resources=cluster.one()))
    queue = cluster.shape["queue"]("busy")
    for i in range(PRIORITY_BACKLOG):
        app = f"busy-app-{i}"
        cluster.add(ev.AppSubmitted(id=f"app-{app}", ts=0, app=app, queue=queue, priority=i % count))
        cluster.add(ev.TaskSubmitted(id=f"t-{app}", ts=0, task=f"t-{app}", app=app, resources=cluster.one()))
    cluster.now += 60_000
    cluster.settle(PRIORITY_BACKLOG // 1000 + 200)
    return cluster


def measure(cluster: Cluster, finishing: str) -> dict[str, float]:
    """The finished and arrival cycles' CPU time, each the median of `REPEATS`: each time the
    task placed by the last finished cycle finishes in turn."""
    finished, arrival = [], []
    for i in range(REPEATS):
        cluster.add(ev.TaskReleased(id=f"done-{finishing}", ts=cluster.now, task=finishing))
        spent, placed = timed_cycle(cluster)
        assert placed, "a waiting task takes the finished one's place"
        finished.append(spent)
        finishing = placed[0]
        cluster.settle()
        cluster.submit("room", 1)
        spent, placed = timed_cycle(cluster)
        assert placed, "the arrival is placed"
        arrival.append(spent)
        cluster.settle()
    return {"finished": statistics.median(finished), "arrival": statistics.median(arrival)}


def timed_cycle(cluster: Cluster) -> tuple[float, list[str]]:
    """One cycle a second after the last: its CPU time and the tasks it placed."""
    cluster.now += 1000
    started = time.process_time()
    decided = run_cycle(cluster.state, tick_record(cluster.state, cluster.now, "default")).decisions
    spent = time.process_time() - started
    p = cluster.state.partitions["default"]
    placed = [d.task for d in decided if isinstance(d, ev.Allocated)]
    placed += [task for d in decided if isinstance(d, ev.Admitted) for task in p.apps[d.app].tasks]
    return spent, placed


SHAPES = {"queues": (queues, (100, 10_000), "q00000-run"), "priorities": (priorities, (1, 1_000), "busy-run")}


def one(model: str, shape: str, size: int) -> dict[str, float]:
    build, _, finishing = SHAPES[shape]
    return measure(build(model, size), finishing)


def apart(*args: object) -> Any:
    """One measurement in a process of its own."""
    out = subprocess.run([sys.executable, __file__, *map(str, args)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--one", nargs=3, metavar=("MODEL", "SHAPE", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], int(args.one[2]))))
        return
    for shape in args.shapes:
        small, large = SHAPES[shape][1]
        for model in args.models:
            base, figures = apart("--one", model, shape, small), apart("--one", model, shape, large)
            cells = [f"{what} {ms(figures[what])} against {ms(base[what])} ({figures[what] / base[what]:.1f}x)" for what in ("finished", "arrival")]
            print(f"{shape:10} {model:9} {large:>6,} against {small:,}: {', '.join(cells)}", flush=True)


if __name__ == "__main__":
    main()
