"""Scenario files: a cluster's history written by hand, run offline by `preemptd simulate`.

Scenario files are decoded strictly (unknown fields are errors) because people write them and a
typo should not silently change a test. The events inside are ordinary cluster events plus an
`at` offset; `id` and `ts` are filled in when missing.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ._cluster import PreemptionPolicy

__all__ = ["Expectations", "PriorityClassSpec", "Scenario", "ShimSettings"]

Duration = str | int


class ShimSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The simulated shim that carries out decisions."""

    execute: bool = True  # bind allocations, release victims after grace_period
    grace_period: Duration = "0s"
    recreate_preempted: bool = False  # a preempted task returns as a new pending task (ReplicaSet)


class PriorityClassSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    value: int
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    allow_preemption: bool = True


class Expectations(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What `simulate --check` verifies at the end of the run.

    - `queues`: per queue path, resources that must match exactly (`allocated`, `pending`, ...).
    - `tasks`: per task, fields that must match (`status`: pending, running, preempting or
      released; `node`; `queue`).
    - `decisions`: partial decisions that must appear in this order (other decisions may come
      between); a list of task names matches the victims' names in any order.
    - `counts`: the exact number of decisions of each type.
    - `rejected`: text that each expected rejected event's reason contains, in order; any other
      rejection fails the check.
    """

    queues: dict[str, dict[str, dict[str, Any]]] = {}
    tasks: dict[str, dict[str, Any]] = {}
    decisions: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    rejected: list[str] = []


class Scenario(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    config: dict[str, Any] | list[Any]
    events: list[dict[str, Any]]
    model: str | None = None  # the default model when left out
    description: str = ""
    partition: str = "default"
    priority_classes: list[PriorityClassSpec] = []
    shim: ShimSettings = ShimSettings()
    until: Duration = "60s"
    tick: Duration = "1s"
    expect: Expectations | None = None
