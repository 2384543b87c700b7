"""A connection to NATS with JetStream, and its parts: the streams, this daemon's consumer of
the cluster stream, and a publisher. nats-py reconnects by itself, forever; errors in between
surface as `BusError` and the callers retry."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
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
#: Requests (and their bytes) read a second, per subject, before the subscription pauses for
#: the rest of the second: publishers that never wait for a reply sent 12,000 a second (or
#: 320 MB a second of 1 MiB ones), and reading them alone held decisions 200 ms. While paused,
#: NATS sees no interest and drops them unread.
REQUESTS_PER_SECOND = 2_000
REQUEST_BYTES_PER_SECOND = 32 * 1024 * 1024
_PAUSES_SAID_EVERY = 60.0


async def _cancel_when_refused(refusals: list[str], scope: anyio.CancelScope) -> None:
    while not refusals:
        await anyio.sleep(0.05)
    scope.cancel()


def _denied_request(subject: str, said: str) -> str:
    """A request NATS's permissions refused, said as what the asker's user lacks."""
    if "subscription" in said.lower():
        return (
            "NATS refused these credentials the subscription their answer comes to: where each user has an inbox of its own, "
            "give its prefix (--nats-inbox-prefix or $PREEMPTD_NATS_INBOX_PREFIX; see docs/operating.md, 'Who may do what')"
        )
    return (
        f"NATS refused these credentials to publish on {subject}: an asker needs publish permission on preemptd.try.<partition> (see "
        "docs/operating.md, 'Who may do what')"
    )


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

    async def serve(
        self, subjects: list[str], screen: Callable[[str, bytes, str | None], bytes | None | Awaitable[bytes | None]], *, others: tuple[Bus, ...] = ()
    ) -> None:
        """Answer the requests on `subjects` until cancelled, each as it comes: `screen` decides
        at once (a reply, None for none) or gives the awaitable of an answer, which runs in a
        task of its own. A reply lost to a disconnection is the asker's to ask again. An answer
        goes only to an asker's inbox (a reply subject starting with `_INBOX`), never to one of
        this connection's own inboxes or of `others'` (where JetStream's acknowledgements
        come): an asker aiming it elsewhere would have the daemon publish where it may (the
        JetStream API, the cluster's events) or forge a message to itself. At most
        `REQUESTS_PER_SECOND` are read a second; what the loop cannot take up in time waits in
        a bounded buffer (`_PENDING_BYTES`); past either, requests are dropped unread, and
        their askers time out."""

        def reply_to(message: Any) -> str | None:
            subject = message.reply or None
            if subject is None or not subject.startswith(_INBOXES) or any(subject.startswith(inbox) for bus in (self, *others) for inbox in bus.own_inboxes()):
                return None
            return subject

        async def send(to: str | None, data: bytes | None) -> None:
            if data is not None and to is not None:
                with contextlib.suppress(*NATS_ERRORS):
                    await self._nc.publish(to, data)

        async def answered(to: str | None, answer: Awaitable[bytes | None]) -> None:
            await send(to, await answer)

        said = {"at": -_PAUSES_SAID_EVERY, "pauses": 0}

        async def listen(subject: str) -> None:
            while True:
                paused = await read_a_while(subject)
                said["pauses"] += 1
                if time.monotonic() - said["at"] >= _PAUSES_SAID_EVERY:
                    log(
                        "requests paused: more than the daemon reads a second came",
                        logging.WARNING,
                        subject=subject,
                        per_second=REQUESTS_PER_SECOND,
                        pauses=said["pauses"],
                    )
                    said["at"], said["pauses"] = time.monotonic(), 0
                await anyio.sleep(paused)

        async def read_a_while(subject: str) -> float:
            """Read requests until more than `REQUESTS_PER_SECOND`, or their bytes more than
            `REQUEST_BYTES_PER_SECOND`, came within a second: how long to pause then (the rest
            of that second)."""
            subscription = await self._nc.subscribe(subject, pending_bytes_limit=_PENDING_BYTES)
            try:
                second, read, size = time.monotonic(), 0, 0
                async for message in subscription.messages:
                    now = time.monotonic()
                    if now - second >= 1:
                        second, read, size = now, 0, 0
                    read, size = read + 1, size + len(message.data)
                    if read > REQUESTS_PER_SECOND or size > REQUEST_BYTES_PER_SECOND:
                        return max(second + 1 - now, 0.0)
                    to = reply_to(message)
                    screened = screen(message.subject, message.data, to)
                    if inspect.isawaitable(screened):
                        tg.start_soon(answered, to, screened)
                    else:
                        await send(to, screened)
                return 0.0
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
