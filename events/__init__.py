"""The contract: cluster events, decisions, quantities, durations and model configurations.

Pure values and codecs; no I/O and no scheduling logic. Everything public is re-exported here.
"""

from events._cluster import (
    AppFinished as AppFinished,
)
from events._cluster import (
    AppSubmitted as AppSubmitted,
)
from events._cluster import (
    ClusterEvent as ClusterEvent,
)
from events._cluster import (
    ConfigApplied as ConfigApplied,
)
from events._cluster import (
    Event as Event,
)
from events._cluster import (
    NodeRemoved as NodeRemoved,
)
from events._cluster import (
    NodeUpserted as NodeUpserted,
)
from events._cluster import (
    PriorityClassDeleted as PriorityClassDeleted,
)
from events._cluster import (
    PriorityClassUpserted as PriorityClassUpserted,
)
from events._cluster import (
    TaskBound as TaskBound,
)
from events._cluster import (
    TaskReleased as TaskReleased,
)
from events._cluster import (
    TaskSubmitted as TaskSubmitted,
)
from events._cluster import (
    Tick as Tick,
)
from events._codec import (
    CLUSTER_EVENT_TYPES as CLUSTER_EVENT_TYPES,
)
from events._codec import (
    DECISION_TYPES as DECISION_TYPES,
)
from events._codec import (
    DecodeError as DecodeError,
)
from events._codec import (
    LogEvent as LogEvent,
)
from events._codec import (
    decode_cluster_event as decode_cluster_event,
)
from events._codec import (
    decode_decision as decode_decision,
)
from events._codec import (
    decode_log_event as decode_log_event,
)
from events._codec import (
    encode as encode,
)
from events._codec import (
    json_schema as json_schema,
)
from events._codec import (
    to_builtins as to_builtins,
)
from events._decisions import (
    Admitted as Admitted,
)
from events._decisions import (
    Allocated as Allocated,
)
from events._decisions import (
    Blocked as Blocked,
)
from events._decisions import (
    Decision as Decision,
)
from events._decisions import (
    DecisionEvent as DecisionEvent,
)
from events._decisions import (
    Evicted as Evicted,
)
from events._decisions import (
    Preempted as Preempted,
)
from events._decisions import (
    Unreserved as Unreserved,
)
from events._decisions import (
    Victim as Victim,
)
from events._duration import (
    DurationError as DurationError,
)
from events._duration import (
    format_duration as format_duration,
)
from events._duration import (
    parse_duration as parse_duration,
)
from events._quantity import (
    MILLI_RESOURCES as MILLI_RESOURCES,
)
from events._quantity import (
    QuantityError as QuantityError,
)
from events._quantity import (
    Resources as Resources,
)
from events._quantity import (
    format_human as format_human,
)
from events._quantity import (
    parse_quantity as parse_quantity,
)
from events._scenario import (
    Expectations as Expectations,
)
from events._scenario import (
    PriorityClassSpec as PriorityClassSpec,
)
from events._scenario import (
    Scenario as Scenario,
)
from events._scenario import (
    ShimSettings as ShimSettings,
)
from events._yunikorn import (
    DEFAULT_PREEMPTION_DELAY_MS as DEFAULT_PREEMPTION_DELAY_MS,
)
from events._yunikorn import (
    ConfigError as ConfigError,
)
from events._yunikorn import (
    ParsedConfig as ParsedConfig,
)
from events._yunikorn import (
    PartitionConfig as PartitionConfig,
)
from events._yunikorn import (
    PreemptionSettings as PreemptionSettings,
)
from events._yunikorn import (
    QueueConfig as QueueConfig,
)
from events._yunikorn import (
    QueueProps as QueueProps,
)
from events._yunikorn import (
    default_partition_config as default_partition_config,
)
from events._yunikorn import (
    parse_yunikorn_config as parse_yunikorn_config,
)
