"""What a scheduling model provides (`Model`, one registry entry) and the cycle context it
decides through (`Cycle`).

A model is a wing of `scheduling` (`yunikorn/`, ...): it parses its native configuration into
the queue tree and its own settings, runs its cycle, says when a cycle could decide anything new
with nothing happening in between, and folds any decision type only it makes. `Cycle.emit`
stamps each decision with its id and log position and folds it at once, so a model always sees
the effect of its own earlier decisions in the same cycle.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from preemptd.events import Admitted, Allocated, Blocked, DecisionEvent, Evicted, Preempted, QuotaEnforced, Tick, cut_text
from preemptd.projections import (
    ClusterState,
    Folds,
    LogRecord,
    ParsedConfig,
    PartitionState,
    Rejected,
    TaskState,
    Words,
    refuse_decision,
)

from ._views import Views

__all__ = ["BLOCKED_PER_CYCLE", "Budget", "Cycle", "Model", "bounded", "decision_id", "one_partition", "rotation"]

D = TypeVar("D", bound=DecisionEvent)  # the type of decision `Cycle.emit` is asked to make


def decision_id(log_id: str, cycle: int, index: int) -> str:
    """Decisions are named by the log, the tick that ran their cycle and their rank in it."""
    return f"{log_id}:{cycle}.{index}"


def one_partition(document: Any) -> list[str]:
    """`Model.partitions` of a model whose configuration documents name no partitions."""
    return ["default"]


def claims_nothing(item: Any) -> bool:
    """`Model.claims` of a model that takes no Kubernetes objects of its own."""
    return False


#: A decision's explanation and reasons keep at most this many lines, each at most this long
#: (a ClusterQueue of thousands of flavors lists each one): the rest is said in one line.
MAX_LINES, MAX_LINE = 100, 1_000
#: A cycle records at most this many `decision.blocked` anew, and stops recording them once its
#: decisions' text passes `BLOCKED_TEXT_PER_CYCLE` characters: the rest in the next cycles, so
#: that a backlog neither floods the log nor holds up ingest.
BLOCKED_PER_CYCLE = 1000
BLOCKED_TEXT_PER_CYCLE = 4_000_000


@dataclass(frozen=True)
class Budget:
    """What one cycle may decide, whatever the model's own settings allow, so that the daemon
    reads events between cycles at least about once a second; the rest is decided in the next
    cycles. The bounds count decisions, not time, so a replay repeats them.

    - `placements`: the allocations (`decision.allocated`) and admissions (`decision.admitted`)
      a cycle may make.
    - `preemptions`: the preemptors a cycle may serve: a `decision.preempted` is one, and the
      `decision.evicted` of one preemptor count as one together (its victims count as one).

    `Cycle.emit` counts every such decision, whichever phase of the model's cycle made it; the
    model asks `Cycle.may_place()` before it places more and `Cycle.may_preempt()` before it
    serves another preemptor, instead of counting for itself."""

    placements: int = 20_000  # about half a second on a 2-core machine
    preemptions: int = 100  # about a second at worst (YuniKorn: p99 10 ms each with 2,000 candidates)


def bounded(lines: tuple[str, ...]) -> tuple[str, ...]:
    """`lines`, at most `MAX_LINES` of at most `MAX_LINE` characters, saying what was left out.
    Bounding what is bounded already changes nothing."""
    if len(lines) <= MAX_LINES:
        return lines if all(len(line) <= MAX_LINE for line in lines) else tuple(cut_text(line, MAX_LINE) for line in lines)
    kept = tuple(cut_text(line, MAX_LINE) for line in lines[: MAX_LINES - 1])
    return (*kept, f"... and {len(lines) - len(kept):,} more lines")


def rotation(queues: Iterable[str], after: str | None) -> str | None:
    """The queue a phase begins at when the previous cycle was cut in it: the first of
    `queues` by name after `after`, else the first by name (a round, over consecutive cycles)."""
    names = sorted(queues)
    if not names:
        return None
    if after is None:
        return names[0]
    index = bisect.bisect_right(names, after)
    return names[index] if index < len(names) else names[0]


class Cycle:
    """What a model sees during one cycle: the partition, the time (`now`, the tick's), and a
    way to decide. `fold` folds a record into the state (the registry's fold); `records` are the
    decisions made so far, as the log records that follow the tick. `budget` is the model's
    (`Model.budget`): `emit` counts placements and preemptions against it, and `may_place` and
    `may_preempt` say whether the cycle may make more.

    Progress under load. A cycle has phases (the model names them: `phase`); the first check of
    whether it may go on (`step`, `may_place`, `may_preempt`, `block`) after each decision asks
    the time, except in a phase before its first decision, whose checks say yes whatever the
    time: every phase of every cycle makes a decision if it can make any, so a partition busy
    beyond its cycle time still decides, and work that decides nothing (a refusal told already)
    never uses up a cycle (a model keeps such work cheap). A phase visits queues; when a cycle is cut, each phase it stopped records where it
    began (`begins_at`), and in the next cycle that phase begins at the next queue by name
    (`rotation`): over consecutive cut cycles every queue goes first in every phase."""

    __slots__ = (
        "began", "blocked", "budget", "checked", "checks_cut", "clock_due", "cut", "fold", "free", "now", "out_of_time", "partition",
        "phase_name", "placed", "preempted", "preemptors", "records", "resume", "state", "stopped", "text", "tick",
    )  # fmt: skip

    def __init__(
        self,
        state: ClusterState,
        partition: PartitionState,
        tick: LogRecord,
        fold: Callable[[ClusterState, LogRecord], object],
        budget: Budget = Budget(),
        out_of_time: Callable[[], bool] | None = None,
        resume: dict[str, str] | None = None,
    ) -> None:
        """`out_of_time`: the daemon's clock, asked at each check of what the cycle may still
        decide; once it says yes, every later check says no (`cut` records where), but those of a
        phase before its first decision. A tick read from the log with a `cut` stops the cycle at the same check
        instead: replay is exact. `resume`: the previous tick's (`PartitionState.resume`)."""
        self.state, self.partition, self.tick, self.fold, self.budget = state, partition, tick, fold, budget
        self.out_of_time = out_of_time
        event = tick.event
        self.cut: int | None = event.out_of_time_after if isinstance(event, Tick) else None  # decisions made when the time ran out
        self.checks_cut: int | None = event.cut if isinstance(event, Tick) else None  # a log of 0.1: the checks that said yes then
        self.checked = 0  # checks that said yes, the free ones aside
        self.free = False  # the phase has made no decision yet: its checks say yes
        self.clock_due = True  # a decision was made since the clock was last read
        self.phase_name = ""
        self.resume = resume or {}
        self.began: dict[str, str] = {}  # per phase: the queue it began at
        self.stopped: list[str] = []  # the phases a check stopped
        self.now: int = tick.event.ts
        self.records: list[LogRecord] = []
        self.blocked = 0  # decision.blocked made
        self.text = 0  # characters of explanations and reasons made
        self.placed = 0  # decision.allocated and decision.admitted made
        self.preempted = 0  # preemptors served: decision.preempted made, and preemptors of decision.evicted
        self.preemptors: set[str] = set()  # the preemptors named by decision.evicted so far

    def phase(self, name: str) -> str | None:
        """Begin the phase `name`: its checks say yes until it makes a decision. Returns the
        queue its rotation begins after, when the previous cycle was cut in this phase."""
        self.phase_name, self.free = name, True
        return self.resume.get(name)

    def begins_at(self, queue: str) -> None:
        """The current phase's first queue this cycle: where the next cycle's rotation goes on
        from, if this one is cut in this phase."""
        self.began.setdefault(self.phase_name, queue)

    def resume_next(self) -> dict[str, str]:
        """Where the next cycle's phases begin after: for each phase a check stopped, the queue
        it began at (the tick's `resume`)."""
        return {phase: self.began[phase] for phase in self.stopped if phase in self.began}

    def may_place(self) -> bool:
        """Whether the cycle may make another allocation or admission (`Budget.placements`, and
        its time)."""
        return self.placed < self.budget.placements and self.step()

    def may_preempt(self) -> bool:
        """Whether the cycle may serve another preemptor (`Budget.preemptions`, and its time)."""
        return self.preempted < self.budget.preemptions and self.step()

    def can_place(self) -> bool:
        """Whether the budget allows another placement (its time aside)."""
        return self.placed < self.budget.placements

    def can_preempt(self) -> bool:
        """Whether the budget allows serving another preemptor (its time aside)."""
        return self.preempted < self.budget.preemptions

    def step(self) -> bool:
        """Whether the cycle may take another step of work: until the daemon's clock says it ran
        out, or, for a cycle read from the log, until its recorded `cut`; whatever the time
        while the phase has made no decision."""
        if self.free:
            return True
        if self._out_of_time():
            self._stop()
            return False
        self.checked += 1
        return True

    def _out_of_time(self) -> bool:
        """Whether the time ran out: once the clock said so (`cut` notes the decisions made
        then), or, for a cycle read from the log, once it made as many decisions as then.

        The clock is read at the first check after each decision only: a cycle stops right
        after a decision, so that a replay, which stops after as many decisions, stops at the
        same point whatever work that decides nothing each run did in between (what a model
        keeps between cycles to save such work is made again after a restart)."""
        if self._stopped_already():
            return True
        if self.cut is None and self.checks_cut is None and self.out_of_time is not None and self.clock_due:
            self.clock_due = False
            if self.out_of_time():
                self.cut = len(self.records)  # from here on, every check says no
                return True
        return False

    def _stopped_already(self) -> bool:
        """The time ran out already (without asking the clock)."""
        if self.cut is not None:
            return len(self.records) >= self.cut
        return self.checks_cut is not None and self.checked >= self.checks_cut

    def _stop(self) -> None:
        if not self.stopped or self.stopped[-1] != self.phase_name:
            self.stopped.append(self.phase_name)

    def telling(self) -> bool:
        """Whether `block` may still tell anything this cycle (without asking the clock)."""
        return self.blocked < BLOCKED_PER_CYCLE and self.text < BLOCKED_TEXT_PER_CYCLE and (self.free or not self._stopped_already())

    def block(self, task: TaskState, *, app: str, queue: str, reasons: tuple[str, ...], explanation: tuple[str, ...] = (), stepped: bool = False) -> bool:
        """Say why `task` waits, unless it was told so already or the cycle's budget for such
        decisions (or its time) is spent (the next cycle tells it); whether it was told now.
        `stepped`: the step that found the reasons was allowed already (`step`)."""
        reasons = bounded(reasons)
        if reasons == task.blocked or self.blocked >= BLOCKED_PER_CYCLE or self.text >= BLOCKED_TEXT_PER_CYCLE or not (stepped or self.step()):
            return False
        self.blocked += 1
        self.emit(Blocked, task=task.id, app=app, queue=queue, reasons=reasons, explanation=explanation)
        return True

    def emit(self, kind: type[D], **fields: Any) -> D:
        """Make a decision of type `kind`, fold it into the state and record it (its
        explanation and reasons `bounded`)."""
        for name in ("explanation", "reasons"):
            if name in fields:
                fields[name] = bounded(tuple(fields[name]))
                self.text += sum(len(line) for line in fields[name])
        index = len(self.records)
        decision = kind(
            id=decision_id(self.state.log_id, self.tick.seq, index),
            ts=self.now,
            partition=self.partition.name,
            cycle=self.tick.seq,
            **fields,
        )
        record = LogRecord(self.tick.seq + 1 + index, self.now, decision)
        self.free = False  # the phase made progress: its checks ask the time from now on
        self.clock_due = True
        try:
            self.fold(self.state, record)
        except Rejected as exc:  # not the input's fault: the model decided what cannot be
            raise RuntimeError(f"the {self.partition.model} model made a decision the fold refuses, a bug: {exc.reason}") from exc
        self.records.append(record)
        self._count(decision)
        return decision

    def _count(self, decision: DecisionEvent) -> None:
        """Spend the budget: an allocation or admission is a placement; a preemption, or the
        first eviction for a preemptor (one without a preemptor on its own), a preemption."""
        if isinstance(decision, (Allocated, Admitted)):
            self.placed += 1
        elif isinstance(decision, (Preempted, QuotaEnforced)):
            self.preempted += 1
        elif isinstance(decision, Evicted):
            if decision.preemptor is None:
                self.preempted += 1
            elif decision.preemptor not in self.preemptors:
                self.preemptors.add(decision.preemptor)
                self.preempted += 1


@dataclass(frozen=True)
class Model:
    """A scheduling model: what the registry maps its name to. It decides; its part of the fold
    is `fold` (`projections.Folds`), what it shows of a partition `views` (`Views`).

    - `parse_config(document, partition)`: its native configuration for one partition (`{}`
      for its default), as `ParsedConfig`; raises `ConfigError` with a reason for the user.
    - `partitions(document)`: the partitions a configuration document sets up (a config file
      applies it to each).
    - `schedule(cycle)`: one cycle of a partition; decides through `cycle.emit`.
    - `next_wakeup(partition, now)`: the earliest time after `now` at which a cycle could decide
      differently with no event in between (a delay running out), or None. It must be exact:
      the engine passes over every cycle before it after one that decided nothing, when
      nothing but ticks came since (see `run_cycle`).
    - `claims(item)`: whether a Kubernetes object is one of this model's own (a ClusterQueue
      is Kueue's), so that an object given to another model, or a file without `model:`, can
      say which model reads it.
    - `budget`: what one cycle may decide (`Budget`): at most `placements` allocations and
      admissions, and `preemptions` preemptors served (a preemptor's victims count as one),
      whatever the model's settings allow; the rest in the next cycles. `Cycle.emit` counts
      the decisions; the model asks `cycle.may_place()` before it places more and
      `cycle.may_preempt()` before it serves another preemptor.
    - `words`: its users' words, as its configurations give them, for what is said without a
      partition at hand (`tail`).
    """

    name: str
    parse_config: Callable[[Any, str], ParsedConfig]
    schedule: Callable[[Cycle], None]
    next_wakeup: Callable[[PartitionState, int], int | None]
    partitions: Callable[[Any], list[str]] = one_partition
    claims: Callable[[Any], bool] = claims_nothing
    budget: Budget = Budget()
    words: Words = Words()
    fold: Folds = Folds()
    views: Views = Views()

    @property
    def decides_applications(self) -> bool:
        """Whether it decides about applications as a whole (Kueue admits and evicts workloads,
        not their pods): the model folds decisions of its own."""
        return self.fold.decision is not refuse_decision
