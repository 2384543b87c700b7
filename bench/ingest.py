"""Live ingest: `preemptd run` from its start to every event committed and every decision
published, against the fastest way the same libraries do the same work, in one run.

    .venv/bin/python bench/ingest.py                        # both workloads, 3 rounds, 100,000 events
    .venv/bin/python bench/ingest.py --workload bound --rounds 5 --events 300000

Two workloads, each published once to the cluster stream of a fresh bundled nats-server:

- bound: 500 nodes, then tasks bound to them and released again; no scheduling cycle decides
  anything, so the figure is ingest alone;
- allocating: a queue configuration, 1,000 nodes and `task.submitted` for the rest; each task
  gets a `decision.allocated`, stored in the log with its outbox row and published.

Against each, in interleaved rounds (min and median of each printed):

- A: nats-py's durable push consumer (ack policy all, as the daemon's) delivering into a
  callback that decodes each message with the daemon's msgspec decoder, one ack per 1,000;
- B: A, plus each 1,000 written to a SQLite table shaped as the log with sqlite3's
  `executemany` and one commit (WAL, synchronous FULL, the daemon's default) before the ack;
- preemptd: `preemptd run` on its own durable consumer, from the process start (imports and
  migrations included) until its log holds every event and its outbox has nothing unpublished.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from preemptd.daemon.bus import Bus
from preemptd.daemon.bus.embedded import EmbeddedNats
from preemptd.daemon.records import CLUSTER_STREAM, Outbound, cluster_subject
from preemptd.events import decode_cluster_event

ROOT = Path(__file__).resolve().parent.parent
CONFIG = {"partitions": [{"name": "default", "queues": [{"name": "root", "queues": [{"name": "default"}]}]}]}


def _node(n: int) -> dict:
    return {"type": "node.upserted", "id": f"node-{n}", "ts": 1, "node": f"n{n}", "capacity": {"cpu": "64", "memory": "256Gi"}}


def bound(count: int, nodes: int = 500) -> tuple[list[dict], int]:
    """Nodes, then tasks bound and released; no decisions."""
    messages = [_node(n) for n in range(nodes)]
    task = 0
    while len(messages) < count:
        spec = {"node": f"n{task % nodes}", "app": f"app-{task % 100}", "queue": "root.default", "resources": {"cpu": "250m", "memory": "512Mi"}}
        messages.append({"type": "task.bound", "id": f"bound-{task}", "ts": 2, "task": f"t{task}", **spec})
        if task % 2 and len(messages) < count:
            messages.append({"type": "task.released", "id": f"released-{task}", "ts": 3, "task": f"t{task - 1}"})
        task += 1
    return messages, 0


def allocating(count: int, nodes: int = 1000) -> tuple[list[dict], int]:
    """A configuration, nodes, then tasks submitted: one allocation each."""
    messages = [{"type": "config.applied", "id": "config-1", "ts": 1, "model": "yunikorn", "config": CONFIG}]
    messages += [_node(n) for n in range(nodes)]
    tasks = count - len(messages)
    for task in range(tasks):
        spec = {"app": f"app-{task % 100}", "queue": "root.default", "resources": {"cpu": "100m", "memory": "128Mi"}}
        messages.append({"type": "task.submitted", "id": f"submitted-{task}", "ts": 2, "task": f"t{task}", **spec})
    return messages, tasks


WORKLOADS = {"bound": bound, "allocating": allocating}


async def publish(url: str, bodies: list[dict]) -> None:
    await publish_messages(url, [Outbound(cluster_subject("default", m["type"]), json.dumps(m).encode(), m["id"]) for m in bodies])


async def publish_messages(url: str, messages: list[Outbound]) -> None:
    """Publish `messages` to the cluster stream (made if need be), a thousand at a time."""
    bus = await Bus.connect(url)
    try:
        await bus.streams.ensure()
        for start in range(0, len(messages), 1000):
            await bus.publisher.publish(messages[start : start + 1000])
    finally:
        await bus.close()


async def push_consumer(url: str, count: int, db: Path | None) -> float:
    """Seconds for a push consumer to decode (and, given `db`, store) and ack `count` messages."""
    import nats
    from nats.js import api

    conn = _log_table(db) if db else None
    nc = await nats.connect(url)
    js = nc.jetstream()
    done = asyncio.Event()
    batch: list = []
    seen = 0

    async def received(message) -> None:
        nonlocal seen
        event = decode_cluster_event(message.data)
        batch.append((seen + 1, event.id, type(event).__struct_config__.tag, event.partition, event.ts, 0, message.data))
        seen += 1
        if len(batch) == 1000 or seen == count:
            if conn is not None:
                conn.executemany("insert into log values (?, ?, ?, ?, ?, ?, ?)", batch)
                conn.commit()
            batch.clear()
            await message.ack()
            if seen == count:
                done.set()

    started = time.perf_counter()
    config = api.ConsumerConfig(ack_policy=api.AckPolicy.ALL, max_ack_pending=50_000)
    await js.subscribe(
        "preemptd.cluster.>", durable="bench", stream=CLUSTER_STREAM, config=config, cb=received, manual_ack=True, flow_control=True, idle_heartbeat=5.0
    )
    await done.wait()
    elapsed = time.perf_counter() - started
    await nc.close()
    return elapsed


def _log_table(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db)
    conn.execute("pragma journal_mode=WAL")
    conn.execute("pragma synchronous=FULL")
    conn.execute("create table log (seq integer primary key, event_id text unique, type text, partition text, ts integer, received integer, payload blob)")
    return conn


def _progress(db: Path, decisions: int) -> tuple[int, int, int]:
    """(cluster events committed, decisions, decisions not yet published) in the daemon's log,
    read cheaply: the bench shares the machine's two cores with the daemon it measures."""
    if not db.exists():
        return 0, 0, 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            events = conn.execute("select coalesce(max(position), 0) from tracking").fetchone()[0]  # the stream holds only the workload
            decided = conn.execute("select count(*) from outbox").fetchone()[0]
            if decided < decisions:  # the scan for what is still unpublished only at the end
                return events, decided, decisions - decided
            waiting = conn.execute("select count(*) from outbox where published_at is null").fetchone()[0]
            return events, decided, waiting
    except sqlite3.OperationalError:  # not migrated yet
        return 0, 0, 0


def daemon(url: str, state: Path, count: int, decisions: int) -> float:
    """Seconds from `preemptd run` starting to every event committed and decision published."""
    command = [sys.executable, "-m", "preemptd.daemon.entry", "--log-level", "warning", "run", "--nats-url", url, "--state-dir", str(state)]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            events, decided, waiting = _progress(state / "preemptd.db", decisions)
            if events >= count and decided >= decisions and waiting == 0:
                return time.perf_counter() - started
            if process.poll() is not None:
                raise SystemExit(f"preemptd run exited with {process.returncode}")
            time.sleep(0.02)
    finally:
        process.terminate()
        process.wait()


def one_round(name: str, count: int) -> dict[str, float]:
    """Events per second of A, B and preemptd, each on a fresh server holding the workload."""
    bodies, decisions = WORKLOADS[name](count)
    rates = {}
    for who in ("A", "B", "preemptd"):
        with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(Path(tmp) / "nats") as server:
            anyio.run(publish, server.url, bodies)
            if who == "preemptd":
                seconds = daemon(server.url, Path(tmp) / "state", len(bodies), decisions)
            else:
                seconds = anyio.run(push_consumer, server.url, len(bodies), Path(tmp) / "b.db" if who == "B" else None)
        rates[who] = len(bodies) / seconds
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    args = parser.parse_args()
    names = list(WORKLOADS) if args.workload == "both" else [args.workload]
    results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for _ in range(args.rounds):  # interleaved: each round runs every workload and every reader
        for name in names:
            results[name].append(one_round(name, args.events))
    print(f"{args.events:,} events, {args.rounds} rounds; events/s as min / median; ratios of the medians")
    for name, rounds in results.items():
        figure = {who: (min(r[who] for r in rounds), statistics.median(r[who] for r in rounds)) for who in ("A", "B", "preemptd")}
        line = "  ".join(f"{who} {low:>9,.0f} / {mid:>9,.0f}" for who, (low, mid) in figure.items())
        ours = figure["preemptd"][1]
        print(f"{name:11} {line}  = {ours / figure['A'][1]:.2f} of A, {ours / figure['B'][1]:.2f} of B")


if __name__ == "__main__":
    main()
