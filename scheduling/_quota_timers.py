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

from collections.abc import Callable, Mapping

import msgspec

from preemptd.events import format_duration, format_moment

__all__ = ["Limit", "QuotaTimer", "lowered", "raised", "timers_after"]


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
