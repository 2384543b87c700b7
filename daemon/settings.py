"""What `preemptd run` was asked to do: its command line, as one value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .bus import NatsAccess
from .ingest import MAX_PARTITIONS
from .log.lease import LEASE_SECONDS
from .log.segments import Retention

__all__ = ["LOG_FILE", "Settings"]

#: In the state directory: where the daemon's log is, without secrets (`preemptd run` writes it;
#: the commands that read a log take it when given no --db).
LOG_FILE = "log.url"


@dataclass(frozen=True)
class Settings:
    state_dir: Path
    db: str
    nats_url: str | None = None
    nats_port: int = 0
    nats_access: NatsAccess = NatsAccess()
    config: Path | None = None
    tick: int = 1000  # ms
    cycle_time: int = 5  # ms a cycle decides for at most, before the next goes on (after events are read)
    idle_tick: int = 30_000  # ms
    batch: int = 1000
    snapshot_every: int = 100_000
    synchronous: str = "FULL"
    metrics_addr: tuple[str, int] | None = None  # where to serve metrics, /healthz and /readyz
    max_partitions: int = MAX_PARTITIONS
    lease_expiry: int = int(LEASE_SECONDS * 1000)  # ms a PostgreSQL log's writer may be silent before a standby ends its session
    partitions: tuple[str, ...] | None = None  # the partitions this daemon reads; None: every one
    retention: Retention = Retention(None)  # off unless asked for: `preemptd run` turns it on by default
