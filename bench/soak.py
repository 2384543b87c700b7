"""A soak, as an operator runs the daemon: how fast the log, its archive and the streams grow
(with retention, that they stay under their bounds), what the log holds by record type, the
daemon's memory and decision latency over time, and that replay over the archive and the live
log reproduces every decision at the end. The measurement behind issue 29 (a log that lives
for months).

    .venv/bin/python bench/soak.py                         # 300 tasks/s on 100 nodes for 5 minutes, default retention
    .venv/bin/python bench/soak.py --seconds 3600 --retain 30m --retain-bytes 512Mi
    .venv/bin/python bench/soak.py --seconds 600 --archive off   # without retention

One run: a bundled nats-server and `preemptd run` with its defaults. A shim submits `--rate`
tasks a second to one of two queues that each guarantee half of what they may hold together,
switching every 30 s, so that each fills it and then preempts the other back; it binds what is
allocated, releases each task 20 s after it started, and releases the victims of each
preemption at once. Arrivals outrun completions: the backlog grows all the way. A third queue,
`probe`, keeps 4 nodes' worth of room the other two may not take: a probe task arrives there
each second and is released 5 s after it started, so that its decision shows how fast an
arrival in a queue with room is decided while the backlog grows (from sending the task to the
decision reaching the shim). Every 10 s it samples the log database (with its WAL), the NATS
data directory, the archive, the daemon's RSS, its `/readyz`, the backlog (`preemptd_pending_tasks`)
and the latency from a task's cycle that made a decision to the decision reaching the shim
(computing, committing, publishing). At the end the daemon is stopped (a snapshot is written),
what it logged about falling behind is shown, the live log is read by record type (count and
payload bytes), and `preemptd replay` checks the whole history, archive included.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import nats

from preemptd.daemon.bus.embedded import EmbeddedNats

ROOT = Path(__file__).resolve().parent.parent
NODES, CORES, LIFETIME = 100, 32, 20.0
PHASE = 30  # seconds each queue has the submissions to itself: the other then preempts back
PROBE_ROOM, PROBE_LIFETIME = 4 * CORES, 5.0  # the room the probe queue keeps; how long a probe task runs
WORK = NODES * CORES - PROBE_ROOM
CONFIG = {
    "queues": [
        {
            "name": "root",
            "properties": {"preemption.delay": "1s"},
            "queues": [
                {
                    "name": "work",
                    "resources": {"max": {"vcore": WORK}},
                    "queues": [{"name": q, "resources": {"guaranteed": {"vcore": WORK // 2}}} for q in ("a", "b")],
                },
                {"name": "probe", "resources": {"guaranteed": {"vcore": PROBE_ROOM}}},
            ],
        }
    ]
}


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else (path.stat().st_size if path.exists() else 0)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Shim:
    """Submits, binds, releases: what a Kubernetes shim does with the daemon's decisions."""

    def __init__(self, nc: nats.NATS, rate: int) -> None:
        self.nc, self.rate = nc, rate
        self.submitted = self.bound = self.released = 0
        self.ends: list[tuple[float, str]] = []  # (when, task) to release
        self.latencies: list[float] = []  # seconds from each decision's cycle (its ts) to the shim, since the last sample
        self.probes: dict[str, float] = {}  # probe task -> when it was sent
        self.probed: list[float] = []  # seconds from sending a probe task to its decision, since the last sample
        self.probed_all: list[float] = []

    async def send(self, kind: str, **fields: object) -> None:
        body = {"type": kind, "id": f"{kind}-{fields.get('task', fields.get('node'))}-{time.monotonic_ns()}", "ts": int(time.time() * 1000), **fields}
        await self.nc.publish(f"preemptd.cluster.default.{kind.split('.')[0]}", json.dumps(body).encode())

    async def on_decision(self, message: nats.aio.msg.Msg) -> None:
        decision = json.loads(message.data)
        self.latencies.append(time.time() - decision["ts"] / 1000)
        sent = self.probes.pop(decision.get("task", decision.get("preemptor", "")), None)
        if sent is not None:
            self.probed.append(time.monotonic() - sent)
            self.probed_all.append(self.probed[-1])
        if decision["type"] == "decision.allocated":
            await self.send("task.bound", task=decision["task"], node=decision["node"])
            self.bound += 1
            self.ends.append((time.monotonic() + (PROBE_LIFETIME if decision["queue"] == "root.probe" else LIFETIME), decision["task"]))
        elif decision["type"] == "decision.preempted":
            for victim in decision["victims"]:
                await self.send("task.released", task=victim["task"], reason="preempted")
                self.released += 1

    async def run(self, seconds: float) -> None:
        await self.nc.subscribe("preemptd.decisions.default.>", cb=self.on_decision)
        await self.send("config.applied", config=CONFIG)
        for n in range(NODES):
            await self.send("node.upserted", node=f"n{n:03d}", capacity={"vcore": CORES})
        started = time.monotonic()
        probes = 0
        while time.monotonic() - started < seconds:
            tick = time.monotonic()
            if tick - started >= probes:  # a probe task a second
                self.probes[f"probe-{probes}"] = time.monotonic()
                await self.send("task.submitted", task=f"probe-{probes}", app="probe", queue="root.probe", resources={"vcore": 1})
                probes += 1
            for _ in range(self.rate // 10):
                queue = "root.work.a" if int(tick - started) // PHASE % 2 == 0 else "root.work.b"
                await self.send("task.submitted", task=f"t{self.submitted}", app=f"{queue[-1]}-{self.submitted // 50}", queue=queue, resources={"vcore": 1})
                self.submitted += 1
            due = [task for when, task in self.ends if when <= tick]
            self.ends = [(when, task) for when, task in self.ends if when > tick]
            for task in due:
                await self.send("task.released", task=task, reason="completed")
                self.released += 1
            await asyncio.sleep(max(0.0, 0.1 - (time.monotonic() - tick)))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def scrape(port: int) -> tuple[int, str]:
    """The backlog (`preemptd_pending_tasks`) and what `/readyz` says."""

    async def get(path: str) -> tuple[int, str]:
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(f"GET {path} HTTP/1.0\r\n\r\n".encode())
            body = b""
            with anyio.move_on_after(5):
                async for chunk in stream:
                    body += chunk
        head, _, text = body.decode(errors="replace").partition("\r\n\r\n")
        return int(head.split()[1]) if head else 0, text

    status, _ = await get("/readyz")
    _, metrics = await get("/metrics")
    pending = sum(int(float(line.split()[-1])) for line in metrics.splitlines() if line.startswith("preemptd_pending_tasks{"))
    return pending, "ready" if status == 200 else f"{status}"


def used(db: Path) -> int:
    """The log's pages in use (what retention bounds), without those freed for reuse."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        pages = conn.execute("pragma page_count").fetchone()[0] - conn.execute("pragma freelist_count").fetchone()[0]
        return pages * conn.execute("pragma page_size").fetchone()[0]


def percentile(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def log_by_type(db: Path) -> tuple[list[tuple[str, int, int]], int]:
    """The log's records by type (count, payload bytes), and how many dead letters it holds."""
    with sqlite3.connect(db) as conn:
        kinds = conn.execute("select type, count(*), sum(length(payload)) from log group by type order by 3 desc").fetchall()
        return kinds, conn.execute("select count(*) from dead_letters").fetchone()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=300, help="tasks submitted a second")
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--archive", help="off: without retention (default: the daemon's STATE_DIR/archive)")
    parser.add_argument("--retain", default="7d", help="the daemon's --retain (default: 7d)")
    parser.add_argument("--retain-bytes", default="8Gi", help="the daemon's --retain-bytes (default: 8Gi)")
    parser.add_argument("--sample", type=float, default=10, help="seconds between samples (default: 10)")
    parser.add_argument("--cycle-time", help="the daemon's --cycle-time (default: its own)")
    args = parser.parse_args()
    retention = (
        ["--archive", "off"]
        if args.archive == "off"
        else ["--retain", args.retain, "--retain-bytes", args.retain_bytes, *(["--archive", args.archive] if args.archive else [])]
    )
    with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(Path(tmp) / "nats") as server:
        state = Path(tmp) / "state"
        metrics_port = free_port()
        command = [
            sys.executable,
            "-m",
            "preemptd.daemon.entry",
            "--log-level",
            "warning",
            "run",
            "--nats-url",
            server.url,
            "--state-dir",
            str(state),
            "--metrics-addr",
            str(metrics_port),
            *retention,
            *(["--cycle-time", args.cycle_time] if args.cycle_time else []),
        ]
        said = Path(tmp) / "daemon.log"
        with said.open("w") as said_file:
            daemon = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=said_file)
        assert daemon.stdout is not None and "listening" in daemon.stdout.readline().decode()
        samples: list[tuple[float, int, int, int, int, float, float, float, float, float, int, str]] = []

        async def soak() -> Shim:
            nc = await nats.connect(server.url)
            shim = Shim(nc, args.rate)
            async with anyio.create_task_group() as tg:
                tg.start_soon(shim.run, args.seconds)
                started = time.monotonic()
                while time.monotonic() - started < args.seconds:
                    await anyio.sleep(args.sample)
                    db = state / "preemptd.db"
                    latencies, shim.latencies = shim.latencies, []
                    probed, shim.probed = shim.probed, []
                    on_disk = size(db) + size(state / "preemptd.db-wal")
                    pending, ready = await scrape(metrics_port)
                    samples.append(
                        (
                            time.monotonic() - started,
                            on_disk,
                            used(db),
                            size(state / "archive"),
                            size(Path(tmp) / "nats"),
                            rss_mb(daemon.pid),
                            percentile(latencies, 0.5),
                            percentile(latencies, 0.99),
                            percentile(probed, 0.5),
                            percentile(probed, 0.99),
                            pending,
                            ready,
                        )
                    )
                    print(
                        f"{samples[-1][0]:8.0f} s: log {on_disk / 1e6:.0f} MB, archive {samples[-1][3] / 1e6:.0f} MB, NATS {samples[-1][4] / 1e6:.0f} MB",
                        file=sys.stderr,
                        flush=True,
                    )
            await nc.close()
            return shim

        shim = anyio.run(soak)
        time.sleep(3)  # the last events and decisions committed
        daemon.terminate()
        daemon.wait(60)
        db = state / "preemptd.db"
        hours = args.seconds / 3600
        print(
            f"soak: {args.rate} tasks/s on {NODES} nodes for {args.seconds:g} s: {shim.submitted:,} submitted, {shim.bound:,} bound, {shim.released:,} released"
        )
        print(f"daemon: {' '.join(retention)}")
        print(
            "   t (s)   log file (MB)   in use (MB)   archive (MB)   NATS (MB)   RSS (MB)    waiting   readyz   after its cycle (ms, p50 / p99)   "
            "probe sent to decided (ms, p50 / p99)"
        )
        for t, on_disk, in_use, archived, nats_bytes, rss, p50, p99, probe50, probe99, pending, ready in samples:
            print(
                f"{t:8.0f} {on_disk / 1e6:15.1f} {in_use / 1e6:13.1f} {archived / 1e6:14.1f} {nats_bytes / 1e6:11.1f} {rss:10.0f} {pending:10,} {ready:>8}"
                f"   {p50 * 1000:13.0f} / {p99 * 1000:<13.0f}   {probe50 * 1000:15.1f} / {probe99 * 1000:.1f}"
            )
        print(
            f"probe tasks (a queue with room, while the backlog grows): {len(shim.probed_all)} decided, p50 {percentile(shim.probed_all, 0.5) * 1000:.1f} ms,"
            f" p99 {percentile(shim.probed_all, 0.99) * 1000:.1f} ms, at most {max(shim.probed_all, default=float('nan')) * 1000:.1f} ms; /readyz not ready in"
            f" {sum(s[11] != 'ready' for s in samples)} of {len(samples)} samples"
        )
        behind = [line for line in said.read_text().splitlines() if "behind" in line or "keeping up" in line]
        print(f"the daemon said it fell behind {len(behind)} times: " + (behind[0] if behind else "never"))
        print(
            f"log {size(db) / 1e6:.1f} MB after the stop ({size(db) / 1e9 / hours:.2f} GB an hour), the most in use {max(s[2] for s in samples) / 1e6:.1f} MB"
        )
        print(
            f"archive {size(state / 'archive') / 1e6:.1f} MB ({size(state / 'archive') / 1e9 / hours:.2f} GB an hour), NATS "
            f"{size(Path(tmp) / 'nats') / 1e6:.1f} MB, at most {max(s[4] for s in samples) / 1e6:.1f} MB"
        )
        kinds, dead = log_by_type(db)
        print("live log's record type       count   payload MB   bytes each")
        for kind, count, payload in kinds:
            print(f"{kind:24} {count:9,} {payload / 1e6:12.1f} {payload / count:12.0f}")
        print(f"dead letters: {dead:,} (a shim's release of a task already gone, for instance)")
        replaying = time.monotonic()
        replayed = subprocess.run([sys.executable, "-m", "preemptd.daemon.cli", "replay", "--db", str(db), "--quiet"], capture_output=True, text=True, cwd=ROOT)
        print(f"replay of the archive and the live log ({time.monotonic() - replaying:.0f} s): {(replayed.stdout or replayed.stderr).strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()
