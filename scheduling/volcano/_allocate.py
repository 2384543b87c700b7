"""Volcano's allocate for one job: its pending tasks, in task order, each on the first node (by
name) where it fits now; kept only if the job then runs its gang (`min_available` tasks), else
every placement is undone. A task that fits nowhere is passed over, and the next ones are tried:
a smaller task may still fit and complete the gang."""

from __future__ import annotations

from ._jobs import Job, Task
from ._nodes import Nodes, Statement

__all__ = ["allocate_job"]


def allocate_job(job: Job, nodes: Nodes) -> tuple[list[tuple[Task, str]], str | None]:
    """The placements kept, and why none were when the gang was not reached."""
    statement = Statement(nodes)
    unplaced: list[str] = []
    for task in job.pending:
        node = nodes.first_fitting(task.resources)
        if node is None:
            unplaced.append(task.id)
            continue
        statement.allocate(task, node)
    if job.running + len(statement.placed) >= job.min_available:
        return statement.commit(), None
    placed = len(statement.placed)
    statement.discard()
    return [], f"gang: {job.running} running and {placed} placeable of the {job.min_available} tasks job {job.id} needs to start (min_available); {', '.join(unplaced)} fit no node now"
