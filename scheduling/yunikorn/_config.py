"""YuniKorn's `queues.yaml`, the configuration shape of the YuniKorn model.

`parse_config` turns the document of a `config.applied` event into the queue tree, with
YuniKorn's queue properties as each queue's `props` and its partition `preemption` section as
the partition's `settings`; `describe` says in one line what a partition's configuration turns on.

The document may also come as a cluster holds it: YuniKorn's `yunikorn-configs` ConfigMap (its
`queues.yaml`), beside PriorityClass objects that define priority classes.

Fields of YuniKorn's that preemptd does not use (ACLs, placement rules, limits, ...) are accepted
and listed once as ignored; a field YuniKorn does not know either is refused (with the closest
known name), as YuniKorn refuses it; a queue property is free-form, but one that misspells a
property preemptd reads (`preemption.dealy`) is refused too. Values YuniKorn would replace by a
default (an invalid `preemption.delay`) are replaced the same way, with a warning. A
structurally invalid tree raises `ConfigError` with the reason.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Annotated, Any, Literal

import msgspec

from preemptd.events import ConfigError, DurationError, QuantityError, Resources, closest, format_human, parse_duration, why_not
from preemptd.projections import ParsedConfig, PartitionState, PriorityClass, QueueConfig

from .._explain import counted, listing
from .._kubernetes import CONFIG_MAP, PRIORITY_KINDS, ObjectReader, is_object

__all__ = [
    "config_of",
    "DEFAULT_PREEMPTION_DELAY_MS",
    "PreemptionSettings",
    "QueueProps",
    "claims",
    "configured_partitions",
    "describe",
    "parse_config",
]

DEFAULT_PREEMPTION_DELAY_MS = 30_000
_QUEUE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_QUEUE_KEYS = {"name", "parent", "resources", "properties", "queues"}
_PARTITION_KEYS = {"name", "queues", "preemption"}
_PREEMPTION_KEYS = {"enabled", "max_victims_per_cycle", "max_share_per_cycle", "quotapreemptionenabled"}
_PROPERTY_KEYS = {"preemption.policy", "preemption.delay", "priority.offset", "priority.policy", "quota.preemption.delay"}
# Fields of YuniKorn's own configuration that preemptd accepts and ignores. Any other field is
# an error, as in YuniKorn, so that a typo (`guarenteed`) cannot silently drop a guarantee.
# Queue properties are free-form in YuniKorn: unknown ones are ignored, with a hint if close.
_YUNIKORN_DOCUMENT_KEYS = {"checksum"}
_YUNIKORN_PARTITION_KEYS = {"placementrules", "limits", "nodesortpolicy", "statedumpfilepath", "usergroupresolver"}
_YUNIKORN_PREEMPTION_KEYS: set[str] = set()
_YUNIKORN_QUEUE_KEYS = {"maxapplications", "adminacl", "submitacl", "childtemplate", "limits"}
_INT32 = (-(2**31), 2**31 - 1)


class QueueProps(msgspec.Struct, frozen=True, kw_only=True):
    """The queue properties YuniKorn's preemption reads, after defaults and inheritance."""

    preemption_policy: Literal["default", "fence", "disabled"] = "default"
    preemption_delay: int = DEFAULT_PREEMPTION_DELAY_MS
    priority_offset: int = 0
    priority_policy: Literal["default", "fence"] = "default"
    quota_preemption_delay: int = 0  # ms after a lowered max before the queue sheds work; 0: never


class PreemptionSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Partition-level switches: YuniKorn's `enabled` and `quotapreemptionenabled` (quota
    enforcement through preemption), and preemptd's pace control."""

    enabled: bool = True
    max_victims_per_cycle: Annotated[int, msgspec.Meta(ge=1)] = 100
    max_share_per_cycle: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.1
    quota_preemption: bool = msgspec.field(default=False, name="quotapreemptionenabled")


def config_of(p: PartitionState) -> PreemptionSettings:
    """The yunikorn model's settings of `p` (`ParsedConfig.settings`), typed."""
    settings = p.settings
    assert isinstance(settings, PreemptionSettings), f"partition {p.name} holds no yunikorn settings: {type(settings).__name__}"
    return settings


def _default_root() -> QueueConfig:
    """What a partition runs with before any `config.applied`: `root` with one leaf, `default`."""
    return QueueConfig(name="root", path="root", props=QueueProps(), children=(QueueConfig(name="default", path="root.default", props=QueueProps()),))


def parse_config(raw: Any, partition: str) -> ParsedConfig:
    """Parse a `queues.yaml` document (or one partition's body; `{}` for the default), or
    Kubernetes objects holding one (YuniKorn's ConfigMap, PriorityClasses), for `partition`."""
    warnings: list[str] = []
    raw, priority_classes = _from_objects(raw, warnings) if is_objects(raw) else (raw, {})
    body = _select_partition(raw, partition, warnings)
    _note_ignored(body, _PARTITION_KEYS, _YUNIKORN_PARTITION_KEYS, f"partition {partition}", warnings)
    preemption = _parse_preemption(body.get("preemption"), warnings)
    root = _parse_root(body.get("queues"), warnings)
    _validate_tree(root)
    return ParsedConfig(root=root, settings=preemption, warnings=tuple(warnings), priority_classes=priority_classes)


def is_objects(raw: Any) -> bool:
    """Whether `raw` is Kubernetes objects rather than a `queues.yaml` document."""
    return isinstance(raw, list) or is_object(raw)


class _Objects(ObjectReader):
    """YuniKorn's configuration as a cluster holds it: the `yunikorn-configs` ConfigMap, whose
    `queues.yaml` is the document, and PriorityClass objects."""

    model = "YuniKorn"
    expected = "YuniKorn's ConfigMap (data: queues.yaml) and PriorityClass objects, or a queues.yaml document"
    config_file = "queues.yaml"  # in the yunikorn-configs ConfigMap
    config_file_is = "the queue configuration"

    def __init__(self) -> None:
        super().__init__()
        self.document: Any = None

    def read_config_file(self, loaded: Any, where: str) -> None:
        if self.document is not None:
            raise ConfigError(f"{where}: a second queues.yaml; give one")
        self.document = {} if loaded is None else loaded


_Objects.kinds = {**PRIORITY_KINDS, "ConfigMap": CONFIG_MAP}


def _from_objects(raw: Any, warnings: list[str]) -> tuple[Any, dict[str, PriorityClass]]:
    """The `queues.yaml` document the objects carry (`{}`: none) and the priority classes they define."""
    reader = _Objects()
    reader.read_all(raw)
    warnings += reader.notes
    return ({} if reader.document is None else reader.document), reader.priority_classes


def claims(item: Any) -> bool:
    """Whether `item` is YuniKorn's ConfigMap (its `queues.yaml`)."""
    return _Objects.claims(item)


def configured_partitions(raw: Any) -> list[str]:
    """The partitions a `queues.yaml` document configures: those it lists, else `default`."""
    if is_objects(raw):
        raw = _from_objects(raw, [])[0]
    partitions = raw.get("partitions") if isinstance(raw, dict) else None
    if not isinstance(partitions, list):
        return ["default"]
    return [p.get("name", "default") if isinstance(p, dict) else "default" for p in partitions]


def describe(partition: PartitionState) -> str:
    """The queues, the partition's preemption switch and pace, and the fences and opt-outs."""
    settings = config_of(partition)
    leaves = sum(queue.leaf for queue in partition.queues.values())
    line = f"yunikorn: {counted(len(partition.queues), 'queue')} ({counted(leaves, 'leaf', 'leaves')}); "
    if not settings.enabled:
        return line + "preemption off (partition preemption.enabled: false): nothing will be preempted"
    line += f"preemption on, at most {settings.max_victims_per_cycle} victims and {settings.max_share_per_cycle:.0%} of the cluster a cycle"
    for policy in ("fence", "disabled"):
        queues = [path for path, queue in partition.queues.items() if queue.props.preemption_policy == policy]
        if queues:
            line += f"; preemption.policy {policy}: {listing(queues)}"
    delays = [f"{path} {queue.props.quota_preemption_delay / 1000:g}s" for path, queue in partition.queues.items() if queue.props.quota_preemption_delay]
    if settings.quota_preemption:
        line += (
            f"; quota enforcement on, quota.preemption.delay: {listing(delays)}"
            if delays
            else "; quota enforcement on, but no queue has a quota.preemption.delay"
        )
    elif delays:
        line += "; quota.preemption.delay set, but quotapreemptionenabled is off: lowered maxes are not enforced"
    return line


def _select_partition(raw: dict[str, Any], partition: str, warnings: list[str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError("the configuration must be an object (YuniKorn queues.yaml)")
    if "partitions" not in raw:
        return raw
    _note_ignored(raw, {"partitions"}, _YUNIKORN_DOCUMENT_KEYS, "the document", warnings)
    partitions = raw["partitions"]
    if not isinstance(partitions, list):
        raise ConfigError("`partitions` must be a list")
    names = [p.get("name", "default") if isinstance(p, dict) else None for p in partitions]
    if names.count(partition) > 1:
        raise ConfigError(f"partition {partition!r} is defined {names.count(partition)} times")
    for body, name in zip(partitions, names):
        if name == partition and isinstance(body, dict):  # a name is only read from an object
            return body
    raise ConfigError(f"the configuration has no partition named {partition!r} (it has: {', '.join(map(str, names)) or 'none'})")


def _note_ignored(obj: dict[str, Any], known: set[str], unused: set[str] | None, where: str, warnings: list[str]) -> None:
    """Warn once about fields of YuniKorn's configuration that preemptd does not use (`unused`);
    refuse fields that neither knows. `unused=None`: free-form (queue properties), where only a
    misspelling of a known field is refused."""
    extra = sorted(str(key) for key in obj if key not in known)
    unknown = [key for key in extra if key not in unused] if unused is not None else [key for key in extra if closest(key, known)]
    if unknown:
        hints = [_did_you_mean(key, known | (unused or set())) for key in unknown]
        raise ConfigError(f"{where}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(hints)}")
    if extra:
        warnings.append(f"ignored (not used by preemptd): {where}: {', '.join(extra)}")


def _did_you_mean(key: str, known: set[str]) -> str:
    close = closest(key, sorted(known))
    return f"{key} (did you mean {close}?)" if close else key


def _parse_preemption(raw: Any, warnings: list[str]) -> PreemptionSettings:
    if raw is None:
        return PreemptionSettings()
    if not isinstance(raw, dict):
        raise ConfigError("partition `preemption` must be an object such as {enabled: true}")
    _note_ignored(raw, _PREEMPTION_KEYS, _YUNIKORN_PREEMPTION_KEYS, "partition preemption", warnings)
    known = {k: v for k, v in raw.items() if k in _PREEMPTION_KEYS}
    try:
        return msgspec.convert(known, PreemptionSettings, strict=False)
    except msgspec.ValidationError:
        raise ConfigError(f"partition preemption: {why_not(known, PreemptionSettings, lax=True)}") from None


def _parse_root(queues: Any, warnings: list[str]) -> QueueConfig:
    if queues is None:
        return _default_root()
    if not isinstance(queues, list):
        raise ConfigError("`queues` must be a list of queues")
    if len(queues) == 1 and isinstance(queues[0], dict) and str(queues[0].get("name", "")).lower() == "root":
        return _parse_queue(queues[0], None, QueueProps(), warnings)
    return _parse_queue({"name": "root", "queues": queues}, None, QueueProps(), warnings)


def _parse_queue(raw: Any, parent_path: str | None, inherited: QueueProps, warnings: list[str]) -> QueueConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"a queue under {parent_path} must be an object with a `name`, got {raw!r}")
    name = str(raw.get("name", ""))
    if not _QUEUE_NAME.match(name):
        raise ConfigError(f"queue name {name!r} under {parent_path or 'the partition'} must be 1-64 of a-z, A-Z, 0-9, _ or -")
    path = name if parent_path is None else f"{parent_path}.{name}"
    _note_ignored(raw, _QUEUE_KEYS, _YUNIKORN_QUEUE_KEYS, f"queue {path}", warnings)
    guaranteed, maximum = _parse_resources(raw.get("resources"), path, warnings)
    props = _parse_properties(raw.get("properties"), inherited, path, warnings)
    children_raw = raw.get("queues") or []
    if not isinstance(children_raw, list):
        raise ConfigError(f"queue {path}: `queues` must be a list")
    children = tuple(_parse_queue(child, path, _inheritable(props), warnings) for child in children_raw)
    return QueueConfig(
        name=name,
        path=path,
        guaranteed=guaranteed,
        max=maximum,
        props=props,
        children=children,
        is_parent=bool(raw.get("parent", False)) or parent_path is None,
    )


def _parse_resources(raw: Any, path: str, warnings: list[str]) -> tuple[Resources, Resources | None]:
    if raw is None:
        return Resources(), None
    if not isinstance(raw, dict):
        raise ConfigError(f"queue {path}: `resources` must be an object with `guaranteed` and/or `max`")
    _note_ignored(raw, {"guaranteed", "max"}, set(), f"queue {path} resources", warnings)
    try:
        guaranteed = Resources.parse(raw.get("guaranteed") or {})
        maximum = Resources.parse(raw["max"]) if raw.get("max") is not None else None
    except QuantityError as exc:
        raise ConfigError(f"queue {path}: {exc}") from None
    return guaranteed, maximum


def _inheritable(props: QueueProps) -> QueueProps:
    """What children inherit: `preemption.policy: disabled` and `preemption.delay`."""
    policy: Literal["disabled", "default"] = "disabled" if props.preemption_policy == "disabled" else "default"
    return QueueProps(preemption_policy=policy, preemption_delay=props.preemption_delay)


def _parse_properties(raw: Any, inherited: QueueProps, path: str, warnings: list[str]) -> QueueProps:
    if raw is None:
        return inherited
    if not isinstance(raw, dict):
        raise ConfigError(f"queue {path}: `properties` must be an object of name to value")
    _note_ignored(raw, _PROPERTY_KEYS, None, f"queue {path} properties", warnings)
    where = f"queue {path}"
    return QueueProps(
        preemption_policy=_choice(raw, "preemption.policy", ("default", "fence", "disabled"), inherited.preemption_policy, where, warnings),
        preemption_delay=_delay(raw, inherited.preemption_delay, where, warnings),
        priority_offset=_offset(raw, where, warnings),
        priority_policy=_choice(raw, "priority.policy", ("default", "fence"), "default", where, warnings),
        quota_preemption_delay=_quota_delay(raw, where),
    )


def _quota_delay(raw: dict[str, Any], where: str) -> int:
    """`quota.preemption.delay`: how long a queue may stay above a lowered max (0, the default:
    for ever, as before the design). Not inherited: each queue says its own."""
    if "quota.preemption.delay" not in raw:
        return 0
    try:
        delay = parse_duration(raw["quota.preemption.delay"])
    except DurationError as exc:
        raise ConfigError(f"{where}: quota.preemption.delay: {exc}") from None
    if delay < 0:
        raise ConfigError(f"{where}: quota.preemption.delay must be 0s (never) or more, got {raw['quota.preemption.delay']!r}")
    return delay


def _choice(raw: dict[str, Any], key: str, allowed: tuple[str, ...], default: Any, where: str, warnings: list[str]) -> Any:
    if key not in raw:
        return default
    value = str(raw[key]).lower()
    if value not in allowed:
        warnings.append(f"{where}: {key} {raw[key]!r} is not one of {', '.join(allowed)}; using {default!r}")
        return default
    return value


def _delay(raw: dict[str, Any], inherited: int, where: str, warnings: list[str]) -> int:
    if "preemption.delay" not in raw:
        return inherited
    try:
        delay = parse_duration(raw["preemption.delay"])
    except DurationError as exc:
        warnings.append(f"{where}: preemption.delay: {exc}; using 30s")
        return DEFAULT_PREEMPTION_DELAY_MS
    if delay <= 0:
        warnings.append(f"{where}: preemption.delay must be greater than 0s, got {raw['preemption.delay']!r}; using 30s")
        return DEFAULT_PREEMPTION_DELAY_MS
    return delay


def _offset(raw: dict[str, Any], where: str, warnings: list[str]) -> int:
    if "priority.offset" not in raw:
        return 0
    try:
        offset = int(str(raw["priority.offset"]).strip())
    except ValueError:
        offset = None
    if offset is None or not _INT32[0] <= offset <= _INT32[1]:
        warnings.append(f"{where}: priority.offset {raw['priority.offset']!r} is not a 32-bit integer; using 0")
        return 0
    return offset


def _validate_tree(queue: QueueConfig) -> None:
    names = Counter(child.name for child in queue.children)
    for name in sorted(n for n, times in names.items() if times > 1):
        raise ConfigError(f"queue {queue.path} has two children named {name!r}")
    _check_within(queue.guaranteed, queue.max, f"queue {queue.path}: guaranteed", "its own max")
    for child in queue.children:
        if queue.max is not None:
            _check_within(child.guaranteed, queue.max, f"queue {child.path}: guaranteed", f"the max of {queue.path}")
            if child.max is not None:
                _check_within(child.max, queue.max, f"queue {child.path}: max", f"the max of {queue.path}")
        _validate_tree(child)
    _check_children_guarantees(queue)


def _check_within(amounts: Resources, limit: Resources | None, what: str, against: str) -> None:
    if limit is None:
        return
    for name, amount in amounts.items():
        if name in limit and amount > limit[name]:
            raise ConfigError(f"{what} {name} {format_human(name, amount)} is above {against} ({format_human(name, limit[name])})")


def _check_children_guarantees(queue: QueueConfig) -> None:
    for name, limit in queue.guaranteed.items():
        total = sum(child.guaranteed.get(name, 0) for child in queue.children)
        if total > limit:
            raise ConfigError(
                f"queue {queue.path}: the children's guarantees for {name} add up to {format_human(name, total)}, "
                f"above its own guarantee {format_human(name, limit)}"
            )
