"""Volcano's configuration, as a user pastes it from a cluster, read into one `VolcanoConfig`.

A configuration is a list of Kubernetes objects (or a `kind: List`, or one object):

- Queues (`scheduling.volcano.sh/v1beta1`): `spec.weight`, `capability`, `deserved`,
  `guarantee.resource`, `reclaimable`, `priority`, `parent` (hierarchical queues), and
  `status.state` (a Closed queue takes no new jobs).
- The scheduler's configuration, as `volcano-scheduler.conf` holds it: a mapping with
  `actions` (Volcano's comma-separated string), `tiers` of `plugins` (each with its `enableX`
  switches and `arguments`) and `configurations` (arguments per action); or the ConfigMap
  that carries that file (`data: {volcano-scheduler.conf: "..."}`).

Without a scheduler configuration, Volcano's default applies (`enqueue, allocate, backfill`
and its two default tiers). A switch left out is on, as Volcano loads it (`enableHierarchy`
excepted). The queues `root` and `default` exist even when not given, as Volcano creates them.
Plugins, actions and fields preemptd does not use are listed once as warnings, never refused;
what Volcano's admission webhook refuses (a weight below 1, a deserved or guarantee above the
capability) is refused with its reason.
"""

from __future__ import annotations

from typing import Any

import msgspec

from preemptd.events import MAX_DEPTH, ConfigError, QuantityError, parse_quantity

from .._kubernetes import Fields, Warnings, kubernetes_objects, name_or_none, object_name, shown, unique

__all__ = ["ACTIONS", "PLUGINS", "Plugin", "Queue", "SchedulerConf", "VolcanoConfig", "parse_objects"]

_QUEUE_API = "scheduling.volcano.sh/v1beta1"
_KINDS = "Volcano objects (Queue, and the scheduler configuration or its ConfigMap)"
_CONF_FILE = "volcano-scheduler.conf"

#: The actions preemptd runs, in the order a configuration lists them.
ACTIONS = ("enqueue", "allocate", "preempt", "reclaim", "backfill")
#: The plugins preemptd models.
PLUGINS = ("priority", "gang", "conformance", "proportion", "capacity", "predicates")  # drf's shares and votes are not modelled
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
        (Plugin(name="predicates"), Plugin(name="proportion")),  # and drf, not modelled
    ),
)


class VolcanoConfig(msgspec.Struct, frozen=True, kw_only=True):
    queues: dict[str, Queue] = {}
    scheduler: SchedulerConf = DEFAULT_CONF


def parse_objects(document: Any) -> tuple[VolcanoConfig, tuple[str, ...]]:
    """The configuration the objects in `document` make, and warnings worth reporting once."""
    reader = _Reader()
    for position, item in enumerate(kubernetes_objects(document, "Volcano", _KINDS), 1):
        reader.read(item, position)
    return reader.config(), tuple(reader.warnings)


class _Reader:
    def __init__(self) -> None:
        self.queues: dict[str, Queue] = {}
        self.scheduler: SchedulerConf | None = None
        self.warnings = Warnings()

    def read(self, item: Any, position: int) -> None:
        if not isinstance(item, dict):
            raise ConfigError(f"object {position}: expected a Kubernetes object or the scheduler configuration, got {type(item).__name__}")
        if "kind" not in item and ("actions" in item or "tiers" in item):
            return self._scheduler(item, "the scheduler configuration")
        kind, name = item.get("kind"), object_name(item, position)
        fields = Fields(f"{kind} {name}", self.warnings.ignore)
        if kind == "Queue":
            if item.get("apiVersion") != _QUEUE_API:
                raise ConfigError(f"Queue {name}: apiVersion {shown(item.get('apiVersion'))} is not {_QUEUE_API}")
            return self._queue(name, item, fields)
        if kind == "ConfigMap" and isinstance(item.get("data"), dict) and _CONF_FILE in item["data"]:
            return self._scheduler(_conf_file(item["data"][_CONF_FILE], name), f"ConfigMap {name}")
        self.warnings.ignore(f"{kind} {name} ({item.get('apiVersion')})")
        return None

    def config(self) -> VolcanoConfig:
        queues = dict(self.queues)
        for implicit in ("root", "default"):
            queues.setdefault(implicit, Queue(name=implicit, implicit=True))
        for queue in queues.values():
            if queue.parent is not None and queue.parent not in queues:
                raise ConfigError(f"Queue {queue.name}: its parent queue {queue.parent} does not exist")
            _no_cycle(queue, queues)
        return VolcanoConfig(queues=dict(sorted(queues.items())), scheduler=self.scheduler or DEFAULT_CONF)

    def _queue(self, name: str, item: dict[str, Any], fields: Fields) -> None:
        unique(name, self.queues, "Queue")
        fields.only(item, "", {"apiVersion", "kind", "metadata", "spec", "status"})
        spec = fields.only(
            item.get("spec") or {},
            "spec",
            {"weight", "capability", "deserved", "guarantee", "reclaimable", "priority", "parent"},
            ignored={"affinity", "type", "extendClusters"},
        )
        status = fields.only(item.get("status") or {}, "status", {"state"})
        weight = spec.get("weight", 1)
        if not isinstance(weight, int) or isinstance(weight, bool) or weight < 1:
            raise ConfigError(f"{fields.where}: queue weight must be a positive integer, got {shown(weight)}")
        guarantee = fields.only(spec.get("guarantee") or {}, "spec.guarantee", {"resource"})
        queue = Queue(
            name=name,
            weight=weight,
            capability=_resources(spec.get("capability"), f"{fields.where}: spec.capability"),
            deserved=_resources(spec.get("deserved"), f"{fields.where}: spec.deserved"),
            guarantee=_resources(guarantee.get("resource"), f"{fields.where}: spec.guarantee.resource"),
            reclaimable=_flag(spec.get("reclaimable", True), f"{fields.where}: spec.reclaimable"),
            priority=_integer(spec.get("priority", 0), f"{fields.where}: spec.priority"),
            parent=None if name == "root" else name_or_none(spec.get("parent"), f"{fields.where}: spec.parent"),
            closed=fields.choice(status.get("state"), "status.state", ("Open", "Closed", "Closing", "Unknown")) in ("Closed", "Closing"),
        )
        for bound in ("deserved", "guarantee"):
            _within_capability(queue, bound, fields.where)
        self.queues[name] = queue

    def _scheduler(self, conf: Any, where: str) -> None:
        if self.scheduler is not None:
            raise ConfigError(f"{where}: a second scheduler configuration; give one")
        fields = Fields(where, self.warnings.ignore)
        conf = fields.only(conf, "", {"actions", "tiers", "configurations"})
        actions = _actions(conf.get("actions"), where, self.warnings.ignore)
        tiers = tuple(self._tier(tier, f"{where}: tiers[{i}]") for i, tier in enumerate(conf.get("tiers") or []))
        configurations: dict[str, dict[str, Any]] = {}
        for i, entry in enumerate(conf.get("configurations") or []):
            entry = fields.only(entry, f"configurations[{i}]", {"name", "arguments"})
            action = name_or_none(entry.get("name"), f"{where}: configurations[{i}].name")
            if action is None:
                raise ConfigError(f"{where}: configurations[{i}].name is required")
            configurations[action] = _arguments(entry.get("arguments"), f"action {action}", ACTION_ARGUMENTS.get(action, set()), fields)
        self.scheduler = SchedulerConf(actions=actions, tiers=tuple(t for t in tiers if t), configurations=configurations)

    def _tier(self, tier: Any, where: str) -> tuple[Plugin, ...]:
        fields = Fields(where, self.warnings.ignore)
        tier = fields.only(tier, "", {"plugins"})
        plugins: list[Plugin] = []
        for i, plugin in enumerate(tier.get("plugins") or []):
            plugin = fields.only(plugin, f"plugins[{i}]", {"name", "arguments", *SWITCHES})
            name = name_or_none(plugin.get("name"), f"{where}: plugins[{i}].name")
            if name is None:
                raise ConfigError(f"{where}: plugins[{i}].name is required")
            if name not in PLUGINS:
                self.warnings.ignore(f"plugin {name}")
                continue
            switches = {key: _flag(value, f"{where}: plugin {name}: {key}") for key, value in plugin.items() if key in SWITCHES}
            arguments = _arguments(plugin.get("arguments"), f"plugin {name}", PLUGIN_ARGUMENTS.get(name, set()), fields)
            if "ancestorReclaimLevel" in arguments:
                level = arguments["ancestorReclaimLevel"]
                if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level <= MAX_DEPTH:
                    raise ConfigError(f"{where}: plugin {name}: ancestorReclaimLevel must be an integer from 0 to {MAX_DEPTH}, got {shown(level)}")
            plugins.append(Plugin(name=name, switches=switches, arguments=arguments))
        return tuple(plugins)


def _no_cycle(queue: Queue, queues: dict[str, Queue]) -> None:
    seen = [queue.name]
    while (parent := queues[seen[-1]].parent) is not None:
        if parent in seen:
            raise ConfigError(f"Queue {queue.name}: its parents make a cycle: {' -> '.join([*seen, parent])}")
        seen.append(parent)


def _arguments(value: Any, owner: str, known: set[str], fields: Fields) -> dict[str, Any]:
    """`value`, a mapping of arguments; those preemptd does not use are listed as ignored."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{fields.where}: {owner} arguments must be a mapping, got {type(value).__name__}")
    for key in value:
        if key not in known:
            fields.ignore(f"{owner} argument {key}")
    return {key: item for key, item in value.items() if key in known}


def _conf_file(text: Any, configmap: str) -> Any:
    """The file's YAML, read by PyYAML's pure-Python loader: a shim may send anything, and text
    nested too deep ends there in a RecursionError (libyaml, under msgspec.yaml, crashes the
    process); nesting deeper than events may, or an alias to itself, is refused."""
    import yaml  # here: only a ConfigMap needs it, and every command would load it

    where = f"ConfigMap {configmap}: data.{_CONF_FILE}"
    if not isinstance(text, str):
        raise ConfigError(f"{where} must be the file's text")
    try:
        conf = yaml.load(text, Loader=yaml.SafeLoader)  # noqa: S506 (SafeLoader builds plain values only)
    except RecursionError:
        raise ConfigError(f"{where} nests deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where} is not YAML: {' '.join(str(exc).split())[:300]}") from None
    if _unbounded(conf):
        raise ConfigError(f"{where} nests deeper than {MAX_DEPTH} levels, expands to more than {_MAX_VALUES:,} values through aliases, or holds itself")
    return conf


_MAX_VALUES = 100_000  # far more than a scheduler configuration holds; aliases can multiply a few lines


def _unbounded(value: Any) -> bool:
    """Whether `value` nests deeper than events may, expands past `_MAX_VALUES` or holds
    itself; walked without recursion."""
    stack = [(value, 0, frozenset[int]())]
    visits = 0
    while stack:
        item, depth, above = stack.pop()
        visits += 1
        if visits > _MAX_VALUES:
            return True
        if not isinstance(item, dict | list):
            continue
        if depth >= MAX_DEPTH or id(item) in above:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1, above | {id(item)}) for child in children)
    return False


def _actions(value: Any, where: str, ignore: Any) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_CONF.actions
    if not isinstance(value, str):
        raise ConfigError(
            f'{where}: actions must be Volcano\'s comma-separated string, such as "enqueue, allocate, preempt, reclaim, backfill"; got {shown(value)}'
        )
    actions: list[str] = []
    for action in (part.strip() for part in value.split(",")):
        if not action:
            continue
        if action not in ACTIONS:
            ignore(f"action {action}")
        elif action in actions:
            raise ConfigError(f"{where}: action {action} is listed twice")
        else:
            actions.append(action)
    return tuple(actions)


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
    if value in ("true", "false"):  # a string, as an annotation or a hand-written conf gives it
        return value == "true"
    raise ConfigError(f"{where} must be true or false, got {shown(value)}")


def _integer(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not -(2**31) <= value < 2**31:
        raise ConfigError(f"{where} must be a 32-bit integer, got {shown(value)}")
    return value
