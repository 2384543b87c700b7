"""`preemptd run --metrics-addr`: Prometheus metrics, `/healthz` and `/readyz` on one address.

Counters and histograms are updated by the daemon as it works (prometheus-client's are safe to
update from the event loop and read from the server's thread). What describes the state (queue
amounts, pending tasks, lag, outbox, snapshot age) is gathered once a second on the event loop
into an immutable `Reading`, which scrapes read: the server's thread never touches the state
the daemon is changing.
"""

from __future__ import annotations

import collections
import socket
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from preemptd.events import DecisionEvent, base_unit
from preemptd.projections import ClusterState, PartitionState
from preemptd.scheduling import model_named

from .errors import UsageError
from .ingest import DEAD_LETTER_KINDS

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


def reading(state: ClusterState, *, lag: int | None, waiting_decisions: int | None, snapshot_age: float | None) -> Reading:
    """What the gauges show for `state`; called on the event loop."""
    rows: list[tuple[str, str, str, str, float]] = []
    for name, partition in sorted(state.partitions.items()):
        rows += _queue_rows(name, partition)
    pending = {name: partition.pending_count for name, partition in sorted(state.partitions.items())}
    return Reading(pending, tuple(rows), lag, waiting_decisions, snapshot_age)


def _queue_rows(name: str, partition: PartitionState) -> Iterator[tuple[str, str, str, str, float]]:
    bounds = model_named(partition.model).bounds(partition)  # Kueue's nominal quota, Volcano's deserved and capability
    for path, queue in sorted(partition.queues.items()):
        guaranteed, most = bounds.get(path, (queue.guaranteed, queue.max))
        for what, amounts in (("allocated", queue.allocated), ("guaranteed", guaranteed), ("max", most or {}), ("pending", queue.pending)):
            for resource, amount in sorted(amounts.items()):
                yield what, name, path, resource, base_unit(resource, amount)  # Prometheus counts in base units: cores, bytes


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
        self.cycle_seconds = Histogram("preemptd_cycle_duration_seconds", "Time a scheduling cycle takes to decide", ["partition"], buckets=_SECONDS, registry=r)
        self.cycle_decisions = Histogram("preemptd_cycle_decisions", "Decisions a scheduling cycle makes", ["partition"], buckets=_COUNTS, registry=r)
        self.latency = Histogram(
            "preemptd_decision_latency_seconds",
            "From a task's or application's submission reaching the daemon to the decision that places, admits or preempts for it "
            "(a preemption's includes its queue's preemption.delay)",
            ["partition", "type"],
            buckets=_SECONDS,
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
            kind = decision.__struct_config__.tag.removeprefix("decision.")
            self.decisions.labels(partition, kind, view.model).inc()
            submitted = _submitted_at(view, decision)
            if submitted is not None:
                self.latency.labels(partition, kind).observe(max(decision.ts - submitted, 0) / 1000)


def _submitted_at(partition: PartitionState, decision: DecisionEvent) -> int | None:
    """When what `decision` places, admits or preempts for was submitted (received), if it is
    such a decision."""
    kind = decision.__struct_config__.tag
    if kind == "decision.allocated":
        task = partition.tasks.get(decision.task)
    elif kind == "decision.preempted":
        task = partition.tasks.get(decision.preemptor)
    elif kind == "decision.admitted":
        task = partition.apps.get(decision.app)
    else:
        return None
    return task.submitted_at if task is not None else None


class _ReadingCollector(Collector):
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        now = self.metrics.now  # one reference: a scrape sees one reading whole
        pending = GaugeMetricFamily("preemptd_pending_tasks", "Tasks waiting for a node or admission", labels=["partition"])
        for partition, count in now.pending.items():
            pending.add_metric([partition], count)
        yield pending
        queues = {
            what: GaugeMetricFamily(f"preemptd_queue_{what}", f"A queue's {what} amount per resource (cpu in cores, memory in bytes)", labels=["partition", "queue", "resource"])
            for what in ("allocated", "guaranteed", "max", "pending")
        }
        for what, partition, queue, resource, amount in now.queues:
            queues[what].add_metric([partition, queue, resource], amount)
        yield from queues.values()
        for name, value, text in (
            ("preemptd_consumer_lag", now.lag, "Cluster stream messages for this daemon not yet committed to its log"),
            ("preemptd_outbox_waiting", now.waiting_decisions, "Decisions committed and not yet published"),
            ("preemptd_snapshot_age_seconds", now.snapshot_age, "Seconds since the newest snapshot was taken (or the daemon started)"),
        ):
            if value is not None:
                yield GaugeMetricFamily(name, text, value=value)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # scrapes are not news
        pass


class MetricsServer:
    """The HTTP server, in a thread of its own: it answers while the event loop is busy."""

    def __init__(self, address: tuple[str, int], metrics: Metrics, health: Health) -> None:
        host, port = address
        metrics_app = make_wsgi_app(metrics.registry)

        def app(environ, start_response):
            path = environ.get("PATH_INFO", "/")
            if path == "/healthz":
                return _text(start_response, "200 OK", "ok\n")
            if path == "/readyz":
                problems = health.problems()
                return _text(start_response, "503 Service Unavailable" if problems else "200 OK", "".join(f"{p}\n" for p in problems) or "ready\n")
            return metrics_app(environ, start_response)

        server_class = type("Server", (ThreadingWSGIServer,), {"address_family": _family(host)})
        try:
            self._server = make_server(host, port, app, server_class, handler_class=_Quiet)
        except OSError as exc:
            raise UsageError(f"--metrics-addr {host}:{port}: cannot listen there: {exc.strerror or exc}") from None
        self.url = f"http://{_bracketed(host)}:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)

    def __enter__(self) -> MetricsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _text(start_response, status: str, body: str) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
    return [body.encode()]


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
