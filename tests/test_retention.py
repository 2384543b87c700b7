"""Retention (issue 29): the live log is cut into segments at snapshots; closed segments go to
the archive as compressed, self-describing files, and leave the live log once the policy lets
them go. What left it is still history: `replay`, `report`, `explain` and `state --at` read the
archive and the live log as one, and reproduce every decision."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import time
from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa
from conftest import ROOT, preemptd
from sqlalchemy.ext.asyncio import create_async_engine
from test_daemon import event, publish, wait_for

from preemptd.daemon.log.database import database_url
from preemptd.daemon.log.history import History, load_state, save_snapshot
from preemptd.daemon.log.segments import DAY, Archivist, Retention
from preemptd.daemon.log.store import Store
from preemptd.daemon.records import Batch, OutboxRow
from preemptd.projections import partition_view

pytestmark = pytest.mark.anyio

GENERAL = ROOT / "examples" / "general.yaml"
CUTS = (30, 60, 90)  # boundary snapshots of the 104-record log of general.yaml


async def _log_cut_at(target: str, tmp_path: Path, cuts: tuple[int, ...] = CUTS) -> Store:
    """general.yaml's log, copied into `target`, with a boundary snapshot at each of `cuts`
    (what the daemon takes when a segment closes)."""
    simulated = tmp_path / "simulated.db"
    assert preemptd("simulate", str(GENERAL), "--quiet", "--db", str(simulated)).returncode == 0
    source = await Store.open(str(simulated), create=False)
    store = await Store.open(target)
    try:
        async for page in source.segments.rows(1, 10**9):
            await store.commit(Batch(rows=page))
    finally:
        await source.close()
        await store.close()
    engine = create_async_engine(database_url(target))  # the copy is the same log: decision ids carry its name
    async with engine.begin() as conn:
        await conn.execute(sa.text("UPDATE meta SET value = :log_id WHERE key = 'log_id'"), {"log_id": source.log_id})
    await engine.dispose()
    store = await Store.open(target)
    for cut in cuts:
        await save_snapshot(store, await load_state(History(store), until=cut), boundary=True)
    return store


def _lines(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as lines:
        return [json.loads(line) for line in lines]


async def test_closed_segments_are_archived_whole_and_leave_the_live_log_by_size(log_target: str, tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    store = await _log_cut_at(log_target, tmp_path)
    try:
        before = await load_state(History(store))
        archivist = Archivist(store, Retention(str(archive), age=7 * DAY, bytes=1))  # any size is too large: every archived segment goes
        await archivist.archive_closed()
        segments = await store.segments.all()
        assert [(s.first, s.last) for s in segments] == [(1, 30), (31, 60), (61, 90)], "one file per closed segment; 91..104 is still open"
        files = sorted(archive.iterdir())
        assert [f.name for f in files] == [f"{store.log_id}-{first:012d}-{last:012d}.jsonl.gz" for first, last in ((1, 30), (31, 60), (61, 90))]
        first, second = _lines(files[0]), _lines(files[1])
        header = second[0]
        assert (header["preemptd"], header["first"], header["last"], header["records"], header["partitions"], header["snapshot"]) == (
            "segment",
            31,
            60,
            30,
            ["default"],
            30,
        )
        assert second[1]["snapshot"] == 30 and second[1]["format"] == "msgpack", "the snapshot the segment starts from is in it"
        assert [line["seq"] for line in second[2:]] == list(range(31, 61))
        assert first[0]["snapshot"] is None and first[1]["seq"] == 1, "the first segment starts from nothing"
        assert second[2]["payload"]["type"] == second[2]["type"], "the record's payload as the log holds it"

        await archivist.drop_expired(now=0)
        assert all(s.dropped == 0 for s in await store.segments.all())
        if not log_target.startswith("postgresql"):
            assert Path(f"{log_target}-wal").stat().st_size == 0, "the write-ahead log is cut back once a segment is dropped"
        assert [seq async for page in store.read_pages() for seq, _, _ in page][0] == 91, "the live log keeps the open segment"
        assert await store.last_seq() == 104
        assert sorted(await store.segments.boundaries()) == [90], "only the open segment's start stays a boundary"
        after = await load_state(History(store))
        assert partition_view(after.partitions["default"]) == partition_view(before.partitions["default"])
        at_45 = await load_state(History(store), until=45)
        assert at_45.seq == 45, "a position that left the live log is rebuilt from the archive's snapshot"
    finally:
        await store.close()


async def test_segments_stay_live_until_old_enough_and_until_their_decisions_are_published(tmp_path: Path) -> None:
    target = str(tmp_path / "log.db")
    store = await _log_cut_at(target, tmp_path)
    try:
        archivist = Archivist(store, Retention(str(tmp_path / "archive"), age=DAY, bytes=2**40))
        await archivist.archive_closed()
        oldest, newest = min(s.last_received for s in await store.segments.all()), max(s.last_received for s in await store.segments.all())
        await archivist.drop_expired(now=oldest + DAY)  # none older than a day yet
        assert [s.dropped for s in await store.segments.all()] == [None, None, None]
        await store.commit(Batch(outbox=[OutboxRow(40, "waiting", "preemptd.decisions.default.allocated")]))
        await archivist.drop_expired(now=newest + DAY + 1)
        assert [s.dropped for s in await store.segments.all()] == [newest + DAY + 1, None, None], "a decision waiting to be published holds its segment"
        await store.outbox.mark_published([(40, 40)], at=1)
        await archivist.drop_expired(now=newest + DAY + 2)
        assert [s.dropped is not None for s in await store.segments.all()] == [True, True, True]
    finally:
        await store.close()


@pytest.fixture
def archived_log(tmp_path: Path) -> Path:
    """general.yaml's log with every closed segment archived and dropped from the live log."""
    target = tmp_path / "log.db"

    async def archived() -> None:
        store = await _log_cut_at(str(target), tmp_path)
        try:
            archivist = Archivist(store, Retention(str(tmp_path / "archive"), bytes=1))
            await archivist.archive_closed()
            await archivist.drop_expired(now=0)
        finally:
            await store.close()

    anyio.run(archived)
    return target


def test_replay_over_the_archive_and_the_live_log_reproduces_every_decision(archived_log: Path) -> None:
    replayed = preemptd("replay", "--db", str(archived_log), "--quiet")
    assert replayed.returncode == 0, replayed.stderr
    assert "all 23 decisions reproduced" in replayed.stdout


def test_state_explain_and_report_read_what_left_the_live_log(archived_log: Path, tmp_path: Path) -> None:
    simulated = tmp_path / "simulated.db"
    for seq in ("12", "45", "95"):
        here, there = (preemptd("state", "--db", str(db), "--at", seq, "--json") for db in (archived_log, simulated))
        assert here.returncode == 0, here.stderr
        assert here.stdout == there.stdout, f"state --at {seq} is the same with the history archived"
    explained = preemptd("explain", "--db", str(archived_log), "--json", "app-1-9")
    original = preemptd("explain", "--db", str(simulated), "--json", "app-1-9")
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout == original.stdout and explained.stdout, "every decision about a task, archived ones included"
    report = tmp_path / "report.html"
    made = preemptd("report", "--db", str(archived_log), "-o", str(report), "--quiet")
    assert made.returncode == 0, made.stderr
    assert "23 decisions" in made.stderr


def test_an_archive_moved_elsewhere_is_read_from_where_it_is_now(archived_log: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.move(tmp_path / "archive", moved)
    lost = preemptd("replay", "--db", str(archived_log), "--quiet")
    assert lost.returncode != 0 and "give the archive's place with --archive" in lost.stderr, lost.stderr
    found = preemptd("replay", "--db", str(archived_log), "--quiet", "--archive", str(moved))
    assert found.returncode == 0 and "all 23 decisions reproduced" in found.stdout, found.stderr
    query = tmp_path / "query.yaml"
    query.write_text("- {type: task.submitted, task: asked, app: asked, queue: root.normal.queue-1, resources: {vcore: 1}}\n")
    asked = preemptd("try", str(query), "--db", str(archived_log), "--at", "40", "--archive", str(moved), "--json")
    assert asked.returncode == 0 and json.loads(asked.stdout)["seq"] == 40, asked.stderr


@pytest.mark.parametrize("damage", ["flipped", "cut short", "a line that is not a record"])
def test_a_damaged_archived_segment_is_one_line_naming_it(archived_log: Path, tmp_path: Path, damage: str) -> None:
    """A corrupted segment gave a traceback of 37 to 51 lines that did not name the file."""
    segment = sorted((tmp_path / "archive").iterdir())[1]  # 31..60: what `state --at 40` reads
    data = segment.read_bytes()
    if damage == "flipped":
        data = data[:200] + bytes(b ^ 0x55 for b in data[200:400]) + data[400:]
    elif damage == "cut short":
        data = data[: len(data) // 2]
    else:
        lines = gzip.decompress(data).split(b"\n")
        data = gzip.compress(b"\n".join([*lines[:3], b'{"seq": "not a number"}', *lines[3:]]))
    segment.write_bytes(data)
    for command in (["replay", "--quiet"], ["state", "--at", "40"]):
        result = preemptd(*command, "--db", str(archived_log))
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert f"the archived segment {segment} is damaged" in result.stderr


@pytest.mark.slow
def test_a_running_daemon_archives_drops_and_still_replays_everything(nats_server, daemon_factory, tmp_path: Path) -> None:
    """`run --retain 1s`: every snapshot closes a segment (an eighth of the age), each goes to
    the archive, and those older than a second leave the live log; the streams are bounded by
    the same policy; replay over the archive and the live log reproduces every decision."""
    archive = tmp_path / "archive"
    daemon = daemon_factory(
        "--nats-url", nats_server.url, "--archive", str(archive), "--retain", "1s", "--retain-bytes", "64Mi", "--snapshot-every", "100"
    ).start()
    nodes = "".join(f"- {{type: node.upserted, node: n{n}, capacity: {{vcore: 100}}}}\n" for n in range(4))
    tasks = lambda first, count: "".join(
        f"- {{type: task.submitted, id: s{i}, task: t{i}, app: a{i // 10}, queue: root.default, resources: {{vcore: 1}}}}\n"
        for i in range(first, first + count)
    )  # noqa: E731
    daemon.publish(nodes + tasks(0, 300))
    for wave in (1, 2):  # the snapshot after each wave closes a segment (it spans more than 1/8 s)
        daemon.decisions_until(lambda found: len(found) >= 200 + 100 * wave)
        time.sleep(1.5)
        daemon.publish(tasks(200 + 100 * wave, 100))
    daemon.decisions_until(lambda found: len(found) >= 500)
    db = daemon.state_dir / "preemptd.db"
    wait_for(lambda: "segment dropped from the live log" in daemon.log_text(), what="a segment dropped")
    again = [
        event("task.submitted", f"s{i}", msg_id=f"again-{i}", task=f"t{i}", app=f"a{i // 10}", queue="root.default", resources={"vcore": 1}) for i in range(20)
    ]
    anyio.run(publish, nats_server.url, again)  # sent again after NATS' de-duplication window (a new Nats-Msg-Id) and after their rows left the live log
    duplicates = "select count(*) from dead_letters where reason like 'duplicate id %'"
    wait_for(lambda: sqlite3.connect(daemon.state_dir / "preemptd.db").execute(duplicates).fetchone()[0] == 20, what="20 duplicates")
    assert daemon.stop() == 0
    decided = 500  # each task allocated, once
    with sqlite3.connect(db) as conn:
        segments = conn.execute("select first, last, location, dropped from segments order by first").fetchall()
        live_from = conn.execute("select min(seq) from log").fetchone()[0]
    dropped = [s for s in segments if s[3] is not None]
    assert dropped and dropped[0][0] == 1 and live_from == dropped[-1][1] + 1, "the oldest segments left the live log, in order"
    assert all(Path(location).parent == archive and Path(location).exists() for _, _, location, _ in segments)
    replayed = preemptd("replay", "--db", str(db), "--quiet")
    assert replayed.returncode == 0 and f"all {decided} decisions reproduced" in replayed.stdout, replayed.stdout + replayed.stderr
    limits = anyio.run(stream_limits, nats_server.url)
    assert limits == {"PREEMPTD_CLUSTER": (600.0, 32 * 2**20), "PREEMPTD_DECISIONS": (600.0, 32 * 2**20), "PREEMPTD_REJECTED": (600.0, 4 * 2**20)}


async def stream_limits(url: str) -> dict[str, tuple[float, int]]:
    import nats

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        return {
            name: ((info := await js.stream_info(name)).config.max_age, info.config.max_bytes)
            for name in ("PREEMPTD_CLUSTER", "PREEMPTD_DECISIONS", "PREEMPTD_REJECTED")
        }
    finally:
        await nc.close()


async def test_an_object_store_archive_is_read_back_as_history(tmp_path: Path) -> None:
    """An fsspec URL (here its in-memory store, as s3:// would be with s3fs): segments are
    uploaded whole, and the history read through them is the one that was written."""
    import fsspec

    store = await _log_cut_at(str(tmp_path / "log.db"), tmp_path)
    try:
        before = [(r.seq, r.event) async for page in History(store).records() for r in page]
        archivist = Archivist(store, Retention("memory://preemptd-test/archive", bytes=1))
        await archivist.archive_closed()
        await archivist.drop_expired(now=0)
        first = (await store.segments.all())[0].location
        assert first.startswith("memory://") and first.endswith(f"/preemptd-test/archive/{store.log_id}-000000000001-000000000030.jsonl.gz")
        assert not fsspec.filesystem("memory").glob("/preemptd-test/archive/.*"), "no partial file is left behind"
        after = [(r.seq, r.event) async for page in History(store).records() for r in page]
        assert after == before
    finally:
        fsspec.filesystem("memory").rm("/preemptd-test", recursive=True)
        await store.close()


async def test_an_archive_that_cannot_be_written_keeps_everything_live(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    store = await _log_cut_at(str(tmp_path / "log.db"), tmp_path)
    try:
        archivist = Archivist(store, Retention(str(blocked), bytes=1))
        with pytest.raises(OSError):
            await archivist.archive_closed()
        await archivist.drop_expired(now=0)
        assert await store.segments.all() == [] and await store.segments.boundaries() == list(CUTS), "nothing archived: nothing leaves, the boundaries stay"
        assert [seq async for page in store.read_pages() for seq, _, _ in page][0] == 1
    finally:
        await store.close()


async def test_a_drop_cut_short_by_a_stop_leaves_one_history_and_is_finished_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment is marked dropped before its rows go, a chunk per transaction: readers take it
    from the archive from then on, so a stop between two chunks leaves no hole and no record
    twice; the next round of retention deletes the rest."""
    from preemptd.daemon.log import segments as segments_module

    monkeypatch.setattr(segments_module, "_DROP_CHUNK", 10)
    store = await _log_cut_at(str(tmp_path / "log.db"), tmp_path, cuts=(30,))
    try:
        whole = [r.seq async for page in History(store).records() for r in page]
        archivist = Archivist(store, Retention(str(tmp_path / "archive"), bytes=1))
        await archivist.archive_closed()
        with anyio.move_on_after(0):  # a stop: the transaction under way finishes, the next never starts
            await store.segments.drop((await store.segments.all())[0], at=5)
        assert await store.segments.first_live_seq() == 11, "cut short after the first chunk"
        assert [r.seq async for page in History(store).records() for r in page] == whole
        await archivist.drop_expired(now=6)
        assert await store.segments.first_live_seq() == 31
        assert [r.seq async for page in History(store).records() for r in page] == whole
    finally:
        await store.close()


async def test_the_ids_of_events_that_left_the_live_log_are_known_for_ever(log_target: str, tmp_path: Path) -> None:
    """Ids were de-duplicated against the live log only: events sent again once their segment
    left it were taken as new (20 finished tasks created and allocated again). The ids of a
    dropped segment are kept with the live log, and found as the live ones are."""
    store = await _log_cut_at(log_target, tmp_path)
    try:
        rows = [(row.seq, row.event_id) async for page in store.segments.rows(1, 104) for row in page]
        archivist = Archivist(store, Retention(str(tmp_path / "archive"), bytes=1))
        await archivist.archive_closed()
        await archivist.drop_expired(now=0)
        assert await store.segments.first_live_seq() == 91
        shims = {event_id: seq for seq, event_id in rows if not event_id.startswith(store.log_id + ":")}
        assert any(seq <= 90 for seq in shims.values())
        assert await store.known_event_ids([*shims, "never-sent"]) == shims, "archived and live ids alike, at their positions"
        assert await store.segments.ids_retired_through() == 90
    finally:
        await store.close()
    reopened = await Store.open(log_target)
    try:
        assert await reopened.known_event_ids(list(shims)[:3]) == dict(list(shims.items())[:3]), "known after a restart"
    finally:
        await reopened.close()


async def test_a_log_dropped_before_ids_were_kept_reads_them_back_from_its_archive(tmp_path: Path) -> None:
    """A log whose segments left before schema 0005 kept no ids: the archivist reads them back
    from the segments' files, once."""
    target = str(tmp_path / "log.db")
    store = await _log_cut_at(target, tmp_path)
    try:
        archivist = Archivist(store, Retention(str(tmp_path / "archive"), bytes=1))
        await archivist.archive_closed()
        await archivist.drop_expired(now=0)
        with sqlite3.connect(target) as conn:  # as a log dropped by the version before
            conn.execute("delete from retired_ids")
            conn.execute("delete from meta where key = 'ids_retired_through'")
        old_id = next(line["event_id"] for line in _lines(min((tmp_path / "archive").iterdir()))[2:] if ":" not in line["event_id"])
        assert await store.known_event_ids([old_id]) == {}
        await archivist.keep_archived_ids()
        assert list(await store.known_event_ids([old_id])) == [old_id]
        assert await store.segments.ids_retired_through() == 90
    finally:
        await store.close()


def test_a_kept_id_costs_about_twenty_bytes(tmp_path: Path) -> None:
    """Bounded: kept as a 64-bit hash and its position, in a table without row ids."""
    target = tmp_path / "log.db"

    async def kept() -> None:
        store = await Store.open(str(target))
        try:
            for start in range(0, 200_000, 20_000):
                await store.segments.retire([(f"{start + i:08d}-{'x' * 30}", start + i) for i in range(20_000)], start, start + 20_000)
        finally:
            await store.close()

    anyio.run(kept)
    with sqlite3.connect(target) as conn:
        size = conn.execute("select sum(pgsize) from dbstat where name = 'retired_ids'").fetchone()[0]
    assert size / 200_000 <= 24, f"{size / 200_000:.1f} bytes per id"
