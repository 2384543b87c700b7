"""`preemptd run` as a process, against a real nats-server and a real SQLite file: the whole
path from a shim's events to decisions on the stream, bad input, a SIGKILL mid-stream and a NATS
restart. These are the slow tests."""

from __future__ import annotations

import datetime
import functools
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest
from conftest import ROOT, preemptd

from preemptd.daemon.bus import Bus
from preemptd.daemon.bus.embedded import EmbeddedNats
from preemptd.daemon.bus.streams import creation_stamp
from preemptd.daemon.errors import BusError
from preemptd.daemon.records import DECISION_STREAM, REJECTED_STREAM, Outbound, cluster_subject

pytestmark = pytest.mark.slow


def count(db: Path, where: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute(f"select count(*) from {where}").fetchone()[0]


def cluster_events(db: Path) -> int:
    return count(db, "log where type not like 'decision.%' and type != 'clock.ticked'")


def wait_for(condition, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def event(kind: str, event_id: str, msg_id: str | None = None, **fields: object) -> Outbound:
    """A message as a shim publishes it; `Nats-Msg-Id` is the event id unless told otherwise."""
    body = {"type": kind, "id": event_id, "ts": 1, **fields}
    return Outbound(cluster_subject("default", kind), json.dumps(body).encode(), msg_id or event_id)


async def publish(url: str, messages: list[Outbound], *, retry: bool = False) -> None:
    bus = await connect(url, retry=retry)
    try:
        await bus.streams.ensure()
        for start in range(0, len(messages), 500):
            chunk = messages[start : start + 500]
            while True:
                try:
                    await bus.publisher.publish(chunk)
                    break
                except BusError:
                    if not retry:
                        raise
                    await anyio.sleep(0.2)  # the same ids again: JetStream drops what already arrived
    finally:
        await bus.close()


async def connect(url: str, *, retry: bool) -> Bus:
    """Connect; with `retry`, wait for a server that is still starting (the probe refuses at once)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return await Bus.connect(url)
        except BusError:
            if not retry or time.monotonic() > deadline:
                raise
            await anyio.sleep(0.2)


async def read(url: str, stream: str, subject: str) -> list[tuple[bytes, dict[str, str]]]:
    bus = await Bus.connect(url)
    try:
        return await bus.streams.read_stream(stream, subject)
    finally:
        await bus.close()


def test_a_new_user_gets_decisions_on_the_embedded_defaults(daemon_factory, tmp_path: Path) -> None:
    daemon = daemon_factory().start()
    state = str(daemon.state_dir)
    events = tmp_path / "events.yaml"
    events.write_text(
        "- {type: node.upserted, node: n1, capacity: {vcore: 4, memory: 8Gi}}\n"
        "- {type: task.submitted, task: t1, app: a1, queue: root.default, resources: {vcore: 1, memory: 1Gi}}\n"
        "- {type: task.submitted, task: t2, app: a1, queue: root.default, resources: {vcore: '500m'}}\n"
    )
    published = preemptd("publish", str(events), "--state-dir", state)
    assert published.returncode == 0, published.stderr
    tail = preemptd("tail", "--json", "--from-start", "--count", "2", "--timeout", "30", "--state-dir", state)
    decisions = [json.loads(line) for line in tail.stdout.splitlines()]
    assert [(d["type"], d["task"], d["node"]) for d in decisions] == [("decision.allocated", "t1", "n1"), ("decision.allocated", "t2", "n1")]
    assert daemon.stop() == 0
    replay = preemptd("replay", "--db", str(daemon.state_dir / "preemptd.db"), "--quiet")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "all 2 decisions reproduced" in replay.stdout
    batches = [int(n) for n in re.findall(r"msg=batch events=(\d+)", daemon.log_text())]
    assert sum(batches) == 3 and "msg=cycle" in daemon.log_text(), "one log line per batch and per cycle"
    assert "connection lost" not in daemon.log_text(), "a clean stop is not an outage"


def test_malformed_input_becomes_dead_letters_and_the_daemon_carries_on(nats_server: EmbeddedNats, daemon_factory, tmp_path: Path) -> None:
    daemon = daemon_factory("--nats-url", nats_server.url).start()
    good = [event("node.upserted", "node", node="n1", capacity={"vcore": 100000})]
    good += [event("task.submitted", f"good-{i}", task=f"t{i}", app="a", queue="root.default", resources={"vcore": 1}) for i in range(999)]
    bad = []
    for i in range(200):
        bad.append(Outbound("preemptd.cluster.default.task", b'{"type": "task.submitted", "id": ', f"m{i}"))
        bad.append(event("task.exploded", f"u{i}"))
        bad.append(event("task.submitted", f"s{i}", task=f"s{i}", app="a", queue="root.default", resources={"vcore": "lots"}))
        bad.append(event("task.released", f"r{i}", task=f"ghost-{i}"))
        # a reused event id on a new message (JetStream's own de-duplication would hide a resend)
        bad.append(event("task.submitted", f"good-{i}", msg_id=f"dup-{i}", task=f"dup{i}", app="a", queue="root.default", resources={"vcore": 1}))
    mixed = [message for pair in zip(good, bad) for message in pair] + good[len(bad) :]
    anyio.run(publish, nats_server.url, mixed)
    db = daemon.state_dir / "preemptd.db"
    wait_for(lambda: cluster_events(db) + count(db, "dead_letters") >= 2000, what="every message committed")
    assert daemon.process.poll() is None, "the daemon stays up"
    assert cluster_events(db) == 1000 and count(db, "dead_letters") == 1000
    with sqlite3.connect(db) as conn:
        reasons = [r for (r,) in conn.execute("select reason from dead_letters")]
    kinds = Counter(
        "malformed"
        if r.startswith("malformed JSON")
        else "unknown type"
        if r.startswith("unknown event type 'task.exploded'")
        else "schema"
        if r.startswith("task.submitted: vcore: 'lots' is not a quantity")
        else "reference"
        if r.startswith("unknown task 'ghost-")
        else "duplicate"
        if r.startswith("duplicate id 'good-")
        else r
        for r in reasons
    )
    assert kinds == {"malformed": 200, "unknown type": 200, "schema": 200, "reference": 200, "duplicate": 200}
    notices = anyio.run(read, nats_server.url, REJECTED_STREAM, "preemptd.rejected.>")
    assert len(notices) == 1000 and "reason" in json.loads(notices[0][0])
    wait_for(lambda: count(db, "log where type = 'decision.allocated'") == 999, what="every valid task allocated")


def test_sigkill_while_publishing_loses_nothing_and_duplicates_nothing(nats_server: EmbeddedNats, daemon_factory) -> None:
    total = 50_000
    daemon = daemon_factory("--nats-url", nats_server.url, "--batch", "2000").start()
    messages = [event("node.upserted", f"node-{n}", node=f"n{n}", capacity={"vcore": 10_000}) for n in range(10)]
    messages += [
        event("task.submitted", f"task-{i}", task=f"t{i}", app=f"a{i % 50}", queue="root.default", resources={"vcore": "100m"}) for i in range(total - 10)
    ]
    db = daemon.state_dir / "preemptd.db"
    publisher = threading.Thread(target=anyio.run, args=(publish, nats_server.url, messages))
    publisher.start()
    wait_for(lambda: db.exists() and cluster_events(db) > 5000, what="the daemon to be busy")
    daemon.kill()
    killed_at = cluster_events(db)
    publisher.join()
    assert killed_at < total, "the daemon was killed while events were flowing"
    restarted = daemon_factory("--nats-url", nats_server.url, state_dir=daemon.state_dir).start()
    wait_for(lambda: cluster_events(db) == total, timeout=180, what="every event in the log")
    wait_for(lambda: count(db, "log where type = 'decision.allocated'") == total - 10, timeout=180, what="every task allocated")
    wait_for(lambda: count(db, "outbox where published_at is null") == 0, what="every decision published")
    with sqlite3.connect(db) as conn:
        ids = [i for (i,) in conn.execute("select event_id from log where type not like 'decision.%' and type != 'clock.ticked'")]
    assert len(ids) == len(set(ids)) == total
    stream = anyio.run(read, nats_server.url, DECISION_STREAM, "preemptd.decisions.>")
    decision_ids = [json.loads(data)["id"] for data, _ in stream]
    assert len(decision_ids) == total - 10 and len(set(decision_ids)) == len(decision_ids)
    assert restarted.stop() == 0


def test_a_nats_restart_while_events_flow_loses_nothing(tmp_path: Path, daemon_factory) -> None:
    total = 6000
    server = EmbeddedNats(tmp_path / "nats")
    server.start()
    daemon = daemon_factory("--nats-url", server.url).start()
    db = daemon.state_dir / "preemptd.db"
    messages = [event("node.upserted", "node", node="n1", capacity={"vcore": 100_000})]
    messages += [event("task.submitted", f"task-{i}", task=f"t{i}", app="a", queue="root.default", resources={"vcore": 1}) for i in range(total - 1)]
    publisher = threading.Thread(target=anyio.run, args=(_publish_slowly, server.url, messages))
    publisher.start()
    try:
        wait_for(lambda: cluster_events(db) > 500, what="events flowing")
        server.stop()
        time.sleep(1.0)
        server = EmbeddedNats(tmp_path / "nats", port=server.port)
        server.start()
        publisher.join(timeout=120)
        wait_for(lambda: cluster_events(db) == total, timeout=120, what="every event in the log after the restart")
        wait_for(lambda: count(db, "log where type = 'decision.allocated'") == total - 1, timeout=60, what="every task allocated")
        wait_for(lambda: count(db, "outbox where published_at is null") == 0, timeout=60, what="decisions published after the restart")
        assert daemon.process.poll() is None
        with sqlite3.connect(db) as conn:
            ids = [i for (i,) in conn.execute("select event_id from log where type not like 'decision.%' and type != 'clock.ticked'")]
        assert len(ids) == len(set(ids)) == total
        stream = anyio.run(read, server.url, DECISION_STREAM, "preemptd.decisions.>")
        decision_ids = [json.loads(data)["id"] for data, _ in stream]
        assert len(decision_ids) == len(set(decision_ids)) == total - 1
        assert "NATS connection lost; reconnecting" in daemon.log_text() and "NATS connection back" in daemon.log_text()
    finally:
        daemon.stop()
        server.stop()


async def _publish_slowly(url: str, messages: list[Outbound]) -> None:
    """A shim that keeps publishing through an outage: it retries with the same ids."""
    for start in range(0, len(messages), 100):
        deadline = time.monotonic() + 60
        while True:
            try:
                await publish(url, messages[start : start + 100])
                break
            except BusError:
                if time.monotonic() > deadline:
                    raise
                await anyio.sleep(0.2)
        await anyio.sleep(0.01)


QUEUES = """
partitions:
  - name: default
    placementrules: [{name: provided}]
    queues:
      - name: root
        queues:
          - {name: prod, resources: {guaranteed: {vcore: 4}}}
          - {name: dev}
"""


@pytest.mark.parametrize("between", [0.0, 0.005, 0.01, 0.02])
def test_a_second_ctrl_c_while_stopping_is_said_not_raised(between: float, daemon_factory) -> None:
    """The second SIGINT used to land in the embedded nats-server's stop as a KeyboardInterrupt:
    a traceback, and nats-server left to die with the process."""
    daemon = daemon_factory().start()
    daemon.process.send_signal(signal.SIGINT)
    time.sleep(between)
    daemon.process.send_signal(signal.SIGINT)
    assert daemon.process.wait(30) == 0
    assert "Traceback" not in daemon.log_text() and "msg=stopped" in daemon.log_text()


def test_run_applies_a_config_file_when_it_changes_and_stops_cleanly_on_sigint(nats_server: EmbeddedNats, daemon_factory, tmp_path: Path) -> None:
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    first = daemon_factory("--nats-url", nats_server.url, "--config", str(queues)).start()
    db = first.state_dir / "preemptd.db"
    first.process.send_signal(2)  # SIGINT, as Ctrl-C
    assert first.process.wait(30) == 0
    assert "ignored (not used by preemptd): partition default: placementrules" in first.log_text()
    assert 'runs="yunikorn: 3 queues (2 leaves); preemption on, at most 100 victims and 10% of the cluster a cycle"' in first.log_text(), (
        "the log says what runs"
    )
    assert "msg=stopped" in first.log_text()
    assert count(db, "log where type = 'config.applied'") == 1
    daemon_factory("--nats-url", nats_server.url, "--config", str(queues), state_dir=first.state_dir).start().stop()
    assert count(db, "log where type = 'config.applied'") == 1, "the same file again changes nothing"
    queues.write_text(QUEUES.replace("vcore: 4", "vcore: 6"))
    daemon_factory("--nats-url", nats_server.url, "--config", str(queues), state_dir=first.state_dir).start().stop()
    assert count(db, "log where type = 'config.applied'") == 2
    state = json.loads(preemptd("state", "--db", str(db), "--json").stdout)
    assert state["queues"]["root.prod"]["guaranteed"] == {"vcore": 6}
    queues.write_text(QUEUES.replace("{name: dev}", "{name: dev, resources: {max: {vcore: 1}, guaranteed: {vcore: 2}}}"))
    refused = run_with_config(first.state_dir, nats_server.url, queues)
    assert refused.returncode == 2 and "guaranteed vcore 2 is above its own max (1)" in refused.stderr


def run_with_config(state_dir: Path, url: str, queues: Path):
    """`preemptd run` in the foreground, for a start that is expected to fail."""
    return preemptd("run", "--state-dir", str(state_dir), "--nats-url", url, "--config", str(queues), timeout=60)


def test_publish_reads_json_lines_from_stdin_and_a_wrong_subject_is_a_dead_letter(nats_server: EmbeddedNats, daemon_factory) -> None:
    daemon = daemon_factory("--nats-url", nats_server.url).start()
    lines = "\n".join(
        json.dumps(e)
        for e in [
            {"type": "node.upserted", "node": "n1", "capacity": {"vcore": 2}},
            {"type": "node.upserted", "node": "n2", "partition": "gpu", "capacity": {"vcore": 2}},
        ]
    )
    published = preemptd("publish", "-", "--nats-url", nats_server.url, input=lines)
    assert published.returncode == 0 and "published 2 events" in published.stderr
    anyio.run(publish, nats_server.url, [Outbound("preemptd.cluster.gpu.node", b'{"type":"node.removed","id":"x","ts":1,"node":"n2"}', "x")])
    db = daemon.state_dir / "preemptd.db"
    with sqlite3.connect(db) as conn:
        (log_id,) = conn.execute("select value from meta where key = 'log_id'").fetchone()
    anyio.run(publish, nats_server.url, [event("node.removed", f"{log_id}:99", node="n1")])
    wait_for(lambda: cluster_events(db) + count(db, "dead_letters") == 4, what="four messages handled")
    listed = preemptd("dead-letters", "--db", str(db))
    assert "published on preemptd.cluster.gpu.node but the event's partition is 'default': publish it on preemptd.cluster.default.node" in listed.stdout
    assert f"event ids starting with '{log_id}:' are reserved for the daemon" in listed.stdout
    state = json.loads(preemptd("state", "--db", str(db), "--partition", "gpu", "--json").stdout)
    assert list(state["nodes"]) == ["n2"], "the gpu partition kept its node"


async def _delete(url: str, sequences: range) -> None:
    import nats

    nc = await nats.connect(url)
    try:
        for seq in sequences:
            await nc.jetstream().delete_msg("PREEMPTD_CLUSTER", seq)
    finally:
        await nc.close()


def test_messages_gone_from_the_stream_are_skipped_and_reported(nats_server: EmbeddedNats, daemon_factory) -> None:
    """Expired or deleted messages leave a hole in the stream: the daemon reads up to it,
    resumes right there, sees the hole is real, says so, and goes on."""
    messages = [event("node.upserted", f"node-{i}", node=f"n{i}", capacity={"vcore": 1}) for i in range(100)]
    anyio.run(publish, nats_server.url, messages)
    anyio.run(_delete, nats_server.url, range(10, 20))
    daemon = daemon_factory("--nats-url", nats_server.url, "--batch", "50").start()
    db = daemon.state_dir / "preemptd.db"
    wait_for(lambda: cluster_events(db) == 90, what="the 90 remaining events")
    assert "messages gone from the stream before they were read" in daemon.log_text()
    assert "missing=10" in daemon.log_text()
    with sqlite3.connect(db) as conn:
        ids = {i for (i,) in conn.execute("select event_id from log")}
    # stream sequences 10 to 19 held node-9 to node-18
    assert "node-8" in ids and "node-19" in ids and not any(f"node-{i}" in ids for i in range(9, 19))


def embedded_servers(state_dir: Path) -> list[int]:
    """Pids of nats-servers running on this state directory's JetStream data."""
    jetstream = str((state_dir / "nats" / "jetstream").resolve()).encode()
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and command[0].endswith(b"nats-server") and jetstream in command:
            pids.append(int(proc.name))
    return pids


def test_a_killed_daemons_nats_server_is_stopped_and_its_port_kept_at_the_next_start(daemon_factory) -> None:
    first = daemon_factory().start()
    [orphan] = embedded_servers(first.state_dir)
    first.kill()
    assert embedded_servers(first.state_dir) == [orphan], "SIGKILL leaves the embedded server behind"
    second = daemon_factory(state_dir=first.state_dir).start()
    assert second.url == first.url, "shims and tails that kept the URL find the daemon again"
    assert orphan not in embedded_servers(first.state_dir), "never two servers on one JetStream directory"
    assert "stopping a nats-server an earlier daemon left running" in second.log_text()
    assert second.stop() == 0
    assert embedded_servers(first.state_dir) == []


def test_a_port_in_use_is_refused_rather_than_joining_the_server_there(nats_server: EmbeddedNats, tmp_path: Path) -> None:
    result = preemptd("run", "--state-dir", str(tmp_path / "state"), "--nats-port", str(nats_server.port), timeout=60)
    assert result.returncode == 2
    assert f"port {nats_server.port} on 127.0.0.1 is in use" in result.stderr and "Traceback" not in result.stderr
    assert embedded_servers(tmp_path / "state") == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_during_start_up_stops_cleanly(tmp_path: Path, signum: int) -> None:
    """The daemon is held in start-up by a NATS that accepts the connection and never answers;
    a stop signal then still ends it cleanly (before, SIGTERM killed it and SIGINT was lost)."""
    log_path = tmp_path / "daemon.log"
    with socket.socket() as silent, log_path.open("wb") as log_file:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"nats://127.0.0.1:{silent.getsockname()[1]}"
        command = [sys.executable, "-m", "preemptd.daemon.cli", "run", "--state-dir", str(tmp_path / "state"), "--nats-url", url]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log_file, cwd=ROOT)
        wait_for(lambda: "state rebuilt" in log_path.read_text(), what="start-up under way")
        time.sleep(0.5)  # connecting to the silent server
        process.send_signal(signum)
        assert process.wait(30) == 0
    text = log_path.read_text()
    assert "msg=stopping" in text and "msg=stopped" in text and "Traceback" not in text
    assert "msg=listening" not in text, "stopped during start-up"


def tasks(count_: int, prefix: str = "t") -> list[Outbound]:
    messages = [event("node.upserted", f"{prefix}-node", node=f"{prefix}-n1", capacity={"vcore": 1_000_000})]
    return messages + [
        event("task.submitted", f"{prefix}-{i}", task=f"{prefix}{i}", app="a", queue="root.default", resources={"vcore": "10m"}) for i in range(count_ - 1)
    ]


def test_two_daemons_on_one_nats_each_read_every_event(nats_server: EmbeddedNats, daemon_factory, tmp_path: Path) -> None:
    first = daemon_factory("--nats-url", nats_server.url, state_dir=tmp_path / "first").start()
    second = daemon_factory("--nats-url", nats_server.url, state_dir=tmp_path / "second").start()
    anyio.run(publish, nats_server.url, tasks(3000))
    for daemon in (first, second):
        db = daemon.state_dir / "preemptd.db"
        wait_for(lambda db=db: cluster_events(db) == 3000, what=f"every event in {daemon.state_dir.name}'s log")
        assert count(db, "dead_letters") == 0
    assert "other preemptd logs consume the cluster stream of this NATS" in second.log_text()


def test_a_daemon_moved_between_nats_servers_reads_each_stream_once(daemon_factory, tmp_path: Path) -> None:
    """Positions are per stream: a longer stream elsewhere is read from its start (not from this
    log's position in another stream), and coming back resumes where the log left off."""
    with EmbeddedNats(tmp_path / "nats-1") as first, EmbeddedNats(tmp_path / "nats-2") as second:
        anyio.run(publish, second.url, tasks(300, "second"))  # a longer stream, already there
        daemon = daemon_factory("--nats-url", first.url).start()
        anyio.run(publish, first.url, tasks(100, "first"))
        db = daemon.state_dir / "preemptd.db"
        wait_for(lambda: cluster_events(db) == 100, what="the first stream read")
        assert daemon.stop() == 0
        moved = daemon_factory("--nats-url", second.url, state_dir=daemon.state_dir).start()
        wait_for(lambda: cluster_events(db) == 400, what="all of the second stream read")
        assert "this log has not read this cluster stream before" in moved.log_text()
        assert moved.stop() == 0
        back = daemon_factory("--nats-url", first.url, state_dir=daemon.state_dir).start()
        anyio.run(publish, first.url, tasks(10, "again"))
        wait_for(lambda: cluster_events(db) == 410, what="the new events on the first stream")
        assert back.stop() == 0
        assert count(db, "dead_letters") == 0, "nothing read twice"


def test_a_stop_leaves_no_decision_on_the_stream_unmarked_in_the_outbox(nats_server: EmbeddedNats, daemon_factory) -> None:
    daemon = daemon_factory("--nats-url", nats_server.url).start()
    db = daemon.state_dir / "preemptd.db"
    anyio.run(publish, nats_server.url, tasks(30_000))
    wait_for(lambda: count(db, "outbox where published_at is not null") > 0, what="decisions being published")
    assert daemon.stop() == 0
    stream = anyio.run(read, nats_server.url, DECISION_STREAM, "preemptd.decisions.>")
    on_stream = {json.loads(data)["id"] for data, _ in stream}
    with sqlite3.connect(db) as conn:
        unmarked = {i for (i,) in conn.execute("select decision_id from outbox where published_at is null")}
    assert on_stream and not on_stream & unmarked, "a restart would publish these again"


def test_an_embedded_server_that_dies_is_started_again_and_nothing_is_lost(daemon_factory, tmp_path: Path) -> None:
    daemon = daemon_factory().start()
    db = daemon.state_dir / "preemptd.db"
    anyio.run(publish, daemon.url, tasks(100, "before"))
    wait_for(lambda: cluster_events(db) == 100, what="the first events")
    [server] = embedded_servers(daemon.state_dir)
    os.kill(server, signal.SIGKILL)
    wait_for(lambda: embedded_servers(daemon.state_dir) not in ([], [server]), what="a new embedded server")
    anyio.run(functools.partial(publish, retry=True), daemon.url, tasks(100, "after"))
    wait_for(lambda: cluster_events(db) == 200, what="the events published after the restart")
    assert "the embedded nats-server exited; starting it again" in daemon.log_text()
    assert daemon.stop() == 0


def test_a_log_from_before_positions_per_stream_keeps_its_place(nats_server: EmbeddedNats, daemon_factory) -> None:
    daemon = daemon_factory("--nats-url", nats_server.url).start()
    anyio.run(publish, nats_server.url, tasks(50, "old"))
    db = daemon.state_dir / "preemptd.db"
    wait_for(lambda: cluster_events(db) == 50, what="the events read")
    assert daemon.stop() == 0
    with sqlite3.connect(db) as conn:  # the position as an earlier version named it
        conn.execute("update tracking set source = 'PREEMPTD_CLUSTER/preemptd'")
    partitioned = daemon_factory("--nats-url", nats_server.url, "--partitions", "default", state_dir=daemon.state_dir)
    with pytest.raises(RuntimeError, match="did not start"):
        partitioned.start()
    assert "this log has read every partition of this cluster stream, not partitions default" in partitioned.log_text()
    upgraded = daemon_factory("--nats-url", nats_server.url, state_dir=daemon.state_dir).start()
    anyio.run(publish, nats_server.url, tasks(5, "new"))
    wait_for(lambda: cluster_events(db) == 55, what="the new events")
    assert upgraded.stop() == 0
    assert count(db, "dead_letters") == 0, "the stream was not read again"


def test_two_daemons_cannot_share_an_embedded_servers_data(daemon_factory, tmp_path: Path) -> None:
    first = daemon_factory("--db", str(tmp_path / "first.db")).start()
    [server] = embedded_servers(first.state_dir)
    second = preemptd("run", "--state-dir", str(first.state_dir), "--db", str(tmp_path / "second.db"), timeout=60)
    assert second.returncode == 2 and "another preemptd's embedded nats-server uses" in second.stderr
    assert embedded_servers(first.state_dir) == [server], "the first daemon's server is left alone"
    assert first.stop() == 0


@pytest.mark.parametrize(
    "created",
    ["2026-11-21T11:57:27.345123456Z", "2026-11-21T11:57:27.345123Z", datetime.datetime(2026, 11, 21, 11, 57, 27, 345123, tzinfo=datetime.timezone.utc)],
)
def test_a_streams_creation_time_names_it_the_same_whatever_the_clients_form(created) -> None:
    """nats-py gives the time as text (older) or a datetime (newer): one stream, one name; and
    two streams created in the same second keep apart."""
    assert creation_stamp(created) == "2026-11-21T11:57:27.345123Z"
    assert creation_stamp("2026-11-21T11:57:27.9Z") != creation_stamp(created)


def test_a_log_locked_by_another_process_is_waited_for_and_said_not_a_crash(nats_server: EmbeddedNats, daemon_factory) -> None:
    """Another process holding the SQLite log's lock past its busy timeout made the daemon die
    with a 150-line traceback; now it waits, says so every few seconds, and goes on."""
    daemon = daemon_factory("--nats-url", nats_server.url).start()
    db = daemon.state_dir / "preemptd.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        anyio.run(publish, nats_server.url, [event("node.upserted", "n1", node="n1", capacity={"vcore": 1})])
        wait_for(lambda: "waiting for the log: another process holds its lock" in daemon.log_text(), timeout=30, what="the wait said")
    finally:
        holder.execute("COMMIT")
        holder.close()
    wait_for(lambda: count(db, "log where type = 'node.upserted'") == 1, what="the event written once the lock is gone")
    assert "Traceback" not in daemon.log_text()
    assert daemon.stop() == 0
    before = len(daemon.log_text())  # the second daemon's log follows the first's in the same file
    again = daemon_factory("--nats-url", nats_server.url, state_dir=daemon.state_dir).start()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        anyio.run(publish, nats_server.url, [event("node.upserted", "n2", node="n2", capacity={"vcore": 1})])
        wait_for(lambda: "waiting for the log: another process holds its lock" in again.log_text()[before:], timeout=30, what="the second wait said")
        again.process.send_signal(signal.SIGTERM)
        assert again.process.wait(30) != 0, "a stop ends the wait: the daemon does not hang on the lock"
        assert "stopping while another process holds the lock of the log" in again.log_text()[before:]
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert count(db, "log where type = 'node.upserted'") == 1, "nothing more written; the event comes again at the next start"
