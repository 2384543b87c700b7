"""The outbox: decisions committed to the log reach the decision stream exactly once.

Decisions go to the outbox in the transaction of the tick that made them. `Outbox` sends
what is unpublished (at start too) with `Nats-Msg-Id` set to the decision id, and marks in the
log what JetStream acknowledged. A decision sent again after a crash carries the same id, so
JetStream's de-duplication window drops it. Rejection notices of dead letters are sent once, at
best: the dead letters themselves are in the log.

No decision holds up the ones after it. One larger than the server's `max_payload` is sent
shortened (its explanation cut, saying so; the log keeps the whole); one that cannot be made to
fit, or that JetStream refuses `_TRIES` times, is passed over: logged, counted in the outbox,
kept in the log. NATS not answering is not a refusal: then everything waits and is tried again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated

import anyio
import msgspec
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from preemptd.events import MAX_TIMESTAMP, cut_text, decode_decision, encode_within

from ..clock import monotonic_ms, wall_ms
from ..errors import BusError
from ..operations.logs import log
from ..records import DeadLetter, Outbound, OutboxRow, rejected_subject
from .database import Database, first_value
from .tables import LOG, OUTBOX

if TYPE_CHECKING:
    from ..bus import Bus, Publisher

__all__ = [
    "KEEP_PUBLISHED",
    "PRUNE_EVERY",
    "WAITING",
    "Notice",
    "Outbox",
    "OutboxTable",
    "waiting_count",
    "notice",
    "publish_rejections",
    "publish_unacknowledged_rejections",
]

_PUBLISH_GRACE = 5.0  # seconds a batch of decisions in flight may hold up a stop
_BATCH = 1000  # small enough that a stop never waits long for the batch in flight
_TRIES = 3  # refusals by JetStream before a decision is passed over
_NOTICE_FIELD = 1024  # characters of each text in a rejection notice
_HEADERS = 512  # bytes kept for the headers (Nats-Msg-Id) within the server's max_payload
#: Published outbox rows are kept this long (ms), twice the decision stream's de-duplication
#: window, then deleted, at most every `PRUNE_EVERY` ms while the outbox is idle: the log
#: keeps every decision; the row only said whether it went out.
KEEP_PUBLISHED = 2 * 600_000
PRUNE_EVERY = 60_000


#: The outbox rows still to publish: what the index `outbox_unpublished` finds.
WAITING = sa.and_(OUTBOX.c.published_at.is_(None), OUTBOX.c.passed_over_at.is_(None))


class OutboxTable:
    """The outbox table: which decisions of the log are still to publish, which JetStream
    acknowledged, and which it refused (passed over after so many tries)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def mark_published(self, runs: Sequence[tuple[int, int]], at: int) -> None:
        """Mark published the unpublished outbox rows of each run (first and last position,
        inclusive): one statement per run, where a list of a thousand positions cost more to
        build than to run."""
        if runs:
            await self.db.write(_mark_published, list(runs), at)

    async def prune_published(self, before: int) -> int:
        """Delete the outbox rows published before `before` (ms): the stream holds those
        decisions, and NATS would drop a repeat of them only within its de-duplication window;
        the log keeps every decision. Rows passed over stay, for the operator. How many went."""
        return await self.db.write(_prune_published, before)

    async def refused(self, problems: dict[int, str], at: int, *, pass_over_after: int) -> list[int]:
        """Record that NATS refused these decisions (by log position, with why); those refused
        `pass_over_after` times are passed over: they stay in the log and are not sent again.
        Returns the positions passed over now."""
        return await self.db.write(_refused, problems, at, pass_over_after) if problems else []

    async def unpublished(self, limit: int) -> list[OutboxRow]:
        return await self.db.run(_unpublished, limit)

    async def oldest_waiting(self) -> int | None:
        """The position of the oldest decision waiting to be published, if any."""
        return await self.db.run(first_value, sa.select(sa.func.min(OUTBOX.c.seq)).where(WAITING))

    async def waiting_decisions(self) -> int:
        """How many decisions wait to be published (counted in the index `outbox_unpublished`)."""
        return await self.db.run(waiting_count)


async def _mark_published(conn: AsyncConnection, runs: list[tuple[int, int]], at: int) -> None:
    waiting = sa.and_(OUTBOX.c.published_at.is_(None), OUTBOX.c.passed_over_at.is_(None))
    for first, last in runs:
        await conn.execute(OUTBOX.update().where(OUTBOX.c.seq.between(first, last), waiting).values(published_at=at))


async def _prune_published(conn: AsyncConnection, before: int) -> int:
    pruned = await conn.execute(OUTBOX.delete().where(OUTBOX.c.published_at < before))
    return int(pruned.rowcount or 0)


async def _unpublished(conn: AsyncConnection, limit: int) -> list[OutboxRow]:
    query = (
        sa.select(OUTBOX.c.seq, OUTBOX.c.decision_id, OUTBOX.c.subject, LOG.c.payload)
        .join(LOG, LOG.c.seq == OUTBOX.c.seq)
        .where(WAITING)
        .order_by(OUTBOX.c.seq)
        .limit(limit)
    )
    return [OutboxRow(*row) for row in await conn.execute(query)]


async def _refused(conn: AsyncConnection, problems: dict[int, str], at: int, pass_over_after: int) -> list[int]:
    for seq, problem in problems.items():
        await conn.execute(OUTBOX.update().where(OUTBOX.c.seq == seq).values(attempts=OUTBOX.c.attempts + 1, problem=problem))
    tried_enough = sa.and_(OUTBOX.c.seq.in_(list(problems)), OUTBOX.c.attempts >= pass_over_after)
    passed = [seq for (seq,) in await conn.execute(sa.select(OUTBOX.c.seq).where(tried_enough).order_by(OUTBOX.c.seq))]
    await conn.execute(OUTBOX.update().where(tried_enough).values(passed_over_at=at))
    return passed


async def waiting_count(conn: AsyncConnection) -> int:
    return (await conn.execute(sa.select(sa.func.count()).select_from(OUTBOX).where(WAITING))).scalar_one()


class Outbox:
    """Publishes the outbox until cancelled; `wake()` after committing new decisions."""

    def __init__(self, table: OutboxTable, publisher: Publisher) -> None:
        self.table, self.publisher = table, publisher
        self._woken = anyio.Event()

    def wake(self) -> None:
        self._woken.set()

    async def run(self) -> None:
        failures, pruned_at = 0, monotonic_ms()
        while True:
            rows = await self.table.unpublished(_BATCH)
            if not rows:
                if monotonic_ms() - pruned_at >= PRUNE_EVERY:  # idle: the published rows past the window go
                    pruned_at = monotonic_ms()
                    await self.table.prune_published(wall_ms() - KEEP_PUBLISHED)
                with anyio.move_on_after(1.0):
                    await self._woken.wait()
                self._woken = anyio.Event()
                continue
            error = await self._publish(rows)
            if error is None:
                failures = 0
                continue
            failures += 1
            if failures in (1, 10) or failures % 100 == 0:
                log("decisions wait for NATS", logging.WARNING, error=error, unpublished=len(rows))
            await anyio.sleep(min(0.1 * failures, 2.0))

    async def _publish(self, rows: list[OutboxRow]) -> str | None:
        """Publish decisions and record what became of each, or say why NATS did not answer. A
        stop waits for the batch in flight: decisions on the stream but unmarked in the outbox
        would be sent again after a restart, perhaps after JetStream's de-duplication window."""
        with anyio.move_on_after(_PUBLISH_GRACE, shield=True):
            sendable, too_big = _fit(rows, self.publisher.max_payload - _HEADERS)
            try:
                outcomes = await self.publisher.publish_each([Outbound(row.subject, data, row.decision_id) for row, data in sendable])
            except BusError as exc:
                return str(exc)
            now = wall_ms()
            await self.table.mark_published(_runs(rows, {row.seq for (row, _), outcome in zip(sendable, outcomes) if outcome is None}), now)
            refused = {row.seq: outcome for (row, _), outcome in zip(sendable, outcomes) if outcome is not None}
            passed = await self.table.refused(too_big, now, pass_over_after=1) + await self.table.refused(refused, now, pass_over_after=_TRIES)
            for row in rows:
                if row.seq in passed:
                    problem = too_big.get(row.seq) or refused[row.seq]
                    log("decision passed over: it stays in the log but is not published", logging.ERROR, id=row.decision_id, problem=problem)
            return None
        return f"no answer from NATS within {_PUBLISH_GRACE:.0f}s"


def _runs(rows: list[OutboxRow], published: set[int]) -> list[tuple[int, int]]:
    """The published rows of a batch as runs of consecutive rows: (first, last) positions."""
    runs: list[tuple[int, int]] = []
    start = None
    for row, after in zip(rows, [*rows[1:], None]):
        if row.seq in published:
            start = row.seq if start is None else start
            if after is None or after.seq not in published:
                runs.append((start, row.seq))
                start = None
    return runs


def _fit(rows: list[OutboxRow], max_bytes: int) -> tuple[list[tuple[OutboxRow, bytes]], dict[int, str]]:
    """Each row with the bytes to send (shortened if need be), and why each that cannot fit."""
    sendable, too_big = [], {}
    for row in rows:
        data = row.payload if len(row.payload) <= max_bytes else encode_within(decode_decision(row.payload), max_bytes)
        if data is None:
            too_big[row.seq] = f"{len(row.payload):,} bytes, and no shorter form fits the server's max_payload ({max_bytes + _HEADERS:,} bytes)"
        else:
            sendable.append((row, data))
    return sendable, too_big


async def publish_rejections(publisher: Publisher, dead: list[DeadLetter]) -> None:
    """Tell shims about their rejected input, on `preemptd.rejected.<partition>`, before the
    events are acknowledged (`publish --wait` takes an acknowledged event without a notice as
    accepted). Tried until NATS answers: a stop meanwhile leaves the events unacknowledged, and
    they and their notices come again. A notice JetStream refuses is logged and passed over."""
    notices = [Outbound(rejected_subject(d.partition or "unknown"), notice(d)) for d in dead]
    fitting = [n for n in notices if len(n.data) <= publisher.max_payload - _HEADERS]
    if len(fitting) < len(notices):  # a server set far below its default of 1 MiB
        log("rejection notices beyond the server's max_payload are passed over", logging.WARNING, notices=len(notices) - len(fitting))
    delay = 1.0
    while fitting:
        try:
            refusals = await publisher.publish_each(fitting)
        except BusError as exc:
            log("could not publish rejection notices; trying again", logging.WARNING, error=str(exc), seconds=delay)
            await anyio.sleep(delay)
            delay = min(delay * 2, 30.0)
            continue
        for problem in filter(None, refusals):
            log("rejection notice refused; it is passed over (the dead letter is in the log)", logging.WARNING, problem=problem)
        return


async def publish_unacknowledged_rejections(letters: Callable[[int, int], Awaitable[list[DeadLetter]]], bus: Bus, consumer: str, position: int) -> None:
    """At start: the notices of dead letters the log committed but the consumer never
    acknowledged (a stop came between), which the consumer, placed after the log's position,
    will not deliver again (`letters(after, through)`: the dead letters of those stream
    sequences, as the store reads them). Each is checked against the stream, so that a dead letter of
    another stream with the same sequence number is never announced."""
    acknowledged = await bus.streams.acknowledged(consumer)
    if acknowledged is None or acknowledged >= position:
        return
    dead = [d for d in await letters(acknowledged, position) if d.stream_seq and await bus.streams.cluster_message(d.stream_seq) == d.raw]
    if dead:
        log("publishing the rejection notices a stop cut short", notices=len(dead))
        await publish_rejections(bus.publisher, dead)


class Notice(msgspec.Struct, kw_only=True):
    """A rejection notice, on `preemptd.rejected.<partition>`: the dead letter, its raw bytes
    cut to 4 KiB. Read with care: anyone who may publish may publish one."""

    subject: str = ""
    stream_seq: int | None = None
    event_type: str | None = None
    event_id: str | None = None
    reason: str = ""
    received: Annotated[int, msgspec.Meta(ge=0, le=MAX_TIMESTAMP)] = 0
    raw: str = ""
    kind: str = ""  # why, in a word: invalid, rejected, duplicate_id, ... (notices before 0.2 have none)


def notice(dead: DeadLetter) -> bytes:
    """The rejection notice published for a dead letter: every field cut to a size that keeps
    the notice far below any server's `max_payload`, whatever the shim sent."""
    return msgspec.json.encode(
        Notice(
            subject=cut_text(dead.subject, _NOTICE_FIELD),
            stream_seq=dead.stream_seq,
            event_type=dead.event_type and cut_text(dead.event_type, _NOTICE_FIELD),
            event_id=dead.event_id and cut_text(dead.event_id, _NOTICE_FIELD),
            reason=cut_text(dead.reason, _NOTICE_FIELD),
            received=dead.received,
            raw=cut_text(dead.raw.decode(errors="replace"), _NOTICE_FIELD),
            kind=dead.kind,
        )
    )
