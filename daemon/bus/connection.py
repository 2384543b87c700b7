"""A connection to NATS with JetStream, and its parts: the streams, this daemon's consumer of
the cluster stream, and a publisher. nats-py reconnects by itself, forever; errors in between
surface as `BusError` and the callers retry."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
_INBOXES = "_INBOX"  # what an asker's reply subject starts with: `_INBOX.` by default, `_INBOX_<user>.` with a prefix of its own
_PENDING_BYTES = 16 * 1024 * 1024  # requests waiting to be taken up, per subscription (nats-py's default: 64 MiB)


async def _cancel_when_refused(refusals: list[str], scope: anyio.CancelScope) -> None:
    while not refusals:
        await anyio.sleep(0.05)
    scope.cancel()


def _denied_request(subject: str, said: str) -> str:
    """A request NATS's permissions refused, said as what the asker's user lacks."""
    if "subscription" in said.lower():
        return (
            "NATS refused these credentials the subscription their answer comes to: where each user has an inbox of its own, "
            "give its prefix (--nats-inbox-prefix or $PREEMPTD_NATS_INBOX_PREFIX; see the README's permissions)"
        )
    return f"NATS refused these credentials to publish on {subject}: an asker needs publish permission on preemptd.try.<partition> (see the README's permissions)"


@dataclass
class _Denials:
    """NATS's permission violations on a connection: how many, and the last as it said it."""

    count: int = 0
    last: str = ""


def _connected_url(nc: Any) -> str:
    server = nc.connected_url
    return f"{server.scheme}://{server.hostname}:{server.port}" if server else "?"


class Bus:
    """A connection to NATS with JetStream: `streams` (administration and reading), `consumer`
    (this log's consumer of the cluster stream) and `publisher`."""

    def __init__(self, nc: Any, denied: _Denials | None = None) -> None:
        self._nc = nc
        self._denied = denied or _Denials()
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

        denied = _Denials()

        async def noted(exc: Exception) -> None:  # other reconnect failures are logged by the caller's retries
            text = str(exc).removeprefix("nats: ")
            if "permissions violation" in text.lower():
                denied.count, denied.last = denied.count + 1, text
                return
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
        return cls(nc, denied)

    @property
    def url(self) -> str:
        return _connected_url(self._nc)

    @property
    def connected(self) -> bool:
        return self._nc.is_connected

    async def serve(self, subjects: list[str], answer: Callable[[str, bytes, str | None], Awaitable[bytes | None]], *, others: tuple[Bus, ...] = ()) -> None:
        """Answer the requests on `subjects` until cancelled, each as it comes (`answer` admits
        them, and says None when there is no one to answer): a reply lost to a disconnection
        is the asker's to ask again. An answer goes only to an asker's inbox (a reply subject
        starting with `_INBOX`), never to one of this connection's own inboxes or of `others`'
        (where JetStream's acknowledgements come): an asker aiming it elsewhere would have the
        daemon publish where it may (the JetStream API, the cluster's events) or forge a
        message to itself. What the loop cannot take up in time waits in a bounded buffer
        (`_PENDING_BYTES`); past it, NATS drops requests, whose askers time out."""

        def reply_to(message: Any) -> str | None:
            subject = message.reply or None
            if subject is None or not subject.startswith(_INBOXES) or any(subject.startswith(inbox) for bus in (self, *others) for inbox in bus.own_inboxes()):
                return None
            return subject

        async def reply(message: Any) -> None:
            to = reply_to(message)
            data = await answer(message.subject, message.data, to)
            if data is not None and to is not None:
                with contextlib.suppress(*NATS_ERRORS):
                    await self._nc.publish(to, data)

        async def listen(subject: str) -> None:
            subscription = await self._nc.subscribe(subject, pending_bytes_limit=_PENDING_BYTES)
            try:
                async for message in subscription.messages:
                    tg.start_soon(reply, message)
            finally:
                with anyio.CancelScope(shield=True), contextlib.suppress(*NATS_ERRORS):
                    await subscription.unsubscribe()

        async with anyio.create_task_group() as tg:
            for subject in subjects:
                tg.start_soon(listen, subject)

    def own_inboxes(self) -> list[str]:
        """The prefixes of this connection's inboxes in use: its requests' and its publishes'
        acknowledgements."""
        prefixes = [bytes(self._nc._resp_sub_prefix).decode()] if self._nc._resp_sub_prefix else []
        return prefixes + self.publisher.inboxes()

    async def request(self, subject: str, data: bytes, *, timeout: float) -> bytes | None:
        """The reply to a request on `subject`; None when nothing answers on it. A refusal of
        NATS's permissions (to publish there, or to read the reply) is said at once."""
        denied = self._denied.count
        asking = asyncio.ensure_future(self._nc.request(subject, data, timeout=timeout))
        try:
            while not asking.done():
                await asyncio.wait({asking}, timeout=0.05)
                if self._denied.count > denied and not asking.done():
                    raise BusError(_denied_request(subject, self._denied.last))
            return asking.result().data
        except nats.errors.NoRespondersError:
            return None
        except nats.errors.TimeoutError:
            raise BusError(f"no answer on {subject} within {timeout:g} s") from None
        except NATS_ERRORS as exc:
            raise BusError(f"cannot ask on {subject}: {describe(exc)}") from None
        finally:
            asking.cancel()

    async def close(self) -> None:
        """Close at once: everything that matters was awaited (publishes) or will come again
        (unacknowledged events), so there is nothing to drain."""
        with contextlib.suppress(*NATS_ERRORS):
            await self._nc.close()
