"""Reading a log of one million cluster events: replay, state and start-up, against reading,
decoding and folding the same rows in the plainest way, in one run.

    .venv/bin/python bench/replay.py                          # 1,000,000 events, 3 rounds
    .venv/bin/python bench/replay.py --events 200000 --rounds 5

The log is made the way the daemon makes it: 1,000 nodes, then tasks submitted, allocated by
the scheduling cycle that runs after each batch of 1,000 events (a tick and its decisions in
the log), bound by the shim and released again, so that about 300,000 tasks pass through.
Then, in interleaved rounds (min and median of each):

1. baseline: Python's sqlite3 reads every row, msgspec decodes each payload with the daemon's
   decoder, and a plain dict fold counts the running tasks per node and queue;
2. `preemptd replay`: the same rows through the store, decoded, the cluster events folded,
   every cycle run again and each recomputed decision compared with the stored one;
3. `preemptd state`: the rows read, decoded and folded (no cycle);
4. `preemptd run` on the log (its own NATS, no snapshot): from the start to ready.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from preemptd import events as ev
from preemptd.daemon.log.store import Store
from preemptd.daemon.records import Batch, outbox_rows, to_row
from preemptd.projections import ClusterState, LogRecord
from preemptd.scheduling import Cadence, Pacer, apply, run_cycle, tick_record

ROOT = Path(__file__).resolve().parent.parent


def cluster_events(nodes: int = 1000):
    """Nodes, then an endless stream of tasks submitted and, 2,000 tasks later, released."""
    for n in range(nodes):
        yield ev.NodeUpserted(id=f"node-{n}", ts=0, node=f"n{n:04d}", capacity=ev.Resources({"cpu": 64_000, "memory": 256 * 2**30}))
    size = ev.Resources({"cpu": 500, "memory": 2**30})
    task = 0
    while True:
        yield ev.TaskSubmitted(id=f"s{task}", ts=task, task=f"t{task}", app=f"app{task % 300}", queue="root.default", resources=size)
        if task >= 2000:
            yield ev.TaskReleased(id=f"r{task - 2000}", ts=task, task=f"t{task - 2000}")
        task += 1


async def make_log(db: Path, count: int) -> int:
    """A daemon's log: events, a cycle after every 1,000, and the shim binding what it placed."""
    store = await Store.open(str(db), synchronous="NORMAL")
    state = ClusterState(log_id=store.log_id)
    pending: list[LogRecord] = []
    events = 0

    def append(event) -> None:
        nonlocal events
        record = LogRecord(state.seq + 1, events, event)
        apply(state, record)
        pending.append(record)
        events += 1

    pacer = Pacer(Cadence(tick=1000, idle_tick=1000))  # a cycle after each 1,000 events (1 s of log time), when due
    try:
        source = cluster_events()
        while events < count:
            for _ in range(1000):
                append(next(source))
            pacer.touched("default")  # as the daemon says after each batch: events changed it
            if "default" not in pacer.due(state, events):
                continue
            cycle = run_cycle(state, tick_record(state, events, "default"))
            pacer.ran(state, "default", events, 0, len(cycle.decided))
            pending += cycle.records
            for decision in cycle.decisions:
                if isinstance(decision, ev.Allocated):
                    append(ev.TaskBound(id=f"b-{decision.task}", ts=events, task=decision.task, node=decision.node))
            if len(pending) >= 20_000:
                await store.commit(Batch(rows=[to_row(r) for r in pending], outbox=outbox_rows(pending)))
                pending.clear()
        await store.commit(Batch(rows=[to_row(r) for r in pending], outbox=outbox_rows(pending)))
    finally:
        await store.close()
    return events


def baseline(db: Path) -> float:
    """Seconds to read, decode and fold the log in the plainest way."""
    started = time.perf_counter()
    running: dict[str, int] = {}  # per node and per queue, as a dict fold
    where: dict[str, tuple[str, str]] = {}
    with sqlite3.connect(db) as conn:
        for (payload,) in conn.execute("select payload from log order by seq"):
            event = ev.decode_log_event(payload)
            if isinstance(event, ev.TaskSubmitted):
                where[event.task] = ("", event.queue)
            elif isinstance(event, ev.TaskBound) and event.task in where:
                where[event.task] = (event.node, where[event.task][1])
                for key in where[event.task]:
                    running[key] = running.get(key, 0) + 1
            elif isinstance(event, ev.TaskReleased) and event.task in where:
                for key in where.pop(event.task):
                    running[key] = running.get(key, 0) - 1
    return time.perf_counter() - started


def command_seconds(*args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "preemptd.daemon.entry", *args], cwd=ROOT, capture_output=True, check=True)
    return time.perf_counter() - started


def start_seconds(db: Path, state_dir: Path) -> float:
    """Seconds from `preemptd run` starting on `db` (no snapshot in it) to ready."""
    command = [sys.executable, "-m", "preemptd.daemon.entry", "run", "--db", str(db), "--state-dir", str(state_dir)]
    started = time.perf_counter()
    daemon = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert daemon.stdout is not None
        for line in daemon.stdout:
            if "listening" in line:
                return time.perf_counter() - started
        raise SystemExit(f"preemptd run exited with {daemon.wait()}")
    finally:
        daemon.kill()  # no snapshot at the stop
        daemon.wait()
        with sqlite3.connect(db) as conn:  # nor the one it may have taken once ready: each round folds the whole log
            conn.execute("delete from snapshot_parts")
            conn.execute("delete from snapshots")


def log_arguments(doc: str) -> argparse.Namespace:
    """--events (of the log to make) and --rounds, for the benchmarks that read a made log."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args()


def main() -> None:
    args = log_arguments(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "log.db"
        started = time.perf_counter()
        events = anyio.run(make_log, db, args.events)
        print(f"made a log of {events:,} cluster events in {time.perf_counter() - started:.0f}s", file=sys.stderr)
        times: dict[str, list[float]] = {"baseline": [], "replay": [], "state": [], "start": []}
        for _ in range(args.rounds):
            times["baseline"].append(baseline(db))
            times["replay"].append(command_seconds("replay", "--db", str(db), "--quiet"))
            times["state"].append(command_seconds("state", "--db", str(db)))
            times["start"].append(start_seconds(db, Path(tmp) / "state"))
    base = statistics.median(times["baseline"])
    print(f"{events:,} cluster events, {args.rounds} rounds; events/s as min / median, ratios of the medians")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        rate = f"{events / max(seconds):>9,.0f} / {events / median:>9,.0f} events/s"
        ratio = (
            "" if name == "baseline" else (f"  = {median / base:.1f}x the baseline's time" if name == "start" else f"  = {base / median:.2f} of the baseline")
        )
        print(f"{name:9} {rate}  ({median:.1f} s){ratio}")


if __name__ == "__main__":
    main()
