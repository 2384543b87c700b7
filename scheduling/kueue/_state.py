"""What the Kueue model keeps per partition besides its configuration: each workload's
admission, folded from its own decisions. An admission belongs to one incarnation of its
application (`AppState.incarnation`): when every task of the workload is gone it holds no quota
and, requeued later, waits for admission again. A finished workload's entry goes with it.
Also the timers of preemptd's quota enforcement (`_quota` folds them)."""

from __future__ import annotations

import msgspec

from preemptd.events import Admitted, AppFinished, Blocked, ConfigApplied, DecisionEvent, Evicted, LogEvent, QuotaEnforced, type_of
from preemptd.projections import AppState, PartitionState, Rejected, apps_changed_by

from .._quota_timers import QuotaTimers
from ._kept import kept

__all__ = ["state_of", "Admission", "KueueState", "admission_of", "eviction_of", "fold_decision", "fold_event", "notice", "preempting"]


class Admission(msgspec.Struct, kw_only=True):
    """A workload's flavor per resource, the cycle that admitted it, and whether it was evicted
    (it holds its quota until its tasks are gone)."""

    flavors: dict[str, str]
    cycle: int
    incarnation: int
    evicted: bool = False


class KueueState(msgspec.Struct, kw_only=True):
    """What snapshots keep; what is kept besides is `_kept.KueueKept`."""

    admissions: dict[str, Admission] = {}
    preempting: dict[str, int] = {}  # workload -> its incarnation that evicted others and waits for them to go
    quota: QuotaTimers = msgspec.field(default_factory=QuotaTimers)  # per ClusterQueue, its quotas (`limit_of`)
    evictions: dict[str, str] = {}  # per workload evicted and not admitted again, why (its Evicted condition, as Kueue keeps it)


def state_of(p: PartitionState) -> KueueState:
    """The kueue model's state of `p` (`Folds.state_type`), typed: the fold made it when `p` took the model."""
    state = p.model_state
    assert isinstance(state, KueueState), f"partition {p.name} holds no kueue state: {type(state).__name__}"
    return state


def admission_of(p: PartitionState, app: AppState) -> Admission | None:
    """The workload's admission, if this incarnation of it has one."""
    admission = state_of(p).admissions.get(app.id)
    return admission if admission is not None and admission.incarnation == app.incarnation else None


def eviction_of(p: PartitionState, app: AppState) -> str | None:
    """Why the workload was last evicted, until it is admitted again."""
    return state_of(p).evictions.get(app.id)


def preempting(p: PartitionState, app: AppState) -> bool:
    """This incarnation of the workload evicted others and waits for them to go."""
    return state_of(p).preempting.get(app.id) == app.incarnation


def notice(p: PartitionState, event: LogEvent) -> None:
    """Before the generic fold applies `event`: the workloads it may change are read again at
    the next cycle (a configuration change has them all read)."""
    match event:
        case ConfigApplied():
            kept(p).workloads = None  # the groups of the waiting, and what blocked them, may change with it
        case Blocked():
            workloads = kept(p).workloads
            if workloads is not None:
                workloads.retell(event.app)
    for app in apps_changed_by(p, event):
        _touch(p, app)


def fold_event(p: PartitionState, event: LogEvent) -> None:
    """Once the generic fold accepted `event`: a finished workload's admission goes with it
    (one of the same name later starts anew); the workloads a quota enforcement evicts are
    evicted."""
    match event:
        case AppFinished():
            state = state_of(p)
            state.admissions.pop(event.app, None)
            state.preempting.pop(event.app, None)
            state.evictions.pop(event.app, None)
        case QuotaEnforced():
            _quota_evicted(p, event)


def _quota_evicted(p: PartitionState, event: QuotaEnforced) -> None:
    """The workloads whose pods a quota enforcement evicts are evicted, as by
    `decision.evicted`: they hold their quota until their pods are gone."""
    for app_id in dict.fromkeys(victim.app for victim in event.victims):
        app = p.apps.get(app_id)
        admission = admission_of(p, app) if app is not None else None
        if admission is not None:
            admission.evicted = True
            state_of(p).evictions[app_id] = f"quota enforcement: {event.reason}"


def _touch(p: PartitionState, app_id: str | None) -> None:
    """What is kept between cycles, or samples, reads `app_id` again."""
    if app_id is None:
        return
    found = kept(p)
    for part in (found.workloads, found.totals):
        if part is not None:
            part.touch(app_id)


def fold_decision(p: PartitionState, decision: DecisionEvent) -> None:
    """`decision.admitted` gives the workload its flavors; `decision.evicted` marks it evicted
    (it holds its quota until its tasks are gone) and its preemptor as waiting for it."""
    app = p.apps.get(getattr(decision, "app", ""))
    if app is None:
        raise Rejected(f"{type_of(decision)} for unknown application {getattr(decision, 'app', None)!r}")
    state = state_of(p)
    match decision:
        case Admitted():
            if admission_of(p, app) is not None:
                raise Rejected(f"decision.admitted for application {app.id!r}, which is admitted already")
            state.admissions[app.id] = Admission(flavors=dict(decision.flavors), cycle=decision.cycle, incarnation=app.incarnation)
            state.preempting.pop(app.id, None)
            state.evictions.pop(app.id, None)
            _touch(p, app.id)
        case Evicted():
            admission = admission_of(p, app)
            if admission is None:
                raise Rejected(f"decision.evicted for application {app.id!r}, which is not admitted")
            admission.evicted = True
            state.evictions[app.id] = f"Preempted ({decision.reason})" + (f" by {decision.preemptor}" if decision.preemptor else "")
            _touch(p, app.id)
            preemptor = p.apps.get(decision.preemptor) if decision.preemptor is not None else None
            if preemptor is not None:
                state.preempting[preemptor.id] = preemptor.incarnation
                _touch(p, preemptor.id)
        case _:
            raise Rejected(f"the kueue model does not make {type_of(decision)}")
