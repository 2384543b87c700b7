"""The daemon's clocks, the only ones in preemptd: the wall clock stamps what the log records
(receive times, ticks); the monotonic one paces the daemon's cycles."""

from __future__ import annotations

import time

__all__ = ["monotonic_ms", "wall_ms"]


def wall_ms() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Milliseconds on a clock that never goes back."""
    return time.monotonic_ns() // 1_000_000
