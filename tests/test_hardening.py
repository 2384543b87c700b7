"""Bad input never stops the daemon or its decisions: the inputs that did, on a real nats-server.

- A message nested 100,000 levels deep among valid events (it crash-looped the daemon).
- Absurd quantities, then a stop and a restart (every snapshot failed, and the daemon with it).
- A task naming 70,000 resources, then an ordinary task whose decision must arrive.
- Decisions larger than the server's max_payload: sent shortened, or passed over when nothing
  fits, and the decisions after them flow (one such decision held up all others forever).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import pytest
from conftest import preemptd
from test_daemon import count, event, publish, read, wait_for

from preemptd.daemon.embedded import EmbeddedNats
from preemptd.daemon.nats_source import DECISION_STREAM, Outbound, cluster_subject

pytestmark = pytest.mark.slow


def raw_message(kind: str, body: bytes, msg_id: str) -> Outbound:
    return Outbound(cluster_subject("default", kind), body, msg_id)


def reasons(db: Path) -> list[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return [reason for (reason,) in conn.execute("select reason from dead_letters order by id")]


def allocated(db: Path, task: str) -> bool:
    return count(db, f"log where type = 'decision.allocated' and cast(payload as text) like '%\"task\":\"{task}\"%'") == 1


def test_a_message_nested_100000_deep_is_a_dead_letter_and_the_events_around_it_go_on(nats_server: EmbeddedNats, daemon_factory) -> None:
    daemon = daemon_factory("--nats-url", nats_server.url).start()
    poison = b'{"type": "task.submitted", "id": "poison", "ts": 1, "extra": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    messages = [
        event("node.upserted", "n1", node="n1", capacity={"vcore": 8}),
        event("task.submitted", "before", task="before", app="a", queue="root.default", resources={"vcore": 1}),
        raw_message("task", poison, "poison"),
        event("task.submitted", "after", task="after", app="a", queue="root.default", resources={"vcore": 1}),
    ]
    anyio.run(publish, nats_server.url, messages)
    db = daemon.state_dir / "preemptd.db"
    wait_for(lambda: db.exists() and allocated(db, "before") and allocated(db, "after"), what="the tasks around the poison allocated")
    assert reasons(db) == ["objects and arrays nested 100,001 levels deep; the limit is 64"]
    assert daemon.stop() == 0
    restarted = daemon_factory("--nats-url", nats_server.url, state_dir=daemon.state_dir).start()
    anyio.run(publish, nats_server.url, [event("task.submitted", "later", task="later", app="a", queue="root.default", resources={"vcore": 1})])
    wait_for(lambda: allocated(db, "later"), what="a task after a restart allocated: no crash loop")
    assert reasons(db) == ["objects and arrays nested 100,001 levels deep; the limit is 64"], "the poison is not read again"
    assert restarted.stop() == 0


def test_absurd_quantities_are_dead_letters_and_the_daemon_stops_and_starts_cleanly(nats_server: EmbeddedNats, daemon_factory) -> None:
    daemon = daemon_factory("--nats-url", nats_server.url).start()
    absurd = {"a": {"memory": "1e30"}, "b": {"memory": "1e400"}, "c": {"vcore": "1e18"}, "d": {"memory": "16Ei"}}
    messages = [event("node.upserted", name, node=name, capacity=capacity) for name, capacity in absurd.items()]
    messages += [event("node.upserted", "n1", node="n1", capacity={"vcore": 8}), event("task.submitted", "t1", task="t1", app="a", queue="root.default", resources={"vcore": 1})]
    anyio.run(publish, nats_server.url, messages)
    db = daemon.state_dir / "preemptd.db"
    wait_for(lambda: db.exists() and allocated(db, "t1"), what="the valid task allocated")
    assert [r.split(" is ")[0] for r in reasons(db)] == ["node.upserted: memory: '1e30'", "node.upserted: memory: '1e400'", "node.upserted: vcore: '1e18'", "node.upserted: memory: '16Ei'"]
    assert all("the limit is 1,152,921,504,606,846,976 (2^60)" in r for r in reasons(db))
    assert daemon.stop() == 0, "the shutdown snapshot is taken"
    assert count(db, "snapshots") == 1
    restarted = daemon_factory("--nats-url", nats_server.url, "--snapshot-every", "1", state_dir=daemon.state_dir).start()
    anyio.run(publish, nats_server.url, [event("task.submitted", "t2", task="t2", app="a", queue="root.default", resources={"vcore": 1})])
    wait_for(lambda: allocated(db, "t2") and count(db, "snapshots") >= 2, what="a task allocated and a periodic snapshot taken after the restart")
    assert restarted.stop() == 0


def test_a_task_naming_70000_resources_does_not_hold_up_the_next_decision(nats_server: EmbeddedNats, daemon_factory) -> None:
    daemon = daemon_factory("--nats-url", nats_server.url).start()
    many = {f"r{i}": 1 for i in range(70_000)}
    huge = event("task.submitted", "huge", task="huge", app="a", queue="root.default", resources=many)
    assert 800_000 < len(huge.data) < 1_000_000, "under NATS's 1 MB limit"
    ordinary = event("task.submitted", "ordinary", task="ordinary", app="a", queue="root.default", resources={"vcore": 1})
    anyio.run(publish, nats_server.url, [event("node.upserted", "n1", node="n1", capacity={"vcore": 8}), huge, ordinary])
    db = daemon.state_dir / "preemptd.db"
    wait_for(lambda: db.exists() and count(db, "outbox where published_at is not null") >= 1, what="a decision published")
    assert reasons(db) == ["task.submitted: 70,000 resource names; the limit is 64 - at `$.resources`"]
    decisions = [json.loads(data) for data, _ in anyio.run(read, nats_server.url, DECISION_STREAM, "preemptd.decisions.>")]
    assert [(d["type"], d["task"]) for d in decisions] == [("decision.allocated", "ordinary")]


def small_payload_server(tmp_path: Path, max_payload: int) -> EmbeddedNats:
    conf = tmp_path / "server.conf"
    conf.write_text(f"max_payload: {max_payload}\n")
    return EmbeddedNats(tmp_path / "nats", options=["-c", str(conf)])


def test_decisions_beyond_the_servers_max_payload_are_shortened_or_passed_over_and_the_rest_flow(tmp_path: Path, daemon_factory) -> None:
    """Two preemptions: one of 60 victims fits 16 kB once its victims' whys are cut; one of 100
    victims does not fit even cut (every victim must stay), so it is passed over. An allocation
    after them is published all the same."""
    config = {
        "queues": [
            {
                "name": "root",
                "properties": {"preemption.delay": "1s"},
                "queues": [{"name": "a", "resources": {"guaranteed": {"vcore": 100}}}, {"name": "c", "resources": {"guaranteed": {"vcore": 60}}}, {"name": "b"}],
            }
        ]
    }
    with small_payload_server(tmp_path, 16_384) as server:
        daemon = daemon_factory("--nats-url", server.url).start()
        setup = [event("config.applied", "config", config=config), event("node.upserted", "n1", node="n1", capacity={"vcore": 100})]
        setup += [event("node.upserted", "n2", node="n2", capacity={"vcore": 60})]
        setup += [event("task.bound", f"b{i}", task=f"b{i}", app=f"b{i}", queue="root.b", node="n1" if i < 100 else "n2", resources={"vcore": 1}) for i in range(160)]
        setup += [event("task.submitted", "a-1", task="a-1", app="a", queue="root.a", resources={"vcore": 100})]
        setup += [event("task.submitted", "c-1", task="c-1", app="c", queue="root.c", resources={"vcore": 60})]
        anyio.run(publish, server.url, setup)
        db = daemon.state_dir / "preemptd.db"
        wait_for(lambda: db.exists() and count(db, "log where type = 'decision.preempted'") == 2, what="both preemptions decided")
        anyio.run(publish, server.url, [event("node.upserted", "n3", node="n3", capacity={"vcore": 8}), event("task.submitted", "d-1", task="d-1", app="d", queue="root.b", resources={"vcore": 1})])
        wait_for(lambda: count(db, "outbox where published_at is not null") == 1 + 1, what="the cut preemption and the later allocation published")
        published = [json.loads(data) for data, _ in anyio.run(read, server.url, DECISION_STREAM, "preemptd.decisions.>")]
        assert [(d["type"], d.get("preemptor") or d.get("task"), len(d.get("victims", []))) for d in published] == [("decision.preempted", "c-1", 60), ("decision.allocated", "d-1", 0)]
        assert all(len(json.dumps(d)) <= 16_384 for d in published)
        cut = published[0]
        assert all(v["why"].endswith("more characters)") for v in cut["victims"])
        assert count(db, "outbox where passed_over_at is not null") == 1
        assert "decision passed over: it stays in the log but is not published" in daemon.log_text()
        whole = preemptd("explain", cut["id"], "--db", str(db), "--json")
        assert whole.returncode == 0 and len(whole.stdout) > 16_384, "explain shows the whole decision from the log"
        assert daemon.stop() == 0


def test_a_stop_with_nats_gone_and_decisions_waiting_is_quick_and_loses_nothing(tmp_path: Path, daemon_factory) -> None:
    """A stop waits for the batch of decisions in flight (so none reaches the stream unmarked),
    but only a few seconds: with NATS gone it took over 10 s. Nothing is lost: after a restart,
    with NATS back, every decision is published once."""
    import time

    with EmbeddedNats(tmp_path / "nats") as server:
        daemon = daemon_factory("--nats-url", server.url).start()
        tasks = [event("task.submitted", f"t{i}", task=f"t{i}", app="a", queue="root.default", resources={"vcore": "100m"}) for i in range(5000)]
        anyio.run(publish, server.url, [event("node.upserted", "n1", node="n1", capacity={"vcore": 1000}), *tasks])
        db = daemon.state_dir / "preemptd.db"
        wait_for(lambda: db.exists() and count(db, "log where type = 'decision.allocated'") == 5000, what="every task allocated")
        server.stop()
        started = time.monotonic()
        assert daemon.stop() == 0
        assert time.monotonic() - started < 9, "the stop waits a few seconds at most for NATS"
        server.start()
        restarted = daemon_factory("--nats-url", server.url, state_dir=daemon.state_dir).start()
        wait_for(lambda: count(db, "outbox where published_at is null") == 0, what="every decision published after the restart")
        ids = [json.loads(data)["id"] for data, _ in anyio.run(read, server.url, DECISION_STREAM, "preemptd.decisions.>")]
        assert len(ids) == len(set(ids)) == 5000
        assert restarted.stop() == 0


@pytest.mark.parametrize("delay", [0.15, 0.4, 0.8, 1.5])
def test_sigterm_at_any_moment_of_the_installed_commands_start_ends_it_cleanly(tmp_path: Path, delay: float) -> None:
    """Loading the CLI takes a moment; a SIGTERM in it (or later in start-up) ends `preemptd
    run` quietly: no traceback, no nats-server left behind, the log usable."""
    import signal
    import subprocess
    import sys
    import time

    from test_daemon import embedded_servers

    state = tmp_path / "state"
    with (tmp_path / "stderr").open("wb") as stderr:
        process = subprocess.Popen([str(Path(sys.executable).with_name("preemptd")), "run", "--state-dir", str(state)], stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path)
        time.sleep(delay)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    assert "Traceback" not in (tmp_path / "stderr").read_text()
    if state.exists():
        assert embedded_servers(state) == []
    if (state / "preemptd.db").exists():
        assert preemptd("db", "upgrade", "--db", str(state / "preemptd.db")).returncode == 0
