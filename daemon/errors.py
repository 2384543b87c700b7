"""The daemon's exceptions, under preemptd's root (`PreemptdError`, where the whole tree is
drawn). Driver errors are translated at the seams (`log`, `bus`) so that callers
handle ours only."""

from __future__ import annotations

from preemptd.events import PreemptdError

__all__ = ["BusError", "DaemonError", "EmbeddedNatsError", "StoreError", "UsageError"]


class DaemonError(PreemptdError):
    """Root of the shell's errors."""


class StoreError(DaemonError):
    pass


class BusError(DaemonError):
    pass


class EmbeddedNatsError(DaemonError):
    pass


class UsageError(DaemonError):
    pass
