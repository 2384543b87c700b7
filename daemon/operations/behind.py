"""Whether a partition falls behind: its backlog grows because tasks arrive faster than they
are placed. Cycles stay quick whatever waits (`bench/backlog.py`), so this is the cluster's
state, not the daemon's: the operator is told once, with the numbers, and again every ten
minutes while it lasts; the gauge `preemptd_backlog_growth_per_second` shows it as it goes."""

from __future__ import annotations

from collections import deque

from preemptd.projections import PartitionState
from preemptd.scheduling import counted

__all__ = ["Behind", "longest_waiting"]

WINDOW_MS = 60_000  # how far back growth is measured
REMIND_MS = 600_000  # how often a partition still behind is said so again
AT_LEAST = 60  # tasks more than a minute ago, and
SHARE = 0.01  # this part of what waits: growth below both is noise


class Behind:
    """Each partition's pending count, a sample a second over the last minute."""

    def __init__(self) -> None:
        self._samples: dict[str, deque[tuple[int, int]]] = {}
        self._said: dict[str, int] = {}  # partitions said to be behind: when last said
        self.growth: dict[str, float] = {}  # tasks a second over the last minute, by partition

    def observe(self, partition: str, now_ms: int, pending: int) -> tuple[str, dict[str, object]] | None:
        """Record `pending` at `now_ms`; what to log when the partition falls behind, stays
        behind (every ten minutes) or keeps up again, as a message and its fields."""
        samples = self._samples.setdefault(partition, deque())
        if samples and now_ms - samples[-1][0] < 1000:
            return None  # a sample a second is enough
        samples.append((now_ms, pending))
        while now_ms - samples[0][0] > WINDOW_MS:
            samples.popleft()
        then, before = samples[0]
        if now_ms - then < WINDOW_MS * 0.9:
            return None  # not a minute seen yet
        grown = pending - before
        self.growth[partition] = grown * 1000 / (now_ms - then)
        behind = grown >= AT_LEAST and grown >= SHARE * pending
        said = self._said.get(partition)
        fields: dict[str, object] = {"partition": partition, "pending": pending, "last_minute": grown}
        if behind and (said is None or now_ms - said >= REMIND_MS):
            self._said[partition] = now_ms
            return "behind: tasks arrive faster than they are placed", fields
        if not behind and said is not None and grown <= 0:
            del self._said[partition]
            return "keeping up again: the backlog no longer grows", fields
        return None

    def forget(self, partition: str) -> None:
        self._samples.pop(partition, None)
        self._said.pop(partition, None)
        self.growth.pop(partition, None)


def longest_waiting(p: PartitionState, shown: int = 3) -> str:
    """The queues whose oldest waiting task has waited longest, as of the partition's last cycle:
    `root.a: 20,000 waiting, the oldest for 92s; ...` (read when a partition is said to be behind:
    it goes over every waiting task)."""
    oldest: dict[str, int] = {}
    count: dict[str, int] = {}
    for task in p.tasks.values():
        if task.status == "pending":
            count[task.queue] = count.get(task.queue, 0) + 1
            oldest[task.queue] = min(oldest.get(task.queue, task.submitted_at), task.submitted_at)
    longest = sorted(oldest, key=lambda queue: (oldest[queue], queue))[:shown]
    said = [f"{queue}: {count[queue]:,} waiting, the oldest for {max(p.last_tick - oldest[queue], 0) / 1000:.0f}s" for queue in longest]
    return "; ".join(said) + (f"; {counted(len(oldest) - shown, 'more queue')}" if len(oldest) > shown else "")
