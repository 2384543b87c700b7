"""Cluster events: what shims publish on `preemptd.cluster.<partition>.<kind>`.

Each event is a frozen msgspec Struct with an explicit, stable `type` tag. New fields get
defaults and a field's type never changes (see docs/contract.md).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ._limits import INT32, MAX_LABEL_KEY, MAX_LABEL_VALUE, MAX_LABELS, MAX_TIMESTAMP
from ._quantity import Resources

__all__ = [
    "AppFinished",
    "AppSubmitted",
    "ClusterEvent",
    "ConfigApplied",
    "Event",
    "EventId",
    "Name",
    "NodeRemoved",
    "NodeUpserted",
    "PartitionName",
    "PreemptionPolicy",
    "PriorityClassDeleted",
    "PriorityClassUpserted",
    "ReleaseReason",
    "TaskBound",
    "TaskReleased",
    "TaskSubmitted",
    "Tick",
]

EventId = Annotated[str, msgspec.Meta(min_length=1, max_length=256, description="unique per event: the idempotency key")]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
PARTITION_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
PartitionName = Annotated[str, msgspec.Meta(pattern=PARTITION_PATTERN, description="a NATS subject token: letters, digits, _ and -")]
Timestamp = Annotated[int, msgspec.Meta(ge=0, le=MAX_TIMESTAMP, description="milliseconds since the epoch")]
Priority = Annotated[int, msgspec.Meta(ge=INT32[0], le=INT32[1], description="a 32-bit integer, as in Kubernetes")]
Labels = Annotated[
    dict[Annotated[str, msgspec.Meta(max_length=MAX_LABEL_KEY)], Annotated[str, msgspec.Meta(max_length=MAX_LABEL_VALUE)]],
    msgspec.Meta(max_length=MAX_LABELS),
]
PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]
ReleaseReason = Literal["completed", "preempted", "failed", "deleted"]
ModelName = Annotated[
    str, msgspec.Meta(min_length=1, max_length=64, description="a scheduling model (`preemptd schema` lists them); left out: the default one")
]


Annotations = Annotated[
    dict[Annotated[str, msgspec.Meta(max_length=MAX_LABEL_KEY)], Annotated[str, msgspec.Meta(max_length=MAX_LABEL_VALUE)]],
    msgspec.Meta(
        max_length=MAX_LABELS,
        description="the shim's own data (a Kubernetes uid, a trace id): kept in the log, never read by decisions; the one place for fields the "
        "contract does not define",
    ),
]


# Subclasses say `frozen=True` again: msgspec inherits it, type checkers do not.
class Event(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type", forbid_unknown_fields=True):
    """Fields every event carries. A field the contract does not define is refused, never
    dropped: a shim's own data goes in `annotations`."""

    id: EventId
    ts: Timestamp
    partition: PartitionName = "default"
    annotations: Annotations = {}


ConfigSource = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=1024,
        description="where the configuration came from: the file a daemon follows (`run --config`) or `preemptd apply` read, as an absolute path",
    ),
]
ConfigDigest = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$", description="the SHA-256 of the source's bytes, in hex")]


class ConfigApplied(Event, tag="config.applied", frozen=True, kw_only=True):
    """The whole queue configuration of a partition, in the chosen model's own shape (each
    model's documentation describes it: an object, or a list of objects for a model that takes
    them so, such as Kueue's). Without `model`, the default model's; a model this version does
    not have makes the event a dead letter. `source` and `digest` say which file it was read
    from, and its content: a daemon restarted with a file it already applied leaves a newer
    configuration in force. The same configuration again changes nothing but where it is
    said to come from."""

    model: ModelName | msgspec.UnsetType = msgspec.UNSET
    config: dict[str, Any] | list[Any]
    source: ConfigSource | msgspec.UnsetType = msgspec.UNSET
    digest: ConfigDigest | msgspec.UnsetType = msgspec.UNSET


class PriorityClassUpserted(Event, tag="priorityclass.upserted", frozen=True, kw_only=True):
    """A Kubernetes PriorityClass, with YuniKorn's allow-preemption annotation."""

    name: Name
    value: Priority
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    allow_preemption: bool = True


class PriorityClassDeleted(Event, tag="priorityclass.deleted", frozen=True, kw_only=True):
    """A PriorityClass is gone; tasks keep the values they were given."""

    name: Name


class NodeUpserted(Event, tag="node.upserted", frozen=True, kw_only=True):
    """A node and what it can hold. Upserting an existing node changes its capacity or labels."""

    node: Name
    capacity: Resources
    labels: Labels = {}
    schedulable: bool = True


class NodeRemoved(Event, tag="node.removed", frozen=True, kw_only=True):
    """A node left the cluster; the tasks on it are released."""

    node: Name


Namespace = Annotated[
    str, msgspec.Meta(min_length=1, max_length=253, description="the Kubernetes namespace (Volcano's conformance never evicts kube-system's pods)")
]


class AppSubmitted(Event, tag="app.submitted", frozen=True, kw_only=True):
    """An application (job, workload) in a leaf queue."""

    app: Name
    queue: Name
    priority: Priority | None = None
    priority_class: Name | None = None
    namespace: Namespace | None = None
    min_available: (
        Annotated[
            int,
            msgspec.Meta(
                ge=0,
                le=INT32[1],
                description="the gang: tasks that must be placed together (0: none, as a PodGroup's minMember 0); left out: every task, as a Volcano "
                "Job without minAvailable",
            ),
        ]
        | None
    ) = None


class AppFinished(Event, tag="app.finished", frozen=True, kw_only=True):
    """An application is done; its remaining tasks are released."""

    app: Name


class _TaskSpec(Event, frozen=True, kw_only=True):
    """What describes a task besides its name, its application and its resources."""

    queue: Name | None = None
    priority: Priority | None = None
    priority_class: Name | None = None
    namespace: Namespace | None = None  # else the application's
    allow_preemption: bool | None = None
    preemption_policy: PreemptionPolicy | None = None
    originator: bool = False
    required_node: Name | None = None
    task_priority: Priority = 0
    preemptable: bool | None = None


class TaskSubmitted(_TaskSpec, tag="task.submitted", frozen=True, kw_only=True):
    """A pending ask (pod).

    `queue` may be given instead of an `app.submitted`: the application is then created in that
    queue. Priority comes from `priority`, else `priority_class`, else the application's.
    """

    task: Name
    app: Name
    resources: Resources


class TaskBound(_TaskSpec, tag="task.bound", frozen=True, kw_only=True):
    """A task runs on `node`. For a task preemptd has not seen, the `task.submitted` fields
    (at least `app` and `resources`) describe it."""

    task: Name
    node: Name
    app: Name | None = None
    resources: Resources | None = None


class TaskReleased(Event, tag="task.released", frozen=True, kw_only=True):
    """A task no longer holds resources."""

    task: Name
    reason: ReleaseReason = "completed"


class Tick(Event, tag="clock.ticked", frozen=True, kw_only=True):
    """The daemon's clock, recorded in the log: a scheduling cycle ran at `ts`.

    When the cycle ran out of its time (`preemptd run --cycle-time`): `out_of_time_after`, how
    many decisions it had made then, so that a replay stops it at the same point (what a cycle
    keeps between cycles to save work may differ after a restart; its decisions may not), and
    `resume`, per phase of the model's cycle that was stopped, where that phase began (a queue):
    the next cycle's phase begins after it, so that over consecutive cut cycles every queue has
    its turn. `cut`, written by versions before 0.2: how many checks of the time said yes.

    Written by the daemon only; a shim that publishes one gets a dead letter.
    """

    cut: Annotated[int, msgspec.Meta(ge=0)] | None = None
    out_of_time_after: Annotated[int, msgspec.Meta(ge=0)] | None = None
    resume: dict[str, str] | None = None

    @property
    def stopped(self) -> bool:
        """The cycle ran out of its time."""
        return self.cut is not None or self.out_of_time_after is not None


ClusterEvent = (
    ConfigApplied
    | PriorityClassUpserted
    | PriorityClassDeleted
    | NodeUpserted
    | NodeRemoved
    | AppSubmitted
    | AppFinished
    | TaskSubmitted
    | TaskBound
    | TaskReleased
)
