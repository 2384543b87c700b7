"""The pure decision core: a scheduling cycle per partition, a model per partition (YuniKorn
now; Kueue and Volcano behind the same interface), explanations on every decision, and the
offline drivers (scenario simulation and replay). No I/O, no clock, no randomness."""

from scheduling._cycle import Cycle as Cycle
from scheduling._cycle import decision_id as decision_id
from scheduling._engine import MODELS as MODELS
from scheduling._engine import Model as Model
from scheduling._engine import run_cycle as run_cycle
from scheduling._replay import (
    Change as Change,
)
from scheduling._replay import (
    Divergence as Divergence,
)
from scheduling._replay import (
    Replayer as Replayer,
)
from scheduling._replay import (
    ReplayReport as ReplayReport,
)
from scheduling._replay import (
    decision_key as decision_key,
)
from scheduling._replay import (
    replay as replay,
)
from scheduling._simulation import (
    ScenarioError as ScenarioError,
)
from scheduling._simulation import (
    SimulationResult as SimulationResult,
)
from scheduling._simulation import (
    check as check,
)
from scheduling._simulation import (
    needs_cycle as needs_cycle,
)
from scheduling._simulation import (
    simulate as simulate,
)
from scheduling._simulation import (
    tick_event as tick_event,
)
