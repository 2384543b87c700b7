"""Replay speed on a log of one million cluster events, against reading the same log raw.

    .venv/bin/python bench/replay.py                    # 1,000,000 events
    .venv/bin/python bench/replay.py --events 200000    # a quicker run

The log is made the way the daemon makes it: 1,000 nodes, then tasks submitted, allocated by
the scheduling cycle that runs after each batch of 1,000 events (a tick and its decisions in
the log), bound by the shim and released again, so that about 300,000 tasks pass through.
Then, in one run:

1. raw: Python's sqlite3 reads every row of the log (the floor for reading it at all);
2. replay: `preemptd replay` reads the log through the store, decodes every record, folds the
   cluster events, re-runs every cycle and checks each recomputed decision against the stored
   one (no progress bar).
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from preemptd import events as ev
from preemptd.daemon.history import outbox_rows, to_row
from preemptd.daemon.store import Batch, Store
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


def raw_read(db: Path) -> tuple[int, float]:
    started = time.perf_counter()
    with sqlite3.connect(db) as conn:
        rows = sum(1 for _ in conn.execute("select seq, event_id, type, partition, ts, received, stream_seq, payload from log order by seq"))
    return rows, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "log.db"
        started = time.perf_counter()
        events = anyio.run(make_log, db, args.events)
        print(f"made a log of {events:,} cluster events in {time.perf_counter() - started:.0f}s", file=sys.stderr)
        rows, raw_seconds = raw_read(db)
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "preemptd.daemon.cli", "replay", "--db", str(db), "--quiet"], cwd=ROOT, capture_output=True, text=True)
        replay_seconds = time.perf_counter() - started
    print(result.stdout.strip())
    print(f"raw sqlite3 read:  {rows / raw_seconds:>10,.0f} rows/s ({rows:,} rows: events, ticks and decisions)")
    print(f"preemptd replay:   {rows / replay_seconds:>10,.0f} rows/s = {events / replay_seconds:,.0f} cluster events/s "
          f"({replay_seconds:.0f}s; {raw_seconds / replay_seconds:.3f} of the raw read rate)")


if __name__ == "__main__":
    main()
