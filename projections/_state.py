"""The cluster state that the fold maintains: plain mutable msgspec Structs, so that a snapshot
is one `msgpack` encode and a restore one decode.

Aggregates are incremental: a queue's `allocated`, `pending`, `preempting`, `reserved` and
`claimed` are sums over its whole subtree, updated along the queue's `lineage` (itself, then its
ancestors) whenever a task changes.

A reservation (a preemptor waiting for its victims) is counted twice over, for two questions:
`reserved` holds its whole ask (what the queue and node will hold once everything settles, which
preemption reasons about), `claimed` only the part its victims still in place do not cover (what
it takes from the room free now, which placement must leave alone).

What is a model's own is held as the model gives it: `QueueState.props` and
`PartitionState.settings` come from its configuration (`document`, kept as JSON so that a
restore can parse it again, whatever a shim put in fields the model ignores),
`PartitionState.model_state` from its own decisions.

Dicts used as ordered sets (`dict[str, None]`) keep insertion order: the log order, or after a
configuration change the order of submission, the same on every replay, so every iteration is
deterministic.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from preemptd.events import Admitted, Allocated, Blocked, Decision, Evicted, LogEvent, Preempted, Unreserved

__all__ = [
    "AppState",
    "ClusterState",
    "Kept",
    "LogRecord",
    "NodeState",
    "PartitionState",
    "PriorityClass",
    "QueueState",
    "TaskState",
    "TaskStatus",
    "Words",
]

TaskStatus = Literal["pending", "running", "preempting"]


class LogRecord(msgspec.Struct, frozen=True):
    """One entry of the log: its global position, the daemon's receive time, the event."""

    seq: int
    received: int
    event: LogEvent


class QueueState(msgspec.Struct, kw_only=True):
    path: str
    lineage: list[str]  # this queue, then each ancestor up to the root
    children: list[str]
    leaf: bool
    guaranteed: dict[str, int]
    max: dict[str, int] | None
    props: Any = None  # the model's settings for this queue
    allocated: dict[str, int] = {}  # running and preempting tasks of the subtree
    preempting: dict[str, int] = {}  # victims in flight in the subtree
    reserved: dict[str, int] = {}  # asks of the subtree waiting on a reserved node
    claimed: dict[str, int] = {}  # the part of those asks not covered by victims still in the subtree
    pending: dict[str, int] = {}  # pending asks of the subtree
    running: dict[str, None] = {}  # leaf only: running or preempting tasks
    waiting: int = 0  # leaf only: how many tasks are pending (the models keep their own order of them)

    @property
    def parent(self) -> str | None:
        return self.lineage[1] if len(self.lineage) > 1 else None


class NodeState(msgspec.Struct, kw_only=True):
    name: str
    capacity: dict[str, int]
    labels: dict[str, str] = {}
    schedulable: bool = True
    allocated: dict[str, int] = {}  # tasks bound here, victims in flight included
    preempting: dict[str, int] = {}  # victims in flight on this node
    reserved: dict[str, int] = {}  # asks of preemptors waiting for this node
    claimed: dict[str, int] = {}  # the part of those asks not covered by their victims still here
    tasks: dict[str, None] = {}
    reservations: dict[str, None] = {}  # preemptor task ids


class AppState(msgspec.Struct, kw_only=True, gc=False):  # holds no cycle
    """An application; its priority settings are the defaults of tasks that name none."""

    id: str
    queue: str
    submitted_at: int
    seq: int
    priority: int = 0
    may_preempt: bool = True
    allow_preemption: bool = True
    min_available: int | None = None  # the gang; None: every task (the field left out)
    priority_class: str | None = None
    namespace: str | None = None
    tasks: dict[str, None] = {}
    incarnation: int = 0  # how many times all its tasks went: what a model kept of it before is gone
    alias: str | None = None  # the name it was submitted to, when that stands for its queue (Kueue's LocalQueue)


class TaskState(msgspec.Struct, kw_only=True, gc=False):  # holds no cycle: the collector need not track a million of them
    id: str
    app: str
    queue: str
    resources: dict[str, int]
    priority: int
    may_preempt: bool = True  # preemptionPolicy is not Never
    allow_preemption: bool = True  # false: a victim only when nothing else will do
    originator: bool = False
    required_node: str | None = None
    task_priority: int = 0
    preemptable: bool | None = None
    priority_class: str | None = None  # its own, else its application's
    namespace: str | None = None  # its own, else its application's
    status: TaskStatus = "pending"
    node: str | None = None
    submitted_at: int = 0
    seq: int = 0  # log position of the submission: the first-in first-out tie-break
    bound_at: int | None = None
    reserved_node: str | None = None  # a preemptor: the node held for it
    victims: tuple[str, ...] = ()  # a preemptor: victims still to leave (all on the reserved node)
    preempted_by: str | None = None  # a victim: the task it makes room for
    blocked: tuple[str, ...] = ()  # the reasons last published in a decision.blocked


class PriorityClass(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    value: int
    may_preempt: bool = True
    allow_preemption: bool = True


class Words(msgspec.Struct, frozen=True, kw_only=True):
    """The words a model's users know its things by, for the fold's refusals and `explain`: an
    unknown LocalQueue is refused as one under Kueue, a job as a job under Volcano."""

    queue: str = "queue"  # what an application names as its queue
    queues: str = "leaf queues"  # what a refusal lists
    alias: str = ""  # another name an application may give a queue (Kueue's LocalQueue, `namespace/name`)
    application: str = "application"
    task: str = "task"  # what an application is made of (Kueue's pods)
    priority_class: str = "priority class"
    define_class: str = "publish priorityclass.upserted first"
    reserved: str = "reserved"  # a node held for a preemptor while its victims go (Volcano's: pipelined)
    limit: str = "max"  # the bound quota enforcement holds a queue to (Kueue's nominal quota, Volcano's capability)


class Kept:
    """What is kept of a partition between cycles besides its state, for the engine
    (`settled_at`, `wakeup`: see `scheduling.run_cycle`) and its model (`model`: the wing's own
    object, made by the wing's typed accessor). Every part is made again from the state when
    absent, so none is ever part of a snapshot: a `Kept` encodes as nothing, a restore starts
    an empty one, and any two are equal (what is kept is not state)."""

    __slots__ = ("model", "nodes_touched", "settled_at", "touched", "wakeup")

    def __init__(self) -> None:
        self.settled_at = -1  # `PartitionState.changed` after a cycle that decided nothing
        self.wakeup: int | None = None  # when such a cycle's model said time alone could change its decisions
        self.model: object | None = None
        # The leaves whose usage or waiting tasks the fold changed since the model last took them
        # (None: no model takes them): what a model's outcomes kept between cycles depend on.
        self.touched: set[str] | None = None
        # The nodes whose tasks or reservations the fold changed since the model last took them
        # (None: no model takes them): the only ones where room may have grown.
        self.nodes_touched: set[str] | None = None

    def touch(self, leaf: str) -> None:
        """The fold changed what `leaf` (and so each queue above it) holds or waits for."""
        if self.touched is not None:
            self.touched.add(leaf)

    def touch_node(self, node: str) -> None:
        """The fold changed what `node` holds or holds back."""
        if self.nodes_touched is not None:
            self.nodes_touched.add(node)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Kept)

    __hash__ = None  # type: ignore[assignment]  # mutable


class PartitionState(msgspec.Struct, kw_only=True):
    """A partition: its fields, but `kept`, are what snapshots keep."""

    name: str
    model: str  # the scheduling model's name, from the registry
    document: bytes = b"{}"  # the model's configuration as applied, as JSON ({}: its default)
    config_seq: int = 0  # the log position of the `config.applied` that set it (0: none yet)
    config_source: str = ""  # where that one came from (its `source`; "": not said, a shim)
    config_from: dict[str, str] = {}  # each source's last configuration, by its digest: what a `--config` file applied to this log
    settings: Any = None  # the model's partition-wide settings, parsed from `document`
    model_state: Any = None  # what the model keeps besides its configuration, if anything
    queues: dict[str, QueueState] = {}
    nodes: dict[str, NodeState] = {}
    apps: dict[str, AppState] = {}
    tasks: dict[str, TaskState] = {}
    priority_classes: dict[str, PriorityClass] = {}
    defined_classes: dict[str, PriorityClass] = {}  # priority classes the configuration defines
    aliases: dict[str, str] = {}  # names that stand for a leaf queue (Kueue's LocalQueues)
    words: Words = Words()  # the model's words for its things, in refusals
    capacity: dict[str, int] = {}  # schedulable nodes only
    pending_count: int = 0
    last_tick: int = 0
    changed: int = 0  # the log position of the last record that changed the partition (ticks aside)
    resume: dict[str, str] = {}  # the last tick's `resume`: where the phases of a cut cycle began
    kept: Kept = msgspec.field(default_factory=Kept)

    def applied_config(self) -> dict[str, Any] | list[Any]:
        """The configuration in force, as the `config` of the `config.applied` that set it."""
        config: dict[str, Any] | list[Any] = msgspec.json.decode(self.document)  # encoded from such a `config`
        return config

    def submitted_for(self, decision: Decision) -> int | None:
        """When what `decision` is for was submitted (received), while it is known: the task it
        places, preempts for, blocks or unreserves; the application it admits, or evicts for."""
        match decision:
            case Preempted():
                found: TaskState | AppState | None = self.tasks.get(decision.preemptor)
            case Allocated() | Blocked() | Unreserved():
                found = self.tasks.get(decision.task)
            case Admitted():
                found = self.apps.get(decision.app)
            case Evicted() if decision.preemptor is not None:
                found = self.apps.get(decision.preemptor)
            case _:
                found = None
        return found.submitted_at if found is not None else None


class ClusterState(msgspec.Struct, kw_only=True):
    """All partitions, as of log position `seq`. `log_id` names the log, for decision ids."""

    log_id: str = "log"
    seq: int = 0
    partitions: dict[str, PartitionState] = {}
