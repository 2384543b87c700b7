"""Go-style durations (`"10s"`, `"1m30s"`, `"250ms"`) as integer milliseconds.

YuniKorn's `preemption.delay` and the scenario files use Go's `time.ParseDuration` notation;
preemptd keeps time as integer milliseconds everywhere.
"""

from __future__ import annotations

import re
from decimal import Decimal

from ._errors import PreemptdError

__all__ = ["DurationError", "format_duration", "format_moment", "parse_duration"]

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
        raise DurationError(f'expected a duration such as "10s", got {text!r}')
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
        raise DurationError(f'{text!r} is not a duration (examples: "30s", "1m30s", "500ms")')
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


#: Log times before this (2000-01-01, UTC) are a simulation's, counted from its start at 0.
_SIMULATED_BEFORE = 946_684_800_000


def format_moment(ms: int) -> str:
    """A log time (`ts`, milliseconds) as people read it: `2026-11-28 14:30:05Z` (UTC), or
    `40s after the start` in a simulated log; never the raw milliseconds."""
    if ms < _SIMULATED_BEFORE:
        return f"{format_duration(ms)} after the start"
    days, rest = divmod(ms // 1000, 86_400)
    year, month, day = _civil(days)
    return f"{year:04d}-{month:02d}-{day:02d} {rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}Z"


def _civil(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian date `days` after 1970-01-01 (H. Hinnant's civil_from_days): the
    pure layers read no clock, and take no calendar module that could."""
    days += 719_468
    era = days // 146_097
    day_of_era = days - era * 146_097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    return year_of_era + era * 400 + (month <= 2), month, day
