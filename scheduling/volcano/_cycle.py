"""One session of the Volcano model: the configured actions, in their order, on one picture of
the cluster (`_session`); then every task still waiting is told why. Each action is a module,
as in Volcano: `_enqueue`, `_allocate`, `_preempt`, `_reclaim`, `_backfill`.

- First, preemptd's extension: a queue annotated `preemptd.io/quota-preemption-delay` whose
  capability was lowered below what it holds sheds running tasks once the delay has run out,
  in victim order and gang-aware (`_quota`).
- Then a preemptor pipelined in an earlier session whose victims are gone is bound to the node
  held for it (`decision.allocated`), or let go (`decision.unreserved`) if the node went or still
  lacks room with nothing left to release there.
- **enqueue**: a job that has not started is let in if its queue is open and has room under its
  capability (and its ancestors', under hierarchy) for its gang's request (the first
  `min_available` tasks) beside what it holds, less what preemption could take back, and what
  was let in before it this session. Without enqueue, every job of an open queue is in. A job
  that has started is always in.
- **allocate**: queues by priority, then the lower share, a job at a time (the queue goes back in
  line after each job); a job's pending tasks go on the first node where they fit now, within
  what the queue may hold, and are kept only if the job then has its gang.
- **preempt**: in each queue, every starving job's pending tasks evict running tasks of the
  queue's lower-priority jobs, node by node, through the plugins' votes (hook `preemptable`);
  the job's evictions are made only if it then has its gang. Then, within each job still
  starving, a pending task evicts running tasks of its own job with a lower task priority, one
  preemptor at a time, until one cannot.
- **reclaim**: queues that hold less than they deserve, taking turns a job at a time by share
  (as in allocate), for their starving jobs: a pending
  task the queue may reclaim for (preemptive) evicts running tasks of other reclaimable queues
  through the votes (hook `reclaimable`), only until it fits; the job's evictions are made only
  if it then has its gang.
- **backfill**: BestEffort tasks (they ask only a pod slot) of jobs let in, on the first node
  with a slot, gang-aware.

A session's work is bounded by the cycle's budget (`Model.budget`): it stops between jobs at the
first budget spent (placements, or preemptors served), and the next session goes on from there.

A preemptor that needs no victim but fits the room others' victims are releasing waits on that
node too (`decision.preempted` with no victims). A BestEffort preemptor takes only BestEffort
victims; a task whose preemptionPolicy is Never evicts nothing. Queue priority orders queues and
victims; as in Volcano, it does not bound reclaim.
"""

from __future__ import annotations

from collections.abc import Callable

from preemptd.events import Unreserved
from preemptd.projections import PartitionState

from .._model import Cycle
from ._allocate import allocate
from ._backfill import backfill
from ._enqueue import admit_open, enqueue
from ._nodes import Statement
from ._preempt import preempt
from ._quota import enforce_quotas, next_enforcement, quotas_due
from ._reclaim import reclaim
from ._session import Session

__all__ = ["next_wakeup", "schedule"]

ACTIONS: dict[str, Callable[[Session], None]] = {"enqueue": enqueue, "allocate": allocate, "preempt": preempt, "reclaim": reclaim, "backfill": backfill}


def schedule(cycle: Cycle) -> None:
    due = quotas_due(cycle.partition, cycle.now)
    if not cycle.partition.pending_count and not due:
        return
    s = Session(cycle)
    cycle.phase("quota")
    enforce_quotas(s, due)
    if not cycle.partition.pending_count:
        return
    _land_reservations(s)
    if "enqueue" not in s.conf.actions:
        admit_open(s)
    for action in s.conf.actions:
        if not (cycle.can_place() and cycle.can_preempt()):
            break  # the next session goes on from here
        cycle.phase(action)  # its first step is taken whatever the time: every action goes on under load
        ACTIONS[action](s)
    cycle.phase("tell")
    s.block()


def _land_reservations(s: Session) -> None:
    """A preemptor pipelined in an earlier session whose victims are gone is bound to the node
    held for it, or let go if the node went or still lacks room with nothing left to release."""
    pipelined = (task for job in s.pipelined_jobs() for task in job.tasks if task.reserved is not None)
    for task in sorted(pipelined, key=lambda t: t.seq):
        node, state = task.reserved, s.p.tasks[task.id]
        if node not in s.nodes.capacity:
            reason = f"{node} is gone or no longer schedulable; the task is pending again"
        elif state.victims:
            continue  # its victims are still leaving
        elif Statement(s.nodes).land(task, node):
            s.settled.add(task.id)
            s.allocated(task, node, f"its victims are gone: {node}, held for it, has room now")
            continue
        elif s.nodes.releasing.get(node):
            continue  # still waiting for what others' victims release there
        else:
            reason = f"its victims are gone but {node} still lacks room; the task is pending again"
        s.cycle.emit(Unreserved, task=task.id, node=node, reason=reason)
        if node in s.nodes.capacity:
            Statement(s.nodes).unpipeline(task, node)
        s.settled.add(task.id)  # pending again: tried from the next session on


def next_wakeup(partition: PartitionState, now: int) -> int | None:
    """`Model.next_wakeup`: when a queue above a lowered capability reaches the end of its
    delay (preemptd's extension); nothing else in this model waits on time."""
    return next_enforcement(partition, now)
