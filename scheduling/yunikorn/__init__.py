"""The YuniKorn model: hierarchical queues with guarantees and maxes, allocation by queue
priority and fairness, and preemption by YuniKorn's seven laws with fences, delays, priority
offsets, opt-outs, required-node (DaemonSet) preemption and node reservations.

- `_config`: YuniKorn's `queues.yaml`, with its queue properties and partition settings, and
  the line that says what a configuration turns on.
- `_cycle`: the cycle's three phases (reservations, allocation, preemption) and pace control.
- `_ordering`: the order leaf queues are served in; priorities through offsets and fences.
- `_backlog`: the waiting tasks kept between cycles, per leaf in groups alike, in the order a
  cycle tries them; `_kept`: where (outside snapshots).
- `_placement`: whether a task fits a node and its queues' maxes, and first-fit node choice.
- `_preemption`: queue preemption, the victim search by the seven laws.
- `_daemonset`: required-node (DaemonSet) preemption, on the task's one node.
- `_victims`: what both preemptions share: plans and refusals, candidates, law 1's resorts,
  node room, the victim order and minimal sets.

This package names `MODEL` only: the registry imports it; tests and tools that need a detail
import it from its module (`preemptd.scheduling.yunikorn._config`, ...).

README.md beside this file describes the model for users, and where it departs from YuniKorn.
"""

from preemptd.events import QuotaEnforced, Tick
from preemptd.projections import Folds

from .._model import Model
from .._views import Views
from ._config import claims, configured_partitions, describe, parse_config
from ._cycle import next_wakeup, schedule
from ._state import YuniKornState, fold_config, fold_event, notice

__all__ = ["MODEL"]

MODEL = Model(
    name="yunikorn",
    parse_config=parse_config,
    schedule=schedule,
    next_wakeup=next_wakeup,
    partitions=configured_partitions,
    claims=claims,
    fold=Folds(state_type=YuniKornState, notice=notice, event=fold_event, events=(Tick, QuotaEnforced), config=fold_config),
    views=Views(describe=describe),
)
