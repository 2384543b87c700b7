"""The fold: `Projection.apply(state, record)` updates the cluster state with one log record.

Every handler checks first and changes state second, so an event that cannot apply raises
`Rejected` with a reason and leaves the state exactly as it was. Decisions are folded like any
other event: allocations bind tasks, preemptions mark victims and reserve nodes. What belongs to
a scheduling model (its configuration, its own decisions, its state) the fold asks of the model,
from the registry it was given (`scheduling` gives it the registry of every model).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, assert_never, cast

import msgspec

from preemptd.events import (
    MAX_TOTAL,
    Admitted,
    Allocated,
    AppFinished,
    AppSubmitted,
    Blocked,
    ConfigApplied,
    ConfigError,
    DecisionEvent,
    Evicted,
    LogEvent,
    NodeRemoved,
    NodeUpserted,
    PreemptdError,
    Preempted,
    PriorityClassDeleted,
    PriorityClassUpserted,
    QuotaEnforced,
    TaskBound,
    TaskReleased,
    TaskSubmitted,
    Tick,
    Unreserved,
    closest,
    encode,
    format_human,
    type_of,
)

from ._models import ModelFold, ParsedConfig, QueueConfig
from ._resources import add, shared_shape, subtract
from ._snapshot import SnapshotError, decode_snapshot, encode_snapshot
from ._state import (
    AppState,
    ClusterState,
    LogRecord,
    NodeState,
    PartitionState,
    PriorityClass,
    QueueState,
    TaskState,
)

__all__ = ["Folds", "Projection", "Rejected", "build_queues", "configured_nothing", "fold_nothing", "refuse_decision", "reservation_claim"]


class Rejected(PreemptdError):
    """An event that cannot apply to the current state; `reason` says why, for the shim author."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def fold_nothing(p: PartitionState, event: LogEvent) -> None:
    """`Folds.event` (or `notice`) of a model that keeps nothing of the events it is not the author of."""


def configured_nothing(p: PartitionState, received: int) -> None:
    """`Folds.config` of a model that keeps nothing of its configurations."""


def apps_changed_by(p: PartitionState, event: LogEvent) -> list[str]:
    """The applications whose tasks (their status, node or reservation) or settings `event`
    changes, asked before the fold applies it: what a model keeping its own view of them
    (`Folds.notice`) reads again. A configuration change is the model's to judge."""
    match event:
        case TaskSubmitted() | TaskBound():
            task = p.tasks.get(event.task)
            return [app for app in dict.fromkeys((event.app, task.app if task is not None else None)) if app is not None]
        case TaskReleased() | Allocated() | Unreserved():
            return _apps_of(p, (event.task,))
        case Preempted():
            return _apps_of(p, (event.preemptor, *(victim.task for victim in event.victims)))
        case QuotaEnforced():
            return _apps_of(p, tuple(victim.task for victim in event.victims))
        case NodeRemoved() if event.node in p.nodes:
            node = p.nodes[event.node]
            return _apps_of(p, (*node.tasks, *node.reservations))
        case AppSubmitted() | AppFinished():
            return [event.app]
        case _:
            return []


def _apps_of(p: PartitionState, task_ids: Iterable[str]) -> list[str]:
    """The applications of the known tasks of `task_ids`, each once, in their order."""
    return list(dict.fromkeys(p.tasks[t].app for t in task_ids if t in p.tasks))


def refuse_decision(p: PartitionState, decision: DecisionEvent) -> None:
    """`Folds.decision` of a model that makes no decision of its own."""
    raise Rejected(f"{type_of(decision)} is not produced by the {p.model} model")


@dataclass(frozen=True)
class Folds:
    """A model's part of the fold (`ModelFold.fold`).

    - `state_type`: a msgspec Struct holding what the model keeps per partition besides its
      configuration (made empty when a partition takes the model, kept in snapshots), or None.
    - `notice(partition, event)`: called with every record's event just before the generic fold
      applies it (so that it still sees, say, the application of a task being released), for
      what the model keeps between cycles outside its state (`Kept`): notes of what to read
      again. It changes nothing of the state: a record the generic fold then refuses leaves the
      state as it was, whatever the model noted.
    - `event(partition, event)`: the model's fold of an event the generic fold accepted, for
      what it keeps in its state: it runs only once the record is in, so a refusal never leaves
      half of it folded; only for the kinds of event in `events` (a configuration's fold is
      `config`), so that the others cost the fold nothing.
    - `decision(partition, decision)`: fold a decision type the generic fold leaves to the
      model (Kueue's `decision.admitted` and `decision.evicted`); raises `Rejected` for
      decisions the model does not make, before it changes anything.
    - `config(partition, received)`: the model's fold of a configuration just applied to the
      partition (received at `received`, ms), for what it keeps of configurations (the quota
      timers).
    """

    state_type: type[msgspec.Struct] | None = None
    notice: Callable[[PartitionState, LogEvent], None] = fold_nothing
    event: Callable[[PartitionState, LogEvent], None] = fold_nothing
    events: tuple[type[LogEvent], ...] = ()
    decision: Callable[[PartitionState, DecisionEvent], None] = refuse_decision
    config: Callable[[PartitionState, int], None] = configured_nothing


class Projection:
    """The fold, with the models it asks about their configurations, states and decisions.
    `default` is the model of a partition before any `config.applied`, and of one that names
    no model."""

    #: How many parsed configurations are kept, by content: a shim that sends its configuration
    #: again (at each of its starts, say) and a start that folds the log past a snapshot read
    #: each one once. Parsing is pure, so the cache changes no result.
    PARSED_KEPT = 8

    def __init__(self, models: Mapping[str, ModelFold], default: str, earlier_layouts: Mapping[str, Callable[[str, Any], Any]] | None = None) -> None:
        """`earlier_layouts`: the layouts of the models' states (`layout`) of earlier versions
        whose snapshots this one still reads, each with what makes a model's state of that
        layout (plain data, by the model's name) one of this layout."""
        self.models = models
        self.default = default
        self.earlier_layouts = earlier_layouts or {}
        self._parsed: OrderedDict[tuple[object, str, bytes], ParsedConfig | ConfigError] = OrderedDict()

    def fold(self, records: Iterable[LogRecord], state: ClusterState | None = None) -> ClusterState:
        """Apply every record in order; records that were rejected live in dead letters, not here."""
        state = state if state is not None else ClusterState()
        for record in records:
            self.apply(state, record)
        return state

    def apply(self, state: ClusterState, record: LogRecord) -> tuple[str, ...]:
        """Fold `record` into `state`; return warnings worth logging. Raises `Rejected`."""
        event = record.event
        p = state.partitions.get(event.partition)
        fresh = p is None
        if p is None:
            p = self.new_partition(event.partition)
        warnings: tuple[str, ...] = ()
        model = self.models[p.model]  # the one the record arrives under (a configuration may change it)
        if p.kept.model is not None:  # what a model keeps between cycles hears of the event first (nothing kept: nothing to tell)
            model.fold.notice(p, event)
        match event:  # the most frequent first: each case is an isinstance check
            case TaskSubmitted():
                _task_submitted(p, event, record)
            case TaskBound():
                _task_bound(p, event, record)
            case Allocated():
                _allocated(p, event)
            case TaskReleased():
                _remove_task(p, _task(p, event.task))
            case Tick():
                p.last_tick = event.ts
                p.resume = event.resume or {}
            case Blocked():
                _task(p, event.task).blocked = event.reasons
            case Preempted():
                _preempted(p, event)
            case QuotaEnforced():
                _evict(p, _running_victims(p, event), None)
            case Admitted() | Evicted():
                self.models[p.model].fold.decision(p, event)
            case Unreserved():
                _drop_reservation(p, _task(p, event.task))
            case NodeUpserted():
                _node_upserted(p, event)
            case NodeRemoved():
                _node_removed(p, event)
            case AppSubmitted():
                _app_submitted(p, event, record)
            case AppFinished():
                _app_finished(p, event)
            case ConfigApplied():
                warnings = self._config_applied(p, event, record)
            case PriorityClassUpserted():
                _priority_class_upserted(p, event)
            case PriorityClassDeleted():
                _priority_class_deleted(p, event)
            case _:
                assert_never(event)
        if isinstance(event, model.fold.events):  # accepted: the model's own fold of the kinds it keeps anything of
            model.fold.event(p, event)
        if fresh:
            state.partitions[event.partition] = p
        if type(event) is not Tick:
            p.changed = record.seq  # something happened: the next cycle runs (see `scheduling.run_cycle`)
        state.seq = record.seq
        return warnings

    def model(self, name: str | msgspec.UnsetType | None) -> ModelFold:
        """The model called `name` (left out: the default one); `ConfigError` if there is none."""
        model = self.models.get(self.default if name is None or name is msgspec.UNSET else name)
        if model is None:
            raise ConfigError(f"model {name!r} is not supported by this version (supported: {', '.join(sorted(self.models))})")
        return model

    def new_partition(self, name: str) -> PartitionState:
        """A partition before any `config.applied`: the default model, configured by default."""
        model = self.models[self.default]
        partition = PartitionState(name=name, model=model.name)
        _configure(partition, model, b"{}", model.parse_config({}, name))
        return partition

    @property
    def layout(self) -> str:
        """A fingerprint of every model's own state type: snapshots hold states of this shape."""
        types = {name: msgspec.json.schema(model.fold.state_type) for name, model in sorted(self.models.items()) if model.fold.state_type}
        return hashlib.sha256(msgspec.json.encode(types)).hexdigest()[:16] if types else ""

    def snapshot(self, state: ClusterState) -> bytes:
        """The whole state as bytes, for `restore`."""
        # A bytearray (bytes() would copy tens of MB), written by the store as bytes are; cast
        # while the daemon's store is typed for bytes only.
        return cast(bytes, encode_snapshot(state, self.layout))

    def restore(self, data: bytes) -> ClusterState:
        """The state a snapshot holds; each model's parts are rebuilt from the configuration
        the partition applied. Raises `SnapshotError`, and the caller folds the log instead."""
        state, taken = decode_snapshot(data, self.layout, self.earlier_layouts)
        for p in state.partitions.values():
            try:
                if taken != self.layout:  # a snapshot of an earlier version's states
                    p.model_state = self.earlier_layouts[taken](p.model, p.model_state)
                self._give_back(p)
            except (ConfigError, msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise SnapshotError(f"partition {p.name}: {exc}") from None
        return state

    def _give_back(self, p: PartitionState) -> None:
        """Make the model's parts of a restored partition the model's own again."""
        model = self.model(p.model)
        parsed = self.parsed(model, p.document, p.name)
        queues = list(parsed.root.walk())
        if [queue.path for queue in queues] != list(p.queues):
            raise SnapshotError(f"partition {p.name}: its configuration no longer gives the queues it holds")
        for queue in queues:
            p.queues[queue.path].props = queue.props
        p.settings, p.aliases, p.defined_classes, p.words = parsed.settings, parsed.aliases, parsed.priority_classes, parsed.words
        for task in p.tasks.values():  # a snapshot holds a copy per task
            task.resources = shared_shape(task.resources)
        p.model_state = msgspec.convert(p.model_state, model.fold.state_type) if model.fold.state_type else None

    def parsed(self, model: ModelFold, document: bytes, partition: str) -> ParsedConfig:
        """`model`'s reading of the configuration `document` (JSON bytes) for `partition`, parsed
        once per content among the last `PARSED_KEPT`. Raises `ConfigError` as the model does."""
        key = _parse_key(model, document, partition)
        found = self._parsed.get(key)
        if found is None:
            found = _read(model, document, partition)
        self.remember(ConfigReading(key, found))
        if isinstance(found, ConfigError):
            raise found.with_traceback(None)  # the same refusal, without the tracebacks of earlier raises
        return found

    def read(self, event: ConfigApplied) -> ConfigReading | None:
        """`event`'s configuration read for its partition, as `apply` will need it, without
        touching what the projection keeps: the daemon reads off its event loop (a
        configuration's YAML may take a moment) and hands the reading over with `remember`.
        None if the event names a model this version lacks (`apply` says so)."""
        try:
            model = self.model(event.model)
        except ConfigError:
            return None
        document = encode(event.config)
        return ConfigReading(_parse_key(model, document, event.partition), _read(model, document, event.partition))

    def remember(self, reading: ConfigReading) -> None:
        """Keep `reading` as the latest of the `PARSED_KEPT` parsed configurations."""
        self._parsed[reading.key] = reading.found
        self._parsed.move_to_end(reading.key)
        if len(self._parsed) > self.PARSED_KEPT:
            self._parsed.popitem(last=False)

    def _config_applied(self, p: PartitionState, event: ConfigApplied, record: LogRecord) -> tuple[str, ...]:
        try:
            model = self.model(event.model)
        except ConfigError as exc:
            raise Rejected(str(exc)) from None
        document = encode(event.config)  # once: the parse cache's key and what the partition keeps
        if p.config_seq and p.model == model.name and p.document == document:  # the same again: only where it came from is news
            _provenance(p, event, record.seq)
            return ()
        try:
            parsed = self.parsed(model, document, p.name)
        except ConfigError as exc:
            raise Rejected(f"configuration refused, the previous one stays: {exc}") from None
        except Exception as exc:  # a model's bug: reading changed nothing yet, so no state to rebuild
            raise Rejected(
                f"configuration refused, the previous one stays: the {model.name} model failed to read it ({type(exc).__name__}: {exc}); please report it"
            ) from None
        _configure(p, model, document, parsed)
        _provenance(p, event, record.seq)
        model.fold.config(p, record.received)
        return parsed.warnings


@dataclass(frozen=True)
class ConfigReading:
    """A configuration as its model read it (or refused it), by what it was read from."""

    key: tuple[object, str, bytes]
    found: ParsedConfig | ConfigError


def _provenance(p: PartitionState, event: ConfigApplied, seq: int) -> None:
    """Which `config.applied` set the configuration in force, and from where; a source that
    says its digest is remembered with it (a daemon's `--config` file: see `config_from`)."""
    p.config_seq, p.config_source = seq, event.source or ""
    if event.source and event.digest:
        p.config_from[event.source] = event.digest


def _parse_key(model: ModelFold, document: bytes, partition: str) -> tuple[object, str, bytes]:
    return (model.parse_config, partition, hashlib.sha256(document).digest())  # the reader itself: a model replaced under its name reads again


def _read(model: ModelFold, document: bytes, partition: str) -> ParsedConfig | ConfigError:
    try:
        return model.parse_config(msgspec.json.decode(document), partition)
    except ConfigError as exc:
        return exc


# -- configuration -------------------------------------------------------------------------


def build_queues(root: QueueConfig) -> dict[str, QueueState]:
    """Empty queue states for the tree under `root`, parents before children."""
    queues: dict[str, QueueState] = {}

    def visit(queue: QueueConfig, parent_lineage: list[str]) -> None:
        lineage = [queue.path, *parent_lineage]
        queues[queue.path] = QueueState(
            path=queue.path,
            lineage=lineage,
            children=[child.path for child in queue.children],
            leaf=queue.leaf,
            guaranteed=dict(queue.guaranteed.amounts),
            max=dict(queue.max.amounts) if queue.max is not None else None,
            props=queue.props,
        )
        for child in queue.children:
            visit(child, lineage)

    visit(root, [])
    return queues


def _configure(p: PartitionState, model: ModelFold, document: bytes, parsed: ParsedConfig) -> None:
    """Give the partition `model` configured by `document` (its JSON); its tasks are counted again in the
    new queue tree. Raises `Rejected` (changing nothing) if a queue in use would go."""
    queues = build_queues(parsed.root)
    for app in p.apps.values():
        if app.queue not in queues or not queues[app.queue].leaf:
            raise Rejected(
                f"configuration refused, the previous one stays: {p.words.queue} {app.queue} is used by {p.words.application} "
                f"{app.id} ({len(app.tasks)} tasks) and would be removed or turned into a parent"
            )
    if p.model != model.name or p.model_state is None:
        p.model_state = model.fold.state_type() if model.fold.state_type else None
    p.model, p.document, p.settings, p.queues = model.name, document, parsed.settings, queues
    p.aliases, p.defined_classes, p.words = dict(parsed.aliases), dict(parsed.priority_classes), parsed.words
    p.pending_count = 0  # counted again below, with every queue aggregate
    for task in p.tasks.values():
        _count_task(p, task, +1)
    for task in p.tasks.values():
        if task.reserved_node is not None:
            _count_reservation_in_queues(p, task, +1)


# -- priority classes and nodes ----------------------------------------------------------


def _priority_class_upserted(p: PartitionState, event: PriorityClassUpserted) -> None:
    p.priority_classes[event.name] = PriorityClass(
        name=event.name,
        value=event.value,
        may_preempt=event.preemption_policy != "Never",
        allow_preemption=event.allow_preemption,
    )


def _priority_class_deleted(p: PartitionState, event: PriorityClassDeleted) -> None:
    if event.name not in p.priority_classes:
        raise Rejected(f"unknown priority class {event.name!r}")
    del p.priority_classes[event.name]


def _node_upserted(p: PartitionState, event: NodeUpserted) -> None:
    node = p.nodes.get(event.node)
    before = node.capacity if node is not None and node.schedulable else {}
    after = event.capacity.amounts if event.schedulable else {}
    _check_total(after, (p.capacity,), before, lambda: (f"node {event.node!r}", f"the capacity of partition {p.name}"))
    if node is None:
        node = p.nodes[event.node] = NodeState(name=event.node, capacity={}, schedulable=False)
    if node.schedulable:
        subtract(p.capacity, node.capacity)
    p.kept.touch_node(node.name)
    node.capacity = dict(event.capacity.amounts)
    node.labels = dict(event.labels)
    node.schedulable = event.schedulable
    if node.schedulable:
        add(p.capacity, node.capacity)


def _node_removed(p: PartitionState, event: NodeRemoved) -> None:
    node = _node(p, event.node)
    for task_id in list(node.reservations):
        _drop_reservation(p, p.tasks[task_id])
    for task_id in list(node.tasks):
        _remove_task(p, p.tasks[task_id])
    if node.schedulable:
        subtract(p.capacity, node.capacity)
    del p.nodes[event.node]


# -- applications and tasks ----------------------------------------------------------------


def _app_submitted(p: PartitionState, event: AppSubmitted, record: LogRecord) -> None:
    if event.app in p.apps:
        raise Rejected(f"{p.words.application} {event.app!r} already exists (in {p.apps[event.app].queue})")
    queue = _leaf(p, event.queue)
    priority, may_preempt, allow = _priority(p, event.priority, event.priority_class, None)
    p.apps[event.app] = AppState(
        id=event.app,
        queue=queue.path,
        submitted_at=record.received,
        seq=record.seq,
        priority=priority,
        may_preempt=may_preempt,
        allow_preemption=allow,
        min_available=event.min_available,
        priority_class=event.priority_class,
        namespace=event.namespace,
        alias=event.queue if event.queue != queue.path else None,
    )


def _app_finished(p: PartitionState, event: AppFinished) -> None:
    app = p.apps.get(event.app)
    if app is None:
        raise Rejected(f"unknown {p.words.application} {event.app!r}")
    for task_id in list(app.tasks):
        _remove_task(p, p.tasks[task_id])
    del p.apps[event.app]


def _task_submitted(p: PartitionState, event: TaskSubmitted, record: LogRecord) -> None:
    _add_task(p, *_new_task(p, event, record))


def _task_bound(p: PartitionState, event: TaskBound, record: LogRecord) -> None:
    node = _node(p, event.node)
    task = p.tasks.get(event.task)
    if task is None:
        task, app = _new_task(p, event, record)
        task.status, task.node, task.bound_at = "running", node.name, record.received
        _add_task(p, task, app)
        _count_on_node(p, task, +1)
        return
    if task.status != "pending":
        if task.node != node.name:
            _move_task(p, task, node)
        return
    _drop_reservation(p, task)
    _start_task(p, task, node, record.received)


def _new_task(p: PartitionState, event: TaskSubmitted | TaskBound, record: LogRecord) -> tuple[TaskState, AppState]:
    if event.task in p.tasks:
        raise Rejected(f"task {event.task!r} already exists ({p.tasks[event.task].status} in {p.tasks[event.task].queue})")
    if event.app is None or event.resources is None:  # a task.bound may leave them out, for a task preemptd has seen
        raise Rejected(f"task.bound for unknown task {event.task!r} must carry `app` and `resources` to describe it")
    app = _app_for(p, event, event.app, record)
    root = p.queues[p.queues[app.queue].lineage[-1]]
    _check_total(
        event.resources.amounts,
        (root.allocated, root.pending),
        {},
        lambda: (f"task {event.task!r}", f"what the tasks of partition {p.name} hold and ask"),
    )
    if isinstance(event, TaskSubmitted):  # a bound task runs whatever the max says: record it
        _check_within_max(p, p.queues[app.queue], event.task, event.resources.amounts)
    if event.required_node is not None and event.required_node not in p.nodes:
        raise Rejected(f"task {event.task!r} requires node {event.required_node!r}, which is unknown")
    priority, may_preempt, allow = _priority(p, event.priority, event.priority_class, app)
    task = TaskState(
        id=event.task,
        app=app.id,
        queue=app.queue,
        resources=shared_shape(event.resources.amounts),
        priority=priority,
        may_preempt=may_preempt if event.preemption_policy is None else event.preemption_policy != "Never",
        allow_preemption=allow if event.allow_preemption is None else event.allow_preemption,
        originator=event.originator,
        required_node=event.required_node,
        task_priority=event.task_priority,
        preemptable=event.preemptable,
        priority_class=event.priority_class or app.priority_class,
        namespace=event.namespace or app.namespace,
        submitted_at=record.received,
        seq=record.seq,
    )
    return task, app


def _app_for(p: PartitionState, event: TaskSubmitted | TaskBound, app_id: str, record: LogRecord) -> AppState:
    """The task's application, `app_id`; a task naming a queue creates its application there."""
    app = p.apps.get(app_id)
    if app is None:
        if event.queue is None:
            raise Rejected(f"unknown {p.words.application} {app_id!r}: publish app.submitted first, or set `queue` on the task")
        queue = _leaf(p, event.queue)
        return AppState(id=app_id, queue=queue.path, submitted_at=record.received, seq=record.seq, alias=event.queue if event.queue != queue.path else None)
    if event.queue is not None and p.aliases.get(event.queue, event.queue) != app.queue:
        raise Rejected(f"task {event.task!r} names queue {event.queue} but its {p.words.application} {app.id!r} is in {app.queue}")
    return app


def _check_total(after: Mapping[str, int], totals: tuple[dict[str, int], ...], before: dict[str, int], names: Callable[[], tuple[str, str]]) -> None:
    """Refuse a change (from `before` to `after`) that would bring a sum the state keeps, the
    sum of `totals`, beyond `MAX_TOTAL`: each aggregate (capacity, a queue's or a node's usage)
    is at most one of these sums. `names` says who changes what, for the reason only."""
    for name, amount in after.items():
        total = amount - before.get(name, 0)
        for held in totals:
            total += held.get(name, 0)
        if total > MAX_TOTAL:
            who, what = names()
            raise Rejected(f"{who} would bring {what} in {name} to {total:,}; the limit is {MAX_TOTAL:,} (2^62)")


def _check_within_max(p: PartitionState, queue: QueueState, task_id: str, ask: dict[str, int]) -> None:
    for path in queue.lineage:
        limit = p.queues[path].max
        for name, amount in ask.items():
            if limit is not None and name in limit and amount > limit[name]:
                raise Rejected(
                    f"task {task_id!r} asks for {name} {format_human(name, amount)}, more than the max of "
                    f"{path} ({format_human(name, limit[name])}): it could never run"
                )


def _priority(p: PartitionState, value: int | None, class_name: str | None, app: AppState | None) -> tuple[int, bool, bool]:
    """(priority, may trigger preemption, may be preempted) from a value, a class or the app."""
    if class_name is not None:
        cls = p.defined_classes.get(class_name) or p.priority_classes.get(class_name)
        if cls is None:
            raise Rejected(_unknown_class(p, class_name))
        return (cls.value if value is None else value), cls.may_preempt, cls.allow_preemption
    if app is not None:
        return (app.priority if value is None else value), app.may_preempt, app.allow_preemption
    return (0 if value is None else value), True, True


def _add_task(p: PartitionState, task: TaskState, app: AppState) -> None:
    p.apps.setdefault(app.id, app).tasks[task.id] = None
    p.tasks[task.id] = task
    _count_task(p, task, +1)


def _count_task(p: PartitionState, task: TaskState, sign: int) -> None:
    """Add (`sign` +1) or take away (-1) the task's share of every aggregate it belongs to."""
    change = add if sign > 0 else subtract
    queues = p.queues
    queue = queues[task.queue]
    p.kept.touch(task.queue)
    if task.status == "pending":
        p.pending_count += sign
        queue.waiting += sign
        for path in queue.lineage:
            change(queues[path].pending, task.resources)
        return
    _toggle(queue.running, task.id, sign)
    preempting = task.status == "preempting"
    for path in queue.lineage:
        q = queues[path]
        change(q.allocated, task.resources)
        if preempting:
            change(q.preempting, task.resources)


def _toggle(members: dict[str, None], key: str, sign: int) -> None:
    if sign > 0:
        members[key] = None
    else:
        members.pop(key, None)


def _count_on_node(p: PartitionState, task: TaskState, sign: int) -> None:
    """Add or take away a bound task's share of its node's aggregates."""
    if task.node is None:
        return
    node = p.nodes[task.node]
    p.kept.touch_node(node.name)
    change = add if sign > 0 else subtract
    change(node.allocated, task.resources)
    if task.status == "preempting":
        change(node.preempting, task.resources)
    _toggle(node.tasks, task.id, sign)


def _start_task(p: PartitionState, task: TaskState, node: NodeState, now: int) -> None:
    """A pending task runs on `node`: its ask moves from pending to allocated along its lineage."""
    queues = p.queues
    queue = queues[task.queue]
    p.kept.touch(task.queue)
    p.pending_count -= 1
    queue.waiting -= 1
    queue.running[task.id] = None
    for path in queue.lineage:
        q = queues[path]
        subtract(q.pending, task.resources)
        add(q.allocated, task.resources)
    task.status, task.node, task.bound_at = "running", node.name, now
    _count_on_node(p, task, +1)


def _move_task(p: PartitionState, task: TaskState, node: NodeState) -> None:
    preemptor = _waiting_preemptor(p, task)
    if preemptor is not None:
        _count_reservation(p, preemptor, -1)
    _count_on_node(p, task, -1)
    task.node = node.name
    _count_on_node(p, task, +1)
    if preemptor is not None:
        _count_reservation(p, preemptor, +1)


def _remove_task(p: PartitionState, task: TaskState) -> None:
    _drop_reservation(p, task)
    preemptor = _waiting_preemptor(p, task) if task.preempted_by is not None else None
    if preemptor is not None:  # one victim fewer in the way: the preemptor's claim grows
        _count_reservation(p, preemptor, -1)
        preemptor.victims = tuple(victim for victim in preemptor.victims if victim != task.id)
    _count_task(p, task, -1)
    _count_on_node(p, task, -1)
    if preemptor is not None:
        _count_reservation(p, preemptor, +1)
    app = p.apps[task.app]
    app.tasks.pop(task.id, None)
    if not app.tasks:  # nothing left: a model's hold on it ends (a workload requeued later waits for admission)
        app.incarnation += 1
    del p.tasks[task.id]


def _waiting_preemptor(p: PartitionState, victim: TaskState) -> TaskState | None:
    """The reserved preemptor `victim` still makes room for, if any."""
    preemptor = p.tasks.get(victim.preempted_by) if victim.preempted_by else None
    if preemptor is not None and victim.id in preemptor.victims:
        return preemptor
    return None


# -- decisions -----------------------------------------------------------------------------


def _allocated(p: PartitionState, event: Allocated) -> None:
    task, node = _task(p, event.task), _node(p, event.node)
    if task.status != "pending":
        raise Rejected(f"decision.allocated for task {task.id!r}, which is {task.status}")
    _drop_reservation(p, task)
    _start_task(p, task, node, event.ts)


def _preempted(p: PartitionState, event: Preempted) -> None:
    task = _task(p, event.preemptor)
    victims = _running_victims(p, event)
    if task.status != "pending":
        raise Rejected(f"decision.preempted for preemptor {task.id!r}, which is {task.status}")
    node = _node(p, event.node) if event.node is not None else None
    _evict(p, victims, task.id)
    _drop_reservation(p, task)
    if node is not None:
        task.reserved_node, task.victims = node.name, tuple(victim.id for victim in victims)
        _count_reservation(p, task, +1)


def _running_victims(p: PartitionState, event: Preempted | QuotaEnforced) -> list[TaskState]:
    """The tasks a decision evicts; `Rejected` unless each is running."""
    victims = [_task(p, victim.task) for victim in event.victims]
    for victim in victims:
        if victim.status != "running":
            raise Rejected(f"{type_of(event)} names victim {victim.id!r}, which is {victim.status}")
    return victims


def _evict(p: PartitionState, victims: list[TaskState], preemptor: str | None) -> None:
    """The victims of a decision are being evicted (for `preemptor`, or for a quota: None)."""
    for victim in victims:
        _count_task(p, victim, -1)
        _count_on_node(p, victim, -1)
        victim.status, victim.preempted_by = "preempting", preemptor
        _count_task(p, victim, +1)
        _count_on_node(p, victim, +1)


def _drop_reservation(p: PartitionState, task: TaskState) -> None:
    if task.reserved_node is None:
        return
    _count_reservation(p, task, -1)
    task.reserved_node, task.victims = None, ()


def _count_reservation(p: PartitionState, task: TaskState, sign: int) -> None:
    """Add or take away a reservation's share of its node's and its queues' aggregates."""
    assert task.reserved_node is not None, task.id  # callers count reserved tasks only
    node = p.nodes[task.reserved_node]
    p.kept.touch_node(node.name)
    change = add if sign > 0 else subtract
    change(node.reserved, task.resources)
    change(node.claimed, reservation_claim(p, task))
    _toggle(node.reservations, task.id, sign)
    _count_reservation_in_queues(p, task, sign)


def _count_reservation_in_queues(p: PartitionState, task: TaskState, sign: int) -> None:
    change = add if sign > 0 else subtract
    p.kept.touch(task.queue)
    for path in p.queues[task.queue].lineage:
        queue = p.queues[path]
        change(queue.reserved, task.resources)
        change(queue.claimed, reservation_claim(p, task, path))


def reservation_claim(p: PartitionState, task: TaskState, within: str | None = None) -> dict[str, int]:
    """What a reserved task still needs beyond its victims in place (those under queue
    `within`, or all of them for the node): the room it takes from what is free now."""
    claim = dict(task.resources)
    for victim_id in task.victims:
        victim = p.tasks[victim_id]
        if (victim.node == task.reserved_node) if within is None else (within in p.queues[victim.queue].lineage):
            for name, amount in victim.resources.items():
                if name in claim:
                    claim[name] -= amount
    return {name: amount for name, amount in claim.items() if amount > 0}


# -- lookups -------------------------------------------------------------------------------


def _task(p: PartitionState, task_id: str) -> TaskState:
    task = p.tasks.get(task_id)
    if task is None:
        raise Rejected(f"unknown task {task_id!r} in partition {p.name}")
    return task


def _node(p: PartitionState, name: str) -> NodeState:
    node = p.nodes.get(name)
    if node is None:
        raise Rejected(f"unknown node {name!r} in partition {p.name}: publish node.upserted first")
    return node


def _leaf(p: PartitionState, name: str) -> QueueState:
    """The leaf queue called `name`, or that `name` stands for (an alias)."""
    path = p.aliases.get(name, name)
    queue = p.queues.get(path)
    if queue is None:
        raise Rejected(_unknown_queue(p, name))
    if not queue.leaf:
        raise Rejected(f"{p.words.queue} {path} is a parent queue; tasks and {p.words.application}s go to leaf queues")
    return queue


def _unknown_queue(p: PartitionState, name: str) -> str:
    """In the model's words: a LocalQueue (`namespace/name`) among those of its namespace, else
    a queue among the leaves; with the one probably meant."""
    words = p.words
    if words.alias and "/" in name:
        namespace = name.split("/", 1)[0]
        same = [alias for alias in p.aliases if alias.startswith(f"{namespace}/")]
        near = closest(name, same or p.aliases)
        listed = (
            f"{words.alias}s in namespace {namespace}: {_listed(same)}"
            if same
            else f"no {words.alias} in namespace {namespace}; {words.alias}s: {_listed(list(p.aliases))}"
        )
        return f"unknown {words.alias} {name!r} in partition {p.name} ({listed}" + (f"; did you mean {near}?)" if near else ")")
    leaves = [q.path for q in p.queues.values() if q.leaf]
    near = closest(name, [*leaves, *p.aliases])
    also = f", or a {words.alias} as namespace/name" if words.alias else ""
    return f"unknown {words.queue} {name!r} in partition {p.name} ({words.queues}: {_listed(leaves)}{also}" + (f"; did you mean {near}?)" if near else ")")


def _unknown_class(p: PartitionState, name: str) -> str:
    known = sorted({*p.defined_classes, *p.priority_classes})
    near = closest(name, known)
    hint = f"did you mean {near}?" if near else (f"known: {_listed(known)}; {p.words.define_class}" if known else p.words.define_class)
    return f"unknown {p.words.priority_class} {name!r} ({hint})"


def _listed(names: list[str], shown: int = 10) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "") if names else "none"
