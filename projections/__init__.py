"""The pure fold of the log into cluster state: queues, nodes, applications, tasks, priority
classes, reservations and victims in flight. No I/O, no clock."""

from ._apply import (
    SUPPORTED_MODELS as SUPPORTED_MODELS,
    Rejected as Rejected,
    apply as apply,
    build_queues as build_queues,
    fold as fold,
    new_partition as new_partition,
    reservation_claim as reservation_claim,
)
from ._resources import (
    add as add,
    fits as fits,
    over_limit as over_limit,
    positive as positive,
    shares_type as shares_type,
    subtract as subtract,
)
from ._snapshot import (
    SNAPSHOT_FORMAT as SNAPSHOT_FORMAT,
    SnapshotError as SnapshotError,
    restore as restore,
    snapshot as snapshot,
)
from ._state import (
    AppState as AppState,
    ClusterState as ClusterState,
    LogRecord as LogRecord,
    NodeState as NodeState,
    PartitionState as PartitionState,
    PriorityClass as PriorityClass,
    QueueState as QueueState,
    TaskState as TaskState,
    TaskStatus as TaskStatus,
)
from ._views import partition_view as partition_view, queue_depth as queue_depth
