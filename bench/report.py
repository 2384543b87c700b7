"""`preemptd report` of a day's log: one million cluster events (and the ticks and decisions the
cycles made of them, as in bench/replay.py), against `preemptd state` of the same log (the same
read, decode and fold, without the timeline), in interleaved rounds.

    .venv/bin/python bench/report.py                     # 1,000,000 events, 3 rounds
    .venv/bin/python bench/report.py --events 200000

Prints the seconds of each (min and median), their ratio, and the page's size; then the same
for a simulated log of a large tree (1,000 leaf queues under 10 parents, 20,000 tasks), where
the curves, not the decisions, are most of the work.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import anyio
import yaml
from replay import command_seconds, log_arguments, make_log


def main() -> None:
    args = log_arguments(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        db, page = Path(tmp) / "log.db", Path(tmp) / "report.html"
        events = anyio.run(make_log, db, args.events)
        timings: dict[str, list[float]] = {"state": [], "report": []}
        for _ in range(args.rounds):
            timings["state"].append(command_seconds("state", "--db", str(db)))
            timings["report"].append(command_seconds("report", "--db", str(db), "-o", str(page), "--quiet"))
        state, report = (statistics.median(timings[name]) for name in ("state", "report"))
        print(f"{events:,} cluster events, {args.rounds} rounds; seconds as min / median")
        for name, seconds in timings.items():
            print(f"{name:<8} {min(seconds):6.1f} / {statistics.median(seconds):6.1f} s")
        print(f"report = {report / state:.2f}x state; the page: {page.stat().st_size / 1e6:.1f} MB")
        tree, tree_db = Path(tmp) / "tree.yaml", Path(tmp) / "tree.db"
        tree.write_text(yaml.safe_dump(large_tree(parents=10, leaves=100, tasks=20_000)))
        command_seconds("simulate", str(tree), "--quiet", "--db", str(tree_db))
        seconds = [command_seconds("report", "--db", str(tree_db), "-o", str(page), "--quiet") for _ in range(args.rounds)]
        print(
            f"a tree of 1,000 leaf queues, 20,000 tasks: report {min(seconds):.1f} / {statistics.median(seconds):.1f} s; the page: "
            f"{page.stat().st_size / 1e6:.1f} MB"
        )


def large_tree(*, parents: int, leaves: int, tasks: int) -> dict:
    """A scenario: `parents` queues of `leaves` leaf queues each (guaranteed 2, max 50 cores),
    ten nodes, and `tasks` tasks submitted 5 ms apart, round the leaves."""
    queues = [
        {"name": f"p{i}", "queues": [{"name": f"q{i}-{j}", "resources": {"guaranteed": {"vcore": 2}, "max": {"vcore": 50}}} for j in range(leaves)]}
        for i in range(parents)
    ]
    events: list[dict] = [{"type": "node.upserted", "node": f"n{k}", "capacity": {"vcore": 400}} for k in range(10)]
    for n in range(tasks):
        i, j = n % parents, (n // parents) % leaves
        events.append(
            {"type": "task.submitted", "ts": 5 * (n + 1), "task": f"t{n}", "app": f"a{i}-{j}", "queue": f"root.p{i}.q{i}-{j}", "resources": {"vcore": 1}}
        )
    return {"name": "large tree", "config": {"partitions": [{"name": "default", "queues": [{"name": "root", "queues": queues}]}]}, "events": events}


if __name__ == "__main__":
    main()
