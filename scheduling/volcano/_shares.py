"""What each queue deserves, as Volcano's proportion and capacity plugins compute it, and its
share (how far its allocation is into what it deserves).

Amounts are exact fractions of the resources' units (milli-CPU, bytes, ...): Volcano divides by
weights in floating point; exact arithmetic gives the same answers without its rounding, and the
same on every machine. The pod count (`pods`) is a node's capacity, never a queue's: it is left
out here, as Volcano leaves it out of queue quotas.

- **proportion** (water-filling): a queue may have at most its *real capability*: what the
  cluster has less every other queue's guarantee, capped by its capability. The cluster's
  remaining resources are split among the queues not yet met, by weight; each queue's deserved
  grows by its part, is clamped to its real capability and to what it asks (allocated plus
  pending: nothing of a resource it does not ask for), and raised to its guarantee. A queue is
  met once it deserves all it asks, or its deserved stopped changing. The loop ends when nothing
  remains or the remainder stopped changing; each round shares out all that remains or clamps
  a queue on one more resource for good, which bounds the rounds (Volcano's loop, in floating
  point, stops on the same conditions). `spec.deserved` is not read.
- **capacity**: a queue deserves its `spec.deserved`, capped by its real capability and raised
  to its guarantee; no weights.

A queue's share is the largest, over the resources it deserves some of, of allocated over
deserved (a resource allocated but not deserved at all counts as a share of 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from ._config import Queue

__all__ = ["Demand", "capacity_deserved", "capped_deserved", "proportion_deserved", "real_capability", "share", "summed"]

Amounts = dict[str, Fraction]
QUEUE_EXEMPT = frozenset({"pods"})  # a node's capacity, not a queue's


@dataclass(frozen=True)
class Demand:
    """What a queue holds and what it asks in all (allocated plus pending), per resource."""

    allocated: Mapping[str, int]
    request: Mapping[str, int]


def real_capability(queue: Queue, total: Mapping[str, int], guarantees: Mapping[str, int]) -> Amounts:
    """The most `queue` may have: the cluster less every other queue's guarantee, capped by
    its capability. `guarantees` is the sum of all the queues' guarantees."""
    own = queue.guarantee or {}
    real = {r: Fraction(amount - guarantees.get(r, 0) + own.get(r, 0)) for r, amount in total.items() if r not in QUEUE_EXEMPT}
    for r, cap in (queue.capability or {}).items():
        if r in real:
            real[r] = min(real[r], Fraction(cap))
    return real


def proportion_deserved(queues: Mapping[str, Queue], demands: Mapping[str, Demand], total: Mapping[str, int]) -> dict[str, Amounts]:
    """What each queue of `demands` (the queues with jobs) deserves under proportion."""
    guarantees = summed(q.guarantee or {} for name, q in queues.items() if name in demands)
    real = {name: real_capability(queues[name], total, guarantees) for name in demands}
    deserved: dict[str, Amounts] = {name: {} for name in demands}
    met: set[str] = set()
    remaining: Amounts = {r: Fraction(a) for r, a in total.items() if r not in QUEUE_EXEMPT}
    # a round shares out all that remains, or clamps a queue on one more resource for good
    for _ in range(len(demands) * (len(remaining) + 1) + 1):
        unmet = [name for name in sorted(demands) if name not in met]
        if not unmet:
            break
        weights = sum(queues[name].weight for name in unmet)
        offered = dict(remaining)
        for name in unmet:
            old = deserved[name]
            grown = {r: old.get(r, Fraction(0)) + offered[r] * queues[name].weight / weights for r in offered}
            new = _clamped(grown, real[name], demands[name].request, queues[name].guarantee or {})
            for r in remaining:
                remaining[r] -= new.get(r, Fraction(0)) - old.get(r, Fraction(0))
            deserved[name] = new
            if new == old or all(new.get(r, 0) >= amount for r, amount in demands[name].request.items() if r not in QUEUE_EXEMPT):
                met.add(name)
        remaining = {r: max(amount, Fraction(0)) for r, amount in remaining.items()}  # a guarantee may take more than its part
        if not any(remaining.values()) or remaining == offered:  # checked after a round, as Volcano does: guarantees count even on an empty cluster
            break
    return deserved


def capacity_deserved(queues: Mapping[str, Queue], demands: Mapping[str, Demand], total: Mapping[str, int]) -> dict[str, Amounts]:
    """What each queue of `demands` deserves under capacity: its `spec.deserved`, capped by
    its real capability and raised to its guarantee."""
    guarantees = summed(q.guarantee or {} for name, q in queues.items() if name in demands)
    return {name: capped_deserved(queues[name], real_capability(queues[name], total, guarantees)) for name in demands}


def capped_deserved(queue: Queue, real: Mapping[str, Fraction]) -> Amounts:
    """`queue`'s `spec.deserved`, capped by what it may have (`real`), raised to its guarantee."""
    amounts = {r: min(Fraction(a), real.get(r, Fraction(a))) for r, a in (queue.deserved or {}).items() if r not in QUEUE_EXEMPT}
    for r, g in (queue.guarantee or {}).items():
        amounts[r] = max(amounts.get(r, Fraction(0)), Fraction(g))
    return amounts


def share(allocated: Mapping[str, int], deserved: Mapping[str, Fraction]) -> Fraction:
    """The largest allocated / deserved over the resources allocated (1 for one not deserved)."""
    ratios = [Fraction(a) / deserved[r] if deserved.get(r) else Fraction(1) for r, a in allocated.items() if a and r not in QUEUE_EXEMPT]
    return max(ratios, default=Fraction(0))


def _clamped(grown: Amounts, real: Amounts, request: Mapping[str, int], guarantee: Mapping[str, int]) -> Amounts:
    """`grown` at most `real` and what is asked (0 of what is not asked), at least `guarantee`."""
    clamped = {}
    for r, amount in grown.items():
        if r in real:
            amount = min(amount, real[r])
        amount = min(amount, Fraction(request.get(r, 0)))
        clamped[r] = max(amount, Fraction(guarantee.get(r, 0)))
    return clamped


def summed(amounts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The sum of `amounts`, per resource."""
    total: dict[str, int] = {}
    for one in amounts:
        for r, a in one.items():
            total[r] = total.get(r, 0) + a
    return total
