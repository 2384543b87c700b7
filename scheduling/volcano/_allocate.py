"""Volcano's allocate: queues by priority, then the lower share, a job at a time (the queue
goes back in line after each job); a job's pending tasks go on the first node where they fit
now, within what the queue may hold, and are kept only if the job then has its gang.

For one job (`allocate_job`): its pending tasks, in task order, each on the first node (by
name) where it fits now and its queue allows it; kept only if the job then has its gang
(`min_available` tasks ready or waiting on a node held for them), else every placement is
undone (those tasks wait for the gang; the others say why they found no place). A task that
cannot be placed is passed over, and the next ones are tried: a smaller task may still fit and
complete the gang."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .._explain import counted
from ._jobs import Job, Task
from ._nodes import Nodes, Statement
from ._session import Session

__all__ = ["allocate", "allocate_job", "place"]


def allocate(s: Session) -> None:
    lines = s.queues_in_order(s.waiting_jobs())
    s.in_turns(lines, lambda queue, job: place(s, job, "allocate", lambda task: s.quotas.allocatable(queue, task.resources)))


def place(s: Session, job: Job, action: str, queue_refuses: Callable[[Task], str | None] = lambda task: None, tasks: list[Task] | None = None) -> None:
    """`action` places `job`'s waiting tasks (or `tasks`) where they fit now, gang-aware; the
    others are told why not."""
    placed, unplaced = allocate_job(job, s.nodes, s.waiting(job) if tasks is None else tasks, queue_refuses, gang=s.gang_ready)
    for task, node in placed:
        s.settled.add(task.id)
        s.allocated(
            task,
            node,
            f"{action}: the first node, by name, where the task fits now"
            + (f"; job {job.id} has its gang of {job.min_available}" if job.min_available > 1 else ""),
        )
    for task_id, why in unplaced.items():
        s.note([s.tasks[task_id]], f"{action}: {why}")


def allocate_job(
    job: Job, nodes: Nodes, tasks: Iterable[Task] | None = None, queue_refuses: Callable[[Task], str | None] = lambda task: None, *, gang: bool = True
) -> tuple[list[tuple[Task, str]], dict[str, str]]:
    """The placements kept of `tasks` (the job's pending ones by default), and, for each task
    not placed, why. Without `gang` (no gang plugin votes on readiness), all are kept."""
    statement = Statement(nodes)
    unplaced: dict[str, str] = {}
    for task in job.pending if tasks is None else tasks:
        refusal = queue_refuses(task)
        node = None if refusal else nodes.first_fitting(task.resources)
        if node is None:
            unplaced[task.id] = refusal or "no node has room for it now"
            continue
        statement.allocate(task, node)
    placed = len(statement.placed)
    in_all = nodes.ready.get(job.id, 0) + nodes.waiting.get(job.id, 0)  # the placements counted
    if not gang or in_all >= job.min_available:
        return statement.commit(), unplaced
    undone = [task for task, _ in statement.placed]
    statement.discard()
    short = (
        f"gang: job {job.id} needs {counted(job.min_available, 'task')} placed to start (min_available): {in_all - placed} placed, {placed} more could be now"
    )
    return [], {**{task.id: short for task in undone}, **unplaced}  # a task that found no place says why itself
