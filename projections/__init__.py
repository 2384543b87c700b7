"""The pure fold of the log into cluster state: queues, nodes, applications, tasks, priority
classes, reservations and victims in flight. No I/O, no clock."""

from projections._apply import (
    SUPPORTED_MODELS as SUPPORTED_MODELS,
)
from projections._apply import (
    Rejected as Rejected,
)
from projections._apply import (
    apply as apply,
)
from projections._apply import (
    build_queues as build_queues,
)
from projections._apply import (
    fold as fold,
)
from projections._apply import (
    new_partition as new_partition,
)
from projections._apply import (
    reservation_claim as reservation_claim,
)
from projections._resources import (
    add as add,
)
from projections._resources import (
    exceeds as exceeds,
)
from projections._resources import (
    fits as fits,
)
from projections._resources import (
    over_limit as over_limit,
)
from projections._resources import (
    positive as positive,
)
from projections._resources import (
    shares_type as shares_type,
)
from projections._resources import (
    subtract as subtract,
)
from projections._resources import (
    total as total,
)
from projections._snapshot import restore as restore
from projections._snapshot import snapshot as snapshot
from projections._state import (
    AppState as AppState,
)
from projections._state import (
    ClusterState as ClusterState,
)
from projections._state import (
    LogRecord as LogRecord,
)
from projections._state import (
    NodeState as NodeState,
)
from projections._state import (
    PartitionState as PartitionState,
)
from projections._state import (
    PriorityClass as PriorityClass,
)
from projections._state import (
    QueueState as QueueState,
)
from projections._state import (
    TaskState as TaskState,
)
from projections._state import (
    TaskStatus as TaskStatus,
)
from projections._views import partition_view as partition_view
from projections._views import queue_depth as queue_depth
