"""NATS JetStream: the only module that talks to nats-py.

Three streams, created idempotently: cluster events from shims, decisions from the daemon
(de-duplicated on `Nats-Msg-Id`, the decision id), and rejections (dead-letter notices). The
daemon consumes cluster events with a durable push consumer (the fastest way nats-py reads a
stream: no request per batch, no task per message), bounded by flow control and the consumer's
limit of unacknowledged messages, and acknowledges a batch, with one cumulative ack, only after
the batch is committed to the log. nats-py reconnects by itself;
errors in between surface as `BusError` and the callers retry.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import msgspec
import nats
import nats.errors
import nats.js.errors
from nats.js import api

from .errors import BusError
from .logs import log

__all__ = [
    "check_credentials",
    "CLUSTER_STREAM",
    "CONSUMER",
    "DECISION_STREAM",
    "REJECTED_STREAM",
    "Bus",
    "Inbound",
    "NatsAccess",
    "Outbound",
    "ReadThrough",
    "Reader",
    "Stored",
    "cluster_subject",
    "creation_stamp",
    "decision_subject",
    "partition_filter",
    "reachable",
    "redacted",
    "rejected_subject",
    "servers",
    "subject_partition",
]

CLUSTER_STREAM = "PREEMPTD_CLUSTER"
DECISION_STREAM = "PREEMPTD_DECISIONS"
REJECTED_STREAM = "PREEMPTD_REJECTED"
CONSUMER = "preemptd"  # the prefix of each log's durable consumer: preemptd-<log id>
_WEEK = 7 * 24 * 3600.0
_MAX_ACK_PENDING = 50_000  # messages delivered and not yet acknowledged
_INBOX_BYTES = 64 * 2**20  # delivered and not yet taken: beyond it, flow control holds the server back


def cluster_subject(partition: str, event_type: str) -> str:
    return f"preemptd.cluster.{partition}.{event_type.split('.')[0]}"


def subject_partition(subject: str) -> str | None:
    """The partition a cluster subject (or a consumer's filter) names: `preemptd.cluster.<partition>.<kind>`."""
    parts = subject.split(".")
    return parts[2] if len(parts) >= 3 else None


def decision_subject(partition: str, decision_type: str) -> str:
    return f"preemptd.decisions.{partition}.{decision_type.removeprefix('decision.')}"


def rejected_subject(partition: str) -> str:
    return f"preemptd.rejected.{partition}"


_STREAMS = (
    api.StreamConfig(name=CLUSTER_STREAM, subjects=["preemptd.cluster.>"], storage=api.StorageType.FILE, max_age=_WEEK, duplicate_window=120.0),
    api.StreamConfig(name=DECISION_STREAM, subjects=["preemptd.decisions.>"], storage=api.StorageType.FILE, max_age=_WEEK, duplicate_window=600.0),
    api.StreamConfig(name=REJECTED_STREAM, subjects=["preemptd.rejected.>"], storage=api.StorageType.FILE, max_age=_WEEK),
)

_NATS_ERRORS = (nats.errors.Error, nats.js.errors.Error, asyncio.TimeoutError, OSError)


def creation_stamp(created: datetime.datetime | str) -> str:
    """A stream's creation time to the microsecond, as `2026-11-21T09:43:05.123456Z`, whichever
    form the client gives it in (a datetime, or the server's text with nanoseconds in older
    nats-py, truncated the same way). Two streams created in one second stay apart."""
    if isinstance(created, datetime.datetime):
        return created.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    seconds, _, fraction = created.rstrip("Z").partition(".")
    return f"{seconds[:19]}.{fraction[:6].ljust(6, '0')}Z"


_DEFAULT_PORTS = {"nats": 4222, "tls": 4222, "ws": 80, "wss": 443}


def nats_address(url: str) -> tuple[str, int]:
    """The host and port `url` names, read as nats-py reads it (`host:port` means nats://);
    a `BusError` that says what is wrong with it."""
    parsed = urlsplit(url if "://" in url else f"nats://{url}")
    shown = redacted(url)
    if parsed.scheme not in _DEFAULT_PORTS:
        raise BusError(f"NATS URL {shown!r}: the scheme must be nats://, tls://, ws:// or wss://, not {parsed.scheme}://")
    bad_port = BusError(f"NATS URL {shown!r}: the port must be a number from 1 to 65535")
    try:
        port = parsed.port
    except ValueError:
        raise bad_port from None
    if not parsed.hostname:
        raise BusError(f"NATS URL {shown!r} names no host")
    if port == 0:
        raise bad_port
    return parsed.hostname, port or _DEFAULT_PORTS[parsed.scheme]


def servers(url: str) -> list[str]:
    """The servers of a NATS URL: one, or several separated by commas (a cluster)."""
    found = [server.strip() for server in url.split(",") if server.strip()]
    if not found:
        raise BusError("the NATS URL is empty")
    return found


def redacted(url: str) -> str:
    """`url` as logs and errors may show it: user, password and token replaced by `***`."""
    shown = []
    for server in servers(url):
        scheme, separator, rest = server.rpartition("://")
        shown.append(f"{scheme}{separator}***@{rest.rsplit('@', 1)[1]}" if "@" in rest else server)
    return ",".join(shown)


@dataclass(frozen=True)
class NatsAccess:
    """How to authenticate to NATS and check its certificate, besides what the URL holds
    (`nats://user:password@host`, `nats://token@host`, `tls://` for TLS)."""

    creds: str | None = None  # a JWT and nkey credentials file
    user: str | None = None
    password: str | None = None
    token: str | None = None
    tls_ca: str | None = None  # the CA that signed the server's certificate (default: the system's)
    tls_cert: str | None = None  # a client certificate, for servers that verify clients
    tls_key: str | None = None

    def options(self, url: str) -> dict[str, Any]:
        """nats-py's connect options for this access; `BusError` for a file that cannot be used."""
        options: dict[str, Any] = {key: value for key, value in (("user", self.user), ("password", self.password), ("token", self.token)) if value}
        if self.creds:
            check_credentials(self.creds)
            options["user_credentials"] = self.creds
        if self.tls_ca or self.tls_cert or any(server.startswith("tls://") for server in servers(url)):
            options["tls"] = self._tls_context()
        return options

    def _tls_context(self) -> ssl.SSLContext:
        try:
            context = ssl.create_default_context(cafile=_readable(self.tls_ca, "--nats-tls-ca") if self.tls_ca else None)
            if self.tls_cert:
                context.load_cert_chain(_readable(self.tls_cert, "--nats-tls-cert"), _readable(self.tls_key, "--nats-tls-key") if self.tls_key else None)
        except ssl.SSLError as exc:
            raise BusError(f"cannot use the TLS files given: {exc.reason or exc}") from None
        return context


_CREDS_PARTS = {b"-----BEGIN NATS USER JWT-----": "the user JWT", b"-----BEGIN USER NKEY SEED-----": "the nkey seed"}


_REFUSAL_EVERY = 30.0  # seconds between the lines that say NATS refuses a reconnection


def check_credentials(path: str) -> None:
    """`--nats-creds` names a credentials file: a user JWT and its nkey seed, as `nsc` writes
    them (nats-py met anything else with a TypeError deep in the handshake)."""
    _readable(path, "--nats-creds")
    with open(path, "rb") as file:
        head = file.read(64 * 1024)
    missing = [name for part, name in _CREDS_PARTS.items() if part not in head]
    if missing:
        raise BusError(f"--nats-creds {path}: not a NATS credentials file: it lacks {' and '.join(missing)} that `nsc generate creds` writes")


def _readable(path: str, option: str) -> str:
    try:
        with open(path, "rb"):
            return path
    except OSError as exc:
        raise BusError(f"{option} {path}: {exc.strerror}") from None


async def reachable(url: str, timeout: float) -> None:
    """Check that something listens at one of the servers of `url`, so that a wrong URL or a
    server that is down is reported at once, in its own words (nats-py would retry until its
    timeout)."""
    problems = []
    for server in servers(url):
        problem = await _unreachable(server, timeout)
        if problem is None:
            return
        problems.append(problem)
    raise BusError(f"cannot connect to NATS at {redacted(url)}: {'; '.join(problems)}")


async def _unreachable(server: str, timeout: float) -> str | None:
    """Why nothing answers at `server`, or None when something does."""
    host, port = nats_address(server)
    try:
        probe = await anyio.to_thread.run_sync(socket.create_connection, (host, port), timeout, abandon_on_cancel=True)
    except ConnectionRefusedError:
        return f"connection refused at {host}:{port} (is it running?)"
    except TimeoutError:
        return f"no answer from {host}:{port} within {timeout:g}s"
    except OSError as exc:  # an unknown host, an unreachable network
        return f"{exc.strerror or exc}"
    probe.close()
    return None


def _describe(exc: BaseException) -> str:
    """The error's text, or its kind when it has none (a timeout)."""
    return str(exc).strip() or {"TimeoutError": "timed out"}.get(type(exc).__name__, type(exc).__name__)


def _refusal(exc: BaseException) -> str | None:
    """What a server's refusal says, in a line: credentials it does not take, a certificate
    that does not verify; None for other errors (a server not there yet: retried)."""
    if isinstance(exc, nats.errors.AuthorizationError) or "authorization violation" in str(exc).lower():
        return "authorization violation (wrong or missing credentials: check --nats-creds, the user and password or token)"
    if isinstance(exc, ssl.SSLError):
        said = getattr(exc, "verify_message", None) or exc.reason or _describe(exc)
        return f"TLS: {said} (check --nats-tls-ca, and that the URL says tls://)"
    if "tls" in str(exc).lower() and "required" in str(exc).lower():
        return f"{_describe(exc)} (use a tls:// URL)"
    return None


async def _cancel_when_refused(refusals: list[str], scope: anyio.CancelScope) -> None:
    while not refusals:
        await anyio.sleep(0.05)
    scope.cancel()


def _connected_url(nc: Any) -> str:
    server = nc.connected_url
    return f"{server.scheme}://{server.hostname}:{server.port}" if server else "?"


def _headers(message: Outbound) -> dict[str, str] | None:
    return {"Nats-Msg-Id": message.msg_id} if message.msg_id else None


def _sequences(reply: str) -> tuple[int, int]:
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


@dataclass(slots=True)  # made per message: a frozen dataclass costs five times as much to make; never changed
class Inbound:
    """A message from the cluster stream, as the daemon sees it."""

    subject: str
    data: bytes
    stream_seq: int
    handle: Any  # the nats message, for the cumulative ack
    generation: int = 0  # which consumer delivered it: acks must go to that one only
    after_gap: bool = False  # a delivery of its consumer before it never arrived (lost in a reconnect)


@dataclass(slots=True)  # made per message: a frozen dataclass costs five times as much to make; never changed
class Stored:
    """Where JetStream put a published message."""

    seq: int
    duplicate: bool


class _PubAck(msgspec.Struct):
    """JetStream's answer to a publish: where it stored the message, or its error."""

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
    try:
        ack = _pub_ack.decode(answer)
    except msgspec.DecodeError:
        return f"JetStream answered {answer[:200]!r}"
    if ack.error is not None:
        return f"JetStream refused it: {ack.error.get('description') or ack.error}"
    return Stored(ack.seq, ack.duplicate)


@dataclass(slots=True)  # made per message: a frozen dataclass costs five times as much to make; never changed
class Outbound:
    subject: str
    data: bytes
    msg_id: str | None = None


class Bus:
    """A connection to NATS with JetStream."""

    def __init__(self, nc: Any) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self._consumer: Any = None
        self._inbox: collections.deque[Inbound] = collections.deque()  # delivered, not yet taken by `fetch`
        self._arrived = asyncio.Event()
        self._inbox_bytes = 0
        self._drained = asyncio.Event()
        self._acks: dict[str, asyncio.Future[bytes]] | None = None  # publishes waiting for JetStream's answer, by reply token
        self._acks_prefix = ""
        self._next_ack = 0
        self._consumer_name = CONSUMER
        self.partitions: tuple[str, ...] | None = None  # the partitions the consumer reads; None: all
        self._delivered = 0  # the current consumer's last delivery (its consumer sequence)
        self._resume_at: int | None = None
        self.generation = 0  # bumped by every new consumer
        self.resumed_at = 0  # the stream sequence the current consumer started at

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
            refusal = _refusal(exc)
            if refusal is None:
                return
            refusals.append(refusal)
            if said["connected"] and time.monotonic() - said["at"] >= _REFUSAL_EVERY:  # once connected, a refusal is news: a rotation
                said["at"] = time.monotonic()
                log("NATS refuses to let the daemon reconnect: were its credentials changed (a password rotation)?", logging.ERROR, url=shown, refusal=refusal)

        nc = nats.NATS()  # made first, so that a connection cut short can still be closed

        async def disconnected() -> None:
            if not nc.is_closed:  # a close of our own is not a lost connection
                log("NATS connection lost; reconnecting", logging.WARNING, url=shown)

        async def reconnected() -> None:
            log("NATS connection back", url=redacted(_connected_url(nc)))

        connecting = nc.connect(
            servers(url),
            name=name,
            connect_timeout=connect_timeout,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
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
                except _NATS_ERRORS as exc:  # kept out of the task group, which would wrap it in a group
                    failure = exc
                tg.cancel_scope.cancel()
            if failure is not None:
                raise failure
            if refusals:
                raise BusError(f"NATS at {shown} refused the connection: {refusals[-1]}")
            said["connected"] = True
        except BaseException as exc:
            # Failed or cancelled (a stop): nats-py's own tasks would outlive it and hold up the exit.
            with anyio.CancelScope(shield=True), contextlib.suppress(*_NATS_ERRORS):
                await nc.close()
            if isinstance(exc, _NATS_ERRORS):
                why = refusals[-1] if refusals else _refusal(exc) or f"{_describe(exc)} (is it a NATS server?)"
                raise BusError(f"cannot connect to NATS at {shown}: {why}") from None
            raise
        return cls(nc)

    @property
    def url(self) -> str:
        return _connected_url(self._nc)

    @property
    def connected(self) -> bool:
        return self._nc.is_connected

    async def close(self) -> None:
        """Close at once: everything that matters was awaited (publishes) or will come again
        (unacknowledged events), so there is nothing to drain."""
        with contextlib.suppress(*_NATS_ERRORS):
            await self._nc.close()

    async def ensure_streams(self) -> None:
        """Create the streams, or bring an existing stream's settings up to date."""
        for config in _STREAMS:
            try:
                try:
                    await self._js.add_stream(config)
                except nats.js.errors.BadRequestError:
                    await self._js.update_stream(config)
            except nats.js.errors.ServiceUnavailableError as exc:
                raise BusError(f"cannot create JetStream stream {config.name}: JetStream is not enabled on this NATS server (start nats-server with -js)") from exc
            except _NATS_ERRORS as exc:
                raise BusError(f"cannot create JetStream stream {config.name}: {_describe(exc)}") from exc

    # -- consuming cluster events --

    async def cluster_stream(self) -> tuple[str, int]:
        """The cluster stream's identity (its creation time: a recreated stream, or another
        server's, has another) and its last sequence number (0 when empty)."""
        try:
            info = await self._js.stream_info(CLUSTER_STREAM)
        except _NATS_ERRORS as exc:
            raise BusError(f"cannot read stream {CLUSTER_STREAM}: {_describe(exc)}") from exc
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
        except _NATS_ERRORS as exc:
            raise BusError(f"cannot read consumer {consumer} of {CLUSTER_STREAM}: {_describe(exc)}") from exc
        return info.ack_floor.stream_seq if info.ack_floor else 0

    async def consumer_lag(self) -> int:
        """Messages for this daemon's consumer not yet acknowledged: not yet delivered, or
        delivered and not yet committed (a batch is acknowledged once committed)."""
        try:
            info = await self._js.consumer_info(CLUSTER_STREAM, self._consumer_name)
        except _NATS_ERRORS as exc:
            raise BusError(f"cannot read consumer {self._consumer_name} of {CLUSTER_STREAM}: {_describe(exc)}") from exc
        return (info.num_pending or 0) + (info.num_ack_pending or 0)

    async def cluster_message(self, seq: int) -> bytes | None:
        """The message at `seq` in the cluster stream; None if it is gone."""
        try:
            return (await self._js.get_msg(CLUSTER_STREAM, seq)).data
        except nats.js.errors.NotFoundError:
            return None
        except _NATS_ERRORS as exc:
            raise BusError(f"cannot read message {seq} of {CLUSTER_STREAM}: {_describe(exc)}") from exc

    async def _daemons(self) -> list[Any]:
        """The consumers of the cluster stream that are preemptd logs'."""
        try:
            consumers = await self._js.consumers_info(CLUSTER_STREAM)
        except _NATS_ERRORS as exc:
            raise BusError(f"cannot list the consumers of {CLUSTER_STREAM}: {_describe(exc)}") from exc
        return [consumer for consumer in consumers if consumer.name.startswith(f"{CONSUMER}-")]

    async def remove_consumer(self, name: str) -> None:
        """Delete a durable consumer of the cluster stream, if it exists."""
        try:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await self._js.delete_consumer(CLUSTER_STREAM, name)
        except _NATS_ERRORS as exc:
            raise BusError(f"cannot remove consumer {name} of {CLUSTER_STREAM}: {_describe(exc)}") from exc

    async def subscribe_cluster(self, start: int, consumer: str | None = None, partitions: tuple[str, ...] | None = None) -> None:
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
                with contextlib.suppress(*_NATS_ERRORS):
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
        except _NATS_ERRORS as exc:
            raise BusError(f"cannot create consumer {self._consumer_name} on {CLUSTER_STREAM}: {_describe(exc)}") from exc

    def _receiver(self, generation: int):
        """The callback of one consumer: its messages go to the inbox, tagged with it. While the
        inbox holds `_INBOX_BYTES`, it waits: flow control then stops the server from sending."""

        async def received(m: Any) -> None:
            while self._inbox_bytes > _INBOX_BYTES and generation == self.generation:
                self._drained.clear()
                await self._drained.wait()
            if generation == self.generation:
                stream_seq, delivered = _sequences(m.reply)
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
            await self.subscribe_cluster(self._resume_at)
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
        except _NATS_ERRORS as exc:
            raise BusError(f"ack failed: {_describe(exc)}") from exc

    # -- publishing --

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
        except _NATS_ERRORS as exc:
            raise BusError(f"publish failed: {_describe(exc)}") from exc
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
            if future is not None and not future.done():
                future.set_result(message.data)

        try:
            await self._nc.subscribe(f"{self._acks_prefix}.*", cb=answered)
        except _NATS_ERRORS as exc:
            self._acks = None
            raise BusError(f"publish failed: {_describe(exc)}") from exc

    async def _publish_alone(self, message: Outbound) -> str | None:
        try:
            await self._js.publish(message.subject, message.data, timeout=2.0, headers=_headers(message))
        except nats.js.errors.APIError as exc:
            return f"JetStream refused it: {exc.description or exc}"
        except _NATS_ERRORS as exc:
            raise BusError(f"publish failed: {_describe(exc)}") from exc
        return None

    # -- reading decisions (tail) and streams (tests, tools) --

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
        except _NATS_ERRORS as exc:
            raise BusError(f"cannot subscribe to {subject}: {_describe(exc)}") from exc

        async def messages() -> AsyncIterator[tuple[int, bytes]]:
            async for message in subscription.messages:
                yield _sequences(message.reply)[0], message.data

        try:
            yield messages()
        finally:
            with contextlib.suppress(*_NATS_ERRORS):
                await subscription.unsubscribe()

    async def last_sequence(self, stream: str) -> int:
        """The stream sequence of the newest message in `stream`."""
        try:
            return (await self._js.stream_info(stream)).state.last_seq
        except _NATS_ERRORS as exc:
            raise BusError(f"cannot read the state of {stream}: {_describe(exc)}") from exc

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
