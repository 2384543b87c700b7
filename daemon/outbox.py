"""The outbox publisher: decisions committed to the log reach the decision stream exactly once.

Decisions go to the outbox in the transaction of the tick that made them. The publisher sends
what is unpublished (at start too) with `Nats-Msg-Id` set to the decision id, and marks in the
log what JetStream acknowledged. A decision sent again after a crash carries the same id, so
JetStream's de-duplication window drops it. Rejection notices of dead letters are sent once, at
best: the dead letters themselves are in the log.
"""

from __future__ import annotations

import logging

import anyio
import msgspec

from .clock import wall_ms
from .errors import BusError
from .logs import log
from .nats_source import Bus, Outbound, rejected_subject
from .store import DeadLetter, OutboxRow, Store

__all__ = ["Publisher", "notice", "publish_rejections"]

_PUBLISH_GRACE = 15.0  # seconds a batch of decisions in flight may hold up a stop
_BATCH = 1000


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
        """Publish decisions and mark them published, or say why not. A stop waits for the batch
        in flight: decisions on the stream but unmarked in the outbox would be sent again after
        a restart, perhaps after JetStream's de-duplication window."""
        with anyio.move_on_after(_PUBLISH_GRACE, shield=True):
            try:
                await self.bus.publish([Outbound(r.subject, r.payload, r.decision_id) for r in rows])
            except BusError as exc:
                return str(exc)
            await self.store.mark_published([r.seq for r in rows], wall_ms())
            return None
        return f"no answer from NATS within {_PUBLISH_GRACE:.0f}s"


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
