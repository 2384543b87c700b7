"""Offline runs of scenario files: the same engine as the daemon, on simulated time.

The simulated shim carries out decisions as a Kubernetes shim would: it binds allocations, and
releases victims after the grace period (re-creating them as new pending tasks when
`recreate_preempted` is set, as a ReplicaSet does). For quota-level models it binds the tasks of
an admitted application to the first schedulable node by name (if there is one: the pods are
scheduled elsewhere; only the admission matters to those models) and releases an evicted
application's tasks after the grace period (re-created, with `recreate_preempted`, as Kueue
requeues an evicted workload). Everything it does is an ordinary cluster
event in the log, so the log of a simulation replays like the daemon's.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from preemptd.events import (
    Admitted,
    Allocated,
    ClusterEvent,
    Decision,
    DecisionEvent,
    DecodeError,
    DurationError,
    Evicted,
    Expectations,
    ObjectError,
    PreemptdError,
    Preempted,
    PriorityClassUpserted,
    QuotaEnforced,
    Resources,
    Scenario,
    TaskBound,
    TaskReleased,
    TaskSubmitted,
    closest,
    decode_cluster_event,
    encode,
    object_events,
    parse_duration,
    runtime_object,
    to_builtins,
    type_of,
)
from preemptd.projections import ClusterState, LogRecord, PartitionState, Rejected, partition_view

from ._engine import run_cycle, tick_record
from ._pacing import Cadence, Pacer
from ._registry import apply

__all__ = ["ScenarioError", "SimulationResult", "check", "simulate"]


class ScenarioError(PreemptdError, ValueError):
    """A scenario file that cannot run: a malformed event, a bad duration."""


@dataclass
class SimulationResult:
    state: ClusterState
    records: list[LogRecord] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    rejected: list[tuple[ClusterEvent, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    known: dict[str, dict[str, Any]] = field(default_factory=dict)  # every task ever seen

    def view(self, partition: str) -> dict[str, Any]:
        """The final state of `partition`, with released tasks listed as `released`."""
        view = partition_view(self.state.partitions[partition])
        for task_id, last in self.known.items():
            view["tasks"].setdefault(task_id, {**last, "status": "released", "reserved_node": None})
        return view


def _duration(value: Any, what: str) -> int:
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise ScenarioError(f"{what}: {exc}") from None


def _expand(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """`repeat: N` makes N copies of an event, with `{i}` in its texts replaced by 1..N; an
    object (a Kueue Workload, a Volcano Job, ...: `object_events`) makes its events, at its `at`."""
    if runtime_object(entry):
        body = {key: value for key, value in entry.items() if key != "at"}
        try:
            return [{"at": entry.get("at", 0), **event} for event in object_events(body)]
        except ObjectError as exc:
            raise ScenarioError(str(exc)) from None
    count = entry.get("repeat")
    if count is None:
        return [entry]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ScenarioError(f"repeat must be a positive integer, got {count!r}")
    body = {key: value for key, value in entry.items() if key != "repeat"}
    return [{key: _number(value, i) for key, value in body.items()} for i in range(1, count + 1)]


def _number(value: Any, i: int) -> Any:
    return value.replace("{i}", str(i)) if isinstance(value, str) else value


#: How many checks of its time (`Cycle.step`) the n-th cycle of a simulation passes before it is
#: cut, as a busy daemon's cycles are by `--cycle-time`; None: every one (the cycle is not cut).
Checks = Callable[[int], int | None]


def simulate(scenario: Scenario, *, log_id: str = "sim", checks: Checks | None = None) -> SimulationResult:
    """Run `scenario` from time 0 to `until`, a cycle every `tick`; `checks` cuts cycles short."""
    return _Simulator(scenario, log_id, checks).run()


def _out_of_time_after(allowed: int) -> Callable[[], bool]:
    """A clock that says the time ran out at its `allowed + 1`-th reading."""
    readings = itertools.count(1)
    return lambda: next(readings) > allowed


class _Simulator:
    def __init__(self, scenario: Scenario, log_id: str, checks: Checks | None = None) -> None:
        self.checks = checks
        self.cycles = 0
        self.scenario = scenario
        self.partition = scenario.partition
        self.result = SimulationResult(state=ClusterState(log_id=log_id))
        self.grace = _duration(scenario.shim.grace_period, "shim.grace_period")
        self.tick, self.until = _duration(scenario.tick, "tick"), _duration(scenario.until, "until")
        if self.tick <= 0:
            raise ScenarioError("tick must be greater than 0s")
        self.pacer = Pacer(Cadence(tick=self.tick, idle_tick=self.tick))  # simulated cycles take no time
        self.reactions: list[tuple[int, int, ClusterEvent]] = []
        self.specs: dict[str, TaskSubmitted | TaskBound] = {}
        self.counter = 0

    def run(self) -> SimulationResult:
        scripted = self._scripted()
        now = 0
        while now <= self.until:
            while scripted and scripted[0][0] <= now:
                self.append(heapq.heappop(scripted)[2])
            self._react(now)
            if self.partition in self.pacer.due(self.result.state, now):
                self._cycle(now)
                self._react(now)
            now += self.tick
        return self.result

    # -- input --

    def _scripted(self) -> list[tuple[int, int, ClusterEvent]]:
        s = self.scenario
        model = {} if s.model is None else {"model": s.model}
        raw: list[dict[str, Any]] = [{"at": 0, "id": "config", "type": "config.applied", **model, "config": s.config}]
        raw += [
            {"at": 0, "id": f"priorityclass-{pc.name}", "type": PriorityClassUpserted.__struct_config__.tag, **msgspec.to_builtins(pc)}
            for pc in s.priority_classes
        ]
        raw += [copy for entry in s.events for copy in _expand(entry)]
        scripted = [self._event(index, entry) for index, entry in enumerate(raw)]
        heapq.heapify(scripted)
        return scripted

    def _event(self, index: int, entry: dict[str, Any]) -> tuple[int, int, ClusterEvent]:
        fields = dict(entry)
        at = _duration(fields.pop("at", 0), f"event {index}: at")
        fields.setdefault("id", f"e{index}")
        fields.setdefault("ts", at)
        fields.setdefault("partition", self.partition)
        try:
            event = decode_cluster_event(encode(fields))
        except DecodeError as exc:
            raise ScenarioError(f"event {index} ({entry.get('type', '?')} at {entry.get('at', 0)}): {exc}") from None
        unknown = sorted(set(fields) - {"type", *event.__struct_fields__})
        if unknown:  # shims may send fields preemptd does not know; a scenario's author means them
            known = ", ".join(sorted(event.__struct_fields__))
            raise ScenarioError(f"event {index} ({fields['type']}): unknown field {', '.join(unknown)}; the fields are: {known}")
        return at, index, event

    # -- the log --

    def append(self, event: ClusterEvent) -> bool:
        state = self.result.state
        record = LogRecord(state.seq + 1, event.ts, event)
        try:
            self.result.warnings.extend(apply(state, record))
        except Rejected as exc:
            self.result.rejected.append((event, exc.reason))
            return False
        self.result.records.append(record)
        self.pacer.touched(event.partition)
        self._remember(event)
        return True

    def _cycle(self, now: int) -> None:
        state = self.result.state
        allowed = self.checks(self.cycles) if self.checks is not None else None
        self.cycles += 1
        cycle = run_cycle(state, tick_record(state, now, self.partition), None if allowed is None else _out_of_time_after(allowed))
        self.pacer.ran(state, self.partition, now, 0, len(cycle.decided))
        self.result.records += cycle.records
        for decision in cycle.decisions:
            self.result.decisions.append(decision)
            self._remember(decision)
            self._plan_reactions(decision, now)

    def _remember(self, event: Any) -> None:
        """Keep what the final view shows of tasks that are gone, and the specs to re-create them."""
        if isinstance(event, (TaskSubmitted, TaskBound)):
            self.specs.setdefault(event.task, event)
        task_id = getattr(event, "task", None)
        p = self.result.state.partitions.get(self.partition)
        if task_id and p is not None and task_id in p.tasks:
            task = p.tasks[task_id]
            self.result.known[task_id] = {"node": task.node, "queue": task.queue, "app": task.app}

    # -- the simulated shim --

    def _plan_reactions(self, decision: Decision, now: int) -> None:
        if not self.scenario.shim.execute:
            return
        if isinstance(decision, Allocated):
            self._bind(decision.task, decision.node, now)
        elif isinstance(decision, (Preempted, QuotaEnforced)):
            for victim in decision.victims:
                self._release([victim.task], now + self.grace)
        elif isinstance(decision, Admitted):
            node = min((n.name for n in self._partition().nodes.values() if n.schedulable), default=None)
            if node is not None:
                for task_id in self._partition().apps[decision.app].tasks:
                    self._bind(task_id, node, now)
        elif isinstance(decision, Evicted):
            self._release(list(self._partition().apps[decision.app].tasks), now + self.grace)

    def _partition(self) -> PartitionState:
        return self.result.state.partitions[self.partition]

    def _bind(self, task: str, node: str, now: int) -> None:
        self._later(now, TaskBound(id=self._shim_id(), ts=now, partition=self.partition, task=task, node=node))

    def _release(self, tasks: list[str], due: int) -> None:
        """Release `tasks` at `due`, then re-create them all if asked to (after the last is
        gone, so that a workload is requeued whole)."""
        for task in tasks:
            self._later(due, TaskReleased(id=self._shim_id(), ts=due, partition=self.partition, task=task, reason="preempted"))
        if self.scenario.shim.recreate_preempted:
            for task in tasks:
                self._later(due, self._recreated(task, due))

    def _recreated(self, task_id: str, now: int) -> TaskSubmitted:
        spec = self.specs[task_id]
        fields = {name: getattr(spec, name) for name in TaskSubmitted.__struct_fields__ if hasattr(spec, name)}
        fields.update(id=self._shim_id(), ts=now, task=f"{task_id.split('~')[0]}~{self.counter}")
        if fields.get("app") is None or fields.get("resources") is None:
            raise ScenarioError(f"cannot re-create {task_id}: its first event did not describe it")
        return TaskSubmitted(**fields)

    def _shim_id(self) -> str:
        self.counter += 1
        return f"shim-{self.counter}"

    def _later(self, due: int, event: ClusterEvent) -> None:
        heapq.heappush(self.reactions, (due, self.counter, event))

    def _react(self, now: int) -> None:
        while self.reactions and self.reactions[0][0] <= now:
            self.append(heapq.heappop(self.reactions)[2])


# -- expectations ----------------------------------------------------------------------------


def check(result: SimulationResult, expect: Expectations, partition: str) -> list[str]:
    """Every way the run differs from `expect`; empty when it matches."""
    view = result.view(partition)
    return [
        *_check_queues(view, expect),
        *_check_tasks(view, expect),
        *_check_decisions(result.decisions, expect),
        *_check_counts(result.decisions, expect),
        *_check_rejected(result.rejected, expect),
    ]


def _check_queues(view: dict[str, Any], expect: Expectations) -> list[str]:
    failures = []
    for path, fields in expect.queues.items():
        queue = view["queues"].get(path)
        if queue is None:
            failures.append(f"queue {path}: no such queue")
            continue
        for field_name, wanted in fields.items():
            actual = Resources.parse(queue.get(field_name) or {})
            for name, amount in Resources.parse(wanted).items():
                if actual.get(name, 0) != amount:
                    failures.append(f"queue {path}: {field_name} {name} is {_show(queue.get(field_name), name)}, expected {wanted[name]}")
    return failures


def _show(wire: dict[str, Any] | None, name: str) -> Any:
    return (wire or {}).get(name, 0)


def _check_tasks(view: dict[str, Any], expect: Expectations) -> list[str]:
    failures = []
    for task_id, fields in expect.tasks.items():
        task = view["tasks"].get(task_id)
        if task is None:
            failures.append(f"task {task_id}: never seen")
            continue
        failures += [f"task {task_id}: {k} is {task.get(k)!r}, expected {v!r}" for k, v in fields.items() if task.get(k) != v]
    return failures


def _matches(decision: dict[str, Any], wanted: dict[str, Any]) -> bool:
    for key, value in wanted.items():
        actual = decision.get(key)
        if key == "victims" and isinstance(value, list):
            if sorted(v["task"] for v in actual or []) != sorted(value):
                return False
        elif actual != value:
            return False
    return True


#: Each decision type's fields, by its `type`: what an expected decision may name.
_DECISION_FIELDS = {str(cls.__struct_config__.tag): ("type", *(field.name for field in msgspec.structs.fields(cls))) for cls in DecisionEvent.__args__}


def _unknown_fields(expect: Expectations) -> list[str]:
    """An expected decision naming a type or a field no decision has would never match: said,
    with the one meant, instead of failing as not found."""
    failures = []
    for index, wanted in enumerate(expect.decisions, 1):
        kind = wanted.get("type")
        if kind is not None and kind not in _DECISION_FIELDS:
            meant = closest(str(kind), _DECISION_FIELDS)
            failures.append(f"expected decision {index}: no decision type {kind!r}" + (f" (did you mean {meant!r}?)" if meant else ""))
            continue
        known = _DECISION_FIELDS[kind] if kind is not None else {name for names in _DECISION_FIELDS.values() for name in names}
        for key in wanted:
            if key not in known:
                meant = "ts" if key == "at" else closest(key, known)  # a scenario's events say `at`; a decision's time is `ts`, in ms
                failures.append(f"expected decision {index}: {kind or 'a decision'} has no field {key!r}" + (f" (did you mean {meant!r}?)" if meant else ""))
    return failures


def _check_decisions(decisions: list[Decision], expect: Expectations) -> list[str]:
    unknown = _unknown_fields(expect)
    if unknown:
        return unknown
    remaining = list(expect.decisions)
    for decision in decisions:
        if remaining and _matches(to_builtins(decision), remaining[0]):
            remaining.pop(0)
    return [f"expected decision not found (in order): {wanted}" for wanted in remaining[:1]]


def _check_counts(decisions: list[Decision], expect: Expectations) -> list[str]:
    failures = []
    for kind, wanted in expect.counts.items():
        actual = sum(1 for d in decisions if type_of(d) == kind)
        if actual != wanted:
            failures.append(f"{actual} {kind} decisions, expected {wanted}")
    return failures


def _check_rejected(rejected: list[tuple[ClusterEvent, str]], expect: Expectations) -> list[str]:
    reasons = [reason for _, reason in rejected]
    failures = [f"expected a rejection containing {text!r}" for text in expect.rejected if not any(text in r for r in reasons)]
    unexpected = [r for r in reasons if not any(text in r for text in expect.rejected)]
    return failures + [f"unexpected rejection: {reason}" for reason in unexpected]
