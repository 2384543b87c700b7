"""Answers to `preemptd try`: "if these events arrived now, what would you decide?", asked by
NATS request/reply on `preemptd.try.<partition>` (a JSON array of events, as shims publish
them) and answered with the decisions the partition's model would make (JSON), from a copy of
the live state: nothing is folded into the state, written to the log or published.

The copy is the operating system's: the daemon forks, and the child, which shares the parent's
memory copy-on-write, folds the events and runs the cycles (`scheduling.trial`), writes its
answer to a socket and exits. The parent goes on at once (a fork takes milliseconds, where
copying a state of 100,000 tasks takes a quarter of a second), reads the answer on the event
loop and replies. The child runs only pure code (no lock, no I/O, no logging: what another
thread held at the fork stays untouched) and ends with `os._exit`.

A query is bounded: `MAX_TRIAL_EVENTS` events, `TIME_BUDGET` seconds of work (the child is killed
past it) and `RUNNING` at once (more are answered "busy" at once). A refusal says why in one
line (`{"refused": ...}`), as a dead letter would.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import socket
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import anyio
import msgspec

from preemptd.events import (
    DECISION_TYPES,
    MAX_DEPTH,
    MAX_MESSAGE_BYTES,
    ClusterEvent,
    DecodeError,
    decode_cluster_event,
    depth_beyond_limit,
    json_schema,
    to_builtins,
)
from preemptd.projections import ClusterState
from preemptd.scheduling import MAX_TRIAL_EVENTS, Trial, TrialRefused, trial

from .clock import wall_ms
from .operations.logs import log

__all__ = ["RUNNING", "STANDBY_DELAY", "TIME_BUDGET", "TRY_SUBJECT", "Queries", "answer_json", "ask_events", "query_subjects", "schema", "try_subject", "trial_in_child"]

TRY_SUBJECT = "preemptd.try"
TIME_BUDGET = 5.0  # seconds a query may take before its child is killed
RUNNING = 2  # queries answered at once; more are told to ask again
STANDBY_DELAY = 0.5  # seconds a standby waits before it says it is not the writer (the writer's answer comes first)
_LIMIT = 4 * 1024 * 1024  # bytes of an answer (a query of 1,000 tasks, each explained)


def try_subject(partition: str) -> str:
    return f"{TRY_SUBJECT}.{partition}"


def query_subjects(partitions: tuple[str, ...] | None) -> list[str]:
    """The query subjects of `partitions` (a daemon's: those it reads, or all)."""
    return [try_subject(p) for p in partitions] if partitions is not None else [try_subject("*")]


def ask_events(body: bytes, partition: str, now: int) -> list[ClusterEvent]:
    """The events of a query's body (a JSON array of events as shims publish them; `id` and
    `ts` may be left out), decoded as ingest decodes them; `TrialRefused` saying which is wrong."""
    if len(body) > MAX_MESSAGE_BYTES:
        raise TrialRefused(f"the query is {len(body):,} bytes; the limit is {MAX_MESSAGE_BYTES:,}")
    if (depth := depth_beyond_limit(body)) is not None:  # parsed, it would exhaust the interpreter's stack
        raise TrialRefused(f"the query nests objects and arrays {depth:,} levels deep; the limit is {MAX_DEPTH}")
    try:
        items = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TrialRefused(f"the query is not JSON ({exc}): send a JSON array of events") from None
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        raise TrialRefused("the query is not a JSON array of events")
    if len(items) > MAX_TRIAL_EVENTS:
        raise TrialRefused(f"{len(items):,} events: a query holds at most {MAX_TRIAL_EVENTS:,}")
    events = []
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise TrialRefused(f"event {number} is not a JSON object")
        item = {"id": f"try-{number}", "ts": now, "partition": partition, **item}
        try:
            events.append(decode_cluster_event(json.dumps(item).encode()))
        except DecodeError as exc:
            raise TrialRefused(f"event {number}: {exc.reason}") from None
    return events


class Answer(msgspec.Struct, forbid_unknown_fields=True):
    """What a partition would decide if the query's events arrived now."""

    partition: str
    model: str
    seq: int  # the log position of the state asked
    now: int  # when asked (epoch ms)
    decisions: list[dict[str, Any]]  # each a decision as `preemptd schema decisions` has it, without id, ts, cycle and partition, with after_ms and when
    other_decisions: int  # what the same cycles would decide about other tasks (due anyway)
    undecided: list[str]  # the query's tasks nothing would be decided about within the hour


class Refusal(msgspec.Struct, forbid_unknown_fields=True):
    """A query that cannot be asked, and why."""

    refused: str


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of a query (`try`: a JSON array of cluster events, `id` and `ts` filled
    when missing) or of its answer (`answer`)."""
    if kind == "answer":
        shapes, definitions = msgspec.json.schema_components([Answer, Refusal])
        out: dict[str, Any] = {"oneOf": list(shapes), "$defs": definitions}
        decision = definitions["Answer"]["properties"]["decisions"]["items"]
        decision.update(
            required=["after_ms", "when", "type"],
            description="a decision as `preemptd schema decisions` describes it, without id, ts, cycle and partition (only a logged decision has them)",
        )
        decision["properties"] = {
            "after_ms": {"type": "integer", "minimum": 0, "description": "how long after the question it would be made"},
            "when": {"enum": ["now", "a delay runs out", "the next cycle runs"], "description": "why a cycle would run then"},
            "type": {"enum": sorted(DECISION_TYPES)},
        }
    else:
        events = json_schema("cluster")
        definitions = events.pop("$defs")
        events.pop("$schema", None)
        for definition in definitions.values():
            if "required" in definition:
                definition["required"] = [name for name in definition["required"] if name not in ("id", "ts")]
        out = {"type": "array", "maxItems": MAX_TRIAL_EVENTS, "items": events, "$defs": definitions}
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return out


def answer_json(result: Trial | TrialRefused) -> bytes:
    """The answer as JSON: the decisions (as `preemptd schema decisions` describes them, without
    the `id`, `ts` and `cycle` only a logged decision has, with `after_ms`: how long after the
    question it would be made, and `when`: why a cycle would run then), or `refused` with the
    reason."""
    if isinstance(result, TrialRefused):
        return msgspec.json.encode(Refusal(result.reason))
    decisions, because = [], dict(result.cycles)
    for after, decision in result.decisions:
        shown = to_builtins(decision)
        for logged_only in ("id", "ts", "cycle", "partition"):
            shown.pop(logged_only, None)
        decisions.append({"after_ms": after, "when": because[after], **shown})
    return msgspec.json.encode(Answer(result.partition, result.model, result.seq, result.now, decisions, result.other_decisions, list(result.undecided)))


async def trial_in_child(state: ClusterState, partition: str, events: list[ClusterEvent], now: int, *, tick: int, budget: float = TIME_BUDGET) -> bytes:
    """`trial` of a copy-on-write copy of `state` in a forked child; its answer (JSON)."""
    ours, theirs = socket.socketpair()
    with warnings.catch_warnings():
        # Python 3.12 warns that a fork of a threaded process may deadlock in the child: this
        # child touches no lock another thread may hold (pure code, then `os._exit`).
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        _answer_and_exit(theirs, lambda: trial(state, partition, events, now, tick=tick))
    theirs.close()
    try:
        with anyio.fail_after(budget):
            return await _read_all(ours)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return answer_json(TrialRefused(f"the query took longer than {budget:g} s: ask about fewer tasks"))
    finally:
        ours.close()
        _reap(pid)


def _reap(pid: int) -> None:
    """Collect the child's exit without waiting for it: the answer goes out first (tearing down
    the child's copy of the memory takes a few milliseconds)."""
    done, _ = os.waitpid(pid, os.WNOHANG)
    if not done:
        threading.Thread(target=os.waitpid, args=(pid, 0), name=f"reap-{pid}", daemon=True).start()


def _answer_and_exit(out: socket.socket, ask: Callable[[], Trial]) -> None:
    """In the child: no collection (it would touch, and so copy, every page of the state), the
    default signal handlers (a Ctrl-C ends it quietly), the answer, and out."""
    status = 0
    try:
        gc.disable()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            answer = answer_json(ask())
        except TrialRefused as exc:
            answer = answer_json(exc)
        except Exception as exc:  # a bug: said to whoever asked, never raised into the daemon's copy
            answer = answer_json(TrialRefused(f"the query failed ({type(exc).__name__}: {exc}); please report it"))
        if len(answer) > _LIMIT:
            answer = answer_json(TrialRefused(f"the answer is {len(answer):,} bytes, more than {_LIMIT:,}: ask about fewer tasks"))
        out.setblocking(True)
        out.sendall(answer)
    except BaseException:
        status = 1
    finally:
        os._exit(status)


async def _read_all(sock: socket.socket) -> bytes:
    sock.setblocking(False)
    chunks: list[bytes] = []
    while True:
        await anyio.wait_readable(sock)
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


class Queries:
    """The daemon's answers to queries on the subjects of the partitions it reads."""

    def __init__(self, state: Callable[[], ClusterState], *, tick: int, partitions: tuple[str, ...] | None) -> None:
        self.state, self.tick, self.partitions = state, tick, partitions
        self.limiter = anyio.CapacityLimiter(RUNNING)

    @property
    def subjects(self) -> list[str]:
        return query_subjects(self.partitions)

    async def answer(self, subject: str, body: bytes) -> bytes:
        """The reply to one query (a refusal when it cannot be asked, or the daemon is busy);
        whatever a query does, it ends here, never in the daemon's task group."""
        try:
            return await self._answer(subject, body)
        except Exception as exc:
            log("query failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")
            return answer_json(TrialRefused(f"the query failed ({type(exc).__name__}); please report it"))

    async def _answer(self, subject: str, body: bytes) -> bytes:
        partition = subject.removeprefix(f"{TRY_SUBJECT}.")
        now = wall_ms()
        try:
            events = ask_events(body, partition, now)
        except TrialRefused as exc:
            return answer_json(exc)
        if self.limiter.available_tokens < 1:
            return answer_json(TrialRefused(f"busy: {RUNNING} queries are being answered; ask again in a moment"))
        async with self.limiter:
            started = time.monotonic()
            answer = await trial_in_child(self.state(), partition, events, now, tick=self.tick)
        log("query answered", logging.DEBUG, partition=partition, events=len(events), ms=round((time.monotonic() - started) * 1000, 1), refused=answer.startswith(b'{"refused"'))
        return answer
