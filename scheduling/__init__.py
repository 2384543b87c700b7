"""The pure decision core: a scheduling cycle per partition, a model per partition (YuniKorn
now; Kueue and Volcano behind the same interface), explanations on every decision, and the
offline drivers (scenario simulation and replay). No I/O, no clock, no randomness."""

from ._cycle import Cycle as Cycle, decision_id as decision_id, is_daemon_id as is_daemon_id, tick_record as tick_record
from ._engine import MODELS as MODELS, Model as Model, next_wakeup as next_wakeup, run_cycle as run_cycle
from ._replay import (
    Change as Change,
    Divergence as Divergence,
    Replayer as Replayer,
    ReplayReport as ReplayReport,
    decision_key as decision_key,
    replay as replay,
)
from ._simulation import (
    ScenarioError as ScenarioError,
    SimulationResult as SimulationResult,
    check as check,
    needs_cycle as needs_cycle,
    simulate as simulate,
)
