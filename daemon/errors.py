"""The daemon's exceptions. Driver errors are translated at the seams (`store`, `nats_source`)
so that callers handle ours only:

    DaemonError
    ├── StoreError         the log database failed or is not a preemptd log
    ├── BusError           NATS failed: connection, stream or publish
    ├── EmbeddedNatsError  the bundled nats-server could not start
    └── UsageError         a command was given something it cannot use (a file, a URL)
"""

from __future__ import annotations

__all__ = ["BusError", "DaemonError", "EmbeddedNatsError", "StoreError", "UsageError"]


class DaemonError(Exception):
    """Root of preemptd's own errors."""


class StoreError(DaemonError):
    pass


class BusError(DaemonError):
    pass


class EmbeddedNatsError(DaemonError):
    pass


class UsageError(DaemonError):
    pass
