"""The JetStream streams: made idempotently (cluster events from shims; decisions from the
daemon, de-duplicated on `Nats-Msg-Id`, the decision id; rejection notices), what other
processes can read of them (which daemons read the cluster stream and how far), and reading a
stream for `tail`, tests and tools."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import nats
import nats.errors
import nats.js.errors
from nats.js import api

from ..errors import BusError
from ..records import CLUSTER_STREAM, CONSUMER, DECISION_STREAM, REJECTED_STREAM, subject_partition
from .access import NATS_ERRORS, describe

__all__ = ["ReadThrough", "Reader", "Streams", "creation_stamp", "partition_filter", "sequences"]

_WEEK = 7 * 24 * 3600.0


_STREAMS = (
    api.StreamConfig(name=CLUSTER_STREAM, subjects=["preemptd.cluster.>"], storage=api.StorageType.FILE, max_age=_WEEK, duplicate_window=120.0),
    api.StreamConfig(name=DECISION_STREAM, subjects=["preemptd.decisions.>"], storage=api.StorageType.FILE, max_age=_WEEK, duplicate_window=600.0),
    api.StreamConfig(name=REJECTED_STREAM, subjects=["preemptd.rejected.>"], storage=api.StorageType.FILE, max_age=_WEEK),
)


def creation_stamp(created: datetime.datetime | str) -> str:
    """A stream's creation time to the microsecond, as `2026-11-21T09:43:05.123456Z`, whichever
    form the client gives it in (a datetime, or the server's text with nanoseconds in older
    nats-py, truncated the same way). Two streams created in one second stay apart."""
    if isinstance(created, datetime.datetime):
        return created.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    seconds, _, fraction = created.rstrip("Z").partition(".")
    return f"{seconds[:19]}.{fraction[:6].ljust(6, '0')}Z"


def sequences(reply: str) -> tuple[int, int]:
    """The stream and consumer sequences in a JetStream ack subject, without building nats-py's
    whole metadata object (a third of the fetch cost): `$JS.ACK.<stream>.<consumer>.<delivered>.
    <stream seq>.<consumer seq>...` (9 tokens), or with a domain and account hash first (12)."""
    tokens = reply.split(".")
    first = 5 if len(tokens) == 9 else 7
    return int(tokens[first]), int(tokens[first + 1])


def partition_filter(partitions: Sequence[str]) -> list[str]:
    """The cluster subjects of `partitions`."""
    return [f"preemptd.cluster.{partition}.>" for partition in partitions]


def _filtered_partitions(config: Any) -> tuple[str, ...] | None:
    """The partitions a consumer of the cluster stream reads; None for every one."""
    subjects = list(config.filter_subjects or ()) + ([config.filter_subject] if config.filter_subject else [])
    if not subjects or "preemptd.cluster.>" in subjects:
        return None
    return tuple(sorted(str(subject_partition(subject)) for subject in subjects))


@dataclass(frozen=True)
class Reader:
    """A daemon's consumer of the cluster stream, as other processes see it."""

    name: str
    partitions: tuple[str, ...] | None  # None: every partition
    active: bool  # a daemon is subscribed to it now
    acknowledged: int  # the stream sequence it has committed through

    def reads(self, partition: str) -> bool:
        return self.partitions is None or partition in self.partitions


@dataclass(frozen=True)
class ReadThrough:
    """How far the daemons on a NATS have read and committed the cluster stream."""

    readers: tuple[Reader, ...]

    def read(self, partition: str, seq: int) -> bool:
        """Whether a daemon reading `partition` has committed stream sequence `seq`."""
        return any(reader.reads(partition) and reader.acknowledged >= seq for reader in self.readers)


class Streams:
    """The streams of one connection: their administration, and reading them."""

    def __init__(self, nc: Any) -> None:
        self._js = nc.jetstream()

    async def ensure(self, limits: dict[str, tuple[float, int]] | None = None) -> None:
        """Create the streams. The daemon gives each stream's limits (max age in seconds, max
        bytes, from its retention policy) and brings an existing stream's settings up to date;
        other clients (`publish`, `tail`) leave an existing stream as the daemon set it."""
        for config in _STREAMS:
            if limits is not None:
                max_age, max_bytes = limits[str(config.name)]
                config = dataclasses.replace(config, max_age=max_age, max_bytes=max_bytes)
            try:
                if limits is None and await self._exists(str(config.name)):
                    continue  # a client needs to read the stream only (permissions may grant no more)
                try:
                    await self._js.add_stream(config)
                except nats.js.errors.BadRequestError:
                    if limits is not None:
                        await self._js.update_stream(config)
            except nats.js.errors.ServiceUnavailableError as exc:
                raise BusError(
                    f"cannot create JetStream stream {config.name}: JetStream is not enabled on this NATS server (start nats-server with -js)"
                ) from exc
            except NATS_ERRORS as exc:
                raise BusError(f"cannot create JetStream stream {config.name}: {describe(exc)}") from exc

    async def _exists(self, stream: str) -> bool:
        try:
            await self._js.stream_info(stream)
        except nats.js.errors.NotFoundError:
            return False
        return True

    async def cluster_stream(self) -> tuple[str, int]:
        """The cluster stream's identity (its creation time: a recreated stream, or another
        server's, has another) and its last sequence number (0 when empty)."""
        try:
            info = await self._js.stream_info(CLUSTER_STREAM)
        except NATS_ERRORS as exc:
            raise BusError(f"cannot read stream {CLUSTER_STREAM}: {describe(exc)}") from exc
        if info.created is None:
            raise BusError(f"NATS did not say when stream {CLUSTER_STREAM} was created; preemptd needs it to tell streams apart")
        return creation_stamp(info.created), info.state.last_seq

    async def readers(self) -> list[Reader]:
        """The consumers of preemptd logs on the cluster stream: which partitions each reads,
        whether a daemon reads through it now, and how far it has committed."""
        return [
            Reader(c.name, _filtered_partitions(c.config), bool(c.push_bound), c.ack_floor.stream_seq if c.ack_floor else 0)
            for c in sorted(await self._daemons(), key=lambda c: c.name)
        ]

    async def read_through(self) -> ReadThrough:
        """How far the daemons have read and committed the cluster stream, partition by partition."""
        return ReadThrough(tuple(await self.readers()))

    async def acknowledged(self, consumer: str) -> int | None:
        """How far `consumer` of the cluster stream has acknowledged; None if it does not exist."""
        try:
            info = await self._js.consumer_info(CLUSTER_STREAM, consumer)
        except nats.js.errors.NotFoundError:
            return None
        except NATS_ERRORS as exc:
            raise BusError(f"cannot read consumer {consumer} of {CLUSTER_STREAM}: {describe(exc)}") from exc
        return info.ack_floor.stream_seq if info.ack_floor else 0

    async def cluster_message(self, seq: int) -> bytes | None:
        """The message at `seq` in the cluster stream; None if it is gone."""
        try:
            return (await self._js.get_msg(CLUSTER_STREAM, seq)).data
        except nats.js.errors.NotFoundError:
            return None
        except NATS_ERRORS as exc:
            raise BusError(f"cannot read message {seq} of {CLUSTER_STREAM}: {describe(exc)}") from exc

    async def _daemons(self) -> list[Any]:
        """The consumers of the cluster stream that are preemptd logs'."""
        try:
            consumers = await self._js.consumers_info(CLUSTER_STREAM)
        except NATS_ERRORS as exc:
            raise BusError(f"cannot list the consumers of {CLUSTER_STREAM}: {describe(exc)}") from exc
        return [consumer for consumer in consumers if consumer.name.startswith(f"{CONSUMER}-")]

    async def remove_consumer(self, name: str) -> None:
        """Delete a durable consumer of the cluster stream, if it exists."""
        try:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await self._js.delete_consumer(CLUSTER_STREAM, name)
        except NATS_ERRORS as exc:
            raise BusError(f"cannot remove consumer {name} of {CLUSTER_STREAM}: {describe(exc)}") from exc

    @contextlib.asynccontextmanager
    async def follow(self, subject: str, *, after: int | None = None) -> AsyncIterator[AsyncIterator[tuple[int, bytes]]]:
        """Messages on `subject` as (stream sequence, data): those published from now on, or
        every one after stream sequence `after` (0: from the oldest kept). Subscribed on entry."""
        if after is None:
            policy: dict[str, Any] = {"deliver_policy": api.DeliverPolicy.NEW}
        else:
            policy = {"deliver_policy": api.DeliverPolicy.BY_START_SEQUENCE, "config": api.ConsumerConfig(opt_start_seq=after + 1)}
        try:
            subscription = await self._js.subscribe(subject, ordered_consumer=True, **policy)
        except NATS_ERRORS as exc:
            raise BusError(f"cannot subscribe to {subject}: {describe(exc)}") from exc

        async def messages() -> AsyncIterator[tuple[int, bytes]]:
            async for message in subscription.messages:
                yield sequences(message.reply)[0], message.data

        try:
            yield messages()
        finally:
            with contextlib.suppress(*NATS_ERRORS):
                await subscription.unsubscribe()

    async def last_sequence(self, stream: str) -> int:
        """The stream sequence of the newest message in `stream`."""
        try:
            return (await self._js.stream_info(stream)).state.last_seq
        except NATS_ERRORS as exc:
            raise BusError(f"cannot read the state of {stream}: {describe(exc)}") from exc

    async def read_stream(self, stream: str, subject: str, *, idle: float = 1.0) -> list[tuple[bytes, dict[str, str]]]:
        """Every message of `stream` on `subject`, with headers, until none arrives for `idle` s."""
        out = []
        subscription = await self._js.subscribe(subject, stream=stream, ordered_consumer=True, deliver_policy=api.DeliverPolicy.ALL)
        try:
            deadline = time.monotonic() + idle
            while time.monotonic() < deadline:
                try:
                    message = await subscription.next_msg(timeout=idle)
                except nats.errors.TimeoutError:
                    break
                out.append((message.data, dict(message.headers or {})))
                deadline = time.monotonic() + idle
        finally:
            await subscription.unsubscribe()
        return out
