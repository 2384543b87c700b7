"""The ingest decision, apart from its I/O: which delivered messages continue the log, which of
them become log records and which dead letters (with a reason a shim author can act on), and
which partitions they touched. Plain functions of their inputs, tested without a server; the
runtime only moves data between NATS, these functions and the log.

    continuing(messages, position) -> Continuation   gap check, redeliveries
    decode(messages, received)      -> Decoded        JSON and schema, subject vs partition
    read_configurations(decoded)    -> readings       the configurations read (off the event loop)
    fold(decoded, known, state)     -> Ingested       reserved and duplicate ids, the fold
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import get_args

from preemptd.events import ClusterEvent, ConfigApplied, DecodeError, decode_cluster_event, type_of
from preemptd.projections import ClusterState, ConfigReading, LogRecord, Rejected
from preemptd.scheduling import apply, config_changes, configured_alone, configured_before, describe, is_daemon_id, read_config, remember_config

from .records import DeadLetter, DeadLetterKind, Inbound, LogRow, cluster_subject, subject_partition, to_row

__all__ = [
    "DEAD_LETTER_KINDS",
    "MAX_PARTITIONS",
    "Continuation",
    "Decoded",
    "Ingested",
    "Position",
    "continuing",
    "dead_letter",
    "decode",
    "fold",
    "read_configurations",
]


@dataclass(frozen=True)
class Position:
    """Where the log stands in the cluster stream, and which consumer delivers it."""

    committed: int  # the last stream sequence committed to the log
    generation: int  # the consumer whose messages count (older ones' are stale)
    resumed_at: int  # the stream sequence that consumer started at
    filtered: bool = False  # the consumer reads some partitions only: its stream sequences have holes


@dataclass(frozen=True)
class Continuation:
    """What to do with a delivery.

    `fresh`: the messages that follow the committed position in stream order, to commit.
    `redelivered`: messages already committed (ack them so they stop coming).
    `resume`: where the consumer must read again after a gap (a fetch lost in a reconnect).
    `gone`: (first sequence, how many) messages that expired or were deleted before they were
    read: a sequence still missing right after resuming exactly there."""

    fresh: list[Inbound]
    redelivered: list[Inbound]
    resume: int | None = None
    gone: tuple[int, int] | None = None


def continuing(messages: list[Inbound], position: Position) -> Continuation:
    """Sort a delivery against the log's position (see `Continuation`)."""
    current = [m for m in messages if m.generation == position.generation]
    if position.filtered:
        return _continuing_filtered(current, position)
    redelivered = [m for m in current if m.stream_seq <= position.committed]
    by_seq = {m.stream_seq: m for m in current if m.stream_seq > position.committed}
    if not by_seq:
        return Continuation([], redelivered)
    expected, gone = position.committed + 1, None
    if expected not in by_seq:
        if position.resumed_at != expected:
            return Continuation([], redelivered, resume=expected)
        gone = (expected, min(by_seq) - expected)
        expected = min(by_seq)
    fresh = []
    while expected in by_seq:
        fresh.append(by_seq[expected])
        expected += 1
    return Continuation(fresh, redelivered, resume=expected if len(fresh) < len(by_seq) else None, gone=gone)


def _continuing_filtered(current: list[Inbound], position: Position) -> Continuation:
    """`continuing` for a consumer of some partitions: the stream sequences it delivers have
    the other partitions' holes, so a lost delivery shows in its own count instead (`after_gap`).
    Messages gone from the stream before they were read cannot be told from those holes."""
    fresh: list[Inbound] = []
    redelivered: list[Inbound] = []
    for message in current:  # in delivery order: stream order, redeliveries aside
        through = fresh[-1].stream_seq if fresh else position.committed
        if message.after_gap:
            return Continuation(fresh, redelivered, resume=through + 1)
        (fresh if message.stream_seq > through else redelivered).append(message)
    return Continuation(fresh, redelivered)


@dataclass
class Decoded:
    """Messages decoded into events, and the dead letters of those that could not be."""

    received: int
    events: list[tuple[Inbound, ClusterEvent]] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [event.id for _, event in self.events]

    @property
    def configures(self) -> bool:
        return any(isinstance(event, ConfigApplied) for _, event in self.events)


def decode(messages: list[Inbound], received: int) -> Decoded:
    """Decode each message; one that is not a valid event, or whose partition differs from its
    subject's, becomes a dead letter."""
    out = Decoded(received)
    for message in messages:
        try:
            event = decode_cluster_event(message.data)
        except DecodeError as exc:
            kind: DeadLetterKind = "invalid" if exc.event_type else "undecodable"
            out.dead.append(dead_letter(message, received, exc.reason, event_type=exc.event_type, event_id=exc.event_id, kind=kind))
            continue
        except Exception as exc:  # whatever a message does to the decoder, it stops there
            out.dead.append(dead_letter(message, received, f"cannot be decoded ({_describe(exc)}); please report this message", kind="internal"))
            continue
        reason = _misplaced(message.subject, event)
        if reason is not None:
            out.dead.append(dead_letter(message, received, reason, event, kind="wrong_subject"))
            continue
        out.events.append((message, event))
    return out


def read_configurations(decoded: Decoded) -> dict[int, ConfigReading]:
    """The configurations `decoded` applies, read by their models, by their place in
    `decoded.events`: the daemon reads them off its event loop (a configuration's YAML may take
    a moment) and `fold` hands each over as it meets it. One that fails to be read is left to
    the fold, which says why."""
    readings = {}
    for place, (_, event) in enumerate(decoded.events):
        if isinstance(event, ConfigApplied):
            try:
                reading = read_config(event)
            except Exception:  # noqa: S112 (a model's bug: the fold meets it again and makes it a dead letter)
                continue
            if reading is not None:
                readings[place] = reading
    return readings


@dataclass
class Ingested:
    """What one delivery adds to the log: records (folded into the state already), dead
    letters, the partitions it touched, and configuration warnings worth logging.

    `stopped`: the message whose fold failed with an error of ours (not a rejection). It is a
    dead letter and the batch ends with it: the state may be half-changed, so the caller
    rebuilds it from the log, and the messages after it are read again."""

    rows: list[LogRow] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    touched: set[str] = field(default_factory=set)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (partition, warning)
    configured: list[tuple[str, str, str, list[str]]] = field(
        default_factory=list
    )  # (partition, the event's id, what runs now, what changed: `config_changes`)
    stopped: Inbound | None = None


#: How many partitions a daemon keeps, unless told otherwise (`run --max-partitions`): a
#: publisher inventing partitions would otherwise grow the state, the metrics and the work.
MAX_PARTITIONS = 1000


def fold(
    decoded: Decoded,
    known: Mapping[str, int],
    state: ClusterState,
    max_partitions: int = MAX_PARTITIONS,
    readings: Mapping[int, ConfigReading] | None = None,
) -> Ingested:
    """Fold the decoded events into `state`, in order. `known` maps the ids already in the log
    to their positions; `readings`, the configurations read already (`read_configurations`).
    An event with a reserved or reused id, one that would make a partition beyond
    `max_partitions`, or one the fold rejects, becomes a dead letter and changes nothing."""
    out = Ingested(dead=list(decoded.dead))
    seen: dict[str, int] = {}
    received = decoded.received
    for place, (message, event) in enumerate(decoded.events):
        if readings and place in readings:
            remember_config(readings[place])
        first = known.get(event.id) or seen.get(event.id)
        kind: DeadLetterKind
        if is_daemon_id(state.log_id, event.id):
            kind = "reserved_id"
            reason = f"event ids starting with {state.log_id + ':'!r} are reserved for the daemon's ticks and decisions; choose another id"
        elif first is not None:
            kind = "duplicate_id"
            reason = f"duplicate id {event.id!r}: already in the log at seq {first}; ids must be unique per event"
        elif event.partition not in state.partitions and len(state.partitions) >= max_partitions:
            kind = "too_many_partitions"
            reason = (
                f"partition {event.partition!r} would be partition {len(state.partitions) + 1:,}; this daemon keeps at most {max_partitions:,} "
                "(run --max-partitions)"
            )
        else:
            record = LogRecord(state.seq + 1, received, event)
            before = configured_before(state, event)
            try:
                warnings = apply(state, record)
            except Rejected as exc:
                kind, reason = "rejected", exc.reason
            except Exception as exc:  # a bug of ours must not stop ingest
                out.dead = [d for d in out.dead if (d.stream_seq or 0) < message.stream_seq]
                out.dead.append(
                    dead_letter(message, received, f"an error of preemptd's while folding it ({_describe(exc)}); please report it", event, kind="internal")
                )
                out.stopped = message
                return out
            else:
                if warnings:
                    out.warnings += [(event.partition, warning) for warning in warnings]
                if isinstance(event, ConfigApplied):
                    after = state.partitions[event.partition]
                    out.configured.append((event.partition, event.id, describe(after), config_changes(before, configured_alone(event))))
                seen[event.id] = record.seq
                out.rows.append(to_row(record, payload=message.data, stream_seq=message.stream_seq))
                out.touched.add(event.partition)
                continue
        out.dead.append(dead_letter(message, received, reason, event, kind=kind))
    return out


def _misplaced(subject: str, event: ClusterEvent) -> str | None:
    """Why `event` does not belong on `subject` (`preemptd.cluster.<partition>.<kind>`), if so."""
    expected = cluster_subject(event.partition, type_of(event))
    if subject == expected:
        return None
    if subject_partition(subject) != event.partition:
        return f"published on {subject} but the event's partition is {event.partition!r}: publish it on {expected}"
    return f"published on {subject} but a {type_of(event)} event goes on {expected}"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


#: Why an input became a dead letter, in a word (the `reason` label of `preemptd_dead_letters_total`).
DEAD_LETTER_KINDS: tuple[DeadLetterKind, ...] = get_args(DeadLetterKind)


def dead_letter(
    message: Inbound,
    received: int,
    reason: str,
    event: ClusterEvent | None = None,
    *,
    event_type: str | None = None,
    event_id: str | None = None,
    kind: DeadLetterKind = "invalid",
) -> DeadLetter:
    return DeadLetter(
        received=received,
        subject=message.subject,
        reason=reason,
        raw=message.data,
        stream_seq=message.stream_seq,
        partition=event.partition if event is not None else subject_partition(message.subject),
        event_type=type_of(event) if event is not None else event_type,
        event_id=event.id if event is not None else event_id,
        kind=kind,
    )
