"""The Kueue model: ClusterQueues lending and borrowing quota in (nested) cohorts, workloads
admitted by flavor assignment in Kueue's order, and classic preemption.

- `_config`: Kueue's objects (both API versions) read into one `KueueConfig`; the queue tree,
  words, bounds and the line that says what a configuration turns on.
- `_tree`: the quota tree of cohorts and ClusterQueues: subtree quotas, limits, what is available.
- `_assign`: flavor assignment, with flavorFungibility.
- `_state`: what the model keeps: each workload's admission, folded from its decisions.
- `_backlog`: the waiting workloads kept between cycles in groups alike, filed by what they were
  told, with what the last cycle found of each group. `_kept`: where what cycles and views
  keep lives (outside snapshots).
- `_workloads`: applications seen as workloads; their requests and the queues' usage.
- `_classic`: classic preemption (candidates, order, passes, greedy removal, minimisation).
- `_fair`: fair sharing's preemption (shares, strategies, the tournament of candidates).
- `_cycle`: the cycle: record running workloads, then visit the waiting in Kueue's order, a
  group judged once per state of its cohort tree (admit, preempt, block); a blocked group kept
  aside until its tree changes.
- `_quota`: preemptd's extension: a lowered quota enforced after a delay (annotation
  `preemptd.io/quota-preemption-delay` on a ClusterQueue), the timers and the evictions.
- `_views`: what `state`, the report and the metrics show: per ClusterQueue and flavor the
  quota admitted workloads reserve, what runs and what waits, against nominal quota and
  borrowing limit; the cohort tree with what each cohort borrows and lends; fair sharing's
  weighted shares.

This package names `MODEL` only: the registry imports it; tests and tools that need a detail
import it from its module (`preemptd.scheduling.kueue._config`, ...).

README.md beside this file describes the model for users, and where it departs from Kueue.
"""

from __future__ import annotations

from preemptd.events import AppFinished, QuotaEnforced, Tick
from preemptd.projections import Folds

from .._model import Budget, Model
from .._views import Curve, Views
from ._config import WORDS, claims, describe, parse_config
from ._cycle import next_wakeup, schedule
from ._quota import fold_config, fold_event
from ._state import KueueState, fold_decision, notice
from ._views import curves, kueue_tables, queue_columns, shares

__all__ = ["MODEL"]

MODEL = Model(
    name="kueue",
    words=WORDS,
    parse_config=parse_config,
    schedule=schedule,
    next_wakeup=next_wakeup,
    budget=Budget(preemptions=50),
    claims=claims,
    fold=Folds(state_type=KueueState, notice=notice, event=fold_event, events=(Tick, QuotaEnforced, AppFinished), decision=fold_decision, config=fold_config),
    views=Views(
        describe=describe,
        queue_columns=queue_columns,
        usage_words={"preempting": "evicting"},
        tables=kueue_tables,
        curve_words=(
            Curve("admitted", "admitted (quota reserved)", "held"),
            Curve("allocated", "running", "held"),
            Curve("pending", "pending (not admitted)", "asked", on="admitted"),
            Curve("guaranteed", "nominal quota", "bound"),
            Curve("max", "borrowing limit", "bound"),
        ),
        curves=curves,
        shares=shares,
        share_words="weighted share (dominant resource share over weight, as Kueue's weightedShare)",
    ),
)
