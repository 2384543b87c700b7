"""Replay: rebuild the state from a log, recompute every decision, compare with the stored ones.

Exact replay folds each cluster event, runs the cycle at each tick and checks that the
decisions it makes are the decisions stored right after that tick, field for field; it stops
at the first divergence. A what-if replay (`configs`) substitutes another configuration for
chosen partitions, keeps going whatever differs, and lists per cycle the decisions that only
the stored log or only the new configuration made.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from preemptd.events import ConfigApplied, Decision, Tick, to_builtins
from preemptd.projections import ClusterState, LogRecord, Rejected

from ._engine import run_cycle
from ._registry import apply

__all__ = ["Change", "DecisionKey", "Divergence", "ReplayConfig", "ReplayReport", "Replayer", "builtins_key", "decision_key", "replay"]

#: A what-if configuration of a partition, as a `config.applied` gives it: the model (unset: the
#: default one) and its `config` (a list of objects for a model that takes them so, as Kueue).
ReplayConfig = tuple[str | msgspec.UnsetType, dict[str, Any] | list[Any]]


@dataclass(frozen=True)
class Divergence:
    seq: int
    cycle: int
    stored: Decision | None
    recomputed: Decision | None

    def differences(self) -> list[str]:
        """The fields in which the two decisions differ."""
        stored = to_builtins(self.stored) if self.stored is not None else {}
        recomputed = to_builtins(self.recomputed) if self.recomputed is not None else {}
        return [
            f"{name}: stored {stored.get(name)!r}, recomputed {recomputed.get(name)!r}"
            for name in sorted(set(stored) | set(recomputed))
            if stored.get(name) != recomputed.get(name)
        ]


@dataclass(frozen=True)
class Change:
    cycle: int
    only_stored: tuple[Decision, ...]
    only_new: tuple[Decision, ...]


@dataclass
class ReplayReport:
    state: ClusterState
    events: int = 0
    cycles: int = 0
    stored_decisions: int = 0
    reproduced: int = 0
    new_decisions: int = 0
    divergence: Divergence | None = None
    changes: list[Change] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)


#: A decision as `builtins_key` gives it: (field, repr of its value) pairs, sorted.
DecisionKey = tuple[tuple[str, str], ...]


def decision_key(decision: Decision) -> DecisionKey:
    """What a decision does, without its id, time or words: for comparing two histories."""
    return builtins_key(to_builtins(decision))


def builtins_key(decision: dict[str, Any], ignored: tuple[str, ...] = ()) -> DecisionKey:
    """`decision_key` of a decision as JSON values, leaving out `ignored` fields too."""
    data = dict(decision)
    for name in ("id", "ts", "cycle", "explanation", *ignored):
        data.pop(name, None)
    if "victims" in data:
        data["victims"] = sorted(victim["task"] for victim in data["victims"])
    return tuple(sorted((key, repr(value)) for key, value in data.items()))


def replay(
    records: Iterable[LogRecord],
    *,
    log_id: str,
    until: int | None = None,
    configs: Mapping[str, ReplayConfig] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ReplayReport:
    """Replay `records` (in log order) up to `until`; see the module docstring."""
    run = Replayer(log_id, configs)
    cut = False
    for count, record in enumerate(records, 1):
        if until is not None and record.seq > until:
            cut = True
            break
        if not run.step(record):
            break
        if progress is not None and count % 10_000 == 0:
            progress(10_000)
    run.finish(cut=cut)
    return run.report


class Replayer:
    """Replay one record at a time (`step`), for callers that read the log in pages."""

    def __init__(self, log_id: str, configs: Mapping[str, ReplayConfig] | None = None) -> None:
        self.report = ReplayReport(state=ClusterState(log_id=log_id))
        self.configs = configs or {}
        self.expected: deque[Decision] = deque()
        self.stored: list[Decision] = []
        self.cycle = 0
        for partition, (model, config) in sorted(self.configs.items()):
            override = ConfigApplied(id=f"replay-config-{partition}", ts=0, partition=partition, model=model, config=config)
            self._fold(LogRecord(0, 0, override))

    @property
    def what_if(self) -> bool:
        return bool(self.configs)

    def step(self, record: LogRecord) -> bool:
        """Take one record; False once exact replay has diverged."""
        event = record.event
        if isinstance(event, Decision):
            self.report.stored_decisions += 1
            if self.what_if:
                self.stored.append(event)
                return True
            return self._stored(record.seq, event)
        if not self._close_cycle(record.seq):
            return False
        if isinstance(event, Tick):
            self._cycle(record)
        else:
            self.report.events += 1
            self._fold(self._substituted(record))
        return True

    def finish(self, *, cut: bool = False) -> None:
        """End the replay. `cut`: the log was cut short (`--until`), perhaps among the last
        cycle's decisions, so the ones recomputed beyond the cut are not missing."""
        if cut:
            self.expected.clear()
            self.stored.clear()
        if self.report.divergence is None:
            self._close_cycle(None)

    def _substituted(self, record: LogRecord) -> LogRecord:
        event = record.event
        if isinstance(event, ConfigApplied) and event.partition in self.configs:
            model, config = self.configs[event.partition]
            return LogRecord(record.seq, record.received, msgspec.structs.replace(event, model=model, config=config))
        return record

    def _fold(self, record: LogRecord) -> None:
        try:
            apply(self.report.state, record)
        except Rejected as exc:
            self.report.rejected.append((record.seq, exc.reason))

    def _cycle(self, tick: LogRecord) -> None:
        self.report.cycles += 1
        self.cycle = tick.seq
        decisions = run_cycle(self.report.state, tick).decisions
        self.report.new_decisions += len(decisions)
        self.expected.extend(decisions)

    def _stored(self, seq: int, stored: Decision) -> bool:
        recomputed = self.expected.popleft() if self.expected else None
        if recomputed != stored:
            self.report.divergence = Divergence(seq, stored.cycle, stored, recomputed)
            return False
        self.report.reproduced += 1
        return True

    def _close_cycle(self, seq: int | None) -> bool:
        """At the end of a cycle's decisions: in exact mode none may be left unmatched; in
        what-if mode the two sets are compared."""
        if self.what_if:
            self._compare_cycle()
            return True
        if self.expected:
            extra = self.expected.popleft()
            self.report.divergence = Divergence(seq or extra.cycle, extra.cycle, None, extra)
            return False
        return True

    def _compare_cycle(self) -> None:
        stored, new = self.stored, list(self.expected)
        self.stored, self.expected = [], deque()
        if not stored and not new:
            return
        only_stored = _minus(stored, new)
        only_new = _minus(new, stored)
        if only_stored or only_new:
            self.report.changes.append(Change(self.cycle, tuple(only_stored), tuple(only_new)))


def _minus(these: list[Decision], those: list[Decision]) -> list[Decision]:
    """The decisions of `these` that `those` does not also make (as a multiset)."""
    left = Counter(decision_key(d) for d in those)
    out = []
    for decision in these:
        key = decision_key(decision)
        if left[key]:
            left[key] -= 1
        else:
            out.append(decision)
    return out
