"""The contract: cluster events, decisions, quantities, durations, scenario files, and the root
of preemptd's exceptions.

Pure values and codecs; no I/O and no scheduling logic. Everything public is re-exported here.
"""

from ._cluster import (
    PARTITION_PATTERN as PARTITION_PATTERN,
    AppFinished as AppFinished,
    AppSubmitted as AppSubmitted,
    ClusterEvent as ClusterEvent,
    ConfigApplied as ConfigApplied,
    Event as Event,
    NodeRemoved as NodeRemoved,
    NodeUpserted as NodeUpserted,
    PriorityClassDeleted as PriorityClassDeleted,
    PriorityClassUpserted as PriorityClassUpserted,
    TaskBound as TaskBound,
    TaskReleased as TaskReleased,
    TaskSubmitted as TaskSubmitted,
    Tick as Tick,
)
from ._codec import (
    CLUSTER_EVENT_TYPES as CLUSTER_EVENT_TYPES,
    DECISION_TYPES as DECISION_TYPES,
    DecodeError as DecodeError,
    LogEvent as LogEvent,
    cut_text as cut_text,
    decode_cluster_event as decode_cluster_event,
    decode_decision as decode_decision,
    decode_log_event as decode_log_event,
    encode as encode,
    encode_within as encode_within,
    json_schema as json_schema,
    to_builtins as to_builtins,
    type_of as type_of,
    why_not as why_not,
)
from ._decisions import (
    Admitted as Admitted,
    Allocated as Allocated,
    Blocked as Blocked,
    Decision as Decision,
    DecisionEvent as DecisionEvent,
    Evicted as Evicted,
    Preempted as Preempted,
    QuotaEnforced as QuotaEnforced,
    Unreserved as Unreserved,
    Victim as Victim,
)
from ._duration import (
    DurationError as DurationError,
    format_duration as format_duration,
    format_moment as format_moment,
    parse_duration as parse_duration,
)
from ._errors import ConfigError as ConfigError, PreemptdError as PreemptdError
from ._limits import (
    INT32 as INT32,
    MAX_DEPTH as MAX_DEPTH,
    MAX_LABEL_KEY as MAX_LABEL_KEY,
    MAX_LABEL_VALUE as MAX_LABEL_VALUE,
    MAX_LABELS as MAX_LABELS,
    MAX_MESSAGE_BYTES as MAX_MESSAGE_BYTES,
    MAX_QUANTITY as MAX_QUANTITY,
    MAX_RESOURCE_NAME as MAX_RESOURCE_NAME,
    MAX_RESOURCE_NAMES as MAX_RESOURCE_NAMES,
    MAX_TIMESTAMP as MAX_TIMESTAMP,
    MAX_TOTAL as MAX_TOTAL,
    depth_beyond_limit as depth_beyond_limit,
)
from ._objects import ObjectError as ObjectError, object_events as object_events, runtime_object as runtime_object
from ._quantity import (
    MILLI_RESOURCES as MILLI_RESOURCES,
    QuantityError as QuantityError,
    Resources as Resources,
    base_unit as base_unit,
    format_human as format_human,
    parse_quantity as parse_quantity,
)
from ._scenario import (
    Expectations as Expectations,
    PriorityClassSpec as PriorityClassSpec,
    Scenario as Scenario,
    ShimSettings as ShimSettings,
)
from ._text import printable as printable, printable_lines as printable_lines, shown as shown
from ._words import closest as closest, snake_case as snake_case
