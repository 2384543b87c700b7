"""Publishing to JetStream and waiting for its acknowledgements: all or nothing (`publish`),
or each message's own verdict (`publish_each`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import msgspec
import nats
import nats.errors
import nats.js.errors

from ..errors import BusError
from ..records import Outbound, Stored
from .access import NATS_ERRORS, describe

__all__ = ["Publisher"]


def _headers(message: Outbound) -> dict[str, str] | None:
    return {"Nats-Msg-Id": message.msg_id} if message.msg_id else None


class _PubAck(msgspec.Struct):
    """JetStream's answer to a publish: the stream and position where it stored the message,
    or its error."""

    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    error: dict[str, Any] | None = None


_pub_ack = msgspec.json.Decoder(_PubAck)


def _stored(answer: bytes) -> Stored | str | None:
    """A JetStream answer as where the message was stored, or why it was refused; None for an
    empty answer, the server's "no responders" (no stream takes the subject now: the same as
    no answer, since the daemon makes its streams again on its next start)."""
    if not answer:
        return None
    ack = _jetstreams(answer)
    if ack is None:
        return f"JetStream answered {answer[:200]!r}"
    if ack.error is not None:
        return f"JetStream refused it: {ack.error.get('description') or ack.error}"
    return Stored(ack.seq, ack.duplicate)


def _jetstreams(answer: bytes) -> _PubAck | None:
    """`answer` read as JetStream's acknowledgement: a stream and a position, or an error with
    its code; None for anything else (a message someone else aimed at the inbox)."""
    try:
        ack = _pub_ack.decode(answer)
    except msgspec.DecodeError:
        return None
    if ack.error is not None:
        return ack if isinstance(ack.error.get("code"), int) else None
    return ack if ack.stream and ack.seq >= 1 else None


def _from_jetstream(message: Any) -> bool:
    """`message` on the acknowledgements' inbox is the server's: JetStream's acknowledgement,
    or "no responders". Anything else someone aimed there is no one's: the real answer still
    comes (a query's reply subject pointed at the inbox made a refusal pass for an
    acknowledgement)."""
    if not message.data:
        return bool(message.headers) and message.headers.get("Status") == "503"
    return _jetstreams(message.data) is not None


class Publisher:
    """Publishes through one connection, with one subscription for JetStream's answers."""

    def __init__(self, nc: Any) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self._acks: dict[str, asyncio.Future[bytes]] | None = None  # publishes waiting for JetStream's answer, by reply token
        self._acks_prefix = ""
        self._next_ack = 0

    def inboxes(self) -> list[str]:
        """The prefix of the inbox JetStream's acknowledgements come to, once there is one."""
        return [f"{self._acks_prefix}."] if self._acks is not None else []

    @property
    def max_payload(self) -> int:
        """The largest message the server takes, headers included (its `max_payload`)."""
        return self._nc.max_payload

    async def publish(self, messages: Sequence[Outbound], timeout: float = 10.0) -> list[Stored]:
        """Publish to JetStream and wait for every acknowledgement; all or `BusError`. Says
        where each message is in its stream, and whether JetStream dropped it as a duplicate of
        a `Nats-Msg-Id` it has seen recently (then the position is the original's)."""
        acks = await self._acknowledged(messages, timeout)
        for ack in acks:
            if not isinstance(ack, Stored):
                raise BusError(f"publish failed: {ack or 'no acknowledgement from JetStream within ' + format(timeout, 'g') + 's'}")
        return acks  # type: ignore[return-value]

    async def publish_each(self, messages: Sequence[Outbound], timeout: float = 10.0) -> list[str | None]:
        """Publish to JetStream: for each message None once JetStream has it, or why the server
        refused it. `BusError` when NATS does not answer: a message whose acknowledgement did
        not come is sent again alone, to tell a lost answer from a server that is gone."""
        acks = await self._acknowledged(messages, timeout)
        return [None if isinstance(ack, Stored) else ack or await self._publish_alone(m) for m, ack in zip(messages, acks)]

    async def _acknowledged(self, messages: Sequence[Outbound], timeout: float) -> list[Stored | str | None]:
        """Publish all, each with a reply subject of its own, and wait for JetStream's answers:
        per message where it was stored, why it was refused, or None when no answer came in
        time. nats-py's `publish_async` does the same at several times the cost per message (a
        timed semaphore, a random token, a future with callbacks, a dataclass built by
        reflection), which the outbox paid for every decision."""
        if self._acks is None:
            await self._listen_for_acks()
        loop = asyncio.get_running_loop()
        futures: dict[str, asyncio.Future[bytes]] = {}
        try:
            for m in messages:
                self._next_ack += 1
                token = str(self._next_ack)
                futures[token] = self._acks[token] = loop.create_future()  # type: ignore[index]
                await self._nc.publish(m.subject, m.data, reply=f"{self._acks_prefix}.{token}", headers=_headers(m))
            if futures:
                await asyncio.wait(futures.values(), timeout=timeout)
        except NATS_ERRORS as exc:
            raise BusError(f"publish failed: {describe(exc)}") from exc
        finally:
            for token, future in futures.items():
                self._acks.pop(token, None)  # type: ignore[union-attr]
                future.cancel()  # a no-op for those done
        return [_stored(f.result()) if f.done() and not f.cancelled() else None for f in futures.values()]

    async def _listen_for_acks(self) -> None:
        self._acks = {}
        self._acks_prefix = self._nc.new_inbox()

        async def answered(message: Any) -> None:
            future = self._acks.get(message.subject.rpartition(".")[2])  # type: ignore[union-attr]
            if future is not None and not future.done() and _from_jetstream(message):
                future.set_result(message.data)

        try:
            await self._nc.subscribe(f"{self._acks_prefix}.*", cb=answered)
        except NATS_ERRORS as exc:
            self._acks = None
            raise BusError(f"publish failed: {describe(exc)}") from exc

    async def _publish_alone(self, message: Outbound) -> str | None:
        try:
            await self._js.publish(message.subject, message.data, timeout=2.0, headers=_headers(message))
        except nats.js.errors.APIError as exc:
            return f"JetStream refused it: {exc.description or exc}"
        except NATS_ERRORS as exc:
            raise BusError(f"publish failed: {describe(exc)}") from exc
        return None
