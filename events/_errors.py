"""preemptd's exceptions share one root, so that a caller (the CLI) catches one thing and shows
every error as one line. Each layer defines its own beside its code:

    PreemptdError
    ├── DecodeError        events: input that is not a valid event (with its type and id)
    ├── QuantityError      events: not a Kubernetes quantity, negative, finer than its unit
    ├── DurationError      events: not a Go duration
    ├── ConfigError        a model's configuration that cannot be used
    ├── Rejected           projections: an event that cannot apply to the state
    ├── SnapshotError      projections: a snapshot this version cannot restore
    ├── ScenarioError      scheduling: a scenario file that cannot run
    └── DaemonError        daemon: the shell
        ├── StoreError         the log database failed or is not a preemptd log
        ├── BusError           NATS failed: connection, stream or publish
        ├── EmbeddedNatsError  the bundled nats-server could not start
        └── UsageError         a command was given something it cannot use

Errors about input values are also `ValueError`s.
"""

from __future__ import annotations

__all__ = ["ConfigError", "PreemptdError"]


class PreemptdError(Exception):
    """Root of preemptd's own errors."""


class ConfigError(PreemptdError, ValueError):
    """A configuration a model refuses; the previous configuration stays in force."""
