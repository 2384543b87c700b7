"""End-to-end ingest (NATS -> decode -> log -> projection) against the raw nats-py rate.

    .venv/bin/python bench/ingest.py                 # 100,000 events
    .venv/bin/python bench/ingest.py --events 300000 --synchronous NORMAL

One run, one machine: a bundled nats-server is started, the events are published once to the
cluster stream, then

1. raw: nats-py alone pulls them from JetStream in batches of 1,000, decodes each with the same
   msgspec decoder, and acknowledges each batch (the ceiling for any consumer in Python);
2. preemptd: `preemptd run` consumes the same messages from its own durable consumer, decodes,
   validates, folds them into the projection and commits them to the SQLite log (ack after
   commit). Timed from its first committed event to its last, by polling the log.

The events are what a busy shim sends: nodes, then tasks bound to them and released again, so
no scheduling cycle runs and the figure is ingest alone.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from preemptd.daemon.embedded import EmbeddedNats
from preemptd.daemon.nats_source import Bus, Outbound, cluster_subject
from preemptd.events import decode_cluster_event

ROOT = Path(__file__).resolve().parent.parent


def workload(count: int, nodes: int = 500) -> list[Outbound]:
    messages = []
    for n in range(nodes):
        body = {"type": "node.upserted", "id": f"node-{n}", "ts": 1, "node": f"n{n}", "capacity": {"cpu": "64", "memory": "256Gi"}}
        messages.append(body)
    task = 0
    while len(messages) < count:
        body = {
            "type": "task.bound",
            "id": f"bound-{task}",
            "ts": 2,
            "task": f"t{task}",
            "node": f"n{task % nodes}",
            "app": f"app-{task % 100}",
            "queue": "root.default",
            "resources": {"cpu": "250m", "memory": "512Mi"},
        }
        messages.append(body)
        if task % 2 and len(messages) < count:
            messages.append({"type": "task.released", "id": f"released-{task}", "ts": 3, "task": f"t{task - 1}"})
        task += 1
    return [Outbound(cluster_subject("default", m["type"]), json.dumps(m).encode(), m["id"]) for m in messages]


async def publish(url: str, messages: list[Outbound]) -> None:
    bus = await Bus.connect(url)
    try:
        await bus.ensure_streams()
        for start in range(0, len(messages), 1000):
            await bus.publish(messages[start : start + 1000])
    finally:
        await bus.close()


async def raw_rate(url: str, count: int) -> float:
    """nats-py alone: pull, decode, ack, as fast as it goes."""
    import nats
    from nats.js import api

    nc = await nats.connect(url)
    js = nc.jetstream()
    config = api.ConsumerConfig(ack_policy=api.AckPolicy.ALL, max_ack_pending=50_000)
    subscription = await js.pull_subscribe("preemptd.cluster.>", durable="raw-bench", stream="PREEMPTD_CLUSTER", config=config)
    seen = 0
    started = time.perf_counter()
    while seen < count:
        messages = await subscription.fetch(1000, timeout=5)
        for message in messages:
            decode_cluster_event(message.data)
        await messages[-1].ack()
        seen += len(messages)
    elapsed = time.perf_counter() - started
    await nc.close()
    return seen / elapsed


def committed(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute("select count(*) from log").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def daemon_rate(url: str, state: Path, count: int, synchronous: str) -> float:
    command = [sys.executable, "-m", "preemptd.daemon.cli", "--log-level", "warning", "run", "--nats-url", url, "--state-dir", str(state), "--sqlite-synchronous", synchronous]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = state / "preemptd.db"
    try:
        while (first := committed(db)) == 0:
            time.sleep(0.01)
        started = time.perf_counter()
        while (done := committed(db)) < count:
            time.sleep(0.02)
        return (done - first) / (time.perf_counter() - started)
    finally:
        process.terminate()
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--synchronous", default="FULL", choices=["FULL", "NORMAL"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(Path(tmp) / "nats") as server:
        messages = workload(args.events)
        anyio.run(publish, server.url, messages)
        raw = anyio.run(raw_rate, server.url, len(messages))
        ours = daemon_rate(server.url, Path(tmp) / "state", len(messages), args.synchronous)
    print(f"raw nats-py consume + decode: {raw:>9,.0f} events/s")
    print(f"preemptd ingest ({args.synchronous:6}):   {ours:>9,.0f} events/s  = {ours / raw:.2f} of raw ({len(messages):,} events)")


if __name__ == "__main__":
    main()
