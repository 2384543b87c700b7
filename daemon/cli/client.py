"""What a shim does, from the command line: publish events (`preemptd publish`), follow
decisions or rejections (`preemptd tail`).

`publish` checks each event with the contract's own decoder before it sends anything, since a
rejected event is otherwise known only to the daemon. Unless told not to wait, it then learns
the verdict of a running daemon on each event: the daemon commits a batch, publishes its
rejection notices, then acknowledges the batch; so once its consumer's acknowledgement reaches
an event, the event was either rejected (a notice names its stream position) or accepted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal, get_args

import anyio
import msgspec

from preemptd.events import PARTITION_PATTERN, ConfigError, DecodeError, ObjectError, decode_cluster_event, decode_decision, object_events, runtime_object
from preemptd.scheduling import claiming, counted, flat_objects, is_object, yaml_documents

from ..bus import Bus, NatsAccess, Reader, ReadThrough
from ..clock import wall_ms
from ..errors import BusError, UsageError
from ..log.outbox import Notice
from ..queries import TIME_BUDGET, try_subject
from ..records import REJECTED_STREAM, Outbound, Stored, cluster_subject, rejected_subject, subject_partition
from . import render
from .stories import Terms, terms_of

__all__ = ["publish", "tail"]

CONNECT_TIMEOUT = 2.0  # a daemon that is not there is reported fast
_PARTITION = re.compile(PARTITION_PATTERN)
_SUBJECT_WORD = re.compile(r"[^\s*>.]+")
_SHOWN_PROBLEMS = 20
_MAX_EVENT_VALUES = 20_000_000  # a file of a million events; aliases multiplying a few lines stop here


# -- publish ---------------------------------------------------------------------------------


#: What became of a published event, in the order the tally says them.
Outcome = Literal["accepted", "rejected", "duplicate", "sent", "not read", "unknown"]


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What became of one published event."""

    position: int  # in the file, from 1
    event: Any
    outcome: Outcome
    reason: str = ""

    def line(self) -> str:
        known = [f"{self.event[key]}" for key in ("type", "id") if isinstance(self.event, dict) and self.event.get(key)]
        said = f"event {self.position}" + (f" ({', id '.join(known)})" if known else "") + f": {self.outcome}"
        return render.printable(said + (f": {self.reason}" if self.reason else ""))

    @property
    def failed(self) -> bool:
        return self.outcome in ("rejected", "not read", "unknown")


def shown_events(events: list[Any]) -> None:
    """`--show-events`: the events a file stands for (its objects' as the contract maps them), as JSON lines."""
    for event in events:
        print(json.dumps(event), flush=True)


async def publish(
    url: str, source: str, *, access: NatsAccess | None = None, check: bool = True, wait: float | None = 30.0, verbose: bool = False, show_events: bool = False
) -> int:
    """Publish the events in `source`. With `wait` (seconds), report the daemon's verdict on
    each event of a partition a running daemon reads (exit 1 if one is rejected or not read in
    time); without, or with no daemon running, send them and return."""
    now = wall_ms()
    text = _read_text(source)
    events = _events(text, source)
    if show_events:
        shown_events(events)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    messages = [_prepared(event, now, f"{digest}-{position}", position) for position, event in enumerate(events, 1)]
    if check:
        _refuse_invalid(messages)
    return await send(url, events, messages, source, access=access, wait=wait, verbose=verbose)


async def send(url: str, events: list[Any], messages: list[Outbound], source: str, *, access: NatsAccess | None, wait: float | None, verbose: bool) -> int:
    """Send `messages` (made of `events`, read from `source`) as `publish` does, and report."""
    bus = await Bus.connect(url, access=access, connect_timeout=CONNECT_TIMEOUT)
    sent: list[Stored] = []
    try:
        await bus.streams.ensure()
        running = _running(await bus.streams.readers(), messages) if wait is not None else set()
        if not running:
            await _publish_all(bus, messages, sent)
            verdicts = [Verdict(n, e, "duplicate" if s.duplicate else "sent") for n, (e, s) in enumerate(zip(events, sent), 1)]
        else:
            before = await bus.streams.last_sequence(REJECTED_STREAM)
            async with bus.streams.follow(rejected_subject(">"), after=before) as notices:
                await _publish_all(bus, messages, sent)
                verdicts = await _verdicts(bus, notices, before, events, messages, sent, wait or 0.0, running)
    finally:
        await bus.close()
        if len(sent) < len(messages):  # interrupted, or NATS failed
            print(_interrupted(len(sent), len(messages), source), file=sys.stderr, flush=True)
    for verdict in verdicts:
        if verbose or verdict.outcome not in ("accepted", "sent", "duplicate"):
            print(verdict.line(), flush=True)
    print(_publish_summary(verdicts, messages, running, waited=wait is not None), file=sys.stderr)
    return 1 if any(verdict.failed for verdict in verdicts) else 0


def _partition(message: Outbound) -> str:
    """The partition of a message `publish` made: each is on its partition's cluster subject."""
    partition = subject_partition(message.subject)
    assert partition is not None, message.subject
    return partition


def _running(readers: list[Reader], messages: list[Outbound]) -> set[str]:
    """The partitions of `messages` that a running daemon reads."""
    partitions = {_partition(message) for message in messages}
    return {partition for partition in partitions if any(reader.active and reader.reads(partition) for reader in readers)}


def _interrupted(sent: int, total: int, source: str) -> str:
    again = f"preemptd publish {source}" if source != "-" else "the same publish with the same input"
    return (
        f"interrupted: NATS had stored {sent:,} of the {total:,} events (perhaps a few more): run {again} again; "
        "the events sent already carry the same ids and are not applied twice"
    )


def _refuse_invalid(messages: list[Outbound]) -> None:
    """Refuse to send anything when an event would be a dead letter for its form alone."""
    problems = []
    for position, message in enumerate(messages, 1):
        try:
            decode_cluster_event(message.data)
        except DecodeError as exc:
            problems.append(f"event {position}" + (f" (id {message.msg_id})" if message.msg_id else "") + f": {exc.reason}")
    if problems:
        more = f"\n  ... and {len(problems) - _SHOWN_PROBLEMS} more" if len(problems) > _SHOWN_PROBLEMS else ""
        shown = "\n  ".join(problems[:_SHOWN_PROBLEMS])
        raise UsageError(f"{counted(len(problems), 'event')} the daemon would reject; nothing was published (--no-check sends them anyway):\n  {shown}{more}")


async def _publish_all(bus: Bus, messages: list[Outbound], sent: list[Stored]) -> None:
    """Publish `messages` in batches, adding where each went to `sent` as it goes."""
    for start in range(0, len(messages), 1000):
        sent += await bus.publisher.publish(messages[start : start + 1000])


async def _verdicts(
    bus: Bus,
    notices: AsyncIterator[tuple[int, bytes]],
    before: int,
    events: list[Any],
    messages: list[Outbound],
    stored: list[Stored],
    wait: float,
    running: set[str],
) -> list[Verdict]:
    """Wait until a running daemon has read every new event of the partitions in `running`,
    then gather the rejection notices published since `before` (a daemon publishes them before
    it acknowledges the events)."""
    partitions = {where.seq: _partition(message) for message, where in zip(messages, stored)}
    awaited = {s.seq for s in stored if not s.duplicate and partitions[s.seq] in running}
    rejections: dict[int, Notice] = {}
    read = ReadThrough(())
    with anyio.move_on_after(wait):
        while True:
            read = await bus.streams.read_through()
            if all(read.read(partitions[seq], seq) for seq in awaited):
                break
            await anyio.sleep(0.1)
    last = await bus.streams.last_sequence(REJECTED_STREAM)
    complete = last <= before  # no notice since the subscription: none to read
    if not complete:
        with anyio.move_on_after(10.0):  # they are in the stream already: only delivery takes time
            async for notice_seq, data in notices:
                notice = _notice(data)
                if notice is not None and notice.stream_seq in awaited:
                    rejections[notice.stream_seq] = notice
                if notice_seq >= last:
                    complete = True
                    break
    verdicts = [
        _verdict(position, event, where, rejections, partitions[where.seq] in running, read.read(partitions[where.seq], where.seq), wait)
        for position, (event, where) in enumerate(zip(events, stored), 1)
    ]
    if complete:
        return verdicts
    unsure = "read by a daemon, but not all rejection notices arrived within 10s: it may have been rejected"
    return [dataclasses.replace(v, outcome="unknown", reason=unsure) if v.outcome == "accepted" else v for v in verdicts]


def _notice(data: bytes) -> Notice | None:
    """A rejection notice; anyone may publish on its subject, so anything else is None."""
    try:
        return msgspec.json.decode(data, type=Notice)
    except msgspec.DecodeError:
        return None


def _verdict(position: int, event: Any, where: Stored, rejections: dict[int, Notice], running: bool, read: bool, wait: float) -> Verdict:
    if where.duplicate:
        return Verdict(position, event, "duplicate", "NATS dropped it: its id was published in the last 2 minutes")
    if not running:
        return Verdict(position, event, "sent", "no daemon is running for its partition: one reads it when it starts")
    notice = rejections.get(where.seq)
    if notice is not None and notice.kind == "duplicate_id":
        return Verdict(position, event, "duplicate", f"already in the log: {notice.reason}")
    if notice is not None:
        return Verdict(position, event, "rejected", notice.reason)
    if read:
        return Verdict(position, event, "accepted")
    return Verdict(position, event, "not read", f"no daemon read it within {wait:g}s (is `preemptd run` running?)")


def _publish_summary(verdicts: list[Verdict], messages: list[Outbound], running: set[str], *, waited: bool) -> str:
    outcomes: dict[Outcome, int] = {}
    for verdict in verdicts:
        outcomes[verdict.outcome] = outcomes.get(verdict.outcome, 0) + 1
    line = f"published {counted(len(verdicts), 'event')}"
    tally = ", ".join(f"{number} {outcome}" for outcome, number in sorted(outcomes.items(), key=lambda item: _ORDER.index(item[0])))
    if tally and (waited or outcomes.get("duplicate")):
        line += f": {tally}"
    idle = sorted({_partition(m) for m in messages} - running) if waited else []
    if idle:
        line += (
            f" (no daemon is running for partition {', '.join(idle)}: the events wait in the stream, and `preemptd tail --rejected` shows any "
            "rejection once one runs)"
        )
    if outcomes.get("duplicate"):
        line += " (a duplicate was published before: it is not applied twice)"
    return line


_ORDER: tuple[Outcome, ...] = get_args(Outcome)


def _read_text(source: str) -> str:
    try:
        return sys.stdin.read() if source == "-" else Path(source).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {source}: {exc}") from None


def _events(text: str, source: str) -> list[Any]:
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    json_error = None
    if lines and lines[0][1].lstrip().startswith("{"):
        try:
            return [json.loads(line) for _, line in lines]
        except json.JSONDecodeError:
            json_error = next(filter(None, (_json_line_error(number, line) for number, line in lines)))
    events: list[Any] = []
    try:
        documents = yaml_documents(text, "stdin" if source == "-" else source, max_values=_MAX_EVENT_VALUES)
    except ConfigError as exc:
        raise UsageError(f"{source}: {json_error}" if json_error else str(exc)) from None
    for document in documents:
        events += document if isinstance(document, list) else [document]
    if len(events) == 1 and isinstance(events[0], dict) and "events" in events[0] and "type" not in events[0]:
        raise UsageError(f"{source} is a scenario file, not a list of events: run it with `preemptd simulate {source}`")
    if events and not any(isinstance(event, dict) and "type" in event for event in events) and _a_configuration(documents):
        raise UsageError(
            f"{source} is a configuration, not events: hand it to the running daemon with `preemptd apply {source}` (or start one with `preemptd run "
            f"--config {source}`)"
        )
    return _objects_as_events(events, source)


def _objects_as_events(items: list[Any], source: str) -> list[Any]:
    """Events as written, and the objects users hold (a Kueue Workload, a Volcano Job, ... and
    `kind: List`s of them) as the events the contract maps them to (`object_events`); a
    configuration object among them is refused with what to do instead."""
    out: list[Any] = []
    for position, item in enumerate(items, 1):
        if not (isinstance(item, dict) and "type" not in item and is_object(item)):
            out.append(item)
            continue
        for found in flat_objects([item]):
            kind = found.get("kind") if isinstance(found, dict) else None
            if claiming(found) is not None and not runtime_object(found):
                raise UsageError(
                    f"{source}: item {position} is a {kind}: configuration, not events: hand it to the running daemon with `preemptd apply`, or ask "
                    "with `preemptd try --db LOG --config FILE`"
                )
            try:
                out += object_events(found)
            except ObjectError as exc:
                raise UsageError(f"{source}: item {position}: {exc}") from None
    return out


def _a_configuration(documents: list[Any]) -> bool:
    """Whether `documents` read as a configuration file (`run --config`, `apply`): a wrapper
    `{model, ...}`, YuniKorn's `queues.yaml`, or Kubernetes objects (events without `type` are
    not taken for one)."""
    from ..config_file import model_and_config

    head = documents[0] if documents else None
    items = head if isinstance(head, list) else [head]
    if not (isinstance(head, dict) and ({"model", "queues", "partitions"} & set(head))) and not all(is_object(item) for item in items):
        return False
    if any(runtime_object(item) for item in flat_objects(items)):  # a Workload, a Volcano Job...: read as events
        return False
    try:
        model_and_config(documents)
    except ConfigError:
        return False
    return True


def _json_line_error(number: int, line: str) -> str | None:
    """Why line `number` of a JSON lines file is not JSON, or None."""
    try:
        json.loads(line)
    except json.JSONDecodeError as exc:
        return f"line {number} is not JSON: {exc.msg} (column {exc.colno})"
    return None


def _prepared(event: Any, now: int, event_id: str, position: int) -> Outbound:
    """The simplest shim fills `id` and `ts` when missing; anything else goes as written. The id
    it fills (`event_id`) is derived from the file's content and the event's position in it, so
    that the same file published again (after an interruption) carries the same ids: NATS and
    the daemon drop what was sent already."""
    if isinstance(event, dict):
        event.setdefault("id", event_id)
        event.setdefault("ts", now)
        partition, kind = str(event.get("partition", "default")), str(event.get("type", "unknown"))
        if not _PARTITION.fullmatch(partition):
            raise UsageError(f"event {position} (id {event['id']}): partition {partition!r} is not 1-64 letters, digits, _ or -")
        if not _SUBJECT_WORD.match(kind):
            raise UsageError(f"event {position} (id {event['id']}): type {kind!r} cannot start a NATS subject word (no spaces, '*' or '>')")
        return Outbound(cluster_subject(partition, kind), _json(event, position), str(event["id"]))
    return Outbound(cluster_subject("default", "unknown"), _json(event, position))


def _json(event: Any, position: int) -> bytes:
    try:
        return json.dumps(event).encode()
    except (TypeError, ValueError) as exc:  # YAML has dates, binary, sets, NaN...
        raise UsageError(f"event {position} has a value JSON cannot carry ({exc}): quote it") from None


# -- try -------------------------------------------------------------------------------------


def query_events(source: str) -> tuple[str, list[Any]]:
    """The events of a `try` file (the formats `publish` reads) and the one partition they are for."""
    events = _events(_read_text(source), source)
    partitions = sorted({str(e.get("partition", "default")) for e in events if isinstance(e, dict)}) or ["default"]
    if len(partitions) > 1:
        raise UsageError(f"{source} holds events of partitions {', '.join(partitions)}: a query asks one partition; split the file")
    if not _PARTITION.fullmatch(partitions[0]):
        raise UsageError(f"partition {partitions[0]!r} is not 1-64 letters, digits, _ or -")
    return partitions[0], events


async def ask(url: str, source: str, *, access: NatsAccess | None = None, as_json: bool, show_events: bool = False) -> int:
    """Ask the daemon that reads the events' partition what it would decide; print its answer."""
    partition, events = query_events(source)
    if show_events:
        shown_events(events)
    bus = await Bus.connect(url, access=access, connect_timeout=CONNECT_TIMEOUT)
    try:
        answer = await bus.request(try_subject(partition), json.dumps(events).encode(), timeout=TIME_BUDGET + 5)
    except BusError as exc:
        raise UsageError(str(exc)) from None
    finally:
        await bus.close()
    if answer is None:
        raise UsageError(f"no daemon answers queries for partition {partition!r} at {url} (is `preemptd run` running, and reading that partition?)")
    return print_answer(json.loads(answer), as_json=as_json)


def _terms(model: str) -> Terms:
    """A model's terms; the default ones for a model this version lacks (a newer daemon's)."""
    try:
        return terms_of(model)
    except ConfigError:
        return Terms()


def print_answer(answer: dict[str, Any], *, as_json: bool) -> int:
    """An answer of `try`: JSON, or a line per decision; 2 when the question was refused."""
    if "refused" in answer:
        raise UsageError(f"the daemon refused the query: {answer['refused']}")
    if as_json:
        print(json.dumps(answer, indent=2))
        return 0
    print(render.printable(f"partition {answer['partition']} ({answer['model']}) as of log seq {answer['seq']}: if these arrived now,"))
    terms = _terms(answer["model"])
    words = terms.words if terms.whole else None  # Kueue's decisions are about workloads, not their pods
    for decision in answer["decisions"]:
        print("  " + render.would(decision, words))
    for name in answer["undecided"]:
        print(render.printable(f"  {name}: nothing would be decided about it (within the hour, with nothing else arriving)"))
    if answer["other_decisions"]:
        others = f"{terms.words.application}s" if terms.whole else "tasks"
        print(f"  (and {counted(answer['other_decisions'], 'decision')} about other {others}, due anyway)")
    return 0


# -- tail ------------------------------------------------------------------------------------


async def tail(
    url: str, *, access: NatsAccess | None = None, partition: str, rejected: bool, as_json: bool, from_start: bool, count: int, timeout: float
) -> int:
    """Print decisions (or rejection notices) as they come, until `count` or `timeout`."""
    subject = rejected_subject(partition) if rejected else f"preemptd.decisions.{partition}.>"
    after = 0 if from_start else None
    show: Callable[[bytes], str] = _rejection if rejected else _decision
    bus = await Bus.connect(url, access=access, connect_timeout=CONNECT_TIMEOUT)
    seen = 0
    try:
        await bus.streams.ensure()
        with anyio.move_on_after(timeout or math.inf):
            async with bus.streams.follow(subject, after=after) as messages:
                async for _, data in messages:
                    print(data.decode(errors="replace") if as_json else show(data), flush=True)
                    seen += 1
                    if count and seen >= count:
                        break
    finally:
        await bus.close()
    return 0


def _decision(data: bytes) -> str:
    """A decision in one line; anyone may publish on the decisions' subjects too."""
    try:
        return render.summary(decode_decision(data))
    except DecodeError as exc:
        return render.printable(f"not a decision ({exc.reason}): {data[:200].decode(errors='replace')}")


def _rejection(data: bytes) -> str:
    """A rejection notice in one line: what was rejected, where it was, and why."""
    notice = _notice(data)
    if notice is None:
        return render.printable(f"not a rejection notice: {data[:200].decode(errors='replace')}")
    what = " ".join(filter(None, (notice.event_type, notice.event_id))) or "a message"
    said = f"{render.clock(notice.received)} rejected {what} ({notice.subject} #{notice.stream_seq}): {notice.reason}"
    return render.printable(said)
