"""What crosses the shell: the rows the log keeps, the messages NATS carries, the subjects and
streams they travel on, and the step between log rows and the pure layers' records. Plain
values, importing neither nats-py nor SQLAlchemy, so that the ingest step (pure) and every side
of the shell share them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from preemptd.events import Decision, decode_log_event, encode, type_of
from preemptd.projections import LogRecord

__all__ = [
    "DeadLetterKind",
    "CLUSTER_STREAM",
    "CONSUMER",
    "DECISION_STREAM",
    "REJECTED_STREAM",
    "Segment",
    "Batch",
    "DeadLetter",
    "Inbound",
    "LogRow",
    "Outbound",
    "OutboxRow",
    "Stored",
    "cluster_subject",
    "decision_subject",
    "outbox_rows",
    "rejected_subject",
    "subject_partition",
    "to_record",
    "to_row",
]

# -- streams and subjects ------------------------------------------------------------------

CLUSTER_STREAM = "PREEMPTD_CLUSTER"
DECISION_STREAM = "PREEMPTD_DECISIONS"
REJECTED_STREAM = "PREEMPTD_REJECTED"
CONSUMER = "preemptd"  # the prefix of each log's durable consumer: preemptd-<log id>


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


# -- messages ------------------------------------------------------------------------------


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


@dataclass(slots=True)  # made per message: a frozen dataclass costs five times as much to make; never changed
class Outbound:
    subject: str
    data: bytes
    msg_id: str | None = None


# -- the log's rows ------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A closed stretch of the log (`first <= seq <= last`) written to the archive as one file
    (`location`); `dropped` is when its rows left the live log (None: still there too)."""

    first: int
    last: int
    records: int
    bytes: int  # payload bytes
    first_received: int
    last_received: int
    location: str
    archived: int  # when its file was written (ms)
    dropped: int | None = None


@dataclass(slots=True)  # not frozen: one is made per record on the hot path, and frozen costs 5x to make; never changed
class LogRow:
    seq: int
    event_id: str
    type: str
    partition: str
    ts: int
    received: int
    payload: bytes
    stream_seq: int | None = None


#: Why an input became a dead letter, in a word (the label of `preemptd_dead_letters_total`).
DeadLetterKind = Literal["undecodable", "invalid", "wrong_subject", "reserved_id", "duplicate_id", "too_many_partitions", "rejected", "internal"]


@dataclass(frozen=True)
class DeadLetter:
    received: int
    subject: str
    reason: str
    raw: bytes
    stream_seq: int | None = None
    partition: str | None = None
    event_type: str | None = None
    event_id: str | None = None
    kind: DeadLetterKind = "invalid"  # why, in a word (a metrics label); not stored

    def stored(self) -> dict[str, object]:
        """The fields the log keeps."""
        return {key: value for key, value in self.__dict__.items() if key != "kind"}


@dataclass(slots=True)  # made per decision, like LogRow; never changed
class OutboxRow:
    seq: int
    decision_id: str
    subject: str
    payload: bytes = b""


@dataclass
class Batch:
    """What one transaction writes."""

    rows: list[LogRow] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    outbox: list[OutboxRow] = field(default_factory=list)
    tracking: tuple[str, int] | None = None


# -- between rows and records ---------------------------------------------------------------


def to_record(row: LogRow) -> LogRecord:
    return LogRecord(row.seq, row.received, decode_log_event(row.payload))


def to_row(record: LogRecord, payload: bytes | None = None, stream_seq: int | None = None) -> LogRow:
    event = record.event
    return LogRow(
        seq=record.seq,
        event_id=event.id,
        type=type_of(event),
        partition=event.partition,
        ts=event.ts,
        received=record.received,
        payload=payload if payload is not None else encode(event),
        stream_seq=stream_seq,
    )


def outbox_rows(records: Iterable[LogRecord]) -> list[OutboxRow]:
    return [OutboxRow(r.seq, r.event.id, decision_subject(r.event.partition, type_of(r.event))) for r in records if isinstance(r.event, Decision)]
