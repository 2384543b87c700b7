"""Words for explanations: resources, counts and lists as a person reads them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from preemptd.events import format_human

__all__ = ["amounts", "listing", "plural"]


def amounts(values: Mapping[str, int], only: Iterable[str] | None = None) -> str:
    """`vcore 5, memory 2Gi`; with `only`, exactly those names, zero where missing."""
    names = list(values) if only is None else list(only)
    return ", ".join(f"{name} {format_human(name, values.get(name, 0))}" for name in names) or "nothing"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def listing(items: list[str], limit: int = 5) -> str:
    """`a, b, c and 4 more`."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
