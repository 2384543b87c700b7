"""Decision latency, what a shim feels: from a `task.submitted` published to its decision on the
decision stream, while the daemon ingests a steady flow of other events, on a large state.

    .venv/bin/python bench/latency.py                        # 5,000 nodes, 100,000 running tasks, 20 s
    .venv/bin/python bench/latency.py --nodes 500 --tasks 10000 --seconds 10

One run: a bundled nats-server and `preemptd run` with its defaults (tick, SQLite FULL). The
state is loaded first (a configuration, the nodes, the running tasks as `task.bound`) and the
bench waits until the daemon has committed it. Then, for `--seconds`:

- load: `--rate` events a second (tasks bound and released again, no decision), published in
  bursts every 10 ms;
- allocation probes: every 100 ms a `task.submitted` that fits; its latency runs from just
  before it is published to the arrival of its `decision.allocated` on a plain NATS
  subscription;
- preemption probes: on a second partition, `preempt`, whose 100 nodes are full of a queue
  without guarantee, every 500 ms a task of a queue under its guarantee (`preemption.delay`
  1s); its latency runs to its `decision.preempted`, less the delay;
- then a burst: 100 such tasks at once, timed until the last of their preemptions arrives,
  less the delay (a cycle, or cycles, with 100 preemptors due, while the load goes on).

At the end the daemon is stopped, which writes a snapshot, and its peak RSS is printed; then it
is started again on its log (timed to ready), killed with SIGKILL, and started again.

Baseline, in the same run: a message published on a subject and received back by the same
process through the same server (the floor of any round trip through NATS here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import nats
from _figures import percentiles
from ingest import publish_messages

from preemptd.daemon.bus.embedded import EmbeddedNats
from preemptd.daemon.records import Outbound, cluster_subject

ROOT = Path(__file__).resolve().parent.parent
CONFIG = {"partitions": [{"name": "default", "queues": [{"name": "root", "queues": [{"name": "default"}]}]}]}
DELAY = 1.0  # seconds: the preemption.delay of the preempting queue
PREEMPT = {
    "partitions": [
        {
            "name": "preempt",
            "queues": [
                {
                    "name": "root",
                    "properties": {"preemption.policy": "default", "preemption.delay": f"{DELAY:g}s"},
                    "queues": [{"name": "low"}, {"name": "high", "resources": {"guaranteed": {"cpu": 250}}}],
                }
            ],
        }
    ]
}


def event(kind: str, id: str, partition: str = "default", **fields) -> Outbound:
    body = {"type": kind, "id": id, "ts": 1, "partition": partition, **fields}
    return Outbound(cluster_subject(partition, kind), json.dumps(body).encode(), id)


def task(kind: str, name: str, queue: str = "root.default", partition: str = "default", **fields) -> Outbound:
    app = f"app-{name[:6]}"
    return event(kind, f"{kind}-{name}", partition, task=name, app=app, queue=queue, resources={"cpu": 1, "memory": "1Gi"}, **fields)


def state(nodes: int, tasks: int) -> list[Outbound]:
    messages = [event("config.applied", "config-1", model="yunikorn", config=CONFIG)]
    messages += [event("node.upserted", f"node-{n}", node=f"n{n:05d}", capacity={"cpu": 64, "memory": "256Gi"}) for n in range(nodes)]
    messages += [task("task.bound", f"r{t:07d}", node=f"n{t % nodes:05d}") for t in range(tasks)]
    messages.append(event("config.applied", "config-2", "preempt", model="yunikorn", config=PREEMPT))
    messages += [event("node.upserted", f"full-node-{n}", "preempt", node=f"full{n}", capacity={"cpu": 10, "memory": "100Gi"}) for n in range(100)]
    messages += [task("task.bound", f"low{t:04d}", "root.low", "preempt", node=f"full{t % 100}") for t in range(1000)]
    return messages


def committed(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute("select count(*) from log where stream_seq is not null").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


async def round_trip(url: str, count: int = 200) -> list[float]:
    """Seconds from publishing a message to receiving it back, `count` times."""
    nc = await nats.connect(url)
    received: asyncio.Queue[float] = asyncio.Queue()

    async def back(_message) -> None:
        received.put_nowait(time.perf_counter())

    await nc.subscribe("bench.echo", cb=back)
    out = []
    for _ in range(count):
        sent = time.perf_counter()
        await nc.publish("bench.echo", b"x")
        out.append(await received.get() - sent)
        await asyncio.sleep(0.005)
    await nc.close()
    return out


async def measure(url: str, nodes: int, seconds: float, rate: int) -> tuple[list[float], list[float], float]:
    """Latencies of the allocation and the preemption probes, and the burst's, in seconds,
    under the load."""
    nc = await nats.connect(url)
    sent: dict[str, float] = {}
    allocations: list[float] = []
    preemptions: list[float] = []

    async def decided(message) -> None:
        decision = json.loads(message.data)
        name = decision.get("preemptor") or decision["task"]
        if name in sent:
            latency = time.perf_counter() - sent.pop(name)
            (preemptions if "preemptor" in decision else allocations).append(latency)

    await nc.subscribe("preemptd.decisions.default.allocated", cb=decided)
    await nc.subscribe("preemptd.decisions.preempt.preempted", cb=decided)

    async def send(message: Outbound) -> None:
        await nc.publish(message.subject, message.data, headers={"Nats-Msg-Id": message.msg_id})

    async def load() -> None:
        n = 0
        while True:
            for _ in range(rate // 200):  # a task bound and one released: two events
                await send(task("task.bound", f"l{n:07d}", node=f"n{n % nodes:05d}"))
                if n >= 1:
                    await send(event("task.released", f"released-{n - 1}", task=f"l{n - 1:07d}"))
                n += 1
            await asyncio.sleep(0.01)

    async def probe(name: str, every: float, message) -> None:
        p = 0
        while True:
            sent[f"{name}{p:06d}"] = time.perf_counter()
            await send(message(f"{name}{p:06d}"))
            p += 1
            await asyncio.sleep(every)

    running = [
        asyncio.create_task(load()),
        asyncio.create_task(probe("p", 0.1, lambda name: task("task.submitted", name))),
        asyncio.create_task(probe("h", 0.5, lambda name: task("task.submitted", name, "root.high", "preempt"))),
    ]
    await asyncio.sleep(seconds)
    for probing in running[1:]:
        probing.cancel()
    await asyncio.sleep(DELAY + 2)  # the last decisions
    burst = [f"b{b:03d}" for b in range(100)]
    started = time.perf_counter()
    for name in burst:
        sent[name] = started
        await send(task("task.submitted", name, "root.high", "preempt"))
    before = len(preemptions)
    while len(preemptions) < before + len(burst) and time.perf_counter() - started < DELAY + 30:
        await asyncio.sleep(0.01)
    last = time.perf_counter() - started - DELAY if len(preemptions) == before + len(burst) else float("nan")
    running[0].cancel()
    await nc.close()
    return allocations, [latency - DELAY for latency in preemptions[:before]], last


def ready(command: list[str]) -> tuple[float, subprocess.Popen]:
    """Start the daemon; seconds until it says it listens (its state rebuilt), and the process."""
    started = time.perf_counter()
    daemon = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert daemon.stdout is not None
    for line in daemon.stdout:
        if "listening" in line:
            return time.perf_counter() - started, daemon
    raise SystemExit(f"preemptd run exited with {daemon.wait()}")


def _rss_mb(pid: int, field: str = "VmRSS:") -> float:
    """The process's resident memory now (or, with `VmHWM:`, its peak so far), in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith(field)).split()[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=int, default=1000, help="other events a second (default: 1000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(Path(tmp) / "nats") as server:
        initial = state(args.nodes, args.tasks)
        anyio.run(publish_messages, server.url, initial)
        command = [sys.executable, "-m", "preemptd.daemon.entry", "--log-level", "warning", "run", "--nats-url", server.url, "--state-dir", f"{tmp}/state"]
        daemon = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            loaded = time.perf_counter()
            while committed(Path(tmp) / "state" / "preemptd.db") < len(initial):
                time.sleep(0.1)
            print(f"state of {args.nodes:,} nodes and {args.tasks:,} running tasks committed in {time.perf_counter() - loaded:.1f} s")
            floor = anyio.run(round_trip, server.url)
            allocations, preemptions, burst = anyio.run(measure, server.url, args.nodes, args.seconds, args.rate)
            steady, running_peak = _rss_mb(daemon.pid), _rss_mb(daemon.pid, "VmHWM:")
        finally:
            daemon.terminate()
            daemon.wait()
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the daemon, its shutdown snapshot included
        after_stop, daemon = ready(command)
        daemon.kill()  # no snapshot at the stop: the next start folds what came after the last one
        daemon.wait()
        after_kill, daemon = ready(command)
        daemon.terminate()
        daemon.wait()
    for what, latencies in (("allocation", allocations), (f"preemption, less its {DELAY:g}s delay", preemptions), ("NATS round trip (baseline)", floor)):
        p50, p99 = percentiles(latencies)
        print(f"{what:34} p50 {p50 * 1000:6.1f} ms  p99 {p99 * 1000:6.1f} ms  ({len(latencies)} samples)")
    print(f"100 preemptors at once, the last decided: {burst * 1000:.0f} ms after the delay")
    print(f"(under {args.rate:,} other events a second)")
    print(f"the daemon's RSS: {steady:.0f} MB before the stop (peak {running_peak:.0f} MB), {peak:.0f} MB at its peak with the snapshot at the stop")
    print(f"start again on its own log: {after_stop:.2f} s to ready after a stop, {after_kill:.2f} s after a SIGKILL")


if __name__ == "__main__":
    main()
