"""What a shim does, from the command line: publish events (`preemptd publish`), follow
decisions or rejections (`preemptd tail`).

`publish` checks each event with the contract's own decoder before it sends anything, since a
rejected event is otherwise known only to the daemon. With `--wait` it also learns the daemon's
verdict on each event: the daemon commits a batch, publishes its rejection notices, then
acknowledges the batch; so once its consumer's acknowledgement reaches an event, the event was
either rejected (a notice names its stream position) or accepted.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import yaml

from preemptd.events import PARTITION_PATTERN, DecodeError, decode_cluster_event, decode_decision

from . import render
from .clock import wall_ms
from .errors import UsageError
from .nats_source import REJECTED_STREAM, Bus, NatsAccess, Outbound, ReadThrough, Stored, cluster_subject, rejected_subject, subject_partition
from .outbox import Notice

__all__ = ["publish", "tail"]

CONNECT_TIMEOUT = 2.0  # a daemon that is not there is reported fast
_PARTITION = re.compile(PARTITION_PATTERN)
_SUBJECT_WORD = re.compile(r"[^\s*>.]+")
_SHOWN_PROBLEMS = 20


# -- publish ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What became of one published event."""

    position: int  # in the file, from 1
    event: Any
    outcome: str  # published, accepted, rejected, duplicate, not read, unknown
    reason: str = ""

    def line(self) -> str:
        known = [f"{self.event[key]}" for key in ("type", "id") if isinstance(self.event, dict) and self.event.get(key)]
        said = f"event {self.position}" + (f" ({', id '.join(known)})" if known else "") + f": {self.outcome}"
        return render.printable(said + (f": {self.reason}" if self.reason else ""))


async def publish(url: str, source: str, *, access: NatsAccess | None = None, check: bool = True, wait: float | None = None) -> int:
    """Publish the events in `source`; with `wait`, report the daemon's verdict on each within
    `wait` seconds (exit 1 unless every one was accepted)."""
    now = wall_ms()
    events = _read_events(source)
    messages = [_prepared(event, now, position) for position, event in enumerate(events, 1)]
    if check:
        _refuse_invalid(messages)
    bus = await Bus.connect(url, access=access, connect_timeout=CONNECT_TIMEOUT)
    try:
        await bus.ensure_streams()
        if wait is None:
            stored = await _publish_all(bus, messages)
            verdicts = [Verdict(n, e, "duplicate" if s.duplicate else "published") for n, (e, s) in enumerate(zip(events, stored), 1)]
        else:
            before = await bus.last_sequence(REJECTED_STREAM)
            async with bus.follow(rejected_subject(">"), after=before) as notices:
                stored = await _publish_all(bus, messages)
                verdicts = await _verdicts(bus, notices, before, events, messages, stored, wait)
    finally:
        await bus.close()
    if wait is not None:
        for verdict in verdicts:
            print(verdict.line(), flush=True)
    print(_publish_summary(verdicts), file=sys.stderr)
    return 0 if wait is None or all(v.outcome == "accepted" for v in verdicts) else 1


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
        raise UsageError(f"{render.count(len(problems), 'event')} the daemon would reject; nothing was published (--no-check sends them anyway):\n  {shown}{more}")


async def _publish_all(bus: Bus, messages: list[Outbound]) -> list[Stored]:
    stored: list[Stored] = []
    for start in range(0, len(messages), 1000):
        stored += await bus.publish(messages[start : start + 1000])
    return stored


async def _verdicts(
    bus: Bus, notices: AsyncIterator[tuple[int, bytes]], before: int, events: list[Any], messages: list[Outbound], stored: list[Stored], wait: float
) -> list[Verdict]:
    """Wait until a daemon has read every new event, then gather the rejection notices
    published since `before` (a daemon publishes them before it acknowledges the events)."""
    awaited = {s.seq for s in stored if not s.duplicate}
    partitions = {where.seq: subject_partition(message.subject) for message, where in zip(messages, stored)}
    reasons: dict[int, str] = {}
    read = ReadThrough(())
    with anyio.move_on_after(wait):
        while True:
            read = await bus.read_through()
            if all(read.read(partitions[seq], seq) for seq in awaited):
                break
            await anyio.sleep(0.1)
    last = await bus.last_sequence(REJECTED_STREAM)
    complete = last <= before  # no notice since the subscription: none to read
    if not complete:
        with anyio.move_on_after(10.0):  # they are in the stream already: only delivery takes time
            async for notice_seq, data in notices:
                notice = _notice(data)
                if notice is not None and notice.stream_seq in awaited:
                    reasons[notice.stream_seq] = notice.reason
                if notice_seq >= last:
                    complete = True
                    break
    verdicts = [_verdict(position, event, where, reasons, read.read(partitions[where.seq], where.seq), wait) for position, (event, where) in enumerate(zip(events, stored), 1)]
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


def _verdict(position: int, event: Any, where: Stored, reasons: dict[int, str], read: bool, wait: float) -> Verdict:
    if where.duplicate:
        return Verdict(position, event, "duplicate", "NATS dropped it: its id was published in the last 2 minutes (the first copy's verdict is not known here)")
    if where.seq in reasons:
        return Verdict(position, event, "rejected", reasons[where.seq])
    if read:
        return Verdict(position, event, "accepted")
    return Verdict(position, event, "not read", f"no daemon read it within {wait:g}s (is `preemptd run` running?)")


def _publish_summary(verdicts: list[Verdict]) -> str:
    outcomes: dict[str, int] = {}
    for verdict in verdicts:
        outcomes[verdict.outcome] = outcomes.get(verdict.outcome, 0) + 1
    sent = f"published {render.count(len(verdicts), 'event')}"
    tally = ", ".join(f"{number} {outcome}" for outcome, number in outcomes.items() if outcome != "published")
    why = " (NATS dropped them: their id was published in the last 2 minutes)" if "duplicate" in outcomes else ""
    return f"{sent}: {tally}{why}" if tally else sent


def _read_events(source: str) -> list[Any]:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {source}: {exc}") from None
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    json_error = None
    if lines and lines[0][1].lstrip().startswith("{"):
        try:
            return [json.loads(line) for _, line in lines]
        except json.JSONDecodeError:
            json_error = next(filter(None, (_json_line_error(number, line) for number, line in lines)))
    events: list[Any] = []
    try:
        for document in yaml.safe_load_all(text):
            events += document if isinstance(document, list) else [document] if document is not None else []
    except yaml.YAMLError as exc:
        reason = json_error or f"not YAML: {' '.join(str(exc).split())}"
        raise UsageError(f"{source}: {reason}") from None
    if len(events) == 1 and isinstance(events[0], dict) and "events" in events[0] and "type" not in events[0]:
        raise UsageError(f"{source} is a scenario file, not a list of events: run it with `preemptd simulate {source}`")
    return events


def _json_line_error(number: int, line: str) -> str | None:
    """Why line `number` of a JSON lines file is not JSON, or None."""
    try:
        json.loads(line)
    except json.JSONDecodeError as exc:
        return f"line {number} is not JSON: {exc.msg} (column {exc.colno})"
    return None


def _prepared(event: Any, now: int, position: int) -> Outbound:
    """The simplest shim fills `id` and `ts` when missing; anything else goes as written."""
    if isinstance(event, dict):
        event.setdefault("id", uuid.uuid4().hex)
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


# -- tail ------------------------------------------------------------------------------------


async def tail(url: str, *, access: NatsAccess | None = None, partition: str, rejected: bool, as_json: bool, from_start: bool, count: int, timeout: float) -> int:
    """Print decisions (or rejection notices) as they come, until `count` or `timeout`."""
    subject = rejected_subject(partition) if rejected else f"preemptd.decisions.{partition}.>"
    after = 0 if from_start else None
    show: Callable[[bytes], str] = _rejection if rejected else _decision
    bus = await Bus.connect(url, access=access, connect_timeout=CONNECT_TIMEOUT)
    seen = 0
    try:
        await bus.ensure_streams()
        with anyio.move_on_after(timeout or math.inf):
            async with bus.follow(subject, after=after) as messages:
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
