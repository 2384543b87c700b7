"""What a partition would decide if some events arrived now, without their having arrived: the
answer to `preemptd try` (asked of a daemon, which answers from a copy of its live state; or of
a log's state at some point).

`trial` folds the events into the state it is given (a copy: it changes it) as if received at
`now`, runs the model's cycle then, and again when a delay would run out (YuniKorn's
preemption delay: "would preempt b-4 once root.team-a's 5 s delay has passed"), as the daemon
would with nothing else arriving, up to `HORIZON` ahead. It answers with the decisions about
the events' tasks and applications, each with how long after `now` it would be made, and how
many other decisions the same cycles would make (those are due anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

from preemptd.events import Admitted, Allocated, AppSubmitted, Blocked, ClusterEvent, DecisionEvent, Evicted, PreemptdError, Preempted, TaskSubmitted
from preemptd.projections import ClusterState, LogRecord, Rejected

from ._engine import next_wakeup, run_cycle, tick_record
from ._registry import apply, model_named

__all__ = ["HORIZON", "MAX_TRIAL_EVENTS", "Trial", "TrialRefused", "trial"]

MAX_TRIAL_EVENTS = 1000  # events a query may hold
HORIZON = 3_600_000  # ms: delays that run out later than this are not waited for
MAX_CYCLES = 20  # cycles a trial runs at most (the first, and one per delay running out)


class TrialRefused(PreemptdError):
    """The question cannot be asked: `reason` says why, for whoever asked."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Trial:
    """What `partition` would decide about the events' tasks and applications.

    - `seq`: the log position of the state the question was asked of;
    - `decisions`: (milliseconds after `now`, decision), in the order they would be made;
    - `cycles`: (milliseconds after `now`, why a cycle would run then): "now", "a delay runs
      out" (YuniKorn's preemption delay), "the next cycle runs" (after a cycle that decided);
    - `other_decisions`: what the same cycles would decide about other tasks (due anyway);
    - `undecided`: the events' tasks (under Kueue their workloads) nothing would be decided about within the horizon."""

    partition: str
    model: str
    seq: int
    now: int
    decisions: tuple[tuple[int, DecisionEvent], ...]
    cycles: tuple[tuple[int, str], ...]
    other_decisions: int
    undecided: tuple[str, ...]


def trial(state: ClusterState, partition: str, events: list[ClusterEvent], now: int, *, tick: int = 1000) -> Trial:
    """Fold `events` into `state` at `now` and run `partition`'s cycles as the daemon would (a
    cycle `tick` ms after one that decided something, one when a delay runs out) until each of
    the events' tasks is placed or preempted for, or nothing more would happen within the
    horizon; `TrialRefused` when the question is not one the state can answer."""
    if partition not in state.partitions:
        known = ", ".join(sorted(state.partitions)[:10]) or "none yet"
        raise TrialRefused(f"no partition {partition!r} here (known: {known})")
    if not events:
        raise TrialRefused("no events: ask with the events that would arrive (task.submitted, app.submitted, ...)")
    if len(events) > MAX_TRIAL_EVENTS:
        raise TrialRefused(f"{len(events):,} events: a query holds at most {MAX_TRIAL_EVENTS:,}")
    seq, now = state.seq, max(now, state.partitions[partition].last_tick)
    for number, event in enumerate(events, 1):
        if event.partition != partition:
            raise TrialRefused(f"event {number} ({event.id}) is for partition {event.partition!r}; ask one partition at a time")
        try:
            apply(state, LogRecord(state.seq + 1, now, event))
        except Rejected as exc:
            raise TrialRefused(f"event {number} ({event.id}): {exc.reason}") from None
    owners = {e.task: e.app for e in events if isinstance(e, TaskSubmitted)}
    tasks, apps = set(owners), {e.app for e in events if isinstance(e, (TaskSubmitted, AppSubmitted))}
    about: list[tuple[int, DecisionEvent]] = []
    cycles: list[tuple[int, str]] = []
    others, at, why = 0, now, "now"
    for _ in range(MAX_CYCLES):
        decided = run_cycle(state, tick_record(state, at, partition)).decisions
        cycles.append((at - now, why))
        for decision in decided:
            if _concerns(decision, tasks, apps):
                about.append((at - now, decision))
            else:
                others += 1
        if _settled(owners, about):
            break
        wakeup = next_wakeup(state, partition, at)  # a delay running out
        following = at + tick if decided else None  # the daemon's next cycle after one that decided
        if following is not None and (wakeup is None or following <= wakeup):
            at, why = following, "the next cycle runs"
        elif wakeup is not None and wakeup - now <= HORIZON:
            at, why = wakeup, "a delay runs out"
        else:
            break
    told = _told(about)
    model = state.partitions[partition].model
    whole = model_named(model).decides_applications  # a workload is decided about, not its pods
    undecided = tuple(sorted({app if whole else task for task, app in owners.items() if task not in told and app not in told}))
    return Trial(partition, model, seq, now, tuple(about), tuple(cycles), others, undecided)


def _concerns(decision: DecisionEvent, tasks: set[str], apps: set[str]) -> bool:
    """Whether `decision` is about one of the query's tasks or applications (as placed,
    preempted for, admitted or evicted for, or blocked)."""
    return getattr(decision, "task", None) in tasks or getattr(decision, "app", None) in apps or getattr(decision, "preemptor", None) in tasks | apps


def _settled(owners: dict[str, str], about: list[tuple[int, DecisionEvent]]) -> bool:
    """Whether each of the query's tasks is placed or preempted for, itself or as its workload
    (Kueue admits and evicts for applications): nothing more would happen without the shim."""
    done = _told(about, settled=True)
    return all(task in done or app in done for task, app in owners.items())


def _told(about: list[tuple[int, DecisionEvent]], *, settled: bool = False) -> set[str]:
    """The tasks and applications the decisions name as placed, admitted or preempted for
    (and, unless `settled`, as waiting)."""
    out: set[str] = set()
    for _, d in about:
        if isinstance(d, Allocated):
            out.add(d.task)
        elif isinstance(d, Admitted):
            out.add(d.app)
        elif isinstance(d, (Preempted, Evicted)) and d.preemptor:
            out.add(d.preemptor)
        elif isinstance(d, Blocked) and not settled:
            out |= {d.task, d.app}
    return out
