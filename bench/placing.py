"""What placing costs: CPU per task placed, in cycles of 20 arrivals, each model; against
another version of preemptd in the same run (a git worktree, as `bench/versions.py` does).

    .venv/bin/python bench/placing.py                       # the checkout alone
    .venv/bin/python bench/placing.py --against 81d46e5     # and that commit, in interleaved rounds
    .venv/bin/python bench/placing.py --running 4000        # fewer running (81d46e5's Volcano takes minutes)

The shape: 1,000 nodes of 64 CPUs and a queue with room; each round, 20 one-task applications
arrive, a cycle places them (a `decision.allocated`, or a Kueue admission and the shim binding
its pod), and the shim binds each. Measured: the CPU time of folding the arrivals, the cycle
and folding the bindings, over the tasks placed (the median of `--rounds` rounds of 500
cycles), once `--running` tasks run (20,000 by default).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODES, NODE_CPUS, BATCH, CYCLES, WARM = 1000, 64, 20, 500, 1000
MODELS = {
    "yunikorn": ({"queues": [{"name": "root", "queues": [{"name": "a"}]}]}, "root.a", "vcore"),
    "kueue": (
        [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": "a"},
                "spec": {
                    "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 100000}]}]}]
                },
            },
        ],
        "a",
        "cpu",
    ),
    "volcano": ([{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "a"}}], "a", "cpu"),
}


def measure(model: str, running: int = WARM * BATCH) -> float:
    """CPU seconds per task placed, in this process's version of preemptd."""
    from preemptd import events as ev
    from preemptd.projections import ClusterState, LogRecord
    from preemptd.scheduling import apply, run_cycle, tick_record

    config, queue, resource = MODELS[model]
    state = ClusterState(log_id="bench")
    now = 0

    def add(event: object) -> None:
        apply(state, LogRecord(state.seq + 1, now, event))

    add(ev.ConfigApplied(id="config", ts=0, model=model, config=config))
    for n in range(NODES):
        add(ev.NodeUpserted(id=f"n{n}", ts=0, node=f"n{n:04d}", capacity=ev.Resources({resource: NODE_CPUS * 1000, "pods": 1000})))
    one = ev.Resources({resource: 1000})
    spent, placed, submitted = 0.0, 0, 0
    warm = running // BATCH
    for cycle in range(warm + CYCLES):
        now += 100
        started = time.process_time()
        for _ in range(BATCH):
            name = f"t{submitted}"
            submitted += 1
            add(ev.AppSubmitted(id=f"app-{name}", ts=now, app=name, queue=queue))
            add(ev.TaskSubmitted(id=name, ts=now, task=name, app=name, resources=one))
        decisions = run_cycle(state, tick_record(state, now, "default")).decisions
        p = state.partitions["default"]
        bound = [(d.task, d.node) for d in decisions if isinstance(d, ev.Allocated)]
        bound += [(task, "n0000") for d in decisions if isinstance(d, ev.Admitted) for task in p.apps[d.app].tasks]
        for task, node in bound:
            add(ev.TaskBound(id=f"bound-{task}", ts=now, task=task, node=node))
        if cycle >= warm:
            spent += time.process_time() - started
            placed += len(bound)
    assert placed == CYCLES * BATCH, (model, placed)
    return spent / placed


def version_dir(work: Path, commit: str | None) -> Path:
    """A directory whose `preemptd` is the checkout (None) or `commit` in a worktree."""
    parent = work / (commit or "checkout")
    parent.mkdir()
    if commit is None:
        (parent / "preemptd").symlink_to(ROOT)
    else:
        subprocess.run(["git", "worktree", "add", "--detach", str(work / f"tree-{commit}"), commit], cwd=ROOT, capture_output=True, check=True)
        (parent / "preemptd").symlink_to(work / f"tree-{commit}")
    return parent


def apart(parent: Path, model: str, running: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(parent)}
    command = [sys.executable, __file__, "--one", model, "--running", str(running)]
    out = subprocess.run(command, cwd=parent, env=env, capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--against", help="a commit to measure in the same run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--running", type=int, default=WARM * BATCH, help="tasks running when the measure starts")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.running)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        versions = {"checkout": version_dir(work, None)}
        if args.against:
            versions[args.against] = version_dir(work, args.against)
        try:
            for model in args.models:
                figures: dict[str, list[float]] = {name: [] for name in versions}
                for _ in range(args.rounds):
                    for name, parent in versions.items():
                        figures[name].append(apart(parent, model, args.running))
                medians = {name: statistics.median(values) for name, values in figures.items()}
                said = ", ".join(f"{name} {seconds * 1e6:.0f} us" for name, seconds in medians.items())
                ratio = f" (ratio {medians['checkout'] / medians[args.against]:.2f})" if args.against else ""
                print(f"{model:9} CPU per task placed in cycles of {BATCH}: {said}{ratio}", flush=True)
        finally:
            if args.against:
                subprocess.run(["git", "worktree", "remove", "--force", str(work / f"tree-{args.against}")], cwd=ROOT, capture_output=True, check=False)


if __name__ == "__main__":
    main()
