"""How the benchmarks report timings: the median and the 99th percentile, in milliseconds."""

from __future__ import annotations

import statistics


def percentiles(values: list[float]) -> tuple[float, float]:
    """(p50, p99) of `values`."""
    values = sorted(values)
    return statistics.median(values), values[min(len(values) - 1, int(len(values) * 0.99))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"
