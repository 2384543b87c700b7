"""What the Volcano model keeps per partition between sessions: its jobs and their tasks
(`_jobs.KeptJobs`), so that a session reads again only the jobs that changed since the last.

Nothing of it is in snapshots: it is all read from the partition, whole the first time a
session asks for it after a restore. The fold tells it, just before each record is folded,
which jobs the record may change.
"""

from __future__ import annotations

import msgspec

from preemptd.events import ConfigApplied, LogEvent
from preemptd.projections import PartitionState, apps_changed_by

from ._jobs import Job, KeptJobs, Task

__all__ = ["VolcanoState", "fold_event", "session_jobs"]


class VolcanoState(msgspec.Struct, kw_only=True, dict=True):
    """No fields (snapshots keep nothing of it); `kept`, the jobs kept between sessions, is an
    attribute beside them, made again when absent; so is `quotas`, the queue rules last found
    for `state`, the report and the metrics (`_queues.session_quotas`)."""


def session_jobs(p: PartitionState) -> tuple[dict[str, Job], dict[str, Task]]:
    """The partition's jobs, in its order of applications, and their tasks by id, as the fold
    left them: those of the jobs that changed read again."""
    state: VolcanoState = p.model_state
    kept: KeptJobs | None = state.__dict__.get("kept")
    if kept is None:
        kept = state.__dict__["kept"] = KeptJobs(p)
    return kept.view(p)


def fold_event(p: PartitionState, event: LogEvent) -> None:
    """Before the generic fold applies `event`: the jobs whose tasks it may change are read
    again at the next session; a configuration change (queues, priorities) has them all read."""
    kept: KeptJobs | None = p.model_state.__dict__.get("kept") if p.model_state is not None else None
    if kept is None:
        return
    if isinstance(event, ConfigApplied):
        del p.model_state.__dict__["kept"]
        return
    for app in apps_changed_by(p, event):
        kept.touch(app)
