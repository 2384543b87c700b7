"""The outbox publisher: decisions committed to the log reach the decision stream exactly once.

Decisions go to the outbox in the transaction of the tick that made them. The publisher sends
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

import anyio
import msgspec

from preemptd.events import decode_decision, encode_within

from .clock import wall_ms
from .errors import BusError
from .logs import log
from .nats_source import Bus, Outbound, rejected_subject
from .store import DeadLetter, OutboxRow, Store

__all__ = ["Publisher", "notice", "publish_rejections"]

_PUBLISH_GRACE = 5.0  # seconds a batch of decisions in flight may hold up a stop
_BATCH = 250  # small enough that a stop never waits long for the batch in flight
_TRIES = 3  # refusals by JetStream before a decision is passed over
_HEADERS = 512  # bytes kept for the headers (Nats-Msg-Id) within the server's max_payload


class Publisher:
    """Publishes the outbox until cancelled; `wake()` after committing new decisions."""

    def __init__(self, store: Store, bus: Bus) -> None:
        self.store, self.bus = store, bus
        self._woken = anyio.Event()

    def wake(self) -> None:
        self._woken.set()

    async def run(self) -> None:
        failures = 0
        while True:
            rows = await self.store.unpublished(_BATCH)
            if not rows:
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
            sendable, too_big = _fit(rows, self.bus.max_payload - _HEADERS)
            try:
                outcomes = await self.bus.publish_each([Outbound(row.subject, data, row.decision_id) for row, data in sendable])
            except BusError as exc:
                return str(exc)
            now = wall_ms()
            await self.store.mark_published([row.seq for (row, _), outcome in zip(sendable, outcomes) if outcome is None], now)
            refused = {row.seq: outcome for (row, _), outcome in zip(sendable, outcomes) if outcome is not None}
            passed = await self.store.refused(too_big, now, pass_over_after=1) + await self.store.refused(refused, now, pass_over_after=_TRIES)
            for row in rows:
                if row.seq in passed:
                    problem = too_big.get(row.seq) or refused[row.seq]
                    log("decision passed over: it stays in the log but is not published", logging.ERROR, id=row.decision_id, problem=problem)
            return None
        return f"no answer from NATS within {_PUBLISH_GRACE:.0f}s"


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


async def publish_rejections(bus: Bus, dead: list[DeadLetter]) -> None:
    """Tell shims about their rejected input, on `preemptd.rejected.<partition>`."""
    notices = [Outbound(rejected_subject(d.partition or "unknown"), notice(d)) for d in dead]
    try:
        await bus.publish(notices)
    except BusError as exc:
        log("could not publish rejection notices (they are in dead letters)", logging.WARNING, error=str(exc))


def notice(dead: DeadLetter) -> bytes:
    """The rejection notice published for a dead letter, on `preemptd.rejected.<partition>`."""
    return msgspec.json.encode(
        {
            "subject": dead.subject,
            "stream_seq": dead.stream_seq,
            "event_type": dead.event_type,
            "event_id": dead.event_id,
            "reason": dead.reason,
            "received": dead.received,
            "raw": dead.raw.decode(errors="replace")[:4096],
        }
    )
