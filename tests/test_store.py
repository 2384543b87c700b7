"""The log database on real SQLite files and real PostgreSQL databases (`log_target`), with the
real migrations."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import anyio
import msgspec
import pytest
from conftest import ROOT, postgres

from preemptd import migrations
from preemptd.daemon.errors import StoreError
from preemptd.daemon.log import store as store_module
from preemptd.daemon.log.history import History, load_state
from preemptd.daemon.log.lease import WriterLease
from preemptd.daemon.log.store import Store
from preemptd.daemon.records import Batch, DeadLetter, LogRow, OutboxRow, to_row
from preemptd.events import Scenario
from preemptd.projections import ClusterState
from preemptd.scheduling import fold, simulate, snapshot

pytestmark = pytest.mark.anyio


def row(seq: int, event_id: str | None = None, kind: str = "node.upserted") -> LogRow:
    return LogRow(seq=seq, event_id=event_id or f"e{seq}", type=kind, partition="default", ts=seq, received=seq, payload=b"{}")


async def test_migrations_create_the_schema_and_the_log_keeps_its_name(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = await Store.open(str(path))
    name = store.log_id
    await store.close()
    tables = {r[0] for r in sqlite3.connect(path).execute("select name from sqlite_master where type='table'")}
    assert {"log", "outbox", "dead_letters", "snapshots", "snapshot_parts", "tracking", "meta", "alembic_version"} <= tables
    assert sqlite3.connect(path).execute("select version_num from alembic_version").fetchone() == (migrations.HEAD,)
    assert sqlite3.connect(path).execute("pragma journal_mode").fetchone() == ("wal",)
    reopened = await Store.open(str(path))
    assert reopened.log_id == name
    await reopened.close()


def test_the_revisions_known_without_alembic_are_alembics() -> None:
    """A start on a log at the newest schema trusts `migrations.HEAD` instead of loading
    Alembic: it must name what Alembic would."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(migrations.LOCATION))
    scripts = ScriptDirectory.from_config(config)
    assert migrations.HEAD == scripts.get_current_head()
    assert migrations.REVISIONS == tuple(script.revision for script in reversed(list(scripts.walk_revisions())))


async def test_a_batch_is_written_in_one_transaction_and_read_back_in_order(log_target: str) -> None:
    store = await Store.open(log_target)
    try:
        await store.commit(
            Batch(
                rows=[row(1), row(2), row(3, "d", "decision.allocated")],
                dead=[DeadLetter(received=5, subject="preemptd.cluster.default.x", reason="bad", raw=b"{x")],
                outbox=[OutboxRow(3, "d", "preemptd.decisions.default.allocated")],
                tracking=("stream/consumer", 42),
            )
        )
        assert [seq async for seq, _, _ in store.read_log(page=2)] == [1, 2, 3]
        assert [seq async for seq, _, _ in store.read_log(after=1, until=2)] == [2]
        assert await store.last_seq() == 3
        assert await store.tracking("stream/consumer") == 42
        assert await store.known_event_ids(["e1", "zz", "d"]) == {"e1": 1, "d": 3}
        assert [(o.seq, o.payload) for o in await store.outbox.unpublished(10)] == [(3, b"{}")]
        await store.outbox.mark_published([(3, 3)], at=9)
        assert await store.outbox.unpublished(10) == []
        assert (await store.dead_letters(10))[0].reason == "bad"
        assert (await store.find("d")).type == "decision.allocated"
    finally:
        await store.close()


async def test_a_run_of_published_decisions_leaves_a_refused_one_inside_it_as_it_was(tmp_path: Path) -> None:
    """The publisher marks runs of consecutive outbox rows; a decision passed over between two
    published ones is not marked published by the run around it."""
    store = await Store.open(str(tmp_path / "log.db"))
    try:
        decisions = [row(seq, f"d{seq}", "decision.allocated") for seq in (2, 4, 6, 8)]
        await store.commit(Batch(rows=[row(1), *decisions], outbox=[OutboxRow(d.seq, d.event_id, "s") for d in decisions]))
        assert await store.outbox.refused({6: "too big"}, at=5, pass_over_after=1) == [6]
        await store.outbox.mark_published([(2, 8)], at=9)
        assert await store.outbox.unpublished(10) == []
        counts = await store.counts()
        assert (counts["unpublished"], counts["passed_over"]) == (0, 1)
        with sqlite3.connect(tmp_path / "log.db") as conn:
            assert conn.execute("select seq, published_at from outbox order by seq").fetchall() == [(2, 9), (4, 9), (6, None), (8, 9)]
    finally:
        await store.close()


async def test_a_failed_batch_writes_nothing(log_target: str) -> None:
    store = await Store.open(log_target)
    try:
        await store.commit(Batch(rows=[row(1)]))
        with pytest.raises(StoreError, match="(?i)unique"):  # SQLite's UNIQUE constraint failed, PostgreSQL's unique constraint
            await store.commit(Batch(rows=[row(2), row(3, "e1")], tracking=("s", 7)))  # e1 repeats: unique id
        assert await store.last_seq() == 1
        assert await store.tracking("s") == 0
    finally:
        await store.close()


async def test_only_the_newest_snapshot_and_those_that_close_a_segment_are_kept(log_target: str) -> None:
    store = await Store.open(log_target)
    try:
        assert await store.latest_snapshot_seq() == 0
        for seq in (10, 20, 30, 40):
            await store.save_snapshot(seq, f"state@{seq}".encode(), created=seq, boundary=seq == 20)
        assert await store.latest_snapshot() == (40, b"state@40")
        assert await store.latest_snapshot(at_most=35) == (20, b"state@20"), "a boundary stays until its segment is archived"
        assert await store.latest_snapshot(at_most=15) is None
        assert await store.latest_snapshot_seq() == 40
    finally:
        await store.close()


async def test_a_large_snapshot_is_stored_in_parts_and_read_back_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts keep the copies the driver and SQLite make of each value small; a snapshot written
    before parts existed (all in its row) still reads back; old snapshots go with their parts."""
    monkeypatch.setattr(store_module, "_SNAPSHOT_PART", 10)
    store = await Store.open(str(tmp_path / "log.db"))
    try:
        big = bytes(range(256)) * 3
        await store.save_snapshot(10, big, created=1)
        assert await store.latest_snapshot() == (10, big)
        with sqlite3.connect(tmp_path / "log.db") as conn:
            stored = b"".join(part for (part,) in conn.execute("select payload from snapshot_parts where seq = 10 order by part"))
            assert stored.startswith(b"PDZ\x01") and len(stored) < len(big), "stored compressed, in parts of 10 bytes"
            assert conn.execute("select count(*) from snapshot_parts where seq = 10").fetchone() == ((len(stored) + 9) // 10,)
            conn.execute("insert into snapshots (seq, created, payload) values (20, 2, ?)", (b"written whole",))
        assert await store.latest_snapshot() == (20, b"written whole")
        for seq in (30, 40, 50):
            await store.save_snapshot(seq, b"x" * 25, created=seq)
        with sqlite3.connect(tmp_path / "log.db") as conn:
            assert conn.execute("select distinct seq from snapshot_parts order by seq").fetchall() == [(50,)]
    finally:
        await store.close()


async def test_reading_a_missing_log_says_so(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no preemptd log"):
        await Store.open(str(tmp_path / "missing.db"), create=False)


async def test_another_applications_database_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("create table orders (id integer)")
    for create in (True, False):
        with pytest.raises(StoreError, match="is not a preemptd log .it has tables orders"):
            await Store.open(str(path), create=create)
    tables = {r[0] for r in sqlite3.connect(path).execute("select name from sqlite_master where type='table'")}
    assert tables == {"orders"}


async def test_a_log_from_a_newer_preemptd_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    await (await Store.open(str(path))).close()
    with sqlite3.connect(path) as conn:
        conn.execute("update alembic_version set version_num = '0099'")
    for create in (True, False):
        with pytest.raises(StoreError, match=f"written by a newer preemptd .schema 0099; this version knows up to {migrations.HEAD}"):
            await Store.open(str(path), create=create)


async def test_reading_a_log_does_not_change_it(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = await Store.open(str(path))
    await store.commit(Batch(rows=[row(1), row(2)]))
    await store.close()
    before = path.read_bytes()
    reader = await Store.open(str(path), create=False)
    assert await reader.last_seq() == 2
    with pytest.raises(StoreError):
        await reader.commit(Batch(rows=[row(3)]))
    await reader.close()
    assert path.read_bytes() == before


async def test_a_snapshot_that_cannot_be_read_is_passed_over_for_the_whole_log(log_target: str) -> None:
    scenario = msgspec.yaml.decode((ROOT / "examples" / "general.yaml").read_bytes(), type=Scenario)
    records = simulate(scenario).records
    store = await Store.open(log_target)
    try:
        await store.commit(Batch(rows=[to_row(r) for r in records]))
        await store.save_snapshot(records[len(records) // 2].seq, b"\x92\x01truncated", 0)
        state = await load_state(History(store))
    finally:
        await store.close()
    assert snapshot(state) == snapshot(fold(records, ClusterState(log_id=store.log_id)))


async def test_a_stop_while_the_log_is_folded_at_start_keeps_what_was_folded_in_a_snapshot(log_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped midway through the start-up fold, the daemon saves a snapshot of what it folded
    (the log is read a page at a time and each page folded whole), so the next start goes on
    from there instead of folding everything again."""
    from preemptd.daemon import runtime
    from preemptd.daemon.log import history
    from preemptd.events import NodeUpserted, Resources, encode

    store = await Store.open(log_target)
    try:
        events = [NodeUpserted(id=f"n{i}", ts=1, node=f"n{i}", capacity=Resources({"vcore": 1000})) for i in range(1, 60_001)]
        await store.commit(
            Batch(
                rows=[
                    LogRow(seq=i, event_id=e.id, type="node.upserted", partition="default", ts=1, received=1, payload=encode(e))
                    for i, e in enumerate(events, 1)
                ]
            )
        )
        stop = anyio.CancelScope()
        fold = history.apply

        def apply_and_stop_at_25000(state, record):
            if record.seq == 25_000:
                stop.cancel()  # takes effect at the next read of the log
            return fold(state, record)

        monkeypatch.setattr(history, "apply", apply_and_stop_at_25000)
        with stop:
            await runtime._rebuilt(store)
        assert stop.cancelled_caught
        assert await store.latest_snapshot_seq() == 40_000, "the two pages read were folded whole and kept"
        monkeypatch.setattr(history, "apply", fold)
        state = await history.load_state(history.History(store))
        assert state.seq == 60_000 and len(state.partitions["default"].nodes) == 60_000
    finally:
        await store.close()


def test_a_snapshot_is_due_every_so_many_records_and_half_a_minute_after_the_last_while_the_log_grows() -> None:
    """A crash folds at most `--snapshot-every` records, or what 30 s brought, at the next start."""
    from preemptd.daemon.actors import snapshot_due

    assert snapshot_due(grown=100_000, elapsed_ms=0, every=100_000)
    assert not snapshot_due(grown=99_999, elapsed_ms=29_999, every=100_000)
    assert snapshot_due(grown=1, elapsed_ms=30_000, every=100_000)
    assert not snapshot_due(grown=0, elapsed_ms=3_600_000, every=100_000), "nothing new: no snapshot"


async def test_a_postgresql_log_is_created_by_the_migrations_and_keeps_its_name(postgres_log: str) -> None:
    store = await Store.open(postgres_log)
    name = store.log_id
    await store.close()
    tables = await _postgres_fetch(postgres_log, "select table_name from information_schema.tables where table_schema = 'public'")
    assert {"log", "outbox", "dead_letters", "snapshots", "snapshot_parts", "tracking", "meta", "alembic_version"} <= set(tables)
    assert await _postgres_fetch(postgres_log, "select version_num from alembic_version") == [migrations.HEAD]
    reopened = await Store.open(postgres_log.replace("postgresql://", "postgresql+asyncpg://"))
    assert reopened.log_id == name
    await reopened.close()


async def test_reading_a_postgresql_log_cannot_change_it(postgres_log: str) -> None:
    store = await Store.open(postgres_log)
    await store.commit(Batch(rows=[row(1), row(2)]))
    await store.close()
    reader = await Store.open(postgres_log, create=False)
    try:
        assert await reader.last_seq() == 2
        with pytest.raises(StoreError, match="read-only transaction"):
            await reader.commit(Batch(rows=[row(3)]))
        assert await reader.last_seq() == 2
    finally:
        await reader.close()


async def test_a_postgresql_database_that_is_missing_or_another_applications_is_refused_in_a_line(postgres_log: str) -> None:
    with pytest.raises(StoreError, match=r'cannot open the log at .*/nowhere_[0-9a-f]+: database "nowhere_[0-9a-f]+" does not exist'):
        await Store.open(postgres_log.rsplit("/", 1)[0] + f"/nowhere_{os.getpid():x}", create=False)
    await _postgres_fetch(postgres_log, "create table orders (id integer)")
    for create in (True, False):
        with pytest.raises(StoreError, match="is not a preemptd log .it has tables orders"):
            await Store.open(postgres_log, create=create)


async def _postgres_fetch(url: str, query: str) -> list:
    """The first column of `query`'s rows (conftest's `postgres`, off this test's event loop)."""
    return [row[0] for row in await anyio.to_thread.run_sync(postgres, url, query)]


async def test_a_writer_that_lost_its_lease_writes_nothing_more_and_the_standby_gets_it(postgres_log: str) -> None:
    lease = await WriterLease.wait(postgres_log, waiting=lambda holder: pytest.fail(f"nobody holds it yet, not {holder}"))
    store = await Store.open(postgres_log)
    store.db.fence = lease.fence
    try:
        await store.commit(Batch(rows=[row(1)]))
        await _postgres_fetch(postgres_log, f"select pg_terminate_backend({lease.pid})")
        with pytest.raises(StoreError, match="lease on the log is lost"):
            await store.commit(Batch(rows=[row(2)]))
        assert await store.last_seq() == 1
        with pytest.raises(StoreError, match="lost the writer's lease"):
            await lease.check()
        told: list[str] = []
        standby = await WriterLease.wait(postgres_log, waiting=told.append)
        assert told == [] and standby.pid != lease.pid
        await standby.release()
    finally:
        await store.close()
        await lease.release()


async def test_a_log_that_cannot_be_written_is_one_line_that_says_what_to_look_at(tmp_path: Path) -> None:
    """A read-only filesystem under the log (here: the file opened read-only, as SQLite sees
    both) stops a writer with a line naming the cause, and what happens to the rest; a disk that
    fails (SQLITE_IOERR) and a full one are worded the same way."""
    target = str(tmp_path / "log.db")
    store = await Store.open(target)
    await store.commit(Batch(rows=[row(1)]))
    await store.close()
    reader = await Store.open(target, create=False)
    try:
        with pytest.raises(StoreError) as refused:
            await reader.commit(Batch(rows=[row(2)]))
    finally:
        await reader.close()
    said = str(refused.value)
    assert said.startswith(f"log database error at {target}: attempt to write a readonly database: the log cannot be written (a read-only filesystem")
    assert said.endswith("what was not committed is read again from NATS at the next start") and "\n" not in said


async def test_published_outbox_rows_are_pruned_past_the_window_and_the_rest_stay(log_target: str) -> None:
    """The outbox grew by a row a decision for ever (34 MB of a 15-minute soak): rows published
    before the cut go; unpublished rows, rows passed over, and every decision in the log stay."""
    store = await Store.open(log_target)
    try:
        decisions = [row(seq, f"d{seq}", "decision.allocated") for seq in (1, 2, 3, 4)]
        await store.commit(Batch(rows=decisions, outbox=[OutboxRow(d.seq, d.event_id, "s") for d in decisions]))
        await store.outbox.mark_published([(1, 1)], at=100)
        await store.outbox.mark_published([(2, 2)], at=900)
        assert await store.outbox.refused({3: "too big"}, at=50, pass_over_after=1) == [3]
        assert await store.outbox.prune_published(before=500) == 1
        counts = await store.counts()
        assert (counts["unpublished"], counts["passed_over"]) == (1, 1), "the unpublished one and the one passed over stay"
        assert [o.seq for o in await store.outbox.unpublished(10)] == [4]
        assert await store.outbox.prune_published(before=1000) == 1 and await store.last_seq() == 4, "the log keeps every decision"
        assert (await store.find("d1")).type == "decision.allocated"
    finally:
        await store.close()
