"""What the YuniKorn model keeps: the timers of quota enforcement through preemption.

A queue's timer starts when a configuration lowers its max (or gives it a
`quota.preemption.delay` while it is above its max) and fires `quota.preemption.delay` later:
then the queue sheds running work down to its max (`_quota`). The timers follow the design's
rules, folded from the log alone, so that a restart or a replay finds them as they were:

- they start when the configuration that lowered the max is received;
- a change of the delay moves a running timer by the difference (it fires at start + new delay);
- a further decrease keeps the earliest start;
- a raised max, quota enforcement switched off or a delay of 0 cancels it; a queue whose usage
  fits its max again sheds nothing when its timer fires;
- YuniKorn starts the countdown again when it recovers from a restart; preemptd needs not: the
  timers are part of the state folded from the log, and fire when they would have.
"""

from __future__ import annotations

import msgspec

from preemptd.events import LogEvent, QuotaEnforced, Tick
from preemptd.projections import PartitionState, QueueState

from ._config import PreemptionSettings

__all__ = ["QuotaTimer", "YuniKornState", "fold_config", "fold_event", "held_now", "over_max"]


class QuotaTimer(msgspec.Struct, frozen=True, kw_only=True):
    """A lowered max: enforced from `start + delay` (ms); `was` the max before it was lowered."""

    start: int
    delay: int
    was: dict[str, int] | None = None

    @property
    def fires(self) -> int:
        return self.start + self.delay


class Limit(msgspec.Struct, frozen=True, kw_only=True):
    """A queue's max and `quota.preemption.delay` as the timers last saw them."""

    max: dict[str, int] | None
    delay: int


class YuniKornState(msgspec.Struct, kw_only=True):
    document: bytes = b""  # the configuration the timers were last reconciled with
    limits: dict[str, Limit] = {}
    timers: dict[str, QuotaTimer] = {}
    short: dict[str, dict[str, int]] = {}  # per queue, what its last enforcement left over its max (said once)


def fold_config(p: PartitionState, received: int) -> None:
    """A configuration applied at `received`: the timers it starts, moves or cancels."""
    state: YuniKornState = p.model_state
    if p.document != state.document:
        _reconcile(p, state, received)


def fold_event(p: PartitionState, event: LogEvent) -> None:
    """At each tick, the timers without those of queues that fit their max again; a quota
    enforcement's shortfall, so that it is said once."""
    state: YuniKornState = p.model_state
    if isinstance(event, Tick):
        for path in [path for path in state.timers if path not in p.queues or not over_max(p.queues[path])]:
            del state.timers[path]
            state.short.pop(path, None)
    elif isinstance(event, QuotaEnforced):
        state.short[event.queue] = dict(event.short or {})


def over_max(queue: QueueState) -> dict[str, int]:
    """What `queue` holds above its max, per resource the max names (victims in flight left out)."""
    if queue.max is None:
        return {}
    held = held_now(queue)
    return {name: held[name] - limit for name, limit in sorted(queue.max.items()) if held.get(name, 0) > limit}


def held_now(queue: QueueState) -> dict[str, int]:
    """What `queue` holds, victims in flight left out."""
    return {name: amount - queue.preempting.get(name, 0) for name, amount in queue.allocated.items()}


def _reconcile(p: PartitionState, state: YuniKornState, now: int) -> None:
    settings: PreemptionSettings = p.settings
    timers: dict[str, QuotaTimer] = {}
    limits: dict[str, Limit] = {}
    for path, queue in sorted(p.queues.items()):
        limit = limits[path] = Limit(max=dict(queue.max) if queue.max is not None else None, delay=queue.props.quota_preemption_delay)
        if not settings.quota_preemption or limit.delay <= 0 or limit.max is None:
            continue
        before, running = state.limits.get(path), state.timers.get(path)
        if running is not None and before is not None and not _raised(before.max, limit.max):
            timers[path] = QuotaTimer(start=running.start, delay=limit.delay, was=running.was)  # the earliest start; a new delay moves it
        elif over_max(queue) and (before is None or before.delay <= 0 or _lowered(before.max, limit.max)):
            timers[path] = QuotaTimer(start=now, delay=limit.delay, was=before.max if before is not None else None)  # lowered, or a delay given
    state.document, state.limits, state.timers = p.document, limits, timers
    state.short = {path: short for path, short in state.short.items() if path in timers}


def _lowered(before: dict[str, int] | None, now: dict[str, int]) -> bool:
    """Whether `now` limits some resource more than `before` did (or newly)."""
    return any(before is None or name not in before or amount < before[name] for name, amount in now.items())


def _raised(before: dict[str, int] | None, now: dict[str, int]) -> bool:
    """Whether `now` allows more of some resource than `before`, and less of none."""
    return before is not None and not _lowered(before, now) and (any(now.get(name, amount + 1) > amount for name, amount in before.items()))
