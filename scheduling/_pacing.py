"""When a partition's next cycle is due: one rule for the daemon (on its clock) and the
simulator (on simulated time, where cycles take no time).

A cycle can only decide something for a partition with pending tasks. For one that has some:

- after events, or a cycle cut short by its time: at once, but at most every `min_gap`;
- while cycles are deciding: every `tick`;
- and never more than half the time in cycles (after a cycle of 0.8 s, the next one waits until
  1.6 s after its start), so that events are read between cycles however long they take;
- when a delay runs out (`next_wakeup`, asked after every cycle): at once, but at most every
  `min_gap`, whatever the tick;
- once a cycle decided nothing and nothing happened since, another could only decide again once
  a delay runs out: then, or every `idle_tick`.

Times are integer milliseconds on the caller's clock, which only has to move forward; a model's
wake-up (in the log's time) is turned into a distance from the tick that asked for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from preemptd.projections import ClusterState

from ._engine import next_wakeup

__all__ = ["Cadence", "Pacer"]


@dataclass(frozen=True)
class Cadence:
    """How often cycles run, in milliseconds (see the module docstring)."""

    tick: int
    idle_tick: int
    min_gap: int = 0


@dataclass
class _Pace:
    last: int | None = None  # when the last cycle started
    took: int = 0  # how long it took
    dirty: bool = True  # events since
    idle: bool = False  # it decided nothing
    wakeup: int | None = None  # when a delay runs out


@dataclass
class Pacer:
    """The pace of every partition's cycles. Only the partitions that could be due are looked
    at (`_live`: touched by events, or with pending tasks at their last look), so that the work
    of asking what is due grows with them, not with every partition there is."""

    cadence: Cadence
    _paces: dict[str, _Pace] = field(default_factory=dict)
    _live: set[str] | None = None  # None: not looked at yet (every partition of the state then)

    def touched(self, partition: str) -> None:
        """Events changed `partition`."""
        self._pace(partition).dirty = True
        if self._live is not None:
            self._live.add(partition)

    def due(self, state: ClusterState, now: int) -> list[str]:
        """The partitions whose cycle is due at `now`, in name order."""
        if self._live is None:
            self._live = set(state.partitions)
        for name in [name for name in self._live if not self._may_decide(state, name, now)]:
            self._live.discard(name)  # nothing to decide until an event touches it
            self._pace(name).dirty = False
        return [name for name in sorted(self._live) if self._due(state, name, now)]

    def _may_decide(self, state: ClusterState, name: str, now: int) -> bool:
        """Whether a cycle of partition `name` could decide anything: it has pending tasks, or a
        delay will run out (YuniKorn's quota enforcement needs no pending task)."""
        p = state.partitions.get(name)
        return p is not None and (bool(p.pending_count) or self._pace(name).wakeup is not None or next_wakeup(state, name, now) is not None)

    def ran(self, state: ClusterState, partition: str, started: int, took: int, decisions: int, cut: bool = False) -> None:
        """A cycle of `partition` started at `started` (the tick it folded is the partition's
        last), took `took` and made `decisions`; `cut`: it ran out of time, the next goes on
        as after events."""
        pace = self._pace(partition)
        pace.last, pace.took, pace.dirty, pace.idle = started, took, cut, not decisions and not cut
        tick_ts = state.partitions[partition].last_tick
        wakeup = next_wakeup(state, partition, tick_ts)
        pace.wakeup = None if wakeup is None else started + wakeup - tick_ts

    def _pace(self, partition: str) -> _Pace:
        return self._paces.setdefault(partition, _Pace())

    def _due(self, state: ClusterState, partition: str, now: int) -> bool:
        pace = self._pace(partition)
        if pace.last is None:
            return True
        elapsed = now - pace.last
        if pace.dirty or (pace.wakeup is not None and now >= pace.wakeup):
            return elapsed >= max(self.cadence.min_gap, 2 * pace.took)
        if not pace.idle:
            return elapsed >= max(self.cadence.tick, 2 * pace.took)
        return elapsed >= self.cadence.idle_tick
