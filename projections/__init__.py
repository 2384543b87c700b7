"""The pure fold of the log into cluster state: queues, nodes, applications, tasks, priority
classes, reservations and victims in flight. No I/O, no clock.

`Projection` is the fold; it asks the scheduling models it is given about what is theirs.
`preemptd.scheduling` binds it to the registry of every model (`scheduling.apply`, `fold`,
`snapshot`, `restore`): use those.
"""

from ._apply import (
    ConfigReading as ConfigReading,
    Folds as Folds,
    Projection as Projection,
    Rejected as Rejected,
    apps_changed_by as apps_changed_by,
    build_queues as build_queues,
    configured_nothing as configured_nothing,
    fold_nothing as fold_nothing,
    refuse_decision as refuse_decision,
    reservation_claim as reservation_claim,
)
from ._models import ModelFold as ModelFold, ParsedConfig as ParsedConfig, QueueConfig as QueueConfig
from ._resources import (
    add as add,
    fits as fits,
    over_limit as over_limit,
    positive as positive,
    shared_shape as shared_shape,
    shares_type as shares_type,
    subtract as subtract,
)
from ._snapshot import SNAPSHOT_FORMAT as SNAPSHOT_FORMAT, SnapshotError as SnapshotError
from ._state import (
    AppState as AppState,
    ClusterState as ClusterState,
    Kept as Kept,
    LogRecord as LogRecord,
    NodeState as NodeState,
    PartitionState as PartitionState,
    PriorityClass as PriorityClass,
    QueueState as QueueState,
    TaskState as TaskState,
    TaskStatus as TaskStatus,
    Words as Words,
)
from ._views import partition_view as partition_view, queue_depth as queue_depth
