"""The daemon's exceptions, under preemptd's root (`PreemptdError`, where the whole tree is
drawn). Driver errors are translated at the seams (`log`, `bus`) so that callers
handle ours only."""

from __future__ import annotations

from preemptd.events import PreemptdError

__all__ = ["BusError", "DaemonError", "EmbeddedNatsError", "LogConflict", "StoreError", "UsageError", "first_leaf"]


class DaemonError(PreemptdError):
    """Root of the shell's errors."""


class StoreError(DaemonError):
    pass


class LogConflict(StoreError):
    """A write met a row this daemon did not know of (a unique key taken): another writer wrote
    the log meanwhile. The daemon reads the log again rather than stop (see `runtime`)."""


class BusError(DaemonError):
    pass


class EmbeddedNatsError(DaemonError):
    pass


class UsageError(DaemonError):
    pass


def first_leaf(group: BaseExceptionGroup) -> BaseException:
    """The first error of a task group's (the rest followed from it)."""
    leaf = group.exceptions[0]
    return first_leaf(leaf) if isinstance(leaf, BaseExceptionGroup) else leaf
