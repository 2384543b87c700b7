"""What the Volcano model keeps per partition between sessions.

- Its jobs and their tasks (`_backlog.KeptJobs`), so that a session reads again only the jobs that
  changed since the last. Nothing of it is in snapshots: it is read from the partition, whole
  the first time a session asks for it after a restore. The fold tells it, just before each
  record is folded, which jobs the record may change.
- The timers of preemptd's quota enforcement (`_quota`; the rules are
  `scheduling._quota_timers`'s), the limits they were set against (each queue's capability and
  its `preemptd.io/quota-preemption-delay`), and what an enforcement stopped short of (said
  once). These are fields: snapshots keep them, and a replay finds them as they were.
"""

from __future__ import annotations

import msgspec

from preemptd.events import Blocked, ConfigApplied, LogEvent, QuotaEnforced, Tick
from preemptd.projections import PartitionState, add, apps_changed_by, subtract

from .._quota_timers import Limit, QuotaTimers
from ._backlog import KeptJobs
from ._config import config_of
from ._kept import kept

__all__ = ["state_of", "VolcanoState", "fold_config", "fold_event", "notice", "over_capability", "session_jobs"]


class VolcanoState(msgspec.Struct, kw_only=True):
    """The quota timers: what snapshots keep; what is kept besides is `_kept.VolcanoKept`."""

    quota: QuotaTimers = msgspec.field(default_factory=QuotaTimers)


def state_of(p: PartitionState) -> VolcanoState:
    """The volcano model's state of `p` (`Folds.state_type`), typed: the fold made it when `p` took the model."""
    state = p.model_state
    assert isinstance(state, VolcanoState), f"partition {p.name} holds no volcano state: {type(state).__name__}"
    return state


def session_jobs(p: PartitionState) -> KeptJobs:
    """The partition's jobs kept between sessions, as the fold left them: those that changed
    read again."""
    found = kept(p)
    if found.jobs is None:
        found.jobs = KeptJobs(p)
    return found.jobs.view(p)


def fold_config(p: PartitionState, received: int) -> None:
    """A configuration applied at `received`: the quota timers it starts, moves or cancels."""
    state = state_of(p)
    config = config_of(p)
    limits = {name: Limit(max=dict(q.capability) if q.capability is not None else None, delay=q.quota_preemption_delay) for name, q in config.queues.items()}
    state.quota.reconcile(p.document, limits, lambda name: bool(over_capability(p, name)), received)


def fold_event(p: PartitionState, event: LogEvent) -> None:
    """Once the generic fold accepted `event`: the quota timers and shortfalls it changes."""
    if isinstance(event, Tick):
        _fold_tick(p, event)
    elif isinstance(event, QuotaEnforced):
        state_of(p).quota.short[event.queue] = dict(event.short or {})


def notice(p: PartitionState, event: LogEvent) -> None:
    """Before the generic fold applies `event`: the jobs whose tasks it may change, to be read
    again at the next session (a configuration change has them all read)."""
    if p.model_state is None:
        return
    found = kept(p)
    if found.jobs is None:
        return
    if isinstance(event, ConfigApplied):
        found.jobs = None
        return
    for app in apps_changed_by(p, event):
        found.jobs.touch(p, app)
    if isinstance(event, Blocked):  # what its tasks were told files an idle job
        found.jobs.touch(p, event.app)


def _fold_tick(p: PartitionState, tick: Tick) -> None:
    """The timers without those of queues within their capability again (a timer running out
    wakes a passed-over cycle through `next_wakeup`: see `scheduling.run_cycle`)."""
    state = state_of(p)
    state.quota.drop_fitting(lambda name: bool(over_capability(p, name)))


def over_capability(p: PartitionState, name: str) -> dict[str, int]:
    """What queue `name` holds above its capability, per resource the capability names: its
    running tasks and its preemptors pipelined, a parent's those of its leaves, as a session
    counts them (victims in flight left out: an enforcement is not repeated while they leave)."""
    config = config_of(p)
    queue, capability = p.queues.get(name), config.queues[name].capability if name in config.queues else None
    if queue is None or capability is None:
        return {}
    held = dict(queue.allocated)
    subtract(held, queue.preempting)
    add(held, queue.reserved)
    return {r: held[r] - limit for r, limit in sorted(capability.items()) if held.get(r, 0) > limit}
