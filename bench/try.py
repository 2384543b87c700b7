"""`preemptd try`: how long a query takes, and what queries cost the daemon's ingest.

    .venv/bin/python bench/try.py                       # both parts
    .venv/bin/python bench/try.py --part latency --queries 500

- latency: a full cluster of 5,000 nodes and 100,000 running tasks (bench/yunikorn.py's, 20
  tasks a node), served as the daemon serves queries (`Bus.serve` of `Queries.answer`: a fork,
  `scheduling.trial`, the reply) on a bundled nats-server; a query of one task of a queue under
  its guarantee, which would preempt one task once the 1 s delay runs out (two cycles). p50 and
  p99 of the request/reply round trip, against nats-py's request/reply to a handler that replies
  at once on the same server, in the same run.
- ingest: bench/ingest.py's allocating workload (`preemptd run` until every event is committed
  and every decision published), without and with 50 queries a second asked of it meanwhile,
  in interleaved rounds; the ratio of the medians.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import anyio
import nats
from _figures import ms, percentiles
from ingest import WORKLOADS, daemon, publish
from yunikorn import _leaf, build_full_cluster

from preemptd.daemon.bus import Bus
from preemptd.daemon.bus.embedded import EmbeddedNats
from preemptd.daemon.queries import Queries

QUERY = json.dumps([{"type": "task.submitted", "task": "asked", "app": "asked", "queue": _leaf(10), "resources": {"vcore": 4}}]).encode()


async def round_trips(url: str, subject: str, body: bytes, count: int) -> list[float]:
    nc = await nats.connect(url)
    try:
        seconds = []
        for _ in range(count):
            started = time.perf_counter()
            reply = await nc.request(subject, body, timeout=30)
            seconds.append(time.perf_counter() - started)
        assert b"refused" not in reply.data, reply.data
        return seconds
    finally:
        await nc.close()


async def latency(url: str, count: int) -> tuple[list[float], list[float], dict]:
    """Queries answered from the full cluster, and the empty handler's round trips."""
    state = build_full_cluster(5000, pending=0, per_node=20).state
    gc.collect()
    gc.freeze()  # as the daemon does once its state is rebuilt
    queries = Queries(lambda: state, tick=1000, partitions=None)
    bus = await Bus.connect(url)
    empty = await nats.connect(url)

    async def reply_at_once(message) -> None:
        await message.respond(b"{}")

    await empty.subscribe("bench.empty", cb=reply_at_once)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(bus.serve, queries.subjects, queries.answer)
            await anyio.sleep(0.2)
            answer = json.loads((await empty.request("preemptd.try.default", QUERY, timeout=30)).data)
            baseline, asked = [], []
            for _ in range(5):  # interleaved
                baseline += await round_trips(url, "bench.empty", QUERY, count // 5)
                asked += await round_trips(url, "preemptd.try.default", QUERY, count // 5)
            tg.cancel_scope.cancel()
    finally:
        await empty.close()
        await bus.close()
    return asked, baseline, answer


def asking(url: str, per_second: float, stop: threading.Event) -> None:
    """Ask a query of one task `per_second` times a second until `stop`."""

    async def run() -> None:
        nc = await nats.connect(url)
        body = json.dumps([{"type": "task.submitted", "task": "asked", "app": "asked", "queue": "root.default", "resources": {"cpu": 1}}]).encode()
        while not stop.is_set():
            try:
                await nc.request("preemptd.try.default", body, timeout=5)
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                pass  # the daemon is not up yet
            await anyio.sleep(1 / per_second)
        await nc.close()

    anyio.run(run)


def ingest_round(count: int, per_second: float) -> float:
    """Events a second of `preemptd run` on the allocating workload, with queries meanwhile."""
    bodies, decisions = WORKLOADS["allocating"](count)
    with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(Path(tmp) / "nats") as server:
        anyio.run(publish, server.url, bodies)
        stop = threading.Event()
        asker = threading.Thread(target=asking, args=(server.url, per_second, stop)) if per_second else None
        if asker:
            asker.start()
        try:
            return len(bodies) / daemon(server.url, Path(tmp) / "state", len(bodies), decisions)
        finally:
            stop.set()
            if asker:
                asker.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["latency", "ingest", "both"], default="both")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.part in ("latency", "both"):
        with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(Path(tmp) / "nats") as server:
            asked, baseline, answer = anyio.run(latency, server.url, args.queries)
        said = [(d["after_ms"], d["type"], d.get("preemptor"), [v["task"] for v in d.get("victims", [])]) for d in answer["decisions"]]
        (a50, a99), (b50, b99) = percentiles(asked), percentiles(baseline)
        print(f"latency, 5,000 nodes and 100,000 running tasks, {len(asked)} queries ({said}):")
        print(f"  query       p50 {ms(a50)}  p99 {ms(a99)}")
        print(f"  empty reply p50 {ms(b50)}  p99 {ms(b99)}  (nats-py request/reply, the same server)")
        print(f"  = {a50 / b50:.0f}x / {a99 / b99:.0f}x the empty round trip")
    if args.part in ("ingest", "both"):
        rates: dict[str, list[float]] = {"without": [], "with": []}
        for _ in range(args.rounds):
            rates["without"].append(ingest_round(args.events, 0))
            rates["with"].append(ingest_round(args.events, 50))
        without, with_queries = (statistics.median(rates[k]) for k in ("without", "with"))
        print(
            f"ingest, allocating workload, {args.events:,} events, {args.rounds} rounds (events/s, median): without queries {without:,.0f}, with 50 "
            f"queries/s {with_queries:,.0f} = {with_queries / without:.2f}"
        )


if __name__ == "__main__":
    main()
