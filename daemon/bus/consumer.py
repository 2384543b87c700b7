"""The daemon's durable push consumer of the cluster stream (the fastest way nats-py reads a
stream: no request per batch, no task per message), bounded by flow control and the consumer's
limit of unacknowledged messages. A batch is acknowledged, with one cumulative ack, only after
it is committed to the log."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any

import nats
import nats.errors
import nats.js.errors
from nats.js import api

from ..errors import BusError
from ..records import CLUSTER_STREAM, CONSUMER, Inbound
from .access import NATS_ERRORS, describe
from .streams import partition_filter, sequences

__all__ = ["ClusterConsumer"]

_MAX_ACK_PENDING = 50_000  # messages delivered and not yet acknowledged
_INBOX_BYTES = 64 * 2**20  # delivered and not yet taken: beyond it, flow control holds the server back


class ClusterConsumer:
    """This log's consumer of the cluster stream, and the messages it delivered not yet taken."""

    def __init__(self, nc: Any) -> None:
        self._js = nc.jetstream()
        self._consumer: Any = None
        self._inbox: collections.deque[Inbound] = collections.deque()  # delivered, not yet taken by `fetch`
        self._arrived = asyncio.Event()
        self._inbox_bytes = 0
        self._drained = asyncio.Event()
        self._consumer_name = CONSUMER
        self.partitions: tuple[str, ...] | None = None  # the partitions the consumer reads; None: all
        self._delivered = 0  # the current consumer's last delivery (its consumer sequence)
        self._resume_at: int | None = None
        self.generation = 0  # bumped by every new consumer
        self.resumed_at = 0  # the stream sequence the current consumer started at

    async def subscribe(self, start: int, consumer: str | None = None, partitions: tuple[str, ...] | None = None) -> None:
        """(Re)create the durable consumer (`consumer`, named once per log) so that it delivers
        from stream sequence `start`, the messages of `partitions` only when given (both are
        kept for the next time).

        The log, not the consumer, knows what is committed: messages handed to a daemon that
        died before committing them must come again, and the cumulative ack of a later batch
        would otherwise hide them. Each log has its own consumer, so that a second daemon on the
        same NATS does not move the first one's position.
        """
        self._consumer_name = consumer or self._consumer_name
        if partitions is not None:
            self.partitions = partitions
        subjects = partition_filter(self.partitions) if self.partitions else []
        config = api.ConsumerConfig(
            durable_name=self._consumer_name,
            filter_subject=subjects[0] if len(subjects) == 1 else None,  # one subject: servers before 2.10 take it too
            filter_subjects=subjects if len(subjects) > 1 else None,
            ack_policy=api.AckPolicy.ALL,
            ack_wait=30.0,
            max_ack_pending=_MAX_ACK_PENDING,
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=max(start, 1),
        )
        try:
            if self._consumer is not None:
                with contextlib.suppress(*NATS_ERRORS):
                    await self._consumer.unsubscribe()
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await self._js.delete_consumer(CLUSTER_STREAM, self._consumer_name)
            self.generation += 1
            self._delivered = 0
            self._inbox.clear()
            self._inbox_bytes = 0
            self._drained.set()  # a callback of the consumer before ends
            self._consumer = await self._js.subscribe(
                "" if len(subjects) > 1 else subjects[0] if subjects else "preemptd.cluster.>",
                durable=self._consumer_name,
                stream=CLUSTER_STREAM,
                config=config,
                cb=self._receiver(self.generation),
                manual_ack=True,
                flow_control=True,
                idle_heartbeat=5.0,
            )
            self.resumed_at, self._resume_at = start, None
        except NATS_ERRORS as exc:
            raise BusError(f"cannot create consumer {self._consumer_name} on {CLUSTER_STREAM}: {describe(exc)}") from exc

    def _receiver(self, generation: int):
        """The callback of one consumer: its messages go to the inbox, tagged with it. While the
        inbox holds `_INBOX_BYTES`, it waits: flow control then stops the server from sending."""

        async def received(m: Any) -> None:
            while self._inbox_bytes > _INBOX_BYTES and generation == self.generation:
                self._drained.clear()
                await self._drained.wait()
            if generation == self.generation:
                stream_seq, delivered = sequences(m.reply)
                after_gap, self._delivered = delivered != self._delivered + 1, delivered
                self._inbox.append(Inbound(m.subject, m.data, stream_seq, m, generation, after_gap))
                self._inbox_bytes += len(m.data)
                self._arrived.set()

        return received

    def resume_from(self, start: int) -> None:
        """Have the next `fetch` recreate the consumer at stream sequence `start` (retried,
        like any fetch, until NATS answers)."""
        self._resume_at = start

    async def fetch(self, batch: int, timeout: float) -> list[Inbound]:
        """Up to `batch` delivered messages, as many as have arrived; an empty list when none
        arrived within `timeout`."""
        if self._resume_at is not None:
            await self.subscribe(self._resume_at)
        if not self._inbox:
            self._arrived.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), timeout)
        inbox = self._inbox
        taken = [inbox.popleft() for _ in range(min(batch, len(inbox)))]
        self._inbox_bytes -= sum(len(m.data) for m in taken)
        self._drained.set()
        return taken

    async def ack_through(self, message: Inbound) -> None:
        """Acknowledge `message` and every earlier one (the consumer's ack policy is `all`)."""
        try:
            await message.handle.ack()
        except NATS_ERRORS as exc:
            raise BusError(f"ack failed: {describe(exc)}") from exc

    async def lag(self) -> int:
        """Messages for this daemon's consumer not yet acknowledged: not yet delivered, or
        delivered and not yet committed (a batch is acknowledged once committed)."""
        try:
            info = await self._js.consumer_info(CLUSTER_STREAM, self._consumer_name)
        except NATS_ERRORS as exc:
            raise BusError(f"cannot read consumer {self._consumer_name} of {CLUSTER_STREAM}: {describe(exc)}") from exc
        return (info.num_pending or 0) + (info.num_ack_pending or 0)
