"""Volcano's configuration, as a user pastes it from a cluster, read into one `VolcanoConfig`.

A configuration is a list of Kubernetes objects (or `kind: List`s of them, or one object):

- Queues (`scheduling.volcano.sh/v1beta1`): `spec.weight`, `capability`, `deserved`,
  `guarantee.resource`, `reclaimable`, `priority`, `parent` (hierarchical queues), and
  `status.state` (a Closed queue takes no new jobs).
- The scheduler's configuration, as `volcano-scheduler.conf` holds it: a mapping with
  `actions` (Volcano's comma-separated string), `tiers` of `plugins` (each with its `enableX`
  switches and `arguments`) and `configurations` (arguments per action); or the ConfigMap
  that carries that file (`data: {volcano-scheduler.conf: "..."}`).

- PriorityClass objects, which jobs name as their `priority_class`.

Without a scheduler configuration, Volcano's default applies (`enqueue, allocate, backfill`
and its two default tiers), which preempts nothing: a note says so. A switch left out is on, as
Volcano loads it (`enableHierarchy` excepted). The queues `root` and `default` exist even when
not given, as Volcano creates them. Fields, actions and plugins Volcano does not have are
refused with the closest known one; those Volcano has and preemptd does not model are one note
each, saying what that means for decisions; what Volcano's admission webhook refuses (a weight
below 1, a deserved or guarantee above the capability) is refused with its reason.
"""

from __future__ import annotations

from typing import Any

import msgspec

from preemptd.events import MAX_DEPTH, ConfigError, QuantityError, closest, cut_text, format_duration, parse_quantity
from preemptd.projections import ParsedConfig, PartitionState, PriorityClass, QueueConfig, Words

from .._explain import counted
from .._kubernetes import (
    ANY,
    CONFIG_MAP,
    PRIORITY_KINDS,
    QUOTA_DELAY_ANNOTATION,
    VALUE,
    Kind,
    ObjectReader,
    Unmodelled,
    check_shape,
    choice,
    duration_annotation,
    integer,
    name_or_none,
    object_shape,
    shown,
    unique,
)

__all__ = [
    "config_of",
    "ACTIONS",
    "PLUGINS",
    "QUOTA_DELAY_ANNOTATION",
    "WORDS",
    "claims",
    "describe",
    "parse_config",
    "parse_objects",
    "sharing_plugin",
    "Plugin",
    "Queue",
    "SchedulerConf",
    "VolcanoConfig",
]

_CONF_FILE = "volcano-scheduler.conf"

#: The actions preemptd runs, in the order a configuration lists them.
ACTIONS = ("enqueue", "allocate", "preempt", "reclaim", "backfill")
#: The plugins preemptd models.
PLUGINS = ("priority", "gang", "conformance", "drf", "proportion", "capacity", "predicates")  # hdrf is not modelled
#: Every switch Volcano's plugin options have (each on unless set false, `enableHierarchy` off).
SWITCHES = (
    "enableJobOrder", "enableNamespaceOrder", "enableHierarchy", "enableJobReady", "enableJobPipelined",
    "enableTaskOrder", "enablePreemptable", "enableReclaimable", "enablePreemptive", "enableQueueOrder",
    "enableClusterOrder", "enablePredicate", "enableBestNode", "enableNodeOrder", "enableTargetJob",
    "enableReservedNodes", "enableJobEnqueued", "enabledVictim", "enableJobStarving", "enabledOverused",
    "enabledAllocatable", "enableSubJobReady", "enableSubJobPipelined", "enableSubJobOrder", "enableHyperNodeOrder",
)  # fmt: skip
_OFF_BY_DEFAULT = frozenset({"enableHierarchy"})
#: The arguments preemptd reads, per plugin and per action; others are listed as ignored.
PLUGIN_ARGUMENTS: dict[str, set[str]] = {"capacity": {"ancestorReclaimLevel"}}  # a non-negative integer
ACTION_ARGUMENTS: dict[str, set[str]] = {}

Resources = dict[str, int]


class Queue(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    weight: int = 1
    capability: Resources | None = None
    deserved: Resources | None = None
    guarantee: Resources | None = None
    reclaimable: bool = True
    priority: int = 0
    parent: str | None = None  # None: under root
    closed: bool = False
    implicit: bool = False  # root or default, not given
    quota_preemption_delay: int = 0  # ms a lowered capability waits before it is enforced; 0: never (preemptd's extension)


class Plugin(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    switches: dict[str, bool] = {}  # those set; `enabled()` answers for the others
    arguments: dict[str, Any] = {}

    def enabled(self, switch: str) -> bool:
        """Whether `switch` is on: as set, else Volcano's default."""
        return self.switches.get(switch, switch not in _OFF_BY_DEFAULT)


class SchedulerConf(msgspec.Struct, frozen=True, kw_only=True):
    actions: tuple[str, ...]
    tiers: tuple[tuple[Plugin, ...], ...]
    configurations: dict[str, dict[str, Any]] = {}  # action -> its arguments


#: Volcano's own default, used when no scheduler configuration is given.
DEFAULT_CONF = SchedulerConf(
    actions=("enqueue", "allocate", "backfill"),
    tiers=(
        (Plugin(name="priority"), Plugin(name="gang", switches={"enablePreemptable": False}), Plugin(name="conformance")),
        (
            Plugin(name="drf", switches={"enablePreemptable": False}),
            Plugin(name="predicates"),
            Plugin(name="proportion"),
        ),  # and overcommit, nodeorder, binpack, not modelled
    ),
)


class VolcanoConfig(msgspec.Struct, frozen=True, kw_only=True):
    queues: dict[str, Queue] = {}
    scheduler: SchedulerConf = DEFAULT_CONF
    priority_classes: dict[str, PriorityClass] = {}


def config_of(p: PartitionState) -> VolcanoConfig:
    """The volcano model's settings of `p` (`ParsedConfig.settings`), typed."""
    settings = p.settings
    assert isinstance(settings, VolcanoConfig), f"partition {p.name} holds no volcano settings: {type(settings).__name__}"
    return settings


def sharing_plugin(conf: SchedulerConf) -> Plugin | None:
    """The plugin that shares the cluster among queues: capacity if the tiers name it, else
    proportion, else none (no queue deserves anything)."""
    plugins = {plugin.name: plugin for tier in conf.tiers for plugin in tier}
    return plugins.get("capacity") or plugins.get("proportion")


def parse_objects(document: Any) -> tuple[VolcanoConfig, tuple[str, ...]]:
    """The configuration the objects in `document` make, and notes worth reporting once."""
    reader = _Reader()
    reader.read_all(document)
    return reader.config(), tuple(reader.notes)


class _Reader(ObjectReader):
    model = "Volcano"
    annotations = frozenset({QUOTA_DELAY_ANNOTATION})
    expected = "Volcano objects (Queue, PriorityClass, and the scheduler configuration or its ConfigMap)"
    config_file = "volcano-scheduler.conf"
    config_file_is = "the scheduler configuration"

    def __init__(self) -> None:
        super().__init__()
        self.queues: dict[str, Queue] = {}
        self.scheduler: SchedulerConf | None = None

    def kindless(self, item: dict[str, Any], position: int) -> None:
        if not {"actions", "tiers", "configurations"} & set(item):
            super().kindless(item, position)
        self._scheduler(item, "the scheduler configuration")

    def config(self) -> VolcanoConfig:
        queues = dict(self.queues)
        for implicit in ("root", "default"):
            queues.setdefault(implicit, Queue(name=implicit, implicit=True))
        for queue in queues.values():
            if queue.parent is not None and queue.parent not in queues:
                near = closest(queue.parent, queues)
                raise ConfigError(f"Queue {queue.name}: its parent queue {queue.parent} does not exist" + (f" (did you mean {near}?)" if near else ""))
        _depths(queues)
        if self.scheduler is None:
            self.notes.add(
                "no scheduler configuration (volcano-scheduler.conf or its ConfigMap): Volcano's default applies, "
                f"actions {', '.join(DEFAULT_CONF.actions)}: no preempt or reclaim action, nothing will be preempted"
            )
        return VolcanoConfig(
            queues=dict(sorted(queues.items())), scheduler=self.scheduler or DEFAULT_CONF, priority_classes=dict(sorted(self.priority_classes.items()))
        )

    def queue(self, name: str, item: dict[str, Any], where: str) -> None:
        unique(name, self.queues, "Queue")
        spec, status = item.get("spec") or {}, item.get("status") or {}
        weight = spec.get("weight", 1)
        if not isinstance(weight, int) or isinstance(weight, bool) or weight < 1:
            raise ConfigError(f"{where}: queue weight must be a positive integer, got {shown(weight)}")
        queue = Queue(
            name=name,
            weight=weight,
            capability=_resources(spec.get("capability"), f"{where}: spec.capability"),
            deserved=_resources(spec.get("deserved"), f"{where}: spec.deserved"),
            guarantee=_resources((spec.get("guarantee") or {}).get("resource"), f"{where}: spec.guarantee.resource"),
            reclaimable=_flag(spec.get("reclaimable", True), f"{where}: spec.reclaimable"),
            priority=integer(spec.get("priority"), f"{where}: spec.priority"),
            parent=None if name == "root" else name_or_none(spec.get("parent"), f"{where}: spec.parent"),
            closed=choice(status.get("state") if isinstance(status, dict) else None, where, "status.state", ("Open", "Closed", "Closing", "Unknown"))
            in ("Closed", "Closing"),
            quota_preemption_delay=duration_annotation(item, QUOTA_DELAY_ANNOTATION, where),
        )
        for bound in ("deserved", "guarantee"):
            _within_capability(queue, bound, where)
        if queue.quota_preemption_delay and queue.capability is None:
            self.notes.add(f"{where}: annotation {QUOTA_DELAY_ANNOTATION} on a queue without spec.capability: there is nothing to enforce")
        self.queues[name] = queue

    def read_config_file(self, loaded: Any, where: str) -> None:
        self._scheduler(loaded, where)

    def _scheduler(self, conf: Any, where: str) -> None:
        if self.scheduler is not None:
            raise ConfigError(f"{where}: a second scheduler configuration; give one")
        if not isinstance(conf, dict):
            raise ConfigError(f"{where} must be a mapping (actions, tiers, configurations), got {shown(conf)}")
        check_shape(conf, _CONF, "scheduler configuration", where, self.notes)
        actions = self._actions(conf.get("actions"), where)
        tiers = tuple(self._tier(tier, f"{where}: tiers[{i}]") for i, tier in enumerate(conf.get("tiers") or []))
        configurations: dict[str, dict[str, Any]] = {}
        for i, entry in enumerate(conf.get("configurations") or []):
            action = name_or_none(entry.get("name"), f"{where}: configurations[{i}].name")
            if action is None:
                raise ConfigError(f"{where}: configurations[{i}].name is required")
            self._known(action, ACTIONS, _UNMODELLED_ACTIONS, "action", f"{where}: configurations[{i}].name")
            configurations[action] = self._arguments(entry.get("arguments"), f"action {action}", ACTION_ARGUMENTS.get(action, set()), where)
        self.scheduler = SchedulerConf(actions=actions, tiers=tuple(t for t in tiers if t), configurations=configurations)
        self._check_plugins_together(self.scheduler, where)

    def _check_plugins_together(self, conf: SchedulerConf, where: str) -> None:
        """What Volcano refuses of plugins together, refused with its reason; what it reads
        differently from preemptd, a note."""
        named = {plugin.name: plugin for tier in conf.tiers for plugin in tier}
        if "capacity" in named and "proportion" in named:
            raise ConfigError(f"{where}: the capacity and proportion plugins cannot be used together (Volcano: the two plugins are in conflict): keep one")
        for i, tier in enumerate(conf.tiers):
            names = {plugin.name: plugin for plugin in tier}
            if "proportion" in names and "drf" in names and names["drf"].enabled("enableHierarchy"):
                raise ConfigError(f"{where}: tiers[{i}]: proportion and drf with enableHierarchy conflict (Volcano refuses them in one tier)")
        if "drf" in named and named["drf"].enabled("enableHierarchy"):
            self.notes.add(f"not modelled: plugin drf: enableHierarchy (hierarchical DRF): {_UNMODELLED_PLUGINS['hdrf']}; drf orders and votes as without it")
        capacity = named.get("capacity")
        if capacity is not None and capacity.arguments.get("ancestorReclaimLevel") and not capacity.enabled("enableHierarchy"):
            self.notes.add("plugin capacity: ancestorReclaimLevel is read only with enableHierarchy: true (as Volcano): without it, no ancestor is checked")

    def _tier(self, tier: dict[str, Any], where: str) -> tuple[Plugin, ...]:
        plugins: list[Plugin] = []
        for i, plugin in enumerate(tier.get("plugins") or []):
            name = name_or_none(plugin.get("name"), f"{where}: plugins[{i}].name")
            if name is None:
                raise ConfigError(f"{where}: plugins[{i}].name is required")
            if not self._known(name, PLUGINS, _UNMODELLED_PLUGINS, "plugin", f"{where}: plugins[{i}].name"):
                continue
            switches = {key: _flag(value, f"{where}: plugin {name}: {key}") for key, value in plugin.items() if key in SWITCHES}
            arguments = self._arguments(plugin.get("arguments"), f"plugin {name}", PLUGIN_ARGUMENTS.get(name, set()), where)
            if "ancestorReclaimLevel" in arguments:
                level = arguments["ancestorReclaimLevel"]
                if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level <= MAX_DEPTH:
                    raise ConfigError(f"{where}: plugin {name}: ancestorReclaimLevel must be an integer from 0 to {MAX_DEPTH}, got {shown(level)}")
            plugins.append(Plugin(name=name, switches=switches, arguments=arguments))
        return tuple(plugins)

    def _actions(self, value: Any, where: str) -> tuple[str, ...]:
        if value is None:
            return DEFAULT_CONF.actions
        if not isinstance(value, str):
            raise ConfigError(
                f'{where}: actions must be Volcano\'s comma-separated string, such as "enqueue, allocate, preempt, reclaim, backfill"; got {shown(value)}'
            )
        actions: list[str] = []
        for action in (part.strip() for part in value.split(",")):
            if not action or not self._known(action, ACTIONS, _UNMODELLED_ACTIONS, "action", f"{where}: actions"):
                continue
            if action in actions:
                raise ConfigError(f"{where}: action {action} is listed twice")
            actions.append(action)
        return tuple(actions)

    def _known(self, name: str, modelled: tuple[str, ...], unmodelled: dict[str, str], what: str, where: str) -> bool:
        """Whether the `what` (action, plugin) `name` is modelled; a note if Volcano has it and
        preemptd does not model it; refused if Volcano does not have it either."""
        if name in modelled:
            return True
        if name in unmodelled:
            self.notes.add(f"not modelled: {what} {name}: {unmodelled[name]}")
            return False
        near = closest(name, [*modelled, *unmodelled])
        hint = f"did you mean {near}?" if near else f"Volcano's {what}s: {', '.join(sorted([*modelled, *unmodelled]))}"
        raise ConfigError(f"{where}: unknown {what} {shown(name)} ({hint})")

    def _arguments(self, value: Any, owner: str, known: set[str], where: str) -> dict[str, Any]:
        """`value`, a mapping of arguments: those preemptd reads; one close to those is refused
        as a misspelling, the others are a note each (arguments are free-form in Volcano)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: {owner} arguments must be a mapping, got {shown(value)}")
        for key in value:
            if key in known:
                continue
            near = closest(str(key), known)
            if near is not None:
                raise ConfigError(f"{where}: {owner}: unknown argument {shown(key)} (did you mean {near}?)")
            self.notes.add(f"not modelled: {owner} argument {cut_text(str(key), 100)}: preemptd does not read it")
        return {key: item for key, item in value.items() if key in known}


_PLUGIN = {"name": VALUE, "arguments": ANY, **dict.fromkeys(SWITCHES, VALUE)}
_CONF = {
    "actions": VALUE,
    "tiers": [{"plugins": [_PLUGIN]}],
    "configurations": [{"name": VALUE, "arguments": ANY}],
    "metrics": ANY,  # where the scheduler's metrics go: no bearing on decisions
}
_QUEUE = object_shape(
    spec={
        "weight": VALUE,
        "capability": ANY,
        "deserved": ANY,
        "guarantee": {"resource": ANY},
        "reclaimable": VALUE,
        "priority": VALUE,
        "parent": VALUE,
        "affinity": Unmodelled("node affinity does not restrict where the queue's tasks go: nodes are tried by name"),
        "type": Unmodelled("the queue type is not read"),
        "extendClusters": Unmodelled("jobs are not dispatched to other clusters"),
        "dequeueStrategy": Unmodelled("jobs leave the queue in Volcano's default order (priority, then gang, then age)"),
    }
)
_NODE_SCORING = "nodes are tried by name, not scored"
_UNMODELLED_PLUGINS = {
    "overcommit": "enqueue lets a job in against the queue's capability, without an overcommit factor",
    "binpack": _NODE_SCORING,
    "nodeorder": _NODE_SCORING,
    "numaaware": _NODE_SCORING,
    "usage": _NODE_SCORING,
    "resource-strategy-fit": _NODE_SCORING,
    "task-topology": _NODE_SCORING,
    "network-topology-aware": "network topology does not constrain placement or preemption",
    "nodegroup": "node groups do not restrict where a queue's tasks go",
    "sla": "jobs waiting past an SLA are not moved ahead",
    "tdm": "time-division multiplexed nodes are not modelled",
    "pdb": "PodDisruptionBudgets do not protect victims",
    "resourcequota": "namespace ResourceQuotas do not hold jobs back at enqueue",
    "extender": "no scheduler extender is called",
    "cdp": "cooldown protection does not spare recently started victims",
    "rescheduling": "nothing is evicted to rebalance nodes",
    "deviceshare": "shared devices (GPU sharing) are counted as whole resources",
    "hdrf": "hierarchical DRF is not modelled: jobs and queues are not ordered by hierarchical shares",
    "capacity-card": "card-based capacity is not modelled",
}
_UNMODELLED_ACTIONS = {
    "shuffle": "nothing is evicted to rebalance nodes",
    "gangpreempt": "gang-level preemption is not modelled: use preempt",
    "gangreclaim": "gang-level reclaim is not modelled: use reclaim",
}
_RUNTIME = "a {0} is a job: publish it as events (app.submitted with queue, priority_class and min_available; its pods as task.submitted), not configuration"

_Reader.kinds = {
    **PRIORITY_KINDS,
    "Queue": Kind("scheduling.volcano.sh", {"v1beta1": _QUEUE}, _Reader.queue),
    "ConfigMap": CONFIG_MAP,
    "PodGroup": Kind("scheduling.volcano.sh", {"v1beta1": object_shape(spec=ANY)}, refusal=_RUNTIME.format("PodGroup")),
    "Job": Kind("batch.volcano.sh", {"v1alpha1": object_shape(spec=ANY)}, refusal=_RUNTIME.format("Volcano Job")),
    "HyperNode": Kind("topology.volcano.sh", {"v1alpha1": object_shape(spec=ANY)}, meaning="network topology does not constrain placement or preemption"),
}


def claims(item: Any) -> bool:
    """Whether `item` is Volcano's: one of its objects, or the bare scheduler configuration."""
    return _Reader.claims(item) or (isinstance(item, dict) and "kind" not in item and bool({"actions", "tiers"} & set(item)))


def _depths(queues: dict[str, Queue]) -> dict[str, int]:
    """Each queue's depth below root; `ConfigError` for a cycle of parents or a tree deeper than
    events may nest. Each queue is walked up once (the depths found are kept)."""
    depth: dict[str, int] = {}
    for name in queues:
        path: list[str] = []
        on_path: set[str] = set()
        node: str | None = name
        while node is not None and node not in depth:
            if node in on_path:
                cycle = path[path.index(node) :]
                raise ConfigError(f"Queue {cycle[0]}: its parents make a cycle: {' -> '.join([*cycle, node])}")
            path.append(node)
            on_path.add(node)
            node = queues[node].parent
        below = -1 if node is None else depth[node]
        for step, queue in enumerate(reversed(path), 1):
            depth[queue] = below + step
            if depth[queue] > MAX_DEPTH:
                raise ConfigError(f"Queue {queue}: {depth[queue]} levels below root; the limit is {MAX_DEPTH}")
    return depth


def _resources(value: Any, where: str) -> Resources | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a mapping of resource names to quantities, got {shown(value)}")
    try:
        return {str(name): parse_quantity(str(name), amount) for name, amount in value.items()}
    except QuantityError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _within_capability(queue: Queue, bound: str, where: str) -> None:
    amounts, capability = getattr(queue, bound), queue.capability
    if amounts is None or capability is None:
        return
    for name, amount in amounts.items():
        if name in capability and amount > capability[name]:
            raise ConfigError(f"{where}: {bound} {name} must be less than or equal to capability {name}")


def _flag(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("true", "false"):  # a string, as an annotation or a hand-written conf gives it
        return value == "true"
    raise ConfigError(f"{where} must be true or false, got {shown(value)}")


def parse_config(document: Any, partition: str) -> ParsedConfig:
    """Volcano's objects (`{}`: none) as the partition's configuration: the queue tree under
    `root` by `spec.parent` (a queue without one is under root), each queue named as in Volcano."""
    config, warnings = parse_objects([] if document == {} else document)
    children: dict[str, list[Queue]] = {}
    for queue in config.queues.values():
        if queue.name != "root":
            children.setdefault(queue.parent or "root", []).append(queue)

    def node(queue: Queue) -> QueueConfig:
        below = tuple(node(child) for child in children.get(queue.name, ()))
        return QueueConfig(name=queue.name, path=queue.name, children=below, is_parent=bool(below) or queue.name == "root")

    return ParsedConfig(root=node(config.queues["root"]), settings=config, warnings=warnings, priority_classes=config.priority_classes, words=WORDS)


#: Volcano's words for its things, in the fold's refusals.
WORDS = Words(
    queue="queue",
    queues="queues jobs may use",
    application="job",
    priority_class="PriorityClass",
    define_class="add the PriorityClass to the configuration, or publish priorityclass.upserted",
    reserved="pipelined",
    limit="capability",
)


def describe(partition: PartitionState) -> str:
    """The queues, the session's actions, the plugins tier by tier, how queues share (no sharing
    plugin; capacity's hierarchy), whether anything can be preempted, and the queues whose
    lowered capability is enforced (preemptd's extension)."""
    config = config_of(partition)
    conf = config.scheduler
    tiers = " ".join(f"[{', '.join(plugin.name for plugin in tier)}]" for tier in conf.tiers) or "none"
    line = f"volcano: {counted(len(config.queues) - 1, 'queue')} under root; actions {', '.join(conf.actions) or 'none'}; plugins by tier {tiers}"
    sharing = sharing_plugin(conf)
    if sharing is None:
        line += "; no proportion or capacity plugin: no queue deserves anything"
    elif sharing.name == "capacity" and sharing.enabled("enableHierarchy"):
        line += f"; capacity's enableHierarchy on (ancestorReclaimLevel {sharing.arguments.get('ancestorReclaimLevel', 0)})"
    if any(plugin.name == "drf" and plugin.enabled("enableHierarchy") for tier in conf.tiers for plugin in tier):
        line += "; drf's enableHierarchy (hierarchical DRF) is not modelled: drf runs as without it"
    enforced = [
        f"{q.name} after {format_duration(q.quota_preemption_delay)}" for q in config.queues.values() if q.quota_preemption_delay and q.capability is not None
    ]
    if not {"preempt", "reclaim"} & set(conf.actions):
        line += "; no preempt or reclaim action: nothing will be preempted" + (" but to enforce a lowered capability" if enforced else "")
    if enforced:
        line += f"; a lowered capability is enforced ({QUOTA_DELAY_ANNOTATION}): {', '.join(enforced)}"
    return line
