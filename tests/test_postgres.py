"""PostgreSQL as the log: the daemon end to end and every command on it, and a standby that
takes over from a writer killed while events flow. Against the server of
$PREEMPTD_TEST_POSTGRES_URL (skipped without one, except in CI), a new database per test."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest
from conftest import POSTGRES_URL, postgres, preemptd
from test_daemon import event, publish, read, wait_for

from preemptd.daemon.bus.embedded import EmbeddedNats
from preemptd.daemon.records import DECISION_STREAM, Outbound

pytestmark = pytest.mark.slow

#: The writer's lease among the advisory locks of pg_locks: its key (b"preemptd" >> 1), on this test's database.
LEASE = "classid = 943272626 and objid = 3065526834 and database = (select oid from pg_database where datname = current_database())"


def scalar(url: str, sql: str) -> int:
    return postgres(url, sql)[0][0]


def test_the_daemon_and_every_command_work_on_a_postgresql_log(postgres_log: str, daemon_factory, tmp_path: Path) -> None:
    daemon = daemon_factory("--db", postgres_log).start()
    events = tmp_path / "events.yaml"
    events.write_text(
        "- {type: node.upserted, node: n1, capacity: {vcore: 2}}\n"
        "- {type: task.submitted, task: first, app: a1, queue: root.default, resources: {vcore: 1}}\n"
        "- {type: task.released, task: nobody}\n"
    )
    published = preemptd("publish", str(events), "--no-check", "--state-dir", str(daemon.state_dir))
    assert published.returncode == 1 and "rejected: unknown task 'nobody'" in published.stdout, published.stdout + published.stderr
    wait_for(lambda: scalar(postgres_log, "select count(*) from dead_letters") == 1, what="the bad release in dead letters")
    assert daemon.decisions(1)[0]["task"] == "first"
    assert daemon.stop() == 0
    assert scalar(postgres_log, "select count(*) from snapshots") == 1, "the snapshot at the stop"

    daemon = daemon_factory("--db", postgres_log).start()  # from the snapshot
    events.write_text("- {type: task.submitted, task: second, app: a2, queue: root.default, resources: {vcore: 1}}\n")
    assert preemptd("publish", str(events), "--state-dir", str(daemon.state_dir)).returncode == 0
    decisions = daemon.decisions(2)
    assert [(d["type"], d["task"], d["node"]) for d in decisions] == [("decision.allocated", "first", "n1"), ("decision.allocated", "second", "n1")]
    assert daemon.stop() == 0
    second_start = daemon.log_text().rsplit("state rebuilt", 1)[1].split("\n", 1)[0]
    assert "seq=0" not in second_start, "the second start rebuilt the state from the snapshot"

    replay = preemptd("replay", "--db", postgres_log, "--quiet")
    assert replay.returncode == 0 and "reproduced" in replay.stdout, replay.stdout + replay.stderr
    state = preemptd("state", "--db", postgres_log, "--json")
    assert state.returncode == 0, state.stderr
    assert json.loads(state.stdout)["nodes"]["n1"]["allocated"] == {"vcore": 2}, state.stdout
    explain = preemptd("explain", decisions[1]["id"], "--db", postgres_log)
    assert explain.returncode == 0 and "second" in explain.stdout and "n1" in explain.stdout
    by_task = preemptd("explain", "second", "--task", "--db", postgres_log, "--json")
    assert by_task.returncode == 0 and decisions[1]["id"] in by_task.stdout
    dead = preemptd("dead-letters", "--db", postgres_log)
    assert dead.returncode == 0 and "unknown task 'nobody'" in dead.stdout
    upgrade = preemptd("db", "upgrade", "--db", postgres_log)
    assert upgrade.returncode == 0 and "schema up to date" in upgrade.stdout


def test_a_standby_takes_over_from_a_killed_writer_and_nothing_is_lost_or_published_twice(
    postgres_log: str, nats_server: EmbeddedNats, daemon_factory, tmp_path: Path
) -> None:
    writer = daemon_factory("--db", postgres_log, "--nats-url", nats_server.url, state_dir=tmp_path / "writer").start()
    standby = daemon_factory("--db", postgres_log, "--nats-url", nats_server.url, state_dir=tmp_path / "standby").launch()
    wait_for(lambda: "standby: another daemon writes this log" in standby.log_text(), what="the second daemon to wait")
    assert "pid" in standby.log_text().split("standby:", 1)[1].split("\n", 1)[0], "it says who holds the lease"

    tasks = 3000
    messages = [event("node.upserted", "node", node="n1", capacity={"vcore": 100_000})]
    messages += [event("task.submitted", f"e{i}", task=f"t{i}", app="a", queue="root.default", resources={"vcore": 1}) for i in range(tasks)]
    flowing = threading.Thread(target=lambda: anyio.run(publish_slowly, nats_server.url, messages))
    flowing.start()
    wait_for(lambda: scalar(postgres_log, "select count(*) from log where type = 'task.submitted'") >= 800, what="the writer to commit some")
    writer.process.send_signal(signal.SIGKILL)
    writer.process.wait()
    killed_at = time.monotonic()
    standby.listening(timeout=60)
    took_over = time.monotonic() - killed_at
    flowing.join()

    submitted = "select count(*) from log where type = 'task.submitted'"
    wait_for(lambda: scalar(postgres_log, submitted) == tasks, what="every event in the log")
    wait_for(lambda: scalar(postgres_log, "select count(*) from log where type = 'decision.allocated'") == tasks, what="every task allocated")
    wait_for(lambda: scalar(postgres_log, "select count(*) from outbox where published_at is null") == 0, what="every decision published")
    assert scalar(postgres_log, "select count(distinct event_id) from log where type = 'task.submitted'") == tasks, "each event once"
    assert scalar(postgres_log, "select count(*) from dead_letters") == 0, "redeliveries recognised, not dead letters"
    decisions = [json.loads(data) for data, _ in anyio.run(read, nats_server.url, DECISION_STREAM, "preemptd.decisions.>")]
    ids = Counter(d["id"] for d in decisions)
    assert not [i for i, n in ids.items() if n > 1], "no decision id twice on the stream"
    assert Counter(d["task"] for d in decisions if d["type"] == "decision.allocated") == {f"t{i}": 1 for i in range(tasks)}
    assert took_over < 15, f"the standby took {took_over:.1f}s to take over"
    assert "taking over as the log's writer" in standby.log_text()
    assert standby.stop() == 0


async def publish_slowly(url: str, messages: list[Outbound]) -> None:
    """A steady flow: a hundred events every 50 ms, retried through the writer's death."""
    for start in range(0, len(messages), 100):
        await publish(url, messages[start : start + 100], retry=True)
        await anyio.sleep(0.05)


def test_a_second_daemon_on_a_sqlite_log_is_still_refused(daemon_factory, tmp_path: Path) -> None:
    first = daemon_factory().start()
    second = daemon_factory("--db", str(first.state_dir / "preemptd.db"), state_dir=tmp_path / "other")
    with pytest.raises(RuntimeError, match="did not start"):
        second.start()
    assert "another preemptd (pid" in second.log_text() and "is writing this log" in second.log_text()
    assert first.stop() == 0


def test_a_writer_that_loses_its_lease_stops_rather_than_write_beside_a_standby(postgres_log: str, daemon_factory) -> None:
    writer = daemon_factory("--db", postgres_log).start()
    writer.publish("- {type: node.upserted, node: n1, capacity: {vcore: 4}}\n")  # a state its stop would snapshot
    wait_for(lambda: scalar(postgres_log, "select count(*) from log") == 1, what="the node in the log")
    holders = f"select pid from pg_locks where locktype = 'advisory' and granted and {LEASE}"
    assert len(postgres(postgres_log, holders)) == 1
    postgres(postgres_log, f"select pg_terminate_backend(pid) from pg_locks where locktype = 'advisory' and granted and {LEASE}")
    assert writer.process.wait(timeout=30) == 2
    assert "stopping: the writer's lease is lost" in writer.log_text()
    assert "snapshot not taken" in writer.log_text() and "please report" not in writer.log_text(), "a fenced snapshot is no bug"
    assert "the database ended the session (terminated by an administrator or a standby" in writer.log_text(), "not asyncpg's 'cannot switch to state 15'"


def test_a_database_that_does_not_exist_is_one_line_saying_how_to_create_it(postgres_log: str, tmp_path: Path) -> None:
    missing = postgres_log.rsplit("/", 1)[0] + "/preemptd_never_made"
    for command in (["state"], ["run", "--state-dir", str(tmp_path / "state")]):
        result = preemptd(*command, "--db", missing)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert 'database "preemptd_never_made" does not exist; create it first, for example `createdb preemptd_never_made`' in result.stderr, result.stderr


def test_a_standby_ends_the_session_of_a_frozen_writer_which_then_writes_nothing(
    postgres_log: str, nats_server: EmbeddedNats, daemon_factory, tmp_path: Path
) -> None:
    """A writer frozen with SIGSTOP kept its lease for ever: the standby waited and nothing was
    decided. Its lease now expires (here after 3 s): the standby ends its session and decides;
    resumed, the old writer finds its lease lost, writes nothing and stops with one line."""
    writer = daemon_factory("--db", postgres_log, "--nats-url", nats_server.url, "--lease-expiry", "3s", state_dir=tmp_path / "writer").start()
    standby = daemon_factory("--db", postgres_log, "--nats-url", nats_server.url, "--lease-expiry", "3s", state_dir=tmp_path / "standby").launch()
    wait_for(lambda: "standby: another daemon writes this log" in standby.log_text(), what="the second daemon to wait")
    anyio.run(publish, nats_server.url, [event("node.upserted", "node", node="n1", capacity={"vcore": 4})])
    wait_for(lambda: scalar(postgres_log, "select count(*) from log") >= 1, what="the writer to commit")
    writer.process.send_signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    standby.listening(timeout=60)
    took_over = time.monotonic() - frozen_at
    anyio.run(publish, nats_server.url, [event("task.submitted", "probe", task="probe", app="a", queue="root.default", resources={"vcore": 1})])
    wait_for(lambda: scalar(postgres_log, "select count(*) from log where type = 'decision.allocated'") == 1, what="the standby to decide")
    rows = scalar(postgres_log, "select count(*) from log")
    writer.process.send_signal(signal.SIGCONT)
    assert writer.process.wait(timeout=30) == 2
    assert "stopping: the writer's lease is lost" in writer.log_text()
    assert "Traceback" not in writer.log_text()
    assert scalar(postgres_log, "select count(*) from log") == rows, "the resumed writer wrote nothing"
    assert "the writer's lease expired: ending its sessions" in standby.log_text()
    assert 1 <= took_over < 15, f"the standby took over after {took_over:.1f}s (the lease counts from the writer's last renewal)"
    assert standby.stop() == 0


def test_a_standby_says_it_is_not_the_writer_and_the_writer_answers_first(postgres_log: str, nats_server: EmbeddedNats, daemon_factory, tmp_path: Path) -> None:
    """A query (`preemptd try`) reaches the writer and the standby alike: the writer answers
    at once, the standby a moment later that it is not the writer, and who is; a plain
    request takes the first reply, the writer's."""
    writer = daemon_factory("--db", postgres_log, "--nats-url", nats_server.url, state_dir=tmp_path / "writer").start()
    standby = daemon_factory("--db", postgres_log, "--nats-url", nats_server.url, state_dir=tmp_path / "standby").launch()
    wait_for(lambda: "standby: another daemon writes this log" in standby.log_text(), what="the second daemon to wait")
    writer.publish("- {type: node.upserted, node: n1, capacity: {vcore: 4}}\n")
    query = tmp_path / "query.yaml"
    query.write_text("- {type: task.submitted, task: t, app: a, queue: root.default, resources: {vcore: 1}}\n")
    asked = preemptd("try", str(query), "--nats-url", nats_server.url, "--json")
    assert asked.returncode == 0, asked.stderr
    assert [d["type"] for d in json.loads(asked.stdout)["decisions"]] == ["decision.allocated"]

    async def every_reply() -> list[dict]:
        import nats

        nc = await nats.connect(nats_server.url)
        inbox, replies = nc.new_inbox(), []
        subscription = await nc.subscribe(inbox)
        await nc.publish(
            "preemptd.try.default",
            json.dumps([{"type": "task.submitted", "task": "t", "app": "a", "queue": "root.default", "resources": {"vcore": 1}}]).encode(),
            reply=inbox,
        )
        with anyio.move_on_after(2):
            async for message in subscription.messages:
                replies.append(json.loads(message.data))
        await nc.close()
        return replies

    replies = anyio.run(every_reply)
    assert len(replies) == 2 and "decisions" in replies[0], replies
    assert replies[1]["refused"].startswith("not the writer: this daemon is a standby of the log; ask the writer (preemptd pid"), replies[1]
    assert writer.stop() == 0


def test_a_write_past_its_check_never_lands_after_a_standby_took_over(postgres_log: str, nats_server: EmbeddedNats, daemon_factory, tmp_path: Path) -> None:
    """A writer's commit passed its lease check, then waited on a lock; meanwhile its lease
    ended and the standby took over. The commit landed 5 s later, and the standby died on a
    duplicate key. Now the standby ends that write before it reads the log: the event the old
    writer did not commit is delivered again and the standby decides it, once."""
    writer = daemon_factory("--db", postgres_log, "--nats-url", nats_server.url, state_dir=tmp_path / "writer").start()
    standby = daemon_factory("--db", postgres_log, "--nats-url", nats_server.url, state_dir=tmp_path / "standby").launch()
    wait_for(lambda: "standby: another daemon writes this log" in standby.log_text(), what="the second daemon to wait")
    writer.publish("- {type: node.upserted, node: n1, capacity: {vcore: 4}}\n")
    wait_for(lambda: scalar(postgres_log, "select count(*) from log") >= 1, what="the writer to commit")

    locked, release = threading.Event(), threading.Event()

    def hold_the_log() -> None:  # a transaction of someone else's, in the writer's way
        async def run() -> None:
            import asyncpg

            connection = await asyncpg.connect(postgres_log)
            async with connection.transaction():
                await connection.execute("LOCK TABLE log IN EXCLUSIVE MODE")
                locked.set()
                await anyio.to_thread.run_sync(release.wait)
            await connection.close()

        anyio.run(run)

    holder = threading.Thread(target=hold_the_log)
    holder.start()
    assert locked.wait(10)
    anyio.run(publish, nats_server.url, [event("task.submitted", "waits", task="waits", app="a", queue="root.default", resources={"vcore": 1})])
    waiting = "select count(*) from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and application_name like 'preemptd%'"
    wait_for(lambda: scalar(postgres_log, waiting) >= 1, what="the writer's commit to wait, past its check")
    assert postgres(
        postgres_log, f"select pg_terminate_backend(pid) from pg_locks where locktype = 'advisory' and granted and {LEASE}"
    )  # only the lease's connection ends
    standby.listening(timeout=60)
    release.set()
    holder.join()

    anyio.run(publish, nats_server.url, [event("task.submitted", "after", task="after", app="a", queue="root.default", resources={"vcore": 1})])
    allocated = "select count(*) from log where type = 'decision.allocated'"
    wait_for(lambda: scalar(postgres_log, allocated) == 2, what="the standby to decide both tasks")
    assert scalar(postgres_log, "select count(*) from log where type = 'task.submitted'") == 2, "each event once"
    assert writer.process.wait(timeout=30) == 2
    assert "a write of the previous writer was still open: ended it before taking over" in standby.log_text()
    assert "another writer wrote" not in standby.log_text(), "the old write never landed"
    assert standby.process.poll() is None and standby.stop() == 0


def test_a_daemon_that_meets_a_row_it_did_not_write_reads_the_log_again(postgres_log: str, daemon_factory) -> None:
    """A row written beside the daemon (whatever wrote it) took the position of its next
    write: the daemon died on a duplicate key, leaving no writer. It now reads the log again,
    with that row, and decides what was delivered again."""
    daemon = daemon_factory("--db", postgres_log).start()
    daemon.publish("- {type: node.upserted, node: n1, capacity: {vcore: 4}}\n")
    wait_for(lambda: scalar(postgres_log, "select count(*) from log") == 1, what="the node in the log")
    postgres(
        postgres_log,
        "insert into log (seq, event_id, type, partition, ts, received, stream_seq, payload) "
        "select seq + 1, 'beside-' || event_id, type, partition, ts, received, null, payload from log",
    )
    daemon.publish("- {type: task.submitted, task: t, app: a, queue: root.default, resources: {vcore: 1}}\n")
    wait_for(lambda: scalar(postgres_log, "select count(*) from log where type = 'decision.allocated'") == 1, what="the task decided")
    assert "a write met a row another writer wrote: reading the log again" in daemon.log_text()
    assert scalar(postgres_log, "select count(*) from log where type = 'task.submitted'") == 1
    assert daemon.stop() == 0


def test_two_logs_on_one_server_each_have_their_writer(postgres_log: str, nats_server: EmbeddedNats, daemon_factory, tmp_path: Path) -> None:
    """Several daemons, each with its own log, on one PostgreSQL server (as docs/operating.md invites):
    the lease holder was looked up across the server, so a standby of one log watched another
    log's writer. Each log has its lease, and a standby waits for its own log's writer."""
    other = postgres_log + "_other"
    postgres(POSTGRES_URL, f'CREATE DATABASE "{other.rsplit("/", 1)[1]}"')
    try:
        first = daemon_factory("--db", postgres_log, "--nats-url", nats_server.url, "--partitions", "default", state_dir=tmp_path / "first").start()
        second = daemon_factory("--db", other, "--nats-url", nats_server.url, "--partitions", "east", state_dir=tmp_path / "second").start()
        standby = daemon_factory("--db", other, "--nats-url", nats_server.url, "--partitions", "east", state_dir=tmp_path / "standby").launch()
        wait_for(lambda: "standby: another daemon writes this log" in standby.log_text(), what="the standby to wait")
        holder = standby.log_text().split("holder=", 1)[1].split(" db=", 1)[0]
        assert f"pid {second.process.pid} " in holder, f"the standby names its own log's writer: {holder}"
        first.publish("- {type: node.upserted, node: n1, capacity: {vcore: 4}}\n")
        wait_for(lambda: scalar(postgres_log, "select count(*) from log") == 1, what="the first log's writer to write")
        assert second.stop() == 0
        standby.listening(timeout=60)
        assert first.process.poll() is None, "the first log's writer was never taken for the second's"
        assert standby.stop() == 0 and first.stop() == 0
    finally:
        postgres(POSTGRES_URL, f'DROP DATABASE IF EXISTS "{other.rsplit("/", 1)[1]}" WITH (FORCE)')


def test_the_commands_find_a_postgresql_log_through_the_state_directory(postgres_log: str, daemon_factory, tmp_path: Path) -> None:
    """`state`, `explain`, `replay` with --state-dir read the daemon's SQLite file only: on a
    PostgreSQL daemon they said there was no log. The state directory says where the log is,
    without its password."""
    with_password = postgres_log.replace("postgresql://postgres@", "postgresql://postgres:secret@")
    daemon = daemon_factory("--db", with_password).start()
    daemon.publish(
        "- {type: node.upserted, node: n1, capacity: {vcore: 4}}\n- {type: task.submitted, task: t, app: a, queue: root.default, resources: {vcore: 1}}\n"
    )
    wait_for(lambda: scalar(postgres_log, "select count(*) from log where type = 'decision.allocated'") == 1, what="the task decided")
    written = (daemon.state_dir / "log.url").read_text()
    assert "secret" not in written and written.strip() == postgres_log
    for command in (["state"], ["explain", "t"], ["replay", "--quiet"]):
        result = preemptd(*command, "--state-dir", str(daemon.state_dir))
        assert result.returncode == 0, (command, result.stderr)
    assert "allocated" in preemptd("explain", "t", "--state-dir", str(daemon.state_dir)).stdout
    assert daemon.stop() == 0


def test_a_standby_started_with_an_older_file_keeps_the_newer_configuration(
    postgres_log: str, nats_server: EmbeddedNats, daemon_factory, tmp_path: Path
) -> None:
    """A failover: the writer and its standby started with the same file (max 48); a newer
    configuration (max 24) came through `preemptd apply`; the writer dies and the standby
    takes over with its file, unchanged: it re-applied 48. It keeps 24 now, and says why."""
    from test_config_flow import queues

    config, newer = tmp_path / "queues.yaml", tmp_path / "newer.yaml"
    config.write_text(queues(48))
    newer.write_text(queues(24))
    writer = daemon_factory("--db", postgres_log, "--nats-url", nats_server.url, "--config", str(config), state_dir=tmp_path / "writer").start()
    standby = daemon_factory("--db", postgres_log, "--nats-url", nats_server.url, "--config", str(config), state_dir=tmp_path / "standby").launch()
    wait_for(lambda: "standby: another daemon writes this log" in standby.log_text(), what="the standby to wait")
    assert preemptd("apply", str(newer), "--nats-url", nats_server.url, "--db", postgres_log).returncode == 0
    newest = "select payload from log where type = 'config.applied' order by seq desc limit 1"
    wait_for(lambda: '"vcore":24' in bytes(postgres(postgres_log, newest)[0][0]).decode(), what="the newer configuration applied")
    writer.process.send_signal(signal.SIGKILL)
    writer.process.wait()
    standby.listening(timeout=60)
    assert '"vcore":24' in bytes(postgres(postgres_log, newest)[0][0]).decode(), "the standby's file did not go back in"
    assert "config file unchanged since it applied it: the log's configuration runs" in standby.log_text()
    assert standby.stop() == 0
