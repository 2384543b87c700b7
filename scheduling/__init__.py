"""The pure decision core: a wing per scheduling model (`yunikorn/`), the registry that maps a
model's name to its wing, the fold bound to that registry, the cycle driver and its pacing, and
the offline drivers (scenario simulation and replay). No I/O, no clock, no randomness."""

from ._changes import (
    amounts_text as amounts_text,
    column_text as column_text,
    config_changes as config_changes,
    configured_alone as configured_alone,
    configured_before as configured_before,
)
from ._engine import CycleRecords as CycleRecords, is_daemon_id as is_daemon_id, next_wakeup as next_wakeup, run_cycle as run_cycle, tick_record as tick_record
from ._explain import counted as counted, listing as listing
from ._kubernetes import flat_objects as flat_objects, is_object as is_object, yaml_documents as yaml_documents
from ._model import (
    BLOCKED_PER_CYCLE as BLOCKED_PER_CYCLE,
    Budget as Budget,
    Cycle as Cycle,
    Model as Model,
    bounded as bounded,
    decision_id as decision_id,
)
from ._pacing import Cadence as Cadence, Pacer as Pacer
from ._registry import (
    DEFAULT_MODEL as DEFAULT_MODEL,
    MODELS as MODELS,
    PROJECTION as PROJECTION,
    apply as apply,
    claiming as claiming,
    describe as describe,
    fold as fold,
    model_named as model_named,
    read_config as read_config,
    remember_config as remember_config,
    restore as restore,
    snapshot as snapshot,
)
from ._replay import (
    Change as Change,
    Divergence as Divergence,
    ReplayConfig as ReplayConfig,
    Replayer as Replayer,
    ReplayReport as ReplayReport,
    builtins_key as builtins_key,
    decision_key as decision_key,
    replay as replay,
)
from ._report import Timeline as Timeline, Window as Window, compare as compare
from ._simulation import (
    ScenarioError as ScenarioError,
    SimulationResult as SimulationResult,
    check as check,
    simulate as simulate,
)
from ._trial import MAX_TRIAL_EVENTS as MAX_TRIAL_EVENTS, Trial as Trial, TrialRefused as TrialRefused, trial as trial
from ._usage import queue_usage as queue_usage
from ._views import Column as Column, Curve as Curve, Curves as Curves, Table as Table, Views as Views, curve_unit as curve_unit
