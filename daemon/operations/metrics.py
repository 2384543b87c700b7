"""`preemptd run --metrics-addr`: Prometheus metrics, `/healthz` and `/readyz` on one address.

Counters and histograms are updated by the daemon as it works (prometheus-client's are safe to
update from the event loop and read from the server's thread). The server runs an event loop
of its own in a thread, with a cap on connections and a time limit on requests. What describes the state (queue
amounts, pending tasks, lag, outbox, snapshot age) is gathered once a second on the event loop
into an immutable `Reading`, which scrapes read: the server's thread never touches the state
the daemon is changing.
"""

from __future__ import annotations

import collections
import heapq
import logging
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import anyio
import anyio.abc
import anyio.from_thread
import anyio.to_thread
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from preemptd.events import Admitted, Allocated, DecisionEvent, Evicted, Preempted, printable, type_of
from preemptd.projections import ClusterState, PartitionState
from preemptd.scheduling import curve_unit, model_named

from ..errors import UsageError
from ..ingest import DEAD_LETTER_KINDS
from .logs import log

__all__ = ["READY_LAG", "Health", "Metrics", "MetricsServer", "Reading", "listen_address", "reading"]

#: /readyz answers 503 while more cluster messages than this wait to be committed.
READY_LAG = 10_000

_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_COUNTS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)


def listen_address(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT` or a bare `PORT` (then loopback), as (host, port)."""
    host, colon, port = text.rpartition(":")
    if not colon:
        host = "127.0.0.1"
    host = host.removeprefix("[").removesuffix("]")
    if not port.isdigit() or int(port) > 65535 or not host:
        raise UsageError(f"--metrics-addr {text!r}: expected HOST:PORT or PORT (for example 127.0.0.1:9464 or 9464)")
    return host, int(port)


@dataclass(frozen=True)
class Reading:
    """The state's figures at one moment, as scrapes show them."""

    pending: dict[str, int] = field(default_factory=dict)  # by partition
    queues: tuple[tuple[str, str, str, str, float], ...] = ()  # (what, partition, queue, resource, amount)
    lag: int | None = None  # cluster messages not yet committed; None until first measured
    waiting_decisions: int | None = None
    snapshot_age: float | None = None  # seconds
    log_bytes: int | None = None  # the live log's pages in use
    growth: dict[str, float] = field(default_factory=dict)  # by partition: its backlog's growth over the last minute, tasks a second


#: Queues shown by name in the per-queue gauges, across partitions: those holding the largest part
#: of their partition; each partition's others are summed as queue `(other)`, so that a tree of
#: thousands of queues, or thousands of partitions, does not make a scrape of millions of series.
QUEUE_SERIES = 500
OTHER = "(other)"


def reading(
    state: ClusterState,
    *,
    lag: int | None,
    waiting_decisions: int | None,
    snapshot_age: float | None,
    log_bytes: int | None = None,
    growth: dict[str, float] | None = None,
) -> Reading:
    """What the gauges show for `state`; called on the event loop."""
    amounts = {name: _amounts(partition) for name, partition in sorted(state.partitions.items())}
    shown = _busiest(state, amounts, QUEUE_SERIES)
    rows: list[tuple[str, str, str, str, float]] = []
    for name, partition in sorted(state.partitions.items()):
        rows += _queue_rows(name, partition, amounts[name], shown)
    pending = {name: partition.pending_count for name, partition in sorted(state.partitions.items())}
    return Reading(pending, tuple(rows), lag, waiting_decisions, snapshot_age, log_bytes, growth or {})


Amounts = dict[str, dict[str, dict[str, int]]]  # queue path -> curve -> resource -> amount


def _amounts(partition: PartitionState) -> Amounts:
    """Each queue's curves, in the model's terms (Kueue's admitted and nominal quota, Volcano's deserved)."""
    curves = model_named(partition.model).views.curves(partition)
    return {path: {"allocated": queue.allocated, "pending": queue.pending, **curves.get(path, {})} for path, queue in partition.queues.items()}


def _busiest(state: ClusterState, amounts: dict[str, Amounts], limit: int) -> set[tuple[str, str]]:
    """The (partition, queue) pairs of the `limit` queues holding the largest part of their
    partition's capacity (then asking the most, then by name); what a queue holds and asks as
    its model says (Kueue: admitted, running or not)."""
    ranked = []
    for name, partition in state.partitions.items():
        curves = model_named(partition.model).views.curve_words
        held_curves, asked_curves = ([c.name for c in curves if c.kind == kind] for kind in ("held", "asked"))

        def part(queue: dict[str, dict[str, int]], names: list[str]) -> float:
            capacity = partition.capacity
            return max(
                (amount / capacity[unit] for n in names for r, amount in queue.get(n, {}).items() if capacity.get(unit := r.split(" in ", 1)[0])), default=0.0
            )

        for path, queue in amounts[name].items():
            ranked.append((-part(queue, held_curves), -part(queue, asked_curves), name, path))
    return {(name, path) for _, _, name, path in heapq.nsmallest(limit, ranked)}


def _queue_rows(name: str, partition: PartitionState, amounts: Amounts, shown: set[tuple[str, str]]) -> Iterator[tuple[str, str, str, str, float]]:
    curves = model_named(partition.model).views.curve_words
    other: dict[tuple[str, str], int] = {}
    for path, queue in sorted(partition.queues.items()):
        for curve in curves:
            for resource, amount in sorted(amounts[path].get(curve.name, {}).items()):
                if (name, path) in shown:
                    yield curve.name, name, path, resource, curve_unit(resource, amount)  # Prometheus counts in base units: cores, bytes
                elif queue.leaf:  # a parent's amounts are its leaves'
                    other[curve.name, resource] = other.get((curve.name, resource), 0) + amount
    for (what, resource), amount in sorted(other.items()):
        yield what, name, OTHER, resource, curve_unit(resource, amount)


class Health:
    """What `/readyz` checks, set by the daemon as it starts and runs."""

    def __init__(self) -> None:
        self.standby: str | None = None  # who holds the writer's lease this daemon waits for
        self.rebuilt = False
        self.connected = False
        self.lag: int | None = None

    def problems(self) -> list[str]:
        if self.standby is not None:
            return [f"standby: waiting for the writer's lease, held by {self.standby}"]
        out = []
        if not self.rebuilt:
            out.append("rebuilding the state from the log")
        if not self.connected:
            out.append("not connected to NATS")
        if self.lag is None:
            out.append("consumer lag not measured yet")
        elif self.lag > READY_LAG:
            out.append(f"{self.lag} cluster messages wait to be committed (ready at {READY_LAG} or fewer)")
        return out


class Metrics:
    """The daemon's metrics, in a registry of their own."""

    def __init__(self) -> None:
        disable_created_metrics()  # a `_created` series per counter and histogram says nothing here
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.events = Counter("preemptd_events_ingested", "Cluster events committed to the log", ["partition", "type"], registry=r)
        self.dead_letters = Counter("preemptd_dead_letters", "Inputs rejected into dead letters, by why in a word", ["reason"], registry=r)
        for kind in DEAD_LETTER_KINDS:  # at 0 from the start: a rate over them needs a first sample
            self.dead_letters.labels(kind)
        self.decisions = Counter("preemptd_decisions", "Decisions committed to the log", ["partition", "type", "model"], registry=r)
        self.cycle_seconds = Histogram(
            "preemptd_cycle_duration_seconds", "Time a scheduling cycle takes to decide", ["partition"], buckets=_SECONDS, registry=r
        )
        self.cycle_decisions = Histogram("preemptd_cycle_decisions", "Decisions a scheduling cycle makes", ["partition"], buckets=_COUNTS, registry=r)
        self.latency = Histogram(
            "preemptd_decision_latency_seconds",
            "From a task's or application's submission reaching the daemon to the decision that places, admits or preempts for it "
            "(a preemption's includes its queue's preemption.delay)",
            ["partition", "type"],
            buckets=_SECONDS,
            registry=r,
        )
        self.queries = Counter(
            "preemptd_queries", "Queries (preemptd try) by what became of them: answered, or refused and why in a word", ["outcome"], registry=r
        )  # at 0 from the start: see `QueryCounts`
        self.query_child_seconds = Counter("preemptd_query_child_seconds", "CPU seconds the children answering queries took", registry=r)
        self.config_file_refusals = Counter(
            "preemptd_config_file_refusals",
            "Contents of the run --config file not applied (unreadable, or refused by the model): the configuration in force stays",
            registry=r,
        )
        self.now = Reading()
        r.register(_ReadingCollector(self))

    def ingested(self, rows: Iterable, dead: Iterable) -> None:
        """Count a committed batch (a label lookup per kind, not per event)."""
        for (partition, kind), count in collections.Counter((row.partition, row.type) for row in rows).items():
            self.events.labels(partition, kind).inc(count)
        for kind, count in collections.Counter(letter.kind for letter in dead).items():
            self.dead_letters.labels(kind).inc(count)

    def cycle(self, state: ClusterState, partition: str, decisions: list[DecisionEvent], seconds: float) -> None:
        self.cycle_seconds.labels(partition).observe(seconds)
        self.cycle_decisions.labels(partition).observe(len(decisions))
        view = state.partitions[partition]
        for decision in decisions:
            kind = type_of(decision).removeprefix("decision.")
            self.decisions.labels(partition, kind, view.model).inc()
            submitted = view.submitted_for(decision) if isinstance(decision, _FOR_SOMEONE) else None
            if submitted is not None:
                self.latency.labels(partition, kind).observe(max(decision.ts - submitted, 0) / 1000)


#: The decisions whose latency is measured: those that place, admit or preempt for someone.
_FOR_SOMEONE = (Allocated, Preempted, Admitted, Evicted)


#: What each per-queue gauge shows, as the models name it (`Model.curve_words`).
_QUEUE_GAUGES = {
    "allocated": "A queue's allocated amount (its running tasks')",
    "pending": "A queue's pending asks (Kueue: of workloads not admitted yet)",
    "guaranteed": "A queue's guarantee (Kueue: nominal quota; Volcano: the guarantee configured)",
    "max": "A queue's max (Kueue: nominal quota and borrowing limit; Volcano: capability)",
    "admitted": "Kueue: a ClusterQueue's quota reserved by admitted workloads, running or not",
    "deserved": "Volcano: what a queue deserves now, by its sharing plugin (proportion or capacity)",
}


def _queue_family(what: str) -> GaugeMetricFamily:
    said = _QUEUE_GAUGES.get(what, f"A queue's {what} amount")
    return GaugeMetricFamily(f"preemptd_queue_{what}", f"{said} per resource (cpu in cores, memory in bytes)", labels=["partition", "queue", "resource"])


class _ReadingCollector(Collector):
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        now = self.metrics.now  # one reference: a scrape sees one reading whole
        pending = GaugeMetricFamily("preemptd_pending_tasks", "Tasks waiting for a node or admission", labels=["partition"])
        for partition, count in now.pending.items():
            pending.add_metric([partition], count)
        yield pending
        growth = GaugeMetricFamily(
            "preemptd_backlog_growth_per_second",
            "How fast a partition's waiting tasks grew over the last minute (above 0: arrivals outrun what is placed)",
            labels=["partition"],
        )
        for partition, rate in now.growth.items():
            growth.add_metric([partition], rate)
        yield growth
        yield GaugeMetricFamily("preemptd_partitions", "Partitions the daemon keeps (run --max-partitions bounds them)", value=len(now.pending))
        queues = {what: _queue_family(what) for what in ("allocated", "guaranteed", "max", "pending")}
        for what, partition, queue, resource, amount in now.queues:  # and the models' own: Kueue's admitted, Volcano's deserved
            if what not in queues:
                queues[what] = _queue_family(what)
            queues[what].add_metric(
                [partition, printable(queue), printable(resource)], amount
            )  # free-form names from shims: no raw ESC or U+202E for whoever reads the page
        yield from queues.values()
        for name, value, text in (
            ("preemptd_consumer_lag", now.lag, "Cluster stream messages for this daemon not yet committed to its log"),
            ("preemptd_outbox_waiting", now.waiting_decisions, "Decisions committed and not yet published"),
            ("preemptd_snapshot_age_seconds", now.snapshot_age, "Seconds since the newest snapshot was taken (or the daemon started)"),
            ("preemptd_log_bytes", now.log_bytes, "The live log's size on disk, pages in use (retention keeps it near --retain-bytes)"),
        ):
            if value is not None:
                yield GaugeMetricFamily(name, text, value=value)


#: How the metrics server holds out against clients that connect and say nothing, or many at
#: once: a request must arrive whole within `REQUEST_SECONDS`, at most `CONNECTIONS` are open at
#: a time (a new one closes the oldest still silent), and a scrape is rendered one at a time, off
#: the server's loop, so that `/healthz` answers while a large `/metrics` is written.
REQUEST_SECONDS = 5.0
SEND_SECONDS = 10.0
CONNECTIONS = 64
_MAX_HEAD = 8192
#: The exposition is rendered at most once in this many seconds; scrapes meanwhile share it
#: (96 clients scraping in a loop rendered it back to back, holding the daemon's decisions).
EXPOSITION_EVERY = 1.0
#: Per client address, a burst of this many scrapes, then one every `EXPOSITION_EVERY`:
#: beyond, `429 Too Many Requests` at once. `/healthz` and `/readyz` are never limited.
SCRAPE_BURST = 5
#: Connections beyond `CONNECTIONS` kept for health: a probe finds a place when scrapes hold every other.
HEALTH_RESERVE = 8
_HEALTH = ("/healthz", "/readyz")
_CLIENTS_KEPT = 1024


class MetricsServer:
    """The HTTP server: an event loop of its own in a thread, so that it answers while the
    daemon's loop is busy, and nothing a client does reaches the daemon's."""

    def __init__(self, address: tuple[str, int], metrics: Metrics, health: Health) -> None:
        host, port = address
        try:
            self._socket = socket.create_server((host, port), family=_family(host), backlog=CONNECTIONS)
        except OSError as exc:
            raise UsageError(f"--metrics-addr {host}:{port}: cannot listen there: {exc.strerror or exc}") from None
        self.url = f"http://{_bracketed(host)}:{self._socket.getsockname()[1]}"
        self._metrics, self._health = metrics, health
        self._rendered: tuple[float, bytes] = (-EXPOSITION_EVERY, b"")  # when, and what: shared by the scrapes meanwhile
        self._scrapes: collections.OrderedDict[str, tuple[float, float]] = collections.OrderedDict()  # client host -> (tokens, when counted)
        self._portal_cm = anyio.from_thread.start_blocking_portal(name="metrics")
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._open = 0  # connections open, on the server's loop

    def __enter__(self) -> MetricsServer:
        self._portal = self._portal_cm.__enter__()
        self._serving = self._portal.start_task_soon(self._serve)
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.cancel()  # the server's tasks end, then its loop
        self._portal_cm.__exit__(None, None, None)
        self._socket.close()

    async def _serve(self) -> None:
        listener = await anyio.abc.SocketListener.from_socket(self._socket)
        rendering = anyio.CapacityLimiter(1)
        self._open = 0
        idle: dict[int, anyio.CancelScope] = {}  # connections still waiting for their request, oldest first
        async with anyio.create_task_group() as tg:
            while True:
                try:
                    stream = await listener.accept()
                except OSError as exc:  # out of descriptors, say: the server waits, it does not die
                    log("the metrics server cannot accept a connection; trying again", logging.WARNING, error=str(exc))
                    await anyio.sleep(1)
                    continue
                if self._open >= CONNECTIONS + HEALTH_RESERVE:
                    if not idle:  # every one is being answered: this one waits for none
                        await stream.aclose()
                        continue
                    idle.pop(next(iter(idle))).cancel()  # the oldest silent client makes way
                self._open += 1
                tg.start_soon(self._answer, stream, rendering, idle, self._open > CONNECTIONS)

    async def _answer(self, stream: anyio.abc.SocketStream, rendering: anyio.CapacityLimiter, idle: dict[int, anyio.CancelScope], reserved: bool) -> None:
        """One request; on a connection of the health reserve (`reserved`), only health's."""
        try:
            async with stream:
                with anyio.move_on_after(REQUEST_SECONDS) as waiting:
                    idle[id(waiting)] = waiting
                    try:
                        request = await _request_line(stream)
                    finally:
                        idle.pop(id(waiting), None)
                if waiting.cancel_called or request is None:
                    return
                method, path = request
                if reserved and path not in _HEALTH:
                    status, body, kind = (
                        "503 Service Unavailable",
                        f"busy: {CONNECTIONS} connections are being answered; ask again in a moment\n".encode(),
                        "text/plain; charset=utf-8",
                    )
                else:
                    status, body, kind = await self._respond(path, rendering, _host_of(stream))
                head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                with anyio.move_on_after(SEND_SECONDS):  # a client that does not read loses its answer
                    await stream.send(head.encode() + (body if method == "GET" else b""))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the client went away
        except Exception as exc:  # a bug of ours must not end the server
            log("the metrics server failed to answer (please report it)", logging.ERROR, error=f"{type(exc).__name__}: {exc}")
        finally:
            self._open -= 1

    async def _respond(self, path: str, rendering: anyio.CapacityLimiter, client: str) -> tuple[str, bytes, str]:
        """Health at once, whatever scrapes do; the exposition within each client's budget."""
        text = "text/plain; charset=utf-8"
        if path == "/healthz":  # `_HEALTH`
            return "200 OK", b"ok\n", text
        if path == "/readyz":
            problems = self._health.problems()
            return ("503 Service Unavailable" if problems else "200 OK"), ("".join(f"{p}\n" for p in problems) or "ready\n").encode(), text
        if path in ("/metrics", "/"):
            if not self._may_scrape(client, time.monotonic()):
                return (
                    "429 Too Many Requests",
                    f"too many scrapes from {client}: {SCRAPE_BURST} at once, then one every {EXPOSITION_EVERY:g} s\n".encode(),
                    text,
                )
            return "200 OK", await self._exposition(rendering), CONTENT_TYPE_LATEST
        return "404 Not Found", b"not found: /metrics, /healthz and /readyz are served\n", text

    def _may_scrape(self, client: str, now: float) -> bool:
        """Take a token of `client`'s bucket (`SCRAPE_BURST`, refilled one every `EXPOSITION_EVERY`)."""
        tokens, then = self._scrapes.pop(client, (float(SCRAPE_BURST), now))
        tokens = min(SCRAPE_BURST, tokens + (now - then) / EXPOSITION_EVERY)
        self._scrapes[client] = (tokens - 1 if tokens >= 1 else tokens, now)
        while len(self._scrapes) > _CLIENTS_KEPT:
            self._scrapes.popitem(last=False)
        return tokens >= 1

    async def _exposition(self, rendering: anyio.CapacityLimiter) -> bytes:
        """The exposition, rendered (in a worker thread) only if the last is older than
        `EXPOSITION_EVERY`; a scrape arriving while it is rendered waits for that one."""
        async with rendering:
            at, body = self._rendered
            if time.monotonic() - at >= EXPOSITION_EVERY:
                body = await anyio.to_thread.run_sync(generate_latest, self._metrics.registry)
                self._rendered = (time.monotonic(), body)
            return body


async def _request_line(stream: anyio.abc.SocketStream) -> tuple[str, str] | None:
    """The method and path of the request's first line, once its head has arrived; None if it
    is not HTTP or is larger than a scrape's."""
    head = b""
    while b"\r\n\r\n" not in head and b"\n\n" not in head:
        try:
            head += await stream.receive(4096)
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            return None
        if len(head) > _MAX_HEAD:
            return None
    parts = head.split(b"\r\n", 1)[0].split()
    if len(parts) < 2 or parts[0] not in (b"GET", b"HEAD"):
        return None
    return parts[0].decode(), parts[1].split(b"?", 1)[0].decode("latin-1")


def _host_of(stream: anyio.abc.SocketStream) -> str:
    """The client's address, without its port: the unit of the scrape budget."""
    address = stream.extra(anyio.abc.SocketAttribute.remote_address, None)
    return str(address[0]) if isinstance(address, tuple) else str(address)


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
