"""Operating the daemon: metrics and health endpoints, as Prometheus and a load balancer see
them, against a real daemon process, nats-server and log."""

from __future__ import annotations

import itertools
import json
import socket
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import anyio
import pytest
from conftest import ROOT, preemptd
from prometheus_client.parser import text_string_to_metric_families
from test_daemon import count, event, publish, read, wait_for

from preemptd.daemon.bus import Reader
from preemptd.daemon.bus.embedded import EmbeddedNats, free_port
from preemptd.daemon.errors import UsageError
from preemptd.daemon.operations.metrics import READY_LAG, Health, Metrics, MetricsServer, Reading, listen_address, reading
from preemptd.daemon.position import _check_claims
from preemptd.daemon.records import DECISION_STREAM, Outbound, cluster_subject


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and labels."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(text) for s in family.samples}


def eventually(url: str, check, timeout: float = 30.0):
    """Scrape `url` until `check(samples)` holds; the last samples."""
    deadline = time.monotonic() + timeout
    while True:
        status, body = get(url)
        found = samples(body) if status == 200 else {}
        if check(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


@pytest.mark.slow
def test_metrics_count_events_dead_letters_and_decisions_and_show_each_queue(nats_server: EmbeddedNats, daemon_factory) -> None:
    port = free_port()
    daemon = daemon_factory("--nats-url", nats_server.url, "--metrics-addr", str(port)).start()
    base = f"http://127.0.0.1:{port}"
    assert get(f"{base}/healthz") == (200, "ok\n")
    messages = [event("node.upserted", "n1", node="n1", capacity={"vcore": 4, "memory": "8Gi"})]
    messages += [event("task.submitted", f"e{i}", task=f"t{i}", app="a", queue="root.default", resources={"vcore": 1, "memory": "1Gi"}) for i in range(6)]
    messages += [Outbound("preemptd.cluster.default.task", b"{not json", "bad-1"), event("task.released", "ghost", task="nobody")]
    anyio.run(publish, nats_server.url, messages)

    queue = (("partition", "default"), ("queue", "root.default"))

    def settled(found) -> bool:  # the gauges are measured once a second, the counters at once
        allocations = found.get(("preemptd_decisions_total", (("model", "yunikorn"), ("partition", "default"), ("type", "allocated"))))
        return (
            allocations == 4
            and found.get(("preemptd_queue_allocated", (*queue, ("resource", "vcore")))) == 4
            and found.get(("preemptd_outbox_waiting", ())) == 0
        )

    found = eventually(f"{base}/metrics", settled)
    assert settled(found), sorted(k for k in found if k[0].startswith(("preemptd_decisions", "preemptd_queue")))
    assert found[("preemptd_events_ingested_total", (("partition", "default"), ("type", "node.upserted")))] == 1
    assert found[("preemptd_events_ingested_total", (("partition", "default"), ("type", "task.submitted")))] == 6
    assert found[("preemptd_dead_letters_total", (("reason", "undecodable"),))] == 1
    assert found[("preemptd_dead_letters_total", (("reason", "rejected"),))] == 1, "a release of an unknown task"
    assert found[("preemptd_queue_allocated", (*queue, ("resource", "vcore")))] == 4, "four tasks of one core (in cores)"
    assert found[("preemptd_queue_allocated", (*queue, ("resource", "memory")))] == 4 * 2**30, "in bytes"
    assert found[("preemptd_queue_pending", (*queue, ("resource", "vcore")))] == 2, "two tasks do not fit"
    assert found[("preemptd_pending_tasks", (("partition", "default"),))] == 2
    assert found[("preemptd_decision_latency_seconds_count", (("partition", "default"), ("type", "allocated")))] == 4
    assert found[("preemptd_cycle_duration_seconds_count", (("partition", "default"),))] >= 1
    assert found[("preemptd_consumer_lag", ())] == 0
    assert 0 <= found[("preemptd_snapshot_age_seconds", ())] < 60
    assert 20_000 < found[("preemptd_log_bytes", ())] < 10_000_000, "the live log's pages in use"
    assert get(f"{base}/readyz") == (200, "ready\n")
    assert daemon.stop() == 0


@pytest.mark.slow
def test_idle_connections_to_the_metrics_port_starve_neither_healthz_nor_decisions(nats_server: EmbeddedNats, daemon_factory) -> None:
    """1,016 idle connections took a thread and a descriptor each, with no timeout: the daemon
    reached its descriptor limit, /healthz stopped answering and decisions stopped coming."""
    port = free_port()
    daemon = daemon_factory("--nats-url", nats_server.url, "--metrics-addr", str(port)).start()
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(1100)]
    try:
        started = time.monotonic()
        assert get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        anyio.run(
            publish,
            nats_server.url,
            [
                event("node.upserted", "n1", node="n1", capacity={"vcore": 1}),
                event("task.submitted", "p1", task="probe", app="a", queue="root.default", resources={"vcore": 1}),
            ],
        )
        [decision] = daemon.decisions(1)
        assert decision["task"] == "probe" and time.monotonic() - started < 10
        open_files = len(list(Path(f"/proc/{daemon.process.pid}/fd").iterdir()))
        assert open_files < 200, f"the daemon holds {open_files} descriptors: idle clients are not capped"
    finally:
        for connection in idle:
            connection.close()
    assert daemon.stop() == 0


@pytest.mark.slow
def test_a_metrics_address_in_use_is_a_one_line_refusal(nats_server: EmbeddedNats, daemon_factory) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        daemon = daemon_factory("--nats-url", nats_server.url, "--metrics-addr", f"127.0.0.1:{taken.getsockname()[1]}")
        with pytest.raises(RuntimeError, match="did not start"):
            daemon.start()
    assert "cannot listen there: Address already in use" in daemon.log_text()


def test_readiness_says_what_it_waits_for() -> None:
    health = Health()
    assert health.problems() == ["rebuilding the state from the log", "not connected to NATS", "consumer lag not measured yet"]
    health.rebuilt, health.connected, health.lag = True, True, READY_LAG + 1
    assert health.problems() == [f"{READY_LAG + 1} cluster messages wait to be committed (ready at {READY_LAG} or fewer)"]
    health.lag = READY_LAG
    assert health.problems() == []
    health.standby = "preemptd pid 7 on host-a"
    assert health.problems() == ["standby: waiting for the writer's lease, held by preemptd pid 7 on host-a"]


@pytest.mark.parametrize(
    ("text", "address"),
    [("9464", ("127.0.0.1", 9464)), ("0.0.0.0:9464", ("0.0.0.0", 9464)), ("[::1]:9464", ("::1", 9464)), ("localhost:0", ("localhost", 0))],
)
def test_a_metrics_address_is_host_and_port_or_a_loopback_port(text: str, address: tuple[str, int]) -> None:
    assert listen_address(text) == address


@pytest.mark.parametrize("text", ["", "host:", "host:http", "1:70000", ":9464"])
def test_a_wrong_metrics_address_says_what_is_expected(text: str) -> None:
    with pytest.raises(UsageError, match="expected HOST:PORT or PORT"):
        listen_address(text)


# -- partitions across daemons -------------------------------------------------------------------


def reader(name: str, partitions: tuple[str, ...] | None, active: bool = True) -> Reader:
    return Reader(name, partitions, active, acknowledged=0)


def test_a_partition_read_by_another_running_daemon_is_refused() -> None:
    with pytest.raises(UsageError, match=r"partition b is read by another running daemon \(consumer preemptd-x of PREEMPTD_CLUSTER, partitions b,c\)"):
        _check_claims([reader("preemptd-mine", ("a", "b")), reader("preemptd-x", ("b", "c"))], "preemptd-mine", ("a", "b"))
    with pytest.raises(UsageError, match="partition a, b is read by another running daemon .* every partition"):
        _check_claims([reader("preemptd-x", None)], "preemptd-mine", ("a", "b"))


def test_a_partition_of_a_stopped_daemon_or_another_partition_is_not_refused() -> None:
    _check_claims([reader("preemptd-x", ("b",), active=False), reader("preemptd-y", ("c",))], "preemptd-mine", ("a", "b"))
    _check_claims([reader("preemptd-x", ("b",))], "preemptd-mine", None)  # every partition: warned about, as before


def partition_events(partition: str, tasks: int) -> list[Outbound]:
    def message(kind: str, event_id: str, **fields: object) -> Outbound:
        body = {"type": kind, "id": f"{partition}-{event_id}", "ts": 1, "partition": partition, **fields}
        return Outbound(cluster_subject(partition, kind), json.dumps(body).encode(), f"{partition}-{event_id}")

    out = [message("node.upserted", "node", node=f"{partition}-n1", capacity={"vcore": 100})]
    return out + [message("task.submitted", f"t{i}", task=f"t{i}", app="a", queue="root.default", resources={"vcore": 1}) for i in range(tasks)]


def logged_partitions(db: Path) -> Counter:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return Counter(partition for (partition,) in conn.execute("select partition from log where type = 'task.submitted'"))


@pytest.mark.slow
def test_two_daemons_split_three_partitions_of_one_nats(nats_server: EmbeddedNats, daemon_factory, tmp_path: Path) -> None:
    first = daemon_factory("--nats-url", nats_server.url, "--partitions", "a,b", state_dir=tmp_path / "first").start()
    second = daemon_factory("--nats-url", nats_server.url, "--partitions", "c", state_dir=tmp_path / "second").start()
    interleaved = [m for trio in itertools.zip_longest(partition_events("a", 40), partition_events("b", 20), partition_events("c", 10)) for m in trio if m]
    anyio.run(publish, nats_server.url, interleaved)
    wait_for(lambda: count(first.state_dir / "preemptd.db", "log where type = 'decision.allocated'") == 60, what="a's and b's tasks allocated")
    wait_for(lambda: count(second.state_dir / "preemptd.db", "log where type = 'decision.allocated'") == 10, what="c's tasks allocated")
    assert logged_partitions(first.state_dir / "preemptd.db") == {"a": 40, "b": 20}, "only its partitions, every event of them"
    assert logged_partitions(second.state_dir / "preemptd.db") == {"c": 10}
    decisions = [json.loads(data) for data, _ in anyio.run(read, nats_server.url, DECISION_STREAM, "preemptd.decisions.>")]
    assert Counter(d["partition"] for d in decisions if d["type"] == "decision.allocated") == {"a": 40, "b": 20, "c": 10}, "each decided once"
    assert len({d["id"] for d in decisions}) == len(decisions)

    third = daemon_factory("--nats-url", nats_server.url, "--partitions", "b,c", state_dir=tmp_path / "third")
    with pytest.raises(RuntimeError, match="did not start"):
        third.start()
    assert "partition b is read by another running daemon" in third.log_text()

    assert first.stop() == 0
    narrower = daemon_factory("--nats-url", nats_server.url, "--partitions", "a", state_dir=tmp_path / "first")
    with pytest.raises(RuntimeError, match="did not start"):
        narrower.start()
    assert "this log has read partitions a,b of this cluster stream, not partitions a" in narrower.log_text()

    events = tmp_path / "c.yaml"
    events.write_text("- {type: task.submitted, partition: c, task: late, app: a, queue: root.default, resources: {vcore: 1}}\n")
    verdict = preemptd("publish", str(events), "--timeout", "20", "--nats-url", nats_server.url)
    assert (verdict.returncode, verdict.stderr) == (0, "published 1 event: 1 accepted\n"), verdict.stdout + verdict.stderr


@pytest.mark.parametrize(
    ("partitions", "said"), [("a,a", "names a partition twice"), ("a,b.c", "'b.c' is not a partition name"), ("", "'' is not a partition name")]
)
def test_a_wrong_list_of_partitions_is_refused_before_anything_starts(partitions: str, said: str, tmp_path: Path) -> None:
    refused = preemptd("run", "--partitions", partitions, "--state-dir", str(tmp_path / "state"))
    assert refused.returncode == 2 and said in refused.stderr
    assert not (tmp_path / "state").exists()


def test_a_configuration_for_a_partition_the_daemon_does_not_read_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "queues.yaml"
    config.write_text("partitions:\n  - name: gpu\n    queues: [{name: root, queues: [{name: a}]}]\n")
    refused = preemptd("run", "--partitions", "cpu", "--config", str(config), "--state-dir", str(tmp_path / "state"))
    assert refused.returncode == 2 and "configures partition gpu, which this daemon does not read (--partitions cpu)" in refused.stderr
    assert not (tmp_path / "state").exists()


def test_the_queue_gauges_show_what_each_model_guarantees_a_queue() -> None:
    import msgspec

    from preemptd.daemon.operations.metrics import reading
    from preemptd.events import Scenario
    from preemptd.scheduling import simulate

    scenario = msgspec.yaml.decode((ROOT / "examples" / "kueue" / "reclaim-within-cohort.yaml").read_bytes(), type=Scenario)
    rows = reading(simulate(scenario).state, lag=0, waiting_decisions=0, snapshot_age=0).queues
    assert ("guaranteed", "default", "svc-a", "cpu in default-flavor", 4.0) in rows, "a ClusterQueue's nominal quota per flavor, in cores"
    assert ("allocated", "default", "svc-b", "cpu in default-flavor", 8.0) in rows


def test_the_per_queue_gauges_name_the_busiest_queues_and_sum_the_rest() -> None:
    """A tree of thousands of queues, or a publisher inventing partitions, made a scrape of
    590,010 series: the gauges name `QUEUE_SERIES` queues, those holding the most of their
    partition, and sum each partition's others as queue `(other)`."""
    from builders import config, fold_events, node, task

    from preemptd.daemon.operations.metrics import OTHER, QUEUE_SERIES

    leaves = [{"name": f"q{i:04}", "resources": {"guaranteed": {"vcore": 1}}} for i in range(2000)]
    busy = [task(f"t{i}", f"a{i}", f"root.q{i:04}") for i in range(1990, 2000)]
    state = fold_events(config(leaves), node("n1", vcore=100), *busy)
    now = reading(state, lag=0, waiting_decisions=0, snapshot_age=0)
    named = {queue for _, _, queue, _, _ in now.queues}
    assert len(named) == QUEUE_SERIES + 1 and OTHER in named
    assert {f"root.q{i:04}" for i in range(1990, 2000)} <= named, "the queues asking for the cluster are named"
    guaranteed = sum(amount for what, _, queue, _, amount in now.queues if what == "guaranteed" and queue not in ("root", OTHER))
    other = next(amount for what, _, queue, _, amount in now.queues if what == "guaranteed" and queue == OTHER)
    assert guaranteed + other == 2000, "every leaf counted once, by name or in (other)"


def test_scrapers_in_a_loop_starve_neither_health_nor_the_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    """96 clients scraping /metrics in a loop left /healthz answering 1 try in 52 (a liveness
    probe would restart a healthy daemon) and rendered the exposition back to back. Health has
    connections of its own; the exposition is rendered at most once a second and shared; a
    client beyond its budget is told so at once."""
    from preemptd.daemon.operations import metrics as metrics_module

    renders = []
    render = metrics_module.generate_latest
    monkeypatch.setattr(metrics_module, "generate_latest", lambda registry: renders.append(1) or render(registry))
    health, seconds = Health(), 3.0
    health.rebuilt = health.connected = True
    health.lag = 0
    statuses: Counter = Counter()
    probes: list[int] = []
    with MetricsServer(("127.0.0.1", 0), Metrics(), health) as server:
        until = time.monotonic() + seconds

        def scrape() -> None:
            while time.monotonic() < until:
                try:
                    statuses[get(f"{server.url}/metrics")[0]] += 1
                except OSError:
                    statuses["refused"] += 1

        def probe() -> None:
            while time.monotonic() < until:
                probes.append(get(f"{server.url}/healthz")[0])
                time.sleep(0.05)

        threads = [threading.Thread(target=scrape) for _ in range(96)] + [threading.Thread(target=probe)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        took = time.monotonic() - started
    assert probes and set(probes) == {200}, f"every health probe answered: {Counter(probes)}"
    assert statuses[200] >= 1 and statuses[429] > statuses[200], statuses
    assert len(renders) <= took / metrics_module.EXPOSITION_EVERY + 1, f"{len(renders)} renders in {took:.1f} s"


def test_names_from_shims_reach_the_metrics_page_escaped() -> None:
    """A queue or resource name is free-form: raw ESC and U+202E reached /metrics, and whoever
    read the page in a terminal."""
    from prometheus_client import generate_latest

    metrics = Metrics()
    metrics.now = Reading(queues=(("allocated", "default", "root.\x1b[31mred", "gpu\u202eevil", 1.0),))
    page = generate_latest(metrics.registry).decode()
    assert "\x1b" not in page and "\u202e" not in page
    assert 'queue="root.\\\\x1b[31mred",resource="gpu\\\\u202eevil"' in page, [line for line in page.splitlines() if "red" in line]
