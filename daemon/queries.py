"""Answers to `preemptd try`: "if these events arrived now, what would you decide?", asked by
NATS request/reply on `preemptd.try.<partition>` (a JSON array of events, as shims publish
them) and answered with the decisions the partition's model would make (JSON), from a copy of
the live state: nothing is folded into the state, written to the log or published.

The copy is the operating system's: the daemon forks, and the child, which shares the parent's
memory copy-on-write, reads the query, folds its events and runs the cycles
(`scheduling.trial`), writes its answer to a socket and exits. The parent goes on at once (a
fork takes milliseconds, where copying a state of 100,000 tasks takes a quarter of a second),
reads the answer on the event loop and replies. The child runs only pure code (no lock, no I/O,
no logging: what another thread held at the fork stays untouched), at a lower CPU priority
than the daemon (`CHILD_NICENESS`), and ends with `os._exit`.

What a query costs the daemon's own loop is its admission, decided before anything of it is
read (`Admission`): at most `RUNNING` at once, one at a time per asker, and a budget per asker
(`ASKER_BURST` queries, then `ASKER_RATE` a second); beyond, a one-line refusal at once. The
query itself is read in the child: `MAX_TRIAL_EVENTS` events, `TIME_BUDGET` seconds of work (the
child is killed past it), an answer NATS can carry. A refusal says why in one line
(`{"refused": ...}`), as a dead letter would. What was asked, answered and refused, and the
children's CPU time, are counted (`QueryCounts`) for the metrics and a line in the log.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import inspect
import json
import logging
import os
import signal
import socket
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from .operations.metrics import Metrics

__all__ = [
    "ASKER_BURST",
    "ASKER_RATE",
    "CHILD_NICENESS",
    "REFUSALS",
    "RUNNING",
    "STANDBY_DELAY",
    "TIME_BUDGET",
    "TRY_SUBJECT",
    "Admission",
    "Queries",
    "QueryCounts",
    "answer_json",
    "ask_events",
    "asker_of",
    "query_subjects",
    "schema",
    "trial_in_child",
    "try_subject",
]

TRY_SUBJECT = "preemptd.try"
TIME_BUDGET = 5.0  # seconds a query may take before its child is killed
RUNNING = 2  # queries answered at once; more are told to ask again
ASKER_BURST = 10  # queries an asker may send at once, then
ASKER_RATE = 1.0  # a second, on average (a token bucket per asker)
CHILD_NICENESS = 10  # a child's CPU priority below the daemon's: the daemon keeps its core
STANDBY_DELAY = 0.5  # seconds a standby waits before it says it is not the writer (the writer's answer comes first)
_LIMIT = 4 * 1024 * 1024  # bytes of an answer (a query of 1,000 tasks, each explained), NATS's max_payload permitting
_ASKERS_KEPT = 10_000  # askers whose budget is remembered (the oldest forgotten: it was full again anyway)

#: Why a query was refused, in a word (the `outcome` label of `preemptd_queries_total`, beside
#: `answered`): the daemon was answering `RUNNING` already, the asker one already, the asker
#: spent its budget, the query was larger than a message may be, it named no reply subject
#: (or one that is not an asker's inbox: see `Bus.serve`), the child refused it (not events, an unknown partition, an
#: answer too large), or it took longer than `TIME_BUDGET`.
REFUSALS = ("busy", "asking", "budget", "size", "no_reply", "refused", "time")


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
    undecided: list[str]  # the query's tasks (under Kueue its workloads) nothing would be decided about within the hour


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


async def trial_in_child(
    state: ClusterState,
    partition: str,
    body: bytes,
    now: int,
    *,
    tick: int,
    budget: float = TIME_BUDGET,
    limit: int = _LIMIT,
    reaped: Callable[[float], None] = lambda seconds: None,
) -> bytes:
    """The answer (JSON) to the query `body` (`ask_events`) of a copy-on-write copy of `state`,
    read and tried in a forked child; `reaped` is told the child's CPU seconds once it ended.
    `TimeoutError` once the child took `budget` seconds (it is killed)."""
    ours, theirs = socket.socketpair()
    with warnings.catch_warnings():
        # Python 3.12 warns that a fork of a threaded process may deadlock in the child: this
        # child touches no lock another thread may hold (pure code, then `os._exit`).
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        _answer_and_exit(theirs, lambda: trial(state, partition, ask_events(body, partition, now), now, tick=tick), limit)
    theirs.close()
    try:
        with anyio.fail_after(budget):
            return await _read_all(ours)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise
    finally:
        ours.close()
        _reap(pid, reaped)


def _reap(pid: int, reaped: Callable[[float], None]) -> None:
    """Collect the child's exit, and its CPU time, without waiting for it: the answer goes out
    first (tearing down the child's copy of the memory takes a few milliseconds)."""

    def collect(flags: int) -> bool:
        done, _, usage = os.wait4(pid, flags)
        if done:
            reaped(usage.ru_utime + usage.ru_stime)
        return bool(done)

    if not collect(os.WNOHANG):
        threading.Thread(target=collect, args=(0,), name=f"reap-{pid}", daemon=True).start()


def _answer_and_exit(out: socket.socket, ask: Callable[[], Trial], limit: int) -> None:
    """In the child: below the daemon's CPU priority, no collection (it would touch, and so
    copy, every page of the state), the default signal handlers (a Ctrl-C ends it quietly), the
    answer, and out."""
    status = 0
    try:
        os.nice(CHILD_NICENESS)
        gc.disable()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            answer = answer_json(ask())
        except TrialRefused as exc:
            answer = answer_json(exc)
        except Exception as exc:  # a bug: said to whoever asked, never raised into the daemon's copy
            answer = answer_json(TrialRefused(f"the query failed ({type(exc).__name__}: {exc}); please report it"))
        if len(answer) > limit:
            answer = answer_json(
                TrialRefused(f"the answer is {len(answer):,} bytes, more than a reply may be ({limit:,}, NATS's max_payload permitting): ask about fewer tasks")
            )
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


def asker_of(reply: str) -> str:
    """Who asks, as far as NATS tells: the reply subject without its last token, the inbox
    prefix of the asker's connection (`_INBOX.<random>` for nats-py and the Go client)."""
    return reply.rpartition(".")[0] or reply


class Admission:
    """Whether a query may be answered now, decided before any of it is read: per asker a token
    bucket of `ASKER_BURST` queries filled at `ASKER_RATE` a second (every query takes a token,
    refused or not, so that asking again at once when busy empties it), one at a time per asker,
    at most `RUNNING` at once. An asker beyond its budget is told so once a second; its other
    queries go unanswered, so that a flood costs the daemon no replies. Times are the caller's
    (seconds, monotonic)."""

    def __init__(self) -> None:
        self.running: set[str] = set()  # askers being answered
        self.budgets: OrderedDict[str, tuple[float, float, float]] = OrderedDict()  # asker -> (tokens, when counted, when told it has none)

    def admit(self, asker: str, size: int, now: float) -> tuple[str, TrialRefused | None] | None:
        """None if the query may go on (then `done` when it ends), or why not: in a word, and
        in a line for the asker (None: not to be answered)."""
        if size > MAX_MESSAGE_BYTES:
            return "size", TrialRefused(f"the query is {size:,} bytes; the limit is {MAX_MESSAGE_BYTES:,}")
        tokens, then, told = self.budgets.pop(asker, (ASKER_BURST, now, -1.0))
        tokens = min(ASKER_BURST, tokens + (now - then) * ASKER_RATE)
        if tokens < 1:
            say = now - told >= 1
            self.budgets[asker] = (tokens, now, now if say else told)
            why = (
                f"this connection asked {ASKER_BURST} queries in a burst; it may ask {ASKER_RATE:g} a second: ask again in "
                f"{(1 - tokens) / ASKER_RATE:.1f} s (queries asked meanwhile are not answered)"
            )
            return "budget", TrialRefused(why) if say else None
        self.budgets[asker] = (tokens - 1, now, told)
        while len(self.budgets) > _ASKERS_KEPT:
            self.budgets.popitem(last=False)
        if asker in self.running:
            return "asking", TrialRefused("busy: your previous query is still being answered; ask one at a time")
        if len(self.running) >= RUNNING:
            return "busy", TrialRefused(f"busy: {RUNNING} queries are being answered; ask again in a moment")
        self.running.add(asker)
        return None

    def done(self, asker: str) -> None:
        self.running.discard(asker)


class QueryCounts:
    """Queries asked, answered and refused (by `REFUSALS`), and the children's CPU seconds:
    since the daemon started, and since the last `said` (the log's line)."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self.metrics = metrics
        if metrics is not None:  # each outcome at 0 from the start: a rate over them needs a first sample
            for outcome in ("answered", *REFUSALS):
                metrics.queries.labels(outcome)
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.child_seconds = 0.0
        self._lock = threading.Lock()  # children are reaped on threads of their own
        self._said: tuple[collections.Counter[str], float] = (collections.Counter(), 0.0)

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] += 1
        if self.metrics is not None:
            self.metrics.queries.labels(outcome).inc()

    def reaped(self, seconds: float) -> None:
        with self._lock:
            self.child_seconds += seconds
        if self.metrics is not None:
            self.metrics.query_child_seconds.inc(seconds)

    def since_said(self) -> dict[str, Any] | None:
        """What changed since the last call, for a line in the log; None if nothing was asked."""
        with self._lock:
            seconds = self.child_seconds
        outcomes, before = self._said
        new = self.outcomes - outcomes
        if not new:
            return None
        self._said = (self.outcomes.copy(), seconds)
        refused = {reason: new[reason] for reason in REFUSALS if new[reason]}
        return {
            "asked": sum(new.values()),
            "answered": new["answered"],
            "refused": sum(refused.values()),
            **{f"refused_{k}": v for k, v in refused.items()},
            "child_cpu_seconds": round(seconds - before, 2),
        }


class Queries:
    """The daemon's answers to queries on the subjects of the partitions it reads."""

    def __init__(
        self,
        state: Callable[[], ClusterState],
        *,
        tick: int,
        partitions: tuple[str, ...] | None,
        metrics: Metrics | None = None,
        max_payload: int = _LIMIT,
        budget: float = TIME_BUDGET,
    ) -> None:
        self.state, self.tick, self.partitions = state, tick, partitions
        self.admission = Admission()
        self.counts = QueryCounts(metrics)
        self.limit = min(_LIMIT, max_payload)
        self.budget = budget

    @property
    def subjects(self) -> list[str]:
        return query_subjects(self.partitions)

    def screen(self, subject: str, body: bytes, reply: str | None) -> bytes | None | Awaitable[bytes | None]:
        """A query's fate, decided at once on the loop (no task, nothing awaited: a flood of
        them costs the least it can): a refusal, None when it is not to be answered (`reply`:
        the asker's reply subject, None if it gave none, or an asker beyond its budget), or for
        an admitted query the awaitable of its answer."""
        if reply is None:
            self.counts.count("no_reply")
            return None
        asker = asker_of(reply)
        refused = self.admission.admit(asker, len(body), time.monotonic())
        if refused is not None:
            self.counts.count(refused[0])
            return None if refused[1] is None else answer_json(refused[1])
        return self._admitted(asker, subject, body)

    async def answer(self, subject: str, body: bytes, reply: str | None = "_INBOX.asker.1") -> bytes | None:
        """The reply to one query, as `screen` decides it and then answered."""
        screened = self.screen(subject, body, reply)
        return await screened if inspect.isawaitable(screened) else screened

    async def _admitted(self, asker: str, subject: str, body: bytes) -> bytes:
        """An admitted query's answer: whatever it does, it ends here, never in the daemon's
        task group."""
        try:
            return await self._answer(subject, body)
        except Exception as exc:
            log("query failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")
            self.counts.count("refused")
            return answer_json(TrialRefused(f"the query failed ({type(exc).__name__}); please report it"))
        finally:
            self.admission.done(asker)

    async def _answer(self, subject: str, body: bytes) -> bytes:
        partition = subject.removeprefix(f"{TRY_SUBJECT}.")
        started = time.monotonic()
        try:
            answer = await trial_in_child(
                self.state(), partition, body, wall_ms(), tick=self.tick, budget=self.budget, limit=self.limit, reaped=self.counts.reaped
            )
            outcome = "refused" if answer.startswith(b'{"refused"') else "answered"
        except TimeoutError:
            answer, outcome = answer_json(TrialRefused(f"the query took longer than {self.budget:g} s: ask about fewer tasks")), "time"
        seconds = time.monotonic() - started
        self.counts.count(outcome)
        log("query answered", logging.DEBUG, partition=partition, bytes=len(body), ms=round(seconds * 1000, 1), outcome=outcome)
        return answer

    def tell(self) -> None:
        """Say in the log what queries came since the last time, if any (the daemon calls this
        once a minute), so that a flood of them shows."""
        said = self.counts.since_said()
        if said is not None:
            log("queries", **said)
