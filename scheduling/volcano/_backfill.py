"""Volcano's backfill: BestEffort tasks (they ask only a pod slot) of the jobs let in, in job
order, each on the first node with a slot, gang-aware."""

from __future__ import annotations

from ._allocate import place
from ._session import Session

__all__ = ["backfill"]


def backfill(s: Session) -> None:
    waiting = {job.id: [task for task in s.waiting(job) if task.best_effort] for job in s.waiting_jobs()}
    for job in sorted((s.jobs[j] for j, best_effort in waiting.items() if best_effort), key=s.job_key):
        if not s.within_budget():
            return
        place(s, job, "backfill", tasks=waiting[job.id])
