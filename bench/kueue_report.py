"""The Kueue model's views on a large log: what `Model.curves` and `Model.shares` cost per
sample (the report samples a partition up to 2,000 times), and `preemptd report` against
`preemptd state` of the same log.

    .venv/bin/python bench/kueue_report.py                  # 1,000 ClusterQueues, 20,000 workloads
    .venv/bin/python bench/kueue_report.py --queues 200 --workloads 4000

The shape: ClusterQueues of 20 CPUs in 10 cohorts under fair sharing, one node with room for
half the workloads' pods (the others are admitted and wait for a node, or wait for admission),
workloads of 1 CPU submitted 5 ms apart, round the queues, a third of them released later.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import _figures  # noqa: F401  (the garbage collector's thresholds every preemptd command uses)
import msgspec
import yaml
from replay import command_seconds

from preemptd.events import Scenario
from preemptd.scheduling import model_named, simulate

API = "kueue.x-k8s.io/v1beta2"


def scenario(queues: int, workloads: int) -> dict:
    objects: list[dict] = [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        },
    ]
    for q in range(queues):
        spec = {
            "cohortName": f"cohort-{q % 10}",
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 20}]}]}],
        }
        objects.append({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": f"cq-{q:04d}"}, "spec": spec})
    events: list[dict] = [{"type": "node.upserted", "node": "n1", "capacity": {"cpu": workloads // 2}}]
    for n in range(workloads):
        events.append({"type": "task.submitted", "ts": 5 * (n + 1), "task": f"w{n}", "app": f"w{n}", "queue": f"cq-{n % queues:04d}", "resources": {"cpu": 1}})
        if n % 3 == 0:
            events.append({"type": "task.released", "ts": 5 * (n + 1) + 20_000, "task": f"w{n}", "reason": "completed"})
    events.sort(key=lambda e: e.get("ts", 0))
    return {"name": "kueue views", "model": "kueue", "config": objects, "events": events, "until": f"{5 * workloads // 1000 + 30}s"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path, db, page = Path(tmp) / "kueue.yaml", Path(tmp) / "kueue.db", Path(tmp) / "report.html"
        made = scenario(args.queues, args.workloads)
        path.write_text(yaml.safe_dump(made))
        result = simulate(msgspec.convert(made, Scenario))
        view = next(iter(result.state.partitions.values()))
        model = model_named("kueue")
        for name, ask in (("curves", model.curves), ("shares", model.shares)):
            ask(view)  # the totals are read whole once; a sample reads what changed since
            rounds = []
            for _ in range(20):
                started = time.perf_counter()
                ask(view)
                rounds.append(time.perf_counter() - started)
            print(f"{name} of {args.queues:,} ClusterQueues, {len(view.apps):,} workloads: {statistics.median(rounds) * 1000:.2f} ms a sample (median of 20)")
        command_seconds("simulate", str(path), "--quiet", "--db", str(db))
        timings: dict[str, list[float]] = {"state": [], "report": []}
        for _ in range(args.rounds):
            timings["state"].append(command_seconds("state", "--db", str(db)))
            timings["report"].append(command_seconds("report", "--db", str(db), "-o", str(page), "--quiet"))
        for name, seconds in timings.items():
            print(f"{name:<8} {min(seconds):6.1f} / {statistics.median(seconds):6.1f} s (min / median)")
        print(f"report = {statistics.median(timings['report']) / statistics.median(timings['state']):.2f}x state; the page: {page.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
