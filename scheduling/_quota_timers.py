"""The timers of quota enforcement through preemption, for any model: YuniKorn's design
(`quota.preemption.delay`), and preemptd's extensions of Kueue and Volcano with it.

A queue's timer starts when a configuration lowers its limit (or gives it a delay while it is
above its limit) and fires the delay later; the model then sheds the queue's running work down
to the limit, in its own victim order. The rules:

- a timer starts when the configuration that lowered the limit is received;
- a change of the delay moves a running timer by the difference (it fires at start + new delay);
- a further decrease keeps the earliest start;
- a raised limit, enforcement switched off or a delay of 0 cancels it; so does the queue's usage
  fitting its limit again (the model drops such timers as its ticks fold, `fitting`);
- the timers are state folded from the log: a restart or a replay finds them as they were (where
  YuniKorn starts the countdown again when it recovers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from preemptd.events import format_duration, format_moment

__all__ = ["FIELDS_LAYOUT", "Limit", "QuotaTimer", "QuotaTimers", "delay_text", "fields_moved_in", "lowered", "raised", "timeline", "timers_after"]


class QuotaTimer(msgspec.Struct, frozen=True, kw_only=True):
    """A lowered limit: enforced from `start + delay` (ms); `was` the limit before it was lowered."""

    start: int
    delay: int
    was: dict[str, int] | None = None

    @property
    def fires(self) -> int:
        return self.start + self.delay


class Limit(msgspec.Struct, frozen=True, kw_only=True):
    """A queue's limit (per resource; None: none) and its enforcement delay (0: never), as the
    timers last saw them."""

    max: dict[str, int] | None
    delay: int


class QuotaTimers(msgspec.Struct, kw_only=True):
    """A partition's quota timers, as each model keeps them in its state (snapshots keep them):
    the configuration they were last reconciled with, the limits they were set against, the
    timers by queue, and per queue what its last enforcement could not shed (said once)."""

    document: bytes = b""
    limits: dict[str, Limit] = {}
    timers: dict[str, QuotaTimer] = {}
    short: dict[str, dict[str, int]] = {}

    def reconcile(self, document: bytes, limits: Mapping[str, Limit], is_over: Callable[[str], bool], received: int, *, enforced: bool = True) -> None:
        """A configuration (`document`, its queues' `limits`) applied at `received`: the timers it
        starts, moves or cancels (all of them when enforcement is off); nothing when it is the one
        they were reconciled with."""
        if document == self.document:
            return
        self.timers = timers_after(self.limits, self.timers, limits if enforced else {}, is_over, received)
        self.document, self.limits = document, dict(limits)
        self.drop(name for name in list(self.short) if name not in self.timers)

    def drop(self, queues: Iterable[str]) -> None:
        """The timers of `queues` end, and what their enforcements fell short of with them."""
        for name in list(queues):
            self.timers.pop(name, None)
            self.short.pop(name, None)

    def drop_fitting(self, is_over: Callable[[str], bool]) -> None:
        """The timers of queues that fit their limit again end (folded at each tick)."""
        self.drop([name for name in self.timers if not is_over(name)])

    def fired(self, now: int) -> list[tuple[str, QuotaTimer]]:
        """The timers that have fired by `now`, by queue name."""
        return [(name, timer) for name, timer in sorted(self.timers.items()) if timer.fires <= now]

    def next_firing(self, now: int, due: Callable[[str], bool] = lambda name: True) -> int | None:
        """When the next timer of a queue `due` says is still to enforce fires, after `now`."""
        return min((timer.fires for name, timer in self.timers.items() if timer.fires > now and due(name)), default=None)


#: The layout of the models' states (`Projection.layout`) while each wing kept the quota timers'
#: fields itself (0.x until this `QuotaTimers`): snapshots of it are read, the fields moved in.
FIELDS_LAYOUT = "80ab94d0c1627e27"


def fields_moved_in(model: str, state: Any) -> Any:
    """A model's state of `FIELDS_LAYOUT`, as plain data, in this layout: its quota timers'
    fields gathered into `quota`; the rest as it was."""
    if isinstance(state, dict) and "quota" not in state:
        state["quota"] = {name: state.pop(name) for name in ("document", "limits", "timers", "short") if name in state}
    return state


def timers_after(
    before: Mapping[str, Limit], running: Mapping[str, QuotaTimer], now_limits: Mapping[str, Limit], is_over: Callable[[str], bool], now: int
) -> dict[str, QuotaTimer]:
    """The timers once a configuration received at `now` changed the limits from `before` to
    `now_limits` (a queue left out, or with a delay of 0 or no limit, has none); `is_over(queue)`
    says whether a queue holds more than its limit now."""
    timers: dict[str, QuotaTimer] = {}
    for path, limit in sorted(now_limits.items()):
        if limit.delay <= 0 or limit.max is None:
            continue
        old, timer = before.get(path), running.get(path)
        if timer is not None and old is not None and not raised(old.max, limit.max):
            timers[path] = QuotaTimer(start=timer.start, delay=limit.delay, was=timer.was)  # the earliest start; a new delay moves it
        elif is_over(path) and (old is None or old.delay <= 0 or lowered(old.max, limit.max)):
            timers[path] = QuotaTimer(start=now, delay=limit.delay, was=old.max if old is not None else None)  # lowered, or a delay given
    return timers


def lowered(before: Mapping[str, int] | None, now: Mapping[str, int]) -> bool:
    """Whether `now` limits some resource more than `before` did (or newly)."""
    return any(before is None or name not in before or amount < before[name] for name, amount in now.items())


def raised(before: Mapping[str, int] | None, now: Mapping[str, int]) -> bool:
    """Whether `now` allows more of some resource than `before`, and less of none."""
    return before is not None and not lowered(before, now) and any(now.get(name, amount + 1) > amount for name, amount in before.items())


def delay_text(annotation: str, timer: QuotaTimer) -> str:
    """`<annotation> 30s from <when lowered>: enforced from <when>`, in times people read (UTC, or
    from a simulation's start), as every model's timeline says it."""
    return f"{annotation} {format_duration(timer.delay)} from {format_moment(timer.start)}: enforced from {format_moment(timer.fires)}"


def timeline(bound: str, now: str, was: str, annotation: str, timer: QuotaTimer) -> str:
    """`quota: <bound> is <now> (<was>); <annotation> 30s from <when>: enforced from <when>`: the
    line every model's enforcement starts its explanation with."""
    return f"quota: {bound} is {now} ({was}); {delay_text(annotation, timer)}"
