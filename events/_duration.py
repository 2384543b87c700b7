"""Go-style durations (`"10s"`, `"1m30s"`, `"250ms"`) as integer milliseconds.

YuniKorn's `preemption.delay` and the scenario files use Go's `time.ParseDuration` notation;
preemptd keeps time as integer milliseconds everywhere.
"""

from __future__ import annotations

import re
from decimal import Decimal

from ._errors import PreemptdError

__all__ = ["DurationError", "format_duration", "parse_duration"]

_UNIT_MS = {
    "ns": Decimal("1e-6"),
    "us": Decimal("1e-3"),
    "µs": Decimal("1e-3"),
    "ms": Decimal(1),
    "s": Decimal(1000),
    "m": Decimal(60_000),
    "h": Decimal(3_600_000),
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|ms|s|m|h)")


class DurationError(PreemptdError, ValueError):
    """Text that is not a Go duration, or one finer than a millisecond."""


def parse_duration(text: object) -> int:
    """Milliseconds in a Go duration such as `"1m30s"`; a bare `0` is allowed, as in Go."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise DurationError(f"expected a duration such as \"10s\", got {text!r}")
    raw = str(text).strip()
    sign, body = (-1, raw[1:]) if raw.startswith("-") else (1, raw.lstrip("+"))
    if body == "0":
        return 0
    total, position = Decimal(0), 0
    for match in _PART.finditer(body):
        if match.start() != position:
            break
        total += Decimal(match[1]) * _UNIT_MS[match[2]]
        position = match.end()
    if position == 0 or position != len(body):
        raise DurationError(f"{text!r} is not a duration (examples: \"30s\", \"1m30s\", \"500ms\")")
    if total != total.to_integral_value():
        raise DurationError(f"{text!r} is finer than a millisecond")
    return sign * int(total)


def format_duration(ms: int) -> str:
    """The Go notation for `ms`: `90000` -> `"1m30s"`."""
    if ms == 0:
        return "0s"
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    if millis and not (hours or minutes or seconds):
        parts.append(f"{millis}ms")
    elif seconds or millis:
        parts.append(f"{seconds}.{millis:03d}".rstrip("0").rstrip(".") + "s")
    return sign + "".join(parts)
