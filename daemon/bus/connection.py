"""A connection to NATS with JetStream, and its parts: the streams, this daemon's consumer of
the cluster stream, and a publisher. nats-py reconnects by itself, forever; errors in between
surface as `BusError` and the callers retry."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import nats

from ..errors import BusError
from ..operations.logs import log
from .access import NATS_ERRORS, NatsAccess, describe, reachable, redacted, refusal, servers
from .consumer import ClusterConsumer
from .publisher import Publisher
from .streams import Streams

__all__ = ["Bus"]

_REFUSAL_EVERY = 30.0  # seconds between the lines that say NATS refuses a reconnection


async def _cancel_when_refused(refusals: list[str], scope: anyio.CancelScope) -> None:
    while not refusals:
        await anyio.sleep(0.05)
    scope.cancel()


def _connected_url(nc: Any) -> str:
    server = nc.connected_url
    return f"{server.scheme}://{server.hostname}:{server.port}" if server else "?"


class Bus:
    """A connection to NATS with JetStream: `streams` (administration and reading), `consumer`
    (this log's consumer of the cluster stream) and `publisher`."""

    def __init__(self, nc: Any) -> None:
        self._nc = nc
        self.streams = Streams(nc)
        self.consumer = ClusterConsumer(nc)
        self.publisher = Publisher(nc)

    @classmethod
    async def connect(cls, url: str, *, access: NatsAccess | None = None, name: str = "preemptd", connect_timeout: float = 5.0) -> Bus:
        """Connect to one of the servers of `url`, and keep reconnecting forever, across them,
        if the server goes away later. A refusal (credentials, TLS) is a `BusError` at once."""
        shown = redacted(url)
        options = (access or NatsAccess()).options(url)
        await reachable(url, connect_timeout)
        refusals: list[str] = []
        said = {"connected": False, "at": 0.0}

        async def noted(exc: Exception) -> None:  # other reconnect failures are logged by the caller's retries
            refused = refusal(exc)
            if refused is None:
                return
            refusals.append(refused)
            if said["connected"] and time.monotonic() - said["at"] >= _REFUSAL_EVERY:  # once connected, a refusal is news: a rotation
                said["at"] = time.monotonic()
                log("NATS refuses to let the daemon reconnect: were its credentials changed (a password rotation)?", logging.ERROR, url=shown, refusal=refused)

        nc = nats.NATS()  # made first, so that a connection cut short can still be closed

        async def disconnected() -> None:
            if not nc.is_closed:  # a close of our own is not a lost connection
                log("NATS connection lost; reconnecting", logging.WARNING, url=shown)

        async def reconnected() -> None:
            log("NATS connection back", url=redacted(_connected_url(nc)))

        connecting = nc.connect(
            servers(url),
            name=name,
            connect_timeout=connect_timeout,  # type: ignore[arg-type]  # nats-py's types say int; it takes seconds as floats
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,  # type: ignore[arg-type]  # the same
            error_cb=noted,
            disconnected_cb=disconnected,
            reconnected_cb=reconnected,
            **options,
        )
        try:  # nats-py retries a first connection forever too: bound it, and end it at a refusal
            failure: BaseException | None = None
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_when_refused, refusals, tg.cancel_scope)
                try:
                    await asyncio.wait_for(connecting, connect_timeout * 2)
                except NATS_ERRORS as exc:  # kept out of the task group, which would wrap it in a group
                    failure = exc
                tg.cancel_scope.cancel()
            if failure is not None:
                raise failure
            if refusals:
                raise BusError(f"NATS at {shown} refused the connection: {refusals[-1]}")
            said["connected"] = True
        except BaseException as exc:
            # Failed or cancelled (a stop): nats-py's own tasks would outlive it and hold up the exit.
            with anyio.CancelScope(shield=True), contextlib.suppress(*NATS_ERRORS):
                await nc.close()
            if isinstance(exc, NATS_ERRORS):
                why = refusals[-1] if refusals else refusal(exc) or f"{describe(exc)} (is it a NATS server?)"
                raise BusError(f"cannot connect to NATS at {shown}: {why}") from None
            raise
        return cls(nc)

    @property
    def url(self) -> str:
        return _connected_url(self._nc)

    @property
    def connected(self) -> bool:
        return self._nc.is_connected

    async def serve(self, subjects: list[str], answer: Callable[[str, bytes], Awaitable[bytes]]) -> None:
        """Answer the requests on `subjects` until cancelled, each as it comes (`answer` bounds
        how many run at once): a reply lost to a disconnection is the asker's to ask again."""

        async def reply(message: Any) -> None:
            data = await answer(message.subject, message.data)
            if message.reply:
                with contextlib.suppress(*NATS_ERRORS):
                    await message.respond(data)

        async def listen(subject: str) -> None:
            subscription = await self._nc.subscribe(subject)
            try:
                async for message in subscription.messages:
                    tg.start_soon(reply, message)
            finally:
                with anyio.CancelScope(shield=True), contextlib.suppress(*NATS_ERRORS):
                    await subscription.unsubscribe()

        async with anyio.create_task_group() as tg:
            for subject in subjects:
                tg.start_soon(listen, subject)

    async def request(self, subject: str, data: bytes, *, timeout: float) -> bytes | None:
        """The reply to a request on `subject`; None when nothing answers on it."""
        try:
            return (await self._nc.request(subject, data, timeout=timeout)).data
        except nats.errors.NoRespondersError:
            return None
        except nats.errors.TimeoutError:
            raise BusError(f"no answer on {subject} within {timeout:g} s") from None
        except NATS_ERRORS as exc:
            raise BusError(f"cannot ask on {subject}: {describe(exc)}") from None

    async def close(self) -> None:
        """Close at once: everything that matters was awaited (publishes) or will come again
        (unacknowledged events), so there is nothing to drain."""
        with contextlib.suppress(*NATS_ERRORS):
            await self._nc.close()
