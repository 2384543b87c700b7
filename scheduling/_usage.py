"""What a queue held against its quotas over a window, and who used what it left unused: the
lines `preemptd explain <queue>` says before the decisions, read from a partition of the
report's data (`Timeline.result`), in the model's words (its curves)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from preemptd.events import MILLI_RESOURCES, format_duration, format_human, format_moment, printable

from ._explain import counted, listing

__all__ = ["queue_usage"]

_TOLD = 20  # queues told of (a cohort's ClusterQueues); `preemptd report` draws them all


@dataclass
class _Borrower:
    """A queue that held beyond its first bound while the queue asked about held under its own:
    for how long, and at most how much beyond, per resource (in the charted unit)."""

    seconds: float = 0.0
    most: dict[str, float] = field(default_factory=dict)


def queue_usage(drawn: dict[str, Any], described: tuple[str, ...], peers: tuple[str, ...]) -> list[str]:
    """Per queue of `described` and resource: what it held at the window's start, at most (and
    when) and at its end, against each bound at the end; then the `peers` that held beyond their
    first bound (a guarantee, a nominal quota, a deserved share) while it held under its own:
    the capacity it could have lent, used by them."""
    times: list[float] = drawn["times"][:-1]  # without the report's last hold
    if not times:
        return ["usage: nothing recorded in the window"]
    held = next(c for c in drawn["curves"] if c["kind"] == "held")
    bounds = [c for c in drawn["curves"] if c["kind"] == "bound"]
    queues = {q["path"]: q["series"] for q in drawn["queues"]}
    lines = [f"usage from {_moment(times[0])} to {_moment(times[-1])} ({counted(len(times), 'moment')} sampled):"]
    told, left = described[:_TOLD], described[_TOLD:]
    for path in told:
        for resource, series in sorted(queues.get(path, {}).items()):
            lines.append(
                f"  {printable(path)} {printable(resource)}: "
                f"{_held_line(times, resource, series[held['name']][: len(times)], held['words'])}{_bounds_line(resource, series, bounds)}"
            )
    for path in told if len(times) > 1 else ():  # who used what a queue left takes a while to see
        lines.append(_lent_line(times, queues, path, tuple(q for q in (*described, *peers) if q != path), held["name"], bounds[0]))
    if left:
        lines.append(f"  and {len(left)} more queues: preemptd report draws them all")
    return lines


def _lent_line(times: list[float], queues: dict[str, Any], path: str, others: tuple[str, ...], held: str, first: dict[str, Any]) -> str:
    """Who used beyond their first bound while `path` held under its own."""
    if not any(v for series in queues.get(path, {}).values() for v in series[first["name"]]):
        return f"  {printable(path)} has no {first['words']}: nothing of its own left unused for others"
    borrowers = _borrowers(times, queues, path, others, held, first["name"])
    if not borrowers:
        return f"  no other queue used beyond its {first['words']} while {printable(path)} held under its own"
    said = [f"{printable(name)} (for {format_duration(round(b.seconds * 1000))}, at most {_beyond(b.most)} beyond)" for name, b in borrowers.items()]
    return f"  used beyond their {first['words']} while {printable(path)} held under its own: {listing(said)}"


def _held_line(times: list[float], resource: str, values: list[float | None], words: str) -> str:
    known = [(v or 0.0, t) for v, t in zip(values, times, strict=True)]
    peak, when = max(known, key=lambda item: item[0])
    if not peak:
        return f"{words} nothing"
    return (
        f"{words} {_amount(resource, known[0][0])} at the start, at most {_amount(resource, peak)} ({_moment(when)}), "
        f"{_amount(resource, known[-1][0])} at the end"
    )


def _bounds_line(resource: str, series: dict[str, list[float | None]], bounds: list[dict[str, Any]]) -> str:
    """Each bound the queue has at the end (the report's last value), in the model's words."""
    said = [f"{b['words']} {_amount(resource, value)}" for b in bounds if (value := series[b["name"]][-1]) is not None]
    return f"; {', '.join(said)}" if said else ""


def _borrowers(times: list[float], queues: dict[str, Any], path: str, peers: tuple[str, ...], held: str, bound: str) -> dict[str, _Borrower]:
    """Per peer, the time from one moment to the next during which it held beyond its bound in
    some resource `path` held under its own (each moment counted once, whatever the resources),
    and the most it held beyond, per such resource."""
    found: dict[str, _Borrower] = {}
    for i in range(len(times) - 1):  # from one moment to the next
        unused = sorted(_unused_at(i, queues.get(path, {}), held, bound))
        for peer in peers:
            beyond = {
                r: b
                for r in unused
                if (amounts := queues.get(peer, {}).get(r)) is not None and (b := (amounts[held][i] or 0.0) - (amounts[bound][i] or 0.0)) > 0
            }
            if beyond:
                borrower = found.setdefault(peer, _Borrower())
                borrower.seconds += times[i + 1] - times[i]
                for resource, amount in beyond.items():
                    borrower.most[resource] = max(amount, borrower.most.get(resource, 0.0))
    return dict(sorted(found.items(), key=lambda item: (-item[1].seconds, item[0])))


def _beyond(most: dict[str, float]) -> str:
    """`4 cpu, 2Gi memory`: each resource in its own unit."""
    return ", ".join(f"{_amount(resource, amount)} {printable(resource)}" for resource, amount in sorted(most.items()))


def _unused_at(i: int, resources: dict[str, Any], held: str, bound: str) -> set[str]:
    """The resources in which a queue (its series by resource) held under its bound at sample `i`."""
    return {resource for resource, series in resources.items() if (series[bound][i] or 0.0) > (series[held][i] or 0.0)}


def _amount(key: str, value: float) -> str:
    """A charted value (`curve_unit`) as the log says amounts: `1.5` cores, `2Gi`."""
    resource = key.split(" in ", 1)[0]
    return format_human(resource, round(value * 1000) if resource in MILLI_RESOURCES else round(value))


def _moment(seconds: float) -> str:
    return format_moment(round(seconds * 1000))
