"""How the benchmarks report timings: the median and the 99th percentile, in milliseconds; and
the garbage collector's thresholds every preemptd command runs with, set on import, so that the
models are measured as the daemon, `simulate` and `replay` run them."""

from __future__ import annotations

import gc
import statistics

from preemptd.daemon.cli.main import GC_THRESHOLDS

gc.set_threshold(*GC_THRESHOLDS)


def percentiles(values: list[float]) -> tuple[float, float]:
    """(p50, p99) of `values`."""
    values = sorted(values)
    return statistics.median(values), values[min(len(values) - 1, int(len(values) * 0.99))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"
