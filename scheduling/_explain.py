"""Words for explanations: resources, counts and lists as a person reads them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from preemptd.events import format_human

__all__ = ["amounts", "amounts_by_name", "counted", "listing"]


def amounts(values: Mapping[str, int], only: Iterable[str] | None = None) -> str:
    """`vcore 5, memory 2Gi`; with `only`, exactly those names, zero where missing."""
    names = list(values) if only is None else list(only)
    return ", ".join(f"{name} {format_human(name, values.get(name, 0))}" for name in names) or "nothing"


def amounts_by_name(values: Mapping[str, int]) -> str:
    """`amounts`, the resources in the order of their names."""
    return amounts(values, sorted(values))


def counted(number: int, singular: str, plural: str = "") -> str:
    """`1 leaf`, `3 leaves`: a number and the word that goes with it."""
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


def listing(items: list[str], limit: int = 5) -> str:
    """`a, b, c and 4 more`."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
