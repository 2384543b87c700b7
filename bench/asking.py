"""Askers at their worst: a probe partition's decision latency while `preemptd try` is flooded,
the measurement behind issue 38's first part.

    .venv/bin/python bench/asking.py                 # each flood for 20 s
    .venv/bin/python bench/asking.py --seconds 60

One run: a bundled nats-server and `preemptd run` with its defaults, holding two partitions.
`default` is a full cluster (400 nodes of 32 cores, 12,800 tasks of queue root.a over its
guarantee, queue root.b with a guarantee of half): a query submitting a task to root.b would
preempt. `probe` has one node with room: a shim submits a probe task there every 100 ms and
releases it half a second after its decision; the probe's latency is from sending the task to
its decision reaching the shim. The floods, 20 s each, in this order, with no flood before and
after (the baseline, in the same run):

- one-task: 32 askers, each asking a one-task query of `probe` again as soon as it is answered
- 1 MiB: 16 askers of queries of 1,000 tasks padded to 1 MiB
- preempting: 8 askers of a one-task query of `default` that would preempt
- hostile: 8 publishers of 1 MiB queries without a reply subject, 8 publishers of one-task
  queries with a reply subject who never wait for it (a flood that no budget slows down), 8
  askers of 1 MiB that is not JSON, 8 of 1 MiB nested 500,000 deep
- all: every one of the above at once

Askers run in a process of their own. For each flood: the probe's p50, p99 and most, its p99
against the baseline's, what the askers got back (answers, refusals by their first words,
timeouts), and the daemon's count of queries by outcome (`preemptd_queries_total`) and of its
children's CPU seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio
import nats
from soak import free_port, percentile

from preemptd.daemon.bus.embedded import EmbeddedNats

ROOT = Path(__file__).resolve().parent.parent
NODES, CORES = 400, 32
PROBE_EVERY, PROBE_LIFETIME = 0.1, 0.5
SLOW = 0.1  # probes slower than this are listed with when they were sent, to be matched with the daemon's log
CONFIGS = {
    "default": {
        "queues": [
            {
                "name": "root",
                "properties": {"preemption.delay": "1s"},
                "queues": [{"name": "a"}, {"name": "b", "resources": {"guaranteed": {"vcore": NODES * CORES // 2}}}],
            }
        ]
    },
    "probe": {"queues": [{"name": "root", "queues": [{"name": "probe"}]}]},
}


def _task(partition: str, queue: str, name: str, vcore: int = 1) -> dict:
    return {"type": "task.submitted", "task": name, "app": name, "queue": queue, "resources": {"vcore": vcore}}


ONE_TASK = json.dumps([_task("probe", "root.probe", "asked")]).encode()
PREEMPTING = json.dumps([_task("default", "root.b", "asked", 4)]).encode()
_THOUSAND = json.dumps([_task("probe", "root.probe", f"asked-{i}") for i in range(1000)])
MEBIBYTE = (_THOUSAND[:-1] + " " * ((1 << 20) - 200 - len(_THOUSAND)) + "]").encode()
NOT_JSON = b"{" + b"x" * ((1 << 20) - 200)
NESTED = b"[" * 500_000 + b"]" * 500_000

#: name -> [(how many, subject, body, how it asks: "wait" for the reply, "none" without a reply
#: subject, "fire" with one but without waiting)]
FLOODS: dict[str, list[tuple[int, str, bytes, str]]] = {
    "one-task": [(32, "preemptd.try.probe", ONE_TASK, "wait")],
    "1 MiB": [(16, "preemptd.try.probe", MEBIBYTE, "wait")],
    "preempting": [(8, "preemptd.try.default", PREEMPTING, "wait")],
    "hostile": [
        (8, "preemptd.try.probe", MEBIBYTE, "none"),
        (8, "preemptd.try.probe", ONE_TASK, "fire"),
        (8, "preemptd.try.probe", NOT_JSON, "wait"),
        (8, "preemptd.try.probe", NESTED, "wait"),
    ],
}
FLOODS["all"] = [asker for name in ("one-task", "1 MiB", "preempting", "hostile") for asker in FLOODS[name]]


async def _ask(url: str, subject: str, body: bytes, how: str, until: float, got: Counter) -> None:
    nc = await nats.connect(url)
    try:
        while time.monotonic() < until:
            if how != "wait":
                await nc.publish(subject, body, reply=nc.new_inbox() if how == "fire" else "")
                await nc.flush()
                continue
            try:
                answer = json.loads((await nc.request(subject, body, timeout=10)).data)
            except nats.errors.TimeoutError:
                got["no answer within 10 s"] += 1
                continue
            except nats.errors.NoRespondersError:  # the server cut the daemon's queries connection off as a slow consumer: it reconnects
                got["no responders"] += 1
                await asyncio.sleep(0.1)
                continue
            refused = answer.get("refused")
            got["answered" if refused is None else "refused: " + " ".join(refused.split()[:3])] += 1
    finally:
        await nc.close()


def flood(url: str, name: str, seconds: float, out: multiprocessing.Queue) -> None:
    """Run the askers of flood `name` for `seconds`; put what they got back on `out`."""
    got: Counter = Counter()

    async def run() -> None:
        until = time.monotonic() + seconds
        async with anyio.create_task_group() as tg:
            for count, subject, body, how in FLOODS[name]:
                for _ in range(count):
                    tg.start_soon(_ask, url, subject, body, how, until, got)

    anyio.run(run)
    out.put(dict(got))


class Probe:
    """The shim of the probe partition: a task every `PROBE_EVERY`, timed to its decision."""

    def __init__(self, nc: nats.NATS, slow: list[tuple[float, float]]) -> None:
        self.nc = nc
        self.sent: dict[str, float] = {}
        self.latencies: list[float] = []
        self.slow = slow  # (when sent, wall clock; latency) of those over `SLOW`
        self.n = 0

    async def send(self, partition: str, kind: str, **fields: object) -> None:
        body = {
            "type": kind,
            "id": f"{kind}-{fields.get('task', fields.get('node'))}-{time.monotonic_ns()}",
            "ts": int(time.time() * 1000),
            "partition": partition,
            **fields,
        }
        await self.nc.publish(f"preemptd.cluster.{partition}.{kind.split('.')[0]}", json.dumps(body).encode())

    async def decided(self, message: nats.aio.msg.Msg) -> None:
        decision = json.loads(message.data)
        sent = self.sent.pop(decision.get("task", ""), None)
        if sent is not None and decision["type"] == "decision.allocated":
            self.latencies.append(time.monotonic() - sent)
            if self.latencies[-1] > SLOW:
                self.slow.append((time.time() - self.latencies[-1], self.latencies[-1]))
            await self.send("probe", "task.bound", task=decision["task"], node=decision["node"])
            await asyncio.sleep(PROBE_LIFETIME)
            await self.send("probe", "task.released", task=decision["task"], reason="completed")

    async def run(self, seconds: float) -> list[float]:
        """Probe for `seconds`; the latencies measured meanwhile."""
        self.latencies = []
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self.n += 1
            self.sent[f"probe-{self.n}"] = time.monotonic()
            await self.send("probe", "task.submitted", task=f"probe-{self.n}", app="probe", queue="root.probe", resources={"vcore": 1})
            await asyncio.sleep(PROBE_EVERY)
        await asyncio.sleep(1)  # the last decisions
        return self.latencies


async def fill(probe: Probe) -> None:
    """Both partitions' configuration, nodes and running tasks."""
    for partition, config in CONFIGS.items():
        await probe.send(partition, "config.applied", config=config)
    await probe.send("probe", "node.upserted", node="p1", capacity={"vcore": 64})
    for n in range(NODES):
        await probe.send("default", "node.upserted", node=f"n{n:03d}", capacity={"vcore": CORES})
    for t in range(NODES * CORES):
        await probe.send("default", "task.bound", task=f"r{t}", node=f"n{t % NODES:03d}", app=f"app-{t // 32}", queue="root.a", resources={"vcore": 1})
    await probe.nc.flush()


async def queries_counted(port: int) -> dict[str, float]:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(b"GET /metrics HTTP/1.0\r\n\r\n")
        body = b""
        async for chunk in stream:
            body += chunk
    counted = {}
    for line in body.decode().splitlines():
        if line.startswith(("preemptd_queries_total{", "preemptd_query_child_seconds_total")):
            name, value = line.rsplit(" ", 1)
            counted[name.split('"')[1] if '"' in name else "child CPU s"] = float(value)
    return counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20, help="how long each flood lasts (default: 20)")
    parser.add_argument("--daemon-log", type=Path, help="keep the daemon's log in this file")
    parser.add_argument("--log-level", default="warning", help="the daemon's log level (default: warning; info shows its snapshots and cycles)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(Path(tmp) / "nats") as server:
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "preemptd.daemon.entry",
            "--log-level",
            args.log_level,
            "run",
            "--nats-url",
            server.url,
            "--state-dir",
            str(Path(tmp) / "state"),
            "--metrics-addr",
            str(port),
        ]
        daemon = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=(args.daemon_log or Path(tmp) / "daemon.log").open("w"))
        assert daemon.stdout is not None and "listening" in daemon.stdout.readline().decode()
        results: list[tuple[str, list[float], dict, dict]] = []
        slow: list[tuple[float, float]] = []

        async def measure() -> None:
            nc = await nats.connect(server.url)
            probe = Probe(nc, slow)

            async def decided(message: nats.aio.msg.Msg) -> None:
                asyncio.ensure_future(probe.decided(message))  # its release waits: the next decisions come meanwhile

            await nc.subscribe("preemptd.decisions.probe.>", cb=decided)
            await fill(probe)
            while not await probe.run(1.0):  # until the daemon has folded what was sent
                pass
            context = multiprocessing.get_context("spawn")
            for name in ("none", *FLOODS, "none"):
                before = await queries_counted(port)
                out = context.Queue()
                askers = context.Process(target=flood, args=(server.url, name, args.seconds, out)) if name != "none" else None
                if askers is not None:
                    askers.start()
                    await asyncio.sleep(1)  # the askers connected
                latencies = await probe.run(args.seconds - 1)
                got = await anyio.to_thread.run_sync(out.get) if askers is not None else {}
                if askers is not None:
                    askers.join()
                after = await queries_counted(port)
                results.append((name, latencies, got, {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}))
                print(f"{name}: done", file=sys.stderr, flush=True)
            await nc.close()

        try:
            anyio.run(measure)
        finally:  # a failed run leaves no daemon behind to skew the next
            daemon.terminate()
            daemon.wait(60)
    baseline = percentile([s for name, latencies, _, _ in results if name == "none" for s in latencies], 0.99)
    print(f"probe decisions while askers flood `preemptd try` ({NODES} nodes, {NODES * CORES:,} running in the queried partition), {args.seconds:g} s each:")
    for name, latencies, got, counted in results:
        p50, p99 = percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000
        print(
            f"  {name:>10}: {len(latencies)} probes, p50 {p50:.1f} ms, p99 {p99:.1f} ms ({p99 / (baseline * 1000):.1f}x the baseline's p99), at most "
            f"{max(latencies, default=0) * 1000:.1f} ms"
        )
        if got:
            print(f"              askers got: {', '.join(f'{k} {v:,}' for k, v in sorted(got.items(), key=lambda kv: -kv[1]))}")
        if counted:
            print(f"              the daemon counted: {', '.join(f'{k} {v:,.1f}' if k == 'child CPU s' else f'{k} {v:,.0f}' for k, v in counted.items())}")
    if slow:
        shown = ", ".join(f"{time.strftime('%H:%M:%S', time.gmtime(at))}.{int(at * 1000) % 1000:03d}Z {latency * 1000:.0f} ms" for at, latency in slow)
        print(f"probes slower than {SLOW * 1000:.0f} ms, sent at (UTC): {shown}")


if __name__ == "__main__":
    main()
