"""Bad input never stops the daemon or its decisions: the inputs that did, on a real nats-server.

- A message nested 100,000 levels deep among valid events (it crash-looped the daemon).
- Absurd quantities, then a stop and a restart (every snapshot failed, and the daemon with it).
- A task naming 70,000 resources, then an ordinary task whose decision must arrive.
- Decisions larger than the server's max_payload: sent shortened, or passed over when nothing
  fits, and the decisions after them flow (one such decision held up all others forever).
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from conftest import preemptd
from test_daemon import count, event, publish, read, wait_for

from preemptd.daemon.bus.embedded import EmbeddedNats
from preemptd.daemon.records import DECISION_STREAM, Outbound, cluster_subject

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
    messages += [
        event("node.upserted", "n1", node="n1", capacity={"vcore": 8}),
        event("task.submitted", "t1", task="t1", app="a", queue="root.default", resources={"vcore": 1}),
    ]
    anyio.run(publish, nats_server.url, messages)
    db = daemon.state_dir / "preemptd.db"
    wait_for(lambda: db.exists() and allocated(db, "t1"), what="the valid task allocated")
    assert [r.split(" is ")[0] for r in reasons(db)] == [
        "node.upserted: memory: '1e30'",
        "node.upserted: memory: '1e400'",
        "node.upserted: vcore: '1e18'",
        "node.upserted: memory: '16Ei'",
    ]
    assert all("the limit is 1,152,921,504,606,846,976 (2^60)" in r for r in reasons(db))
    assert daemon.stop() == 0, "the shutdown snapshot is taken"
    assert count(db, "snapshots") == 1
    with sqlite3.connect(db) as conn:
        at_stop = conn.execute("select seq from snapshots").fetchone()[0]
    restarted = daemon_factory("--nats-url", nats_server.url, "--snapshot-every", "1", state_dir=daemon.state_dir).start()
    anyio.run(publish, nats_server.url, [event("task.submitted", "t2", task="t2", app="a", queue="root.default", resources={"vcore": 1})])
    wait_for(
        lambda: allocated(db, "t2") and count(db, f"snapshots where seq > {at_stop}") >= 1,
        what="a task allocated and a periodic snapshot taken after the restart",
    )
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
                "queues": [
                    {"name": "a", "resources": {"guaranteed": {"vcore": 100}}},
                    {"name": "c", "resources": {"guaranteed": {"vcore": 60}}},
                    {"name": "b"},
                ],
            }
        ]
    }
    with small_payload_server(tmp_path, 16_384) as server:
        daemon = daemon_factory("--nats-url", server.url).start()
        setup = [event("config.applied", "config", config=config), event("node.upserted", "n1", node="n1", capacity={"vcore": 100})]
        setup += [event("node.upserted", "n2", node="n2", capacity={"vcore": 60})]
        setup += [
            event("task.bound", f"b{i}", task=f"b{i}", app=f"b{i}", queue="root.b", node="n1" if i < 100 else "n2", resources={"vcore": 1}) for i in range(160)
        ]
        setup += [event("task.submitted", "a-1", task="a-1", app="a", queue="root.a", resources={"vcore": 100})]
        setup += [event("task.submitted", "c-1", task="c-1", app="c", queue="root.c", resources={"vcore": 60})]
        anyio.run(publish, server.url, setup)
        db = daemon.state_dir / "preemptd.db"
        wait_for(lambda: db.exists() and count(db, "log where type = 'decision.preempted'") == 2, what="both preemptions decided")
        anyio.run(
            publish,
            server.url,
            [
                event("node.upserted", "n3", node="n3", capacity={"vcore": 8}),
                event("task.submitted", "d-1", task="d-1", app="d", queue="root.b", resources={"vcore": 1}),
            ],
        )
        wait_for(lambda: count(db, "outbox where published_at is not null") == 1 + 1, what="the cut preemption and the later allocation published")
        published = [json.loads(data) for data, _ in anyio.run(read, server.url, DECISION_STREAM, "preemptd.decisions.>")]
        assert [(d["type"], d.get("preemptor") or d.get("task"), len(d.get("victims", []))) for d in published] == [
            ("decision.preempted", "c-1", 60),
            ("decision.allocated", "d-1", 0),
        ]
        assert all(len(json.dumps(d)) <= 16_384 for d in published)
        cut = published[0]
        assert all(v["why"].endswith("more characters)") for v in cut["victims"])
        assert count(db, "outbox where passed_over_at is not null") == 1
        assert "decision passed over: it stays in the log but is not published" in daemon.log_text()
        assert "1 decision passed over by the publisher" in preemptd("dead-letters", "--db", str(db)).stderr
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


def catches(pid: int, signum: int) -> bool:
    """The process has a handler for `signum` (Linux: the SigCgt mask in /proc/<pid>/status)."""
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(mask >> (signum - 1) & 1)


SLOW_LOADING = """
import sys, time, importlib.abc
class SlowCli(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "preemptd.daemon.cli":
            time.sleep(5)
        return None
sys.meta_path.insert(0, SlowCli())
sys.argv = ["preemptd", "run", "--state-dir", sys.argv[1]]
from preemptd.daemon.entry import main
sys.exit(main())
"""


def test_sigterm_while_the_cli_loads_ends_the_program_quietly(tmp_path: Path) -> None:
    """Loading the CLI takes a moment (here made long); a SIGTERM in it killed the process."""
    import signal
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", SLOW_LOADING, str(tmp_path / "state")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
    wait_for(lambda: catches(process.pid, signal.SIGTERM), timeout=30, what="the entry point handling SIGTERM while the CLI loads")
    process.send_signal(signal.SIGTERM)
    _, said = process.communicate(timeout=30)
    assert process.returncode == 0
    assert said == b"" and not (tmp_path / "state").exists(), "nothing started, nothing said"


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.4, 0.8, 1.5])
def test_sigterm_at_any_moment_of_the_installed_commands_start_ends_it_cleanly(tmp_path: Path, delay: float) -> None:
    """From the moment its code runs (before that the interpreter itself is starting), a SIGTERM
    ends `preemptd run` quietly, while it loads or later in start-up: no traceback, no
    nats-server left behind, the log usable."""
    import signal
    import subprocess
    import sys
    import time

    from test_daemon import embedded_servers

    state = tmp_path / "state"
    with (tmp_path / "stderr").open("wb") as stderr:
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("preemptd")), "run", "--state-dir", str(state)], stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path
        )
        wait_for(lambda: catches(process.pid, signal.SIGTERM), timeout=30, what="the program's own code running")
        time.sleep(delay)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    assert "Traceback" not in (tmp_path / "stderr").read_text()
    if state.exists():
        assert embedded_servers(state) == []
    if (state / "preemptd.db").exists():
        assert preemptd("db", "upgrade", "--db", str(state / "preemptd.db")).returncode == 0


def closed_port() -> int:
    """A loopback port nothing listens on."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.0.0.1:4222", "NATS URL 'http://127.0.0.1:4222': the scheme must be nats://, tls://, ws:// or wss://, not http://"),
        ("nats://127.0.0.1:99999", "NATS URL 'nats://127.0.0.1:99999': the port must be a number from 1 to 65535"),
        ("nats://127.0.0.1:four", "the port must be a number from 1 to 65535"),
        ("nats://:4222", "NATS URL 'nats://:4222' names no host"),
        ("nats://127.0.0.1:CLOSED", "connection refused at 127.0.0.1:CLOSED (is it running?)"),
        ("127.0.0.1:CLOSED", "connection refused at 127.0.0.1:CLOSED (is it running?)"),  # as nats-py reads it: nats://
    ],
)
@pytest.mark.parametrize("command", [["run"], ["publish", "-"], ["tail"]])
def test_a_bad_nats_url_is_named_for_what_is_wrong_and_nothing_is_created(tmp_path: Path, url: str, said: str, command: list[str]) -> None:
    """Every bad URL was "timed out (is it running?)" after some 5 s, and `run` had already
    created its state directory and an empty log."""
    port = str(closed_port())
    url, said = url.replace("CLOSED", port), said.replace("CLOSED", port)
    done = preemptd(*command, "--nats-url", url, "--state-dir", str(tmp_path / "state"), input="", timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].endswith(said)
    assert "timed out" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("command", [["state"], ["replay"], ["explain", "--task", "t-1"], ["dead-letters"]])
def test_a_damaged_log_is_named_with_how_to_check_it(tmp_path: Path, command: list[str]) -> None:
    """A damaged page gave SQLAlchemy's dump of the statement and its parameters."""
    db = tmp_path / "preemptd.db"
    assert preemptd("simulate", "tests/scenarios/cycle-bound.yaml", "--db", str(db)).returncode == 0
    with db.open("r+b") as file:  # the second half is the log's rows; the schema is at the start
        size = db.stat().st_size
        file.seek(size // 2 // 4096 * 4096)
        file.write(b"\x0d" + b"\xff" * (size - size // 2 // 4096 * 4096 - 1))
    done = preemptd(*command, "--db", str(db))
    assert done.returncode != 0
    assert done.stderr.splitlines() == [
        f"preemptd: the log {db} is damaged (database disk image is malformed): check it with `sqlite3 {db} 'pragma integrity_check'`"
    ]


NEW_USER_EVENTS = "\n".join(
    json.dumps(e)
    for e in [
        {"type": "node.upserted", "node": "n1", "capacity": {"vcore": 4}},
        {"type": "task.submitted", "task": "t1", "app": "a1", "queue": "root.default", "resorces": {"vcore": 1}},
        {"type": "task.submitted", "task": "t2", "app": "a2", "queue": "root.nope", "resources": {"vcore": 1}},
    ]
)


def test_publish_checks_the_events_first_and_sends_nothing_if_one_is_invalid(nats_server: EmbeddedNats) -> None:
    """It printed "published 3 events" for events the daemon would reject, and `tail` showed
    nothing: a new user never learnt of the misspelt field."""
    from preemptd.daemon.records import CLUSTER_STREAM

    refused = preemptd("publish", "-", "--nats-url", nats_server.url, input=NEW_USER_EVENTS)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "preemptd: 1 event the daemon would reject; nothing was published (--no-check sends them anyway):",
        "  event 2 (id " + refused.stderr.split("(id ")[1].split(")")[0] + "): task.submitted: unknown field `resorces` (did you mean `resources`?)",
    ]
    unread = preemptd("publish", "-", "--nats-url", nats_server.url, "--no-check", input=NEW_USER_EVENTS)
    assert unread.returncode == 0, "no daemon runs: the events wait in the stream for one, no verdict is awaited"
    assert unread.stderr == (
        "published 3 events: 3 sent (no daemon is running for partition default: the events wait in the stream, "
        "and `preemptd tail --rejected` shows any rejection once one runs)\n"
    )
    assert len(anyio.run(read, nats_server.url, CLUSTER_STREAM, "preemptd.cluster.>")) == 3, "only the events sent with --no-check"


def test_publish_wait_gives_the_daemons_verdict_on_each_event_and_tail_shows_the_rejected(nats_server: EmbeddedNats, daemon_factory) -> None:
    daemon_factory("--nats-url", nats_server.url).start()
    published = preemptd("publish", "-", "--nats-url", nats_server.url, "--no-check", input=NEW_USER_EVENTS)
    assert published.returncode == 1, "not every event was accepted"
    verdicts = [line.split(", id ")[0] + ":" + line.split("):", 1)[1] for line in published.stdout.splitlines()]
    assert verdicts == [
        "event 2 (task.submitted: rejected: task.submitted: unknown field `resorces` (did you mean `resources`?)",
        "event 3 (task.submitted: rejected: unknown queue 'root.nope' in partition default (leaf queues: root.default)",
    ], "the daemon's verdict by default: each rejection printed"
    assert published.stderr.strip() == "published 3 events: 1 accepted, 2 rejected"
    every = preemptd(
        "publish",
        "-",
        "--nats-url",
        nats_server.url,
        "--no-check",
        "--verbose",
        input=NEW_USER_EVENTS.replace('"n1"', '"n2"').replace('"t1"', '"t5"').replace('"t2"', '"t6"'),
    )
    assert [line.split(" (", 1)[0] + ":" + line.split("):", 1)[1].split(":")[0] for line in every.stdout.splitlines()] == [
        "event 1: accepted",
        "event 2: rejected",
        "event 3: rejected",
    ]
    rejected = preemptd("tail", "--rejected", "--from-start", "--count", "2", "--timeout", "20", "--nats-url", nats_server.url)
    assert rejected.returncode == 0
    assert [line.split(" rejected ", 1)[1].split(" (preemptd.cluster.default.task #")[0].split()[0] for line in rejected.stdout.splitlines()] == [
        "task.submitted"
    ] * 2
    assert "did you mean `resources`?" in rejected.stdout and "unknown queue 'root.nope'" in rejected.stdout
    again = preemptd("publish", "-", "--nats-url", nats_server.url, "--wait", input=NEW_USER_EVENTS.splitlines()[0].replace('"n1"', '"n3"') + "\n")
    assert (again.returncode, again.stderr) == (0, "published 1 event: 1 accepted\n"), "--wait, the default now, still runs"


def test_publish_says_when_nats_dropped_a_resend(nats_server: EmbeddedNats) -> None:
    line = json.dumps({"type": "node.upserted", "id": "node-n1-1", "node": "n1", "capacity": {"vcore": 4}}) + "\n"
    first = preemptd("publish", "-", "--nats-url", nats_server.url, "--no-wait", input=line)
    assert (first.returncode, first.stderr) == (0, "published 1 event\n")
    again = preemptd("publish", "-", "--nats-url", nats_server.url, "--no-wait", input=line)
    assert (again.returncode, again.stderr) == (0, "published 1 event: 1 duplicate (a duplicate was published before: it is not applied twice)\n")


def test_publish_fills_ids_from_the_file_so_that_publishing_it_again_applies_nothing_twice(nats_server: EmbeddedNats, daemon_factory, tmp_path: Path) -> None:
    """Ids filled in are derived from each event and its position: the same file again is
    dropped by NATS (within two minutes) or refused by the daemon as already in the log."""
    daemon = daemon_factory("--nats-url", nats_server.url).start()
    events = tmp_path / "events.yaml"
    events.write_text(
        "- {type: node.upserted, node: n1, capacity: {vcore: 4}}\n- {type: task.submitted, task: t1, app: a, queue: root.default, resources: {vcore: 1}}\n"
    )
    first = preemptd("publish", str(events), "--nats-url", nats_server.url)
    assert (first.returncode, first.stderr) == (0, "published 2 events: 2 accepted\n")
    again = preemptd("publish", str(events), "--nats-url", nats_server.url)
    assert again.returncode == 0 and again.stderr.startswith("published 2 events: 2 duplicate"), again.stderr
    db = daemon.state_dir / "preemptd.db"
    assert count(db, "log where type = 'task.submitted'") == 1
    with sqlite3.connect(db) as conn:
        (task_id,) = conn.execute("select event_id from log where type = 'task.submitted'").fetchone()
    assert re.fullmatch(r"[0-9a-f]{16}-2", task_id), "the event's digest and its position in the file"
    # past NATS's two minutes, the daemon itself refuses the id, and publish says it is in the log already
    data = json.dumps({"type": "task.submitted", "id": "t9-id", "ts": 1, "task": "t9", "app": "a", "queue": "root.default", "resources": {"vcore": 1}}).encode()
    anyio.run(publish, nats_server.url, [Outbound("preemptd.cluster.default.task", data)])  # no Nats-Msg-Id: NATS keeps any copy
    events.write_text(data.decode() + "\n")
    wait_for(lambda: count(db, "log where type = 'task.submitted'") == 2, what="t9 in the log")
    late = preemptd("publish", str(events), "--nats-url", nats_server.url)
    assert late.returncode == 0, late.stdout
    assert late.stderr.startswith("published 1 event: 1 duplicate"), late.stderr
    assert count(db, "log where type = 'task.submitted'") == 2


@pytest.mark.slow
def test_an_interrupted_publish_says_how_many_it_sent_and_runs_again_without_duplicates(nats_server: EmbeddedNats, tmp_path: Path) -> None:
    total = 60_000
    events = tmp_path / "many.jsonl"
    events.write_text("".join(json.dumps({"type": "node.upserted", "node": f"n{i}", "capacity": {"vcore": 1}}) + "\n" for i in range(total)))
    command = [sys.executable, "-m", "preemptd.daemon.cli", "publish", str(events), "--nats-url", nats_server.url, "--no-wait"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: _stream_messages(nats_server.url) >= 2000, what="the first batches sent")
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    said = re.search(r"interrupted: NATS had stored ([\d,]+) of the 60,000 events \(perhaps a few more\): run preemptd publish \S+ again", stderr)
    assert said is not None, stderr
    sent = int(said[1].replace(",", ""))
    assert 0 < sent < total and process.returncode == 130
    rerun = preemptd("publish", str(events), "--nats-url", nats_server.url, "--no-wait", timeout=300)
    assert rerun.returncode == 0
    assert _stream_messages(nats_server.url) == total, "each event in the stream once"
    duplicates = int(re.search(r"published 60000 events: (\d+) duplicate, \d+ sent", rerun.stderr)[1])
    assert duplicates >= sent, "what was sent before is dropped, not applied twice"


def _stream_messages(url: str) -> int:
    from preemptd.daemon.records import CLUSTER_STREAM

    async def messages() -> int:
        import nats

        connection = await nats.connect(url)
        try:
            return (await connection.jetstream().stream_info(CLUSTER_STREAM)).state.messages
        except nats.js.errors.NotFoundError:  # not made yet
            return 0
        finally:
            await connection.close()

    return anyio.run(messages)


def test_a_huge_rejected_message_gets_its_notice_and_so_does_the_next(nats_server: EmbeddedNats, daemon_factory) -> None:
    """A 800 KB message whose type and id are long made a notice beyond max_payload (each field
    repeats them); the batch's notices were all lost and `publish --wait` said "accepted" of
    the next rejected event."""
    daemon_factory("--nats-url", nats_server.url).start()
    huge = json.dumps({"type": "T" * 400_000, "id": "I" * 400_000}).encode()
    anyio.run(publish, nats_server.url, [Outbound("preemptd.cluster.default.task", huge, "huge")])
    bogus = preemptd("publish", "-", "--nats-url", nats_server.url, "--no-check", input='{"type": "bogus", "id": "mine-1"}')
    assert bogus.stdout.startswith("event 1 (bogus, id mine-1): rejected: unknown event type 'bogus'")
    notices = preemptd("tail", "--rejected", "--from-start", "--count", "2", "--timeout", "20", "--json", "--nats-url", nats_server.url)
    first = json.loads(notices.stdout.splitlines()[0])
    assert len(first["event_type"]) == 1024 and first["event_type"].endswith("... (399,005 more characters)")
    assert len(notices.stdout.splitlines()[0]) < 8192


def test_publish_reads_yaml_as_json_values_and_refuses_what_json_cannot_carry(tmp_path: Path) -> None:
    """A YAML date stays the text it is (a `ts` must be milliseconds); a set or a binary is refused."""
    events = tmp_path / "events.yaml"
    events.write_text("- {type: node.upserted, node: n1, capacity: {vcore: 1}, ts: 2024-01-01}\n")
    refused = preemptd("publish", str(events), "--nats-url", "nats://127.0.0.1:1")
    assert refused.returncode == 2
    assert "node.upserted: a string where an integer is expected - at `$.ts`" in refused.stderr
    events.write_text("- {type: node.upserted, node: n1, capacity: !!set {vcore}}\n")
    refused = preemptd("publish", str(events), "--nats-url", "nats://127.0.0.1:1")
    assert refused.returncode == 2 and "tag:yaml.org,2002:set makes no JSON value: quote it, or write a list or a mapping" in refused.stderr


def test_tail_shows_a_forged_decision_as_such_and_goes_on(nats_server: EmbeddedNats) -> None:
    forged = [Outbound("preemptd.decisions.default.allocated", data) for data in (b"\xff\xfe", b'{"type": "decision.allocated"}')]
    decision = {
        "type": "decision.allocated",
        "id": "x:1.0",
        "ts": 0,
        "partition": "default",
        "cycle": 1,
        "task": "t",
        "app": "a",
        "queue": "root.q",
        "node": "n1",
        "resources": {"vcore": 1},
    }
    anyio.run(publish, nats_server.url, [*forged, Outbound("preemptd.decisions.default.allocated", json.dumps(decision).encode())])
    shown = preemptd("tail", "--from-start", "--count", "3", "--timeout", "20", "--nats-url", nats_server.url)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("not a decision (not UTF-8: byte b'\\xff'") and lines[1].startswith("not a decision (decision.allocated: missing field")
    assert "allocated" in lines[2] and " t " in lines[2]
    as_json = preemptd("tail", "--from-start", "--count", "3", "--timeout", "20", "--json", "--nats-url", nats_server.url)
    assert as_json.returncode == 0 and json.loads(as_json.stdout.splitlines()[2]) == decision


def test_between_cycles_the_daemon_reads_only_what_waited_when_the_cycle_ended() -> None:
    """Events that arrived during a cycle are read before the next partition's cycle, but only
    those: reading until nothing waited let a steady flow of events hold every cycle off."""
    from preemptd.daemon.actors import Daemon

    class Reader:
        def __init__(self, tx) -> None:
            self.taken: list[int] = []
            self.tx = tx

        async def _take(self, delivery: list[int]) -> None:
            self.taken += delivery
            self.tx.send_nowait([delivery[0] + 100])  # another arrives while this one is read

    async def scenario() -> list[int]:
        tx, rx = anyio.create_memory_object_stream(10)
        async with tx, rx:
            for number in range(3):
                tx.send_nowait([number])
            reader = Reader(tx)
            await Daemon._take_waiting(reader, rx)
            return reader.taken

    assert anyio.run(scenario) == [0, 1, 2]


async def _delete_stream_then_publish(url: str, stream: str, message: Outbound) -> None:
    """Delete `stream`, then publish `message` (without `ensure_streams`, which would bring the
    stream back)."""
    import nats

    nc = await nats.connect(url)
    try:
        await nc.jetstream().delete_stream(stream)
        await nc.jetstream().publish(message.subject, message.data, headers={"Nats-Msg-Id": message.msg_id})
    finally:
        await nc.close()


def test_a_rejection_notice_cut_short_by_a_stop_is_sent_after_the_restart(nats_server: EmbeddedNats, daemon_factory) -> None:
    """Notices were sent at most once, before the acknowledgement: when NATS did not take them
    and the daemon stopped, the redelivered event was acknowledged without them, and
    `publish --wait` would have called a dead letter accepted."""
    from preemptd.daemon.records import REJECTED_STREAM

    daemon = daemon_factory("--nats-url", nats_server.url).start()
    db = daemon.state_dir / "preemptd.db"
    bogus = Outbound("preemptd.cluster.default.task", b'{"type": "bogus", "id": "b-1"}', "b-1")
    anyio.run(_delete_stream_then_publish, nats_server.url, REJECTED_STREAM, bogus)  # its notice has nowhere to go
    wait_for(lambda: count(db, "dead_letters") == 1, what="the dead letter committed")
    wait_for(lambda: "could not publish rejection notices; trying again" in daemon.log_text(), what="the notice tried")
    assert daemon.stop() == 0
    restarted = daemon_factory("--nats-url", nats_server.url, state_dir=daemon.state_dir).start()
    wait_for(lambda: anyio.run(read, nats_server.url, REJECTED_STREAM, "preemptd.rejected.>") != [], what="the notice sent after the restart")
    (notice,) = [json.loads(data) for data, _ in anyio.run(read, nats_server.url, REJECTED_STREAM, "preemptd.rejected.>")]
    assert (notice["event_id"], notice["stream_seq"]) == ("b-1", 1)
    assert count(db, "dead_letters") == 1, "the redelivered event is recognised, not rejected twice"
    assert restarted.stop() == 0


def test_a_configuration_of_sixty_thousand_unknown_fields_delays_nothing(nats_server: EmbeddedNats, daemon_factory) -> None:
    """A 769 KB Volcano Queue of 60,000 unknown fields held the daemon's only thread for 27-54 s
    (a warning per field, checked against a list), then again at every start."""
    daemon = daemon_factory("--nats-url", nats_server.url).start()
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}, "spec": {f"f{i}": 0 for i in range(60_000)}}
    hostile = event("config.applied", "hostile", model="volcano", config=[queue])
    probe = [
        event("node.upserted", "n1", node="n1", capacity={"vcore": 1}),
        event("task.submitted", "probe", task="probe", app="a", queue="root.default", resources={"vcore": 1}),
    ]
    started = time.monotonic()
    anyio.run(publish, nats_server.url, [hostile, *probe])
    [decision] = daemon.decisions(1)
    assert decision["task"] == "probe" and time.monotonic() - started < 10
    db = daemon.state_dir / "preemptd.db"
    assert reasons(db) == [
        "configuration refused, the previous one stays: Queue q: unknown field spec.f0 (spec has: weight, capability, deserved, guarantee, reclaimable, "
        "priority, parent, affinity, type, extendClusters, dequeueStrategy); " + "; ".join(f"unknown field spec.f{i}" for i in range(1, 10)) + "; and 1 more"
    ]
    assert daemon.stop() == 0


def test_a_run_config_whose_field_is_an_alias_chain_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    """574 bytes of YAML aliases took 3.6 GB of memory, then a SIGSEGV, and left the embedded
    nats-server running."""
    chain = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8))
    config = tmp_path / "queues.yaml"
    config.write_text("queues: [{name: a}]\n" + chain)
    result = preemptd("run", "--config", str(config), "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"preemptd: {config} holds more than 100,000 values, counting what its aliases repeat"]
    assert not (tmp_path / "state").exists()
