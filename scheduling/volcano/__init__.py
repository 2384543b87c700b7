"""The Volcano model: queues sharing by weight or deserved capacity, jobs that start whole (gang),
and preemption at three levels: reclaim across queues, preempt between jobs of a queue and
between tasks of a job.

- `_config`: Volcano's Queue objects and scheduler configuration read into one `VolcanoConfig`;
  the queue tree, words, bounds and the line that says what a configuration turns on.
- `_state`: what the model keeps in snapshots (the timers of a lowered capability), and the fold
  that tells the jobs kept between sessions which changed.
- `_backlog`: the jobs kept between sessions: those started, whole; the idle ones in groups of
  one gang request, filed by what they were told. `_kept`: where they are kept (outside
  snapshots).
- `_jobs`: applications seen as jobs (gang size, starving) and tasks (task priority,
  preemptable, BestEffort, the pod slot).
- `_nodes`: nodes (idle, releasing, pipelined, pod slots), what queues and jobs hold, and
  statements committed or discarded.
- `_shares`: what each queue deserves (proportion's water-filling, capacity's deserved) and its share.
- `_queues`: the sharing plugin's rules: allocatable, overused, preemptive, enqueueable.
- `_order`: the orders of queues, jobs and tasks, and of victims (the reverse).
- `_votes`: the plugins' votes on victims (gang, priority, proportion, capacity, conformance), tier by tier.
- `_victims`: making room for one preemptor on the first node that can, evicting only until it fits.
- `_session`: what a session's actions share: the picture of the cluster, what they settled, why tasks wait.
- `_enqueue`, `_allocate`, `_preempt`, `_reclaim`, `_backfill`: the actions, one module each, as
  Volcano splits them; `_evict` is what preempt and reclaim share (gang-aware evictions).
- `_quota`: preemptd's extension, a lowered capability enforced after a delay (gang-aware).
- `_cycle`: the session: quotas enforced, reservations landing, the configured actions in order, then why every task still waits.

This package names `MODEL` only: the registry imports it; tests and tools that need a detail
import it from its module (`preemptd.scheduling.volcano._config`, ...).

README.md beside this file describes the model for users, and where it departs from Volcano.
"""

from __future__ import annotations

from preemptd.events import QuotaEnforced, Tick
from preemptd.projections import Folds

from .._model import Model
from .._views import Curve, Views
from ._config import WORDS, claims, describe, parse_config
from ._cycle import next_wakeup, schedule
from ._jobs import job_table
from ._queues import curves, queue_columns, shares
from ._state import VolcanoState, fold_config, fold_event, notice

__all__ = ["MODEL"]


MODEL = Model(
    name="volcano",
    words=WORDS,
    parse_config=parse_config,
    schedule=schedule,
    next_wakeup=next_wakeup,
    claims=claims,
    fold=Folds(state_type=VolcanoState, notice=notice, event=fold_event, events=(Tick, QuotaEnforced), config=fold_config),
    views=Views(
        describe=describe,
        queue_columns=queue_columns,
        usage_words={"preempting": "releasing"},
        tables=job_table,
        curve_words=(
            Curve("allocated", "allocated", "held"),
            Curve("pending", "pending", "asked", on="allocated"),
            Curve("deserved", "deserved", "bound"),  # the first bound: the summary's "longest under deserved"
            Curve("guaranteed", "guarantee", "bound"),
            Curve("max", "capability", "bound"),
        ),
        curves=curves,
        shares=shares,
        share_words="share: allocated over deserved, by which allocate and reclaim order queues",
    ),
)
