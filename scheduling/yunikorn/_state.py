"""What the YuniKorn model keeps: the timers of quota enforcement through preemption (a
`QuotaTimers`, whose rules are `scheduling._quota_timers`'s). A queue's timer starts when a
configuration lowers its max (or gives it a `quota.preemption.delay` while it is above its max),
with the partition's `quotapreemptionenabled` on, and fires `quota.preemption.delay` later
(`_quota`).
"""

from __future__ import annotations

import msgspec

from preemptd.events import ConfigApplied, LogEvent, NodeRemoved, NodeUpserted, QuotaEnforced, Tick
from preemptd.projections import PartitionState, QueueState

from .._quota_timers import Limit, QuotaTimers
from ._backlog import tasks_changed_by
from ._config import config_of
from ._kept import kept

__all__ = ["state_of", "YuniKornState", "fold_config", "fold_event", "held_now", "notice", "over_max"]


class YuniKornState(msgspec.Struct, kw_only=True):
    quota: QuotaTimers = msgspec.field(default_factory=QuotaTimers)


def state_of(p: PartitionState) -> YuniKornState:
    """The yunikorn model's state of `p` (`Folds.state_type`), typed: the fold made it when `p` took the model."""
    state = p.model_state
    assert isinstance(state, YuniKornState), f"partition {p.name} holds no yunikorn state: {type(state).__name__}"
    return state


def fold_config(p: PartitionState, received: int) -> None:
    """A configuration applied at `received`: the timers it starts, moves or cancels."""
    state = state_of(p)
    settings = config_of(p)
    limits = {path: Limit(max=dict(queue.max) if queue.max is not None else None, delay=queue.props.quota_preemption_delay) for path, queue in p.queues.items()}
    state.quota.reconcile(p.document, limits, lambda path: bool(over_max(p.queues[path])), received, enforced=settings.quota_preemption)


def notice(p: PartitionState, event: LogEvent) -> None:
    """Before the generic fold applies `event`: the tasks it may change are filed again in the
    backlog at the next cycle (a configuration change has it built whole); a node's event has
    the nodes listed again."""
    found = kept(p)
    if isinstance(event, NodeUpserted | NodeRemoved):
        found.nodes = None
    if isinstance(event, ConfigApplied):
        found.backlog = None
    elif found.backlog is not None:
        for task_id in tasks_changed_by(p, event):
            found.backlog.touch(p, task_id)


def fold_event(p: PartitionState, event: LogEvent) -> None:
    """Once the generic fold accepted `event`: at each tick, the timers without those of queues
    that fit their max again; at a quota enforcement, its timer: YuniKorn enforces a cut once
    (left, a timer would also start a later cut's countdown early)."""
    state = state_of(p)
    if isinstance(event, Tick):
        state.quota.drop_fitting(lambda path: path in p.queues and bool(over_max(p.queues[path])))
    elif isinstance(event, QuotaEnforced):
        state.quota.drop([event.queue])


def over_max(queue: QueueState) -> dict[str, int]:
    """What `queue` holds above its max, per resource the max names (victims in flight left out)."""
    if queue.max is None:
        return {}
    held = held_now(queue)
    return {name: held[name] - limit for name, limit in sorted(queue.max.items()) if held.get(name, 0) > limit}


def held_now(queue: QueueState) -> dict[str, int]:
    """What `queue` holds, victims in flight left out."""
    return {name: amount - queue.preempting.get(name, 0) for name, amount in queue.allocated.items()}
