"""Arithmetic on resource maps (`dict[str, int]` of canonical amounts).

Plain dicts on the hot path: every projection update and every fit check goes through here.
A name missing from a map means zero, except in a `limit` (a queue's max), where it means
"no limit on that resource".
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "add",
    "fits",
    "over_limit",
    "positive",
    "shared_shape",
    "shares_type",
    "subtract",
]

Amounts = Mapping[str, int]


def add(into: dict[str, int], amounts: Amounts) -> None:
    """`into += amounts`, in place."""
    for name, amount in amounts.items():
        into[name] = into.get(name, 0) + amount


def subtract(into: dict[str, int], amounts: Amounts) -> None:
    """`into -= amounts`, in place; names that reach zero are dropped to keep maps small."""
    for name, amount in amounts.items():
        left = into.get(name, 0) - amount
        if left:
            into[name] = left
        else:
            into.pop(name, None)


def fits(ask: Amounts, free: Amounts) -> bool:
    """Every positive amount of `ask` is available in `free` (missing means zero)."""
    for name, amount in ask.items():
        if amount > free.get(name, 0):
            return False
    return True


def over_limit(used: Amounts, ask: Amounts, limit: Amounts | None) -> dict[str, int]:
    """How far `used + ask` goes beyond `limit`, per limited resource; empty when it fits."""
    if limit is None:
        return {}
    over = {}
    for name, amount in ask.items():
        if name in limit and amount:
            beyond = used.get(name, 0) + amount - limit[name]
            if beyond > 0:
                over[name] = beyond
    return over


def positive(amounts: Amounts) -> dict[str, int]:
    return {name: amount for name, amount in amounts.items() if amount > 0}


def shares_type(a: Amounts, b: Amounts) -> bool:
    """Both hold a positive amount of at least one common resource."""
    return any(amount > 0 and b.get(name, 0) > 0 for name, amount in a.items())


#: The ask shapes shared so far (`shared_shape`), at most `SHAPES_KEPT` of them.
_SHAPES: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}
SHAPES_KEPT = 4096


def shared_shape(amounts: Mapping[str, int]) -> dict[str, int]:
    """`amounts` as the one mapping every task asking the same shares: a task's resources are
    never changed in place, so a million tasks of a few shapes hold a few dicts, not a million.
    At most `SHAPES_KEPT` shapes are shared (past them, a shim sending shape after shape gets
    copies, as before)."""
    key = tuple(amounts.items())
    found = _SHAPES.get(key)
    if found is None:
        found = dict(amounts)
        if len(_SHAPES) < SHAPES_KEPT:
            _SHAPES[key] = found
    return found
