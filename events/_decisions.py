"""Decision events: what preemptd publishes on `preemptd.decisions.<partition>.<kind>`.

Decisions are stored in the same log as cluster events and folded back into the projection,
so a restart or a replay sees exactly the in-flight state the live daemon saw. Every decision
carries an `explanation`: the checks that admitted or excluded queues and candidates.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ._cluster import EventId, Name, PartitionName, Timestamp
from ._quantity import Resources

__all__ = [
    "Admitted",
    "Allocated",
    "Blocked",
    "Decision",
    "DecisionEvent",
    "Evicted",
    "Preempted",
    "QuotaEnforced",
    "Unreserved",
    "Victim",
]


# Subclasses say `frozen=True` again: msgspec inherits it, type checkers do not.
class Decision(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type"):
    """Fields every decision carries. `id` is derived from the log: `<log>:<cycle>.<n>`."""

    id: EventId
    ts: Timestamp
    partition: PartitionName
    cycle: Annotated[int, msgspec.Meta(description="log sequence number of the tick that ran the cycle")]
    explanation: tuple[str, ...] = ()


class Allocated(Decision, tag="decision.allocated", frozen=True, kw_only=True):
    """Bind `task` to `node`."""

    task: Name
    app: Name
    queue: Name
    node: Name
    resources: Resources


class Victim(msgspec.Struct, frozen=True, kw_only=True):
    """A running task chosen for eviction, and why it was chosen."""

    task: Name
    app: Name
    queue: Name
    node: Name
    priority: int
    resources: Resources
    why: str = ""


class Preempted(Decision, tag="decision.preempted", frozen=True, kw_only=True):
    """Evict `victims`; `node` is reserved for `preemptor`, which is allocated there once they
    are gone. `grace_period` (milliseconds) is a hint for the shim; `null` means its default."""

    preemptor: Name
    app: Name
    queue: Name
    node: Name | None
    resources: Resources
    victims: tuple[Victim, ...]
    model: str
    reason: str
    grace_period: int | None = None


class QuotaEnforced(Decision, tag="decision.quota_enforced", frozen=True, kw_only=True):
    """A queue above a lowered quota (its max) sheds running work once its delay has run out:
    the shim evicts `victims`, as for `decision.preempted`, and nothing takes their place.
    `target` is what was to be shed (per resource over the quota), `short` what stays over it
    because the queue's guarantee stopped the choice (then `victims` may be empty: said once)."""

    queue: Name
    max: Resources
    target: Resources
    victims: tuple[Victim, ...]
    short: Resources | None = None
    model: str
    reason: Literal["quota"]


class Admitted(Decision, tag="decision.admitted", frozen=True, kw_only=True):
    """Quota-level models: the application may start. `flavors` names the flavor of each
    resource it was admitted with (Kueue's ResourceFlavors)."""

    app: Name
    queue: Name
    flavors: dict[str, str] = {}


class Evicted(Decision, tag="decision.evicted", frozen=True, kw_only=True):
    """Quota-level models: the application must stop, to make room for `preemptor` (an
    application); `message` says why in a sentence."""

    app: Name
    queue: Name
    reason: Literal["InClusterQueue", "InCohortReclamation", "InCohortFairSharing", "InCohortReclaimWhileBorrowing"]
    preemptor: Name | None = None
    message: str = ""


class Unreserved(Decision, tag="decision.unreserved", frozen=True, kw_only=True):
    """A node reservation was dropped; the task is pending again."""

    task: Name
    node: Name
    reason: str


class Blocked(Decision, tag="decision.blocked", frozen=True, kw_only=True):
    """Preemption was considered for `task` and refused; emitted when the reasons change."""

    task: Name
    app: Name
    queue: Name
    reasons: tuple[str, ...]


DecisionEvent = Allocated | Preempted | QuotaEnforced | Admitted | Evicted | Unreserved | Blocked
