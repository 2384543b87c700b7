"""Reading Kubernetes objects as a user has them (a list, a `kind: List` from `kubectl get -o
yaml`, several YAML documents, one object), as strictly as their own API servers read them: what
the models that take their configuration as objects share.

Each kind has a shape per API version: every field it has, nested. A field the shape does not
have is refused, naming the closest known field or the place where that field belongs; a field
the project's API has but preemptd does not model is one note saying what that means for
decisions; a kind preemptd does not know is refused with the closest known kind. PriorityClass
and WorkloadPriorityClass objects, in a configuration of any model, define priority classes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from preemptd.events import INT32, MAX_DEPTH, ConfigError, DurationError, closest, cut_text, parse_duration, shown
from preemptd.projections import PriorityClass

__all__ = [
    "duration_annotation",
    "ANY",
    "METADATA",
    "VALUE",
    "Gone",
    "Kind",
    "Notes",
    "ObjectReader",
    "PRIORITY_KINDS",
    "Unmodelled",
    "UnknownKind",
    "check_shape",
    "choice",
    "embedded_yaml",
    "flat_objects",
    "is_object",
    "yaml_documents",
    "integer",
    "kubernetes_objects",
    "name_or_none",
    "object_shape",
    "shown",
    "unique",
]


class _Leaf:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: A value its reader checks.
VALUE = _Leaf("VALUE")
#: Anything, unchecked: free-form maps (labels, resource quantities), what a server reports.
ANY = _Leaf("ANY")


@dataclass(frozen=True)
class Unmodelled:
    """A field of the project's API that preemptd does not model; `meaning` says what that
    means for decisions. Set to one of its `neutral` values, it changes nothing, and says nothing."""

    meaning: str
    neutral: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Gone:
    """A field another API version of the object has, not this one: refused with `hint`."""

    hint: str


Shape = dict[str, Any]  # field -> Shape | [Shape] (each item's) | VALUE | ANY | Unmodelled | Gone

METADATA: Shape = {
    "name": VALUE,
    "namespace": VALUE,
    **dict.fromkeys(
        ("generateName", "labels", "annotations", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
         "deletionGracePeriodSeconds", "ownerReferences", "finalizers", "managedFields", "selfLink"),
        ANY,
    ),
}  # fmt: skip


def object_shape(**fields: Any) -> Shape:
    """The shape of a whole object: `apiVersion`, `kind`, `metadata`, what the server reports
    (`status`), and `fields`."""
    return {"apiVersion": VALUE, "kind": VALUE, "metadata": METADATA, "status": ANY, **fields}


class Notes(list[str]):
    """What a configuration's reading reports, in the order found, each line once."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()

    def add(self, line: str) -> None:
        if line not in self._seen:
            self._seen.add(line)
            self.append(line)


_SHOWN_PROBLEMS = 10


def check_shape(item: dict[str, Any], shape: Shape, kind: str, where: str, notes: Notes) -> None:
    """Refuse the fields of `item` that `shape` does not have; note the unmodelled ones once."""
    problems: list[str] = []
    _walk(item, shape, "", shape, kind, problems, notes)
    if problems:
        more = f"; and {len(problems) - _SHOWN_PROBLEMS} more" if len(problems) > _SHOWN_PROBLEMS else ""
        raise ConfigError(f"{where}: {'; '.join(problems[:_SHOWN_PROBLEMS])}{more}")


def _walk(value: Any, shape: Any, path: str, whole: Shape, kind: str, problems: list[str], notes: Notes) -> None:
    if value is None or shape is VALUE or shape is ANY or len(problems) > _SHOWN_PROBLEMS:
        return
    if isinstance(shape, list):
        if not isinstance(value, list):
            problems.append(f"{path} must be a list, got {_type(value)}")
            return
        for index, entry in enumerate(value):
            if entry is None and isinstance(shape[0], dict):  # a field may be null (left out); an item of a list of objects may not
                problems.append(f"{path}[{index}] must be a mapping, got null")
                continue
            _walk(entry, shape[0], f"{path}[{index}]", whole, kind, problems, notes)
        return
    if not isinstance(value, dict):
        problems.append(f"{path or 'the object'} must be a mapping, got {_type(value)}")
        return
    for key, entry in value.items():
        inner = shape.get(key) if isinstance(key, str) else None
        here = f"{path}.{key}" if path else str(key)
        if isinstance(inner, Unmodelled):
            if entry not in inner.neutral:
                notes.add(f"not modelled: {kind} {_pattern(here)}: {inner.meaning}")
        elif isinstance(inner, Gone):
            problems.append(f"{shown_path(here)}: {inner.hint}")
        elif inner is None:
            problem = _unknown(str(key), here, path, shape, whole)
            if (
                problem.endswith(")")
                and " has: " in problem
                and any(" has: " in earlier and earlier.endswith(problem[problem.rindex(" (") :]) for earlier in problems)
            ):
                problem = problem[: problem.rindex(" (")]  # what this place has, said once
            problems.append(problem)
        else:
            _walk(entry, inner, here, whole, kind, problems, notes)
        if len(problems) > _SHOWN_PROBLEMS:
            return


def _unknown(key: str, here: str, parent: str, shape: Shape, whole: Shape) -> str:
    """Why `key` is refused: the field it misspells, else where it belongs, else what is here."""
    siblings = [name for name, inner in shape.items() if not isinstance(inner, Gone)]
    near = closest(key, siblings)
    if near is not None:
        return f"unknown field {shown_path(here)} (did you mean {near}?)"
    homes = [home for home in _homes(key, whole, "") if home != _pattern(parent)]
    if homes:
        return f"{shown_path(key)} is not a field of {_pattern(parent) or 'the object'}: it belongs under {' or '.join(homes)}"
    return f"unknown field {shown_path(here)} ({_pattern(parent) or 'the object'} has: {', '.join(siblings)})"


def _homes(key: str, shape: Any, path: str) -> Iterator[str]:
    """Every path (`spec.resourceGroups[].flavors[]`) under which `shape` has `key`."""
    if isinstance(shape, list):
        yield from _homes(key, shape[0], f"{path}[]")
    elif isinstance(shape, dict):
        if isinstance(shape.get(key), dict | list | _Leaf | Unmodelled):
            yield path or "the object"
        for name, inner in shape.items():
            if isinstance(inner, dict | list):
                yield from _homes(key, inner, f"{path}.{name}" if path else name)


def _pattern(path: str) -> str:
    """`spec.resourceGroups[0].flavors[1]` -> `spec.resourceGroups[].flavors[]`: a place in the shape."""
    return _INDEX.sub("[]", path)


_INDEX = re.compile(r"\[\d+\]")


def shown_path(path: str) -> str:
    return cut_text(path, 200)


def _type(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "true or false"}.get(type(value), type(value).__name__)


# -- kinds and the reader ---------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """A kind a model's configuration may hold: its API group, its shape in each version (the
    first is named in refusals), and how to read it (`read`). Without `read`, the kind is known
    but `meaning` says what leaving it out means (a note), or `refusal` why it is refused."""

    group: str
    versions: dict[str, Shape]
    read: Callable[[Any, str, dict[str, Any], str], None] | None = None
    meaning: str = ""
    refusal: str = ""

    def api_versions(self) -> list[str]:
        return [f"{self.group}/{version}" if self.group else version for version in self.versions]


class UnknownKind(ConfigError):
    """A kind the model does not know; `item` is the object (the `position`th), so that the
    registry can say which model knows it."""

    def __init__(self, reason: str, item: dict[str, Any], position: int) -> None:
        super().__init__(reason)
        self.item, self.position = item, position


_PRIORITY_CLASS = object_shape(value=VALUE, description=ANY, preemptionPolicy=VALUE, globalDefault=Unmodelled(
    "a task that names no priority gets 0, not this class's value: give priority_class on the application or task", neutral=(False,)
))  # fmt: skip
_WORKLOAD_PRIORITY_CLASS = object_shape(value=VALUE, description=ANY)
ALLOW_PREEMPTION_ANNOTATION = "yunikorn.apache.org/allow-preemption"
PREEMPTD_ANNOTATIONS = "preemptd.io/"  # the prefix of preemptd's own annotations
#: preemptd's extension of Kueue (on a ClusterQueue) and Volcano (on a Queue): a duration such as
#: "30s" after which a lowered quota or capability is enforced by eviction; left out or "0s": never.
QUOTA_DELAY_ANNOTATION = "preemptd.io/quota-preemption-delay"


class ObjectReader:
    """Reads one object after another into the model's configuration; a model's reader adds its
    kinds to `kinds` and reads what needs every object (references) once all are read.
    `model` names the model in refusals (`Kueue`); `expected` lists what its configuration holds."""

    model = ""
    expected = ""
    kinds: dict[str, Kind] = {}
    #: The annotations of preemptd's own (`preemptd.io/...`) the model reads: another one is
    #: refused with the closest, never ignored (a misspelt switch would silently stay off).
    annotations: frozenset[str] = frozenset()
    #: The file a ConfigMap of this model carries (`data.<config_file>`), and what that file is.
    config_file = ""
    config_file_is = ""

    def __init__(self) -> None:
        self.notes = Notes()
        self.priority_classes: dict[str, PriorityClass] = {}

    def read_all(self, document: Any) -> None:
        for position, item in enumerate(kubernetes_objects(document, self.model, self.expected), 1):
            self.read(item, position)

    def read(self, item: Any, position: int, where: str = "") -> None:
        """Read `item`, the `position`th object (`where`: what holds it, for a ConfigMap's file)."""
        if not isinstance(item, dict):
            raise ConfigError(f"object {position}: expected a Kubernetes object (apiVersion, kind, metadata, ...), got {_type(item)}")
        kind_name = item.get("kind")
        if kind_name is None or kind_name == "":
            return self.kindless(item, position)
        kind = self.kinds.get(kind_name) if isinstance(kind_name, str) else None
        if kind is None:
            near = closest(kind_name, self.kinds) if isinstance(kind_name, str) else None
            hint = f"did you mean {near}?" if near else f"a {self.model} configuration holds {self.expected}"
            raise UnknownKind(f"object {position}: unknown kind {shown(kind_name)} ({hint})", item, position)
        name = self.name_of(kind_name, item, position)
        label = f"{kind_name} {name}".strip()
        if where:
            label = f"{where}: {label}"
        group, _, version = str(item.get("apiVersion", "")).rpartition("/")
        if group != kind.group or version not in kind.versions:
            raise ConfigError(f"{label}: apiVersion {shown(item.get('apiVersion'))} is not {' or '.join(kind.api_versions())}")
        if kind.refusal:
            raise ConfigError(f"{label}: {kind.refusal}")
        check_shape(item, kind.versions[version], kind_name, label, self.notes)
        self._check_our_annotations(item, label)
        if kind.read is None:
            self.notes.add(f"not modelled: {kind_name} objects: {kind.meaning}")
            return None
        return kind.read(self, name, item, label)

    def _check_our_annotations(self, item: dict[str, Any], label: str) -> None:
        annotations = (item.get("metadata") or {}).get("annotations") or {}
        for key in sorted(annotations) if isinstance(annotations, dict) else ():
            if isinstance(key, str) and key.startswith(PREEMPTD_ANNOTATIONS) and key not in self.annotations:
                near = closest(key, sorted(self.annotations))
                read = ", ".join(sorted(self.annotations)) or "none of preemptd's annotations"
                known = f"did you mean {near}?" if near else f"{self.model} reads {read}"
                raise ConfigError(f"{label}: unknown annotation {shown(key)} ({known})")

    def name_of(self, kind: str, item: dict[str, Any], position: int) -> str:
        return object_name(item, position)

    @classmethod
    def claims(cls, item: Any) -> bool:
        """Whether `item` is an object of this model's own (not one every model reads)."""
        if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
            return False
        kind = cls.kinds.get(item["kind"])
        if kind is None or item["kind"] in PRIORITY_KINDS:
            return False
        if item["kind"] == "ConfigMap":
            return isinstance(item.get("data"), dict) and cls.config_file in item["data"]
        return str(item.get("apiVersion", "")).rpartition("/")[0] == kind.group

    def config_map(self, name: str, item: dict[str, Any], where: str) -> None:
        """The model's ConfigMap: the file it carries, read by `read_config_file`."""
        data = item.get("data") or {}
        if not isinstance(data, dict) or self.config_file not in data:
            keys = [str(key) for key in data] if isinstance(data, dict) else []
            near = next((key for key in keys if closest(key, [self.config_file])), None)
            hint = f" (data.{cut_text(near, 100)}: did you mean {self.config_file}?)" if near else f"; it has {cut_text(', '.join(keys), 200) or 'no data'}"
            raise ConfigError(f"{where}: a ConfigMap in a {self.model} configuration carries {self.config_file_is} as data.{self.config_file}{hint}")
        for key in data:
            if key != self.config_file:
                self.notes.add(f"{where}: data.{cut_text(str(key), 100)} is not read (only {self.config_file} is)")
        self.read_config_file(embedded_yaml(data[self.config_file], f"{where}: data.{self.config_file}"), f"{where}: data.{self.config_file}")

    def read_config_file(self, loaded: Any, where: str) -> None:
        raise NotImplementedError

    def kindless(self, item: dict[str, Any], position: int) -> None:
        raise ConfigError(f"object {position}: no kind; a {self.model} configuration holds {self.expected}")

    def priority_class(self, name: str, item: dict[str, Any], where: str) -> None:
        """A Kubernetes PriorityClass (with YuniKorn's allow-preemption annotation)."""
        annotations = (item.get("metadata") or {}).get("annotations") or {}
        allow = annotations.get(ALLOW_PREEMPTION_ANNOTATION, "true") if isinstance(annotations, dict) else "true"
        if allow not in ("true", "false"):
            raise ConfigError(f'{where}: annotation {ALLOW_PREEMPTION_ANNOTATION} must be "true" or "false", got {shown(allow)}')
        policy = choice(item.get("preemptionPolicy"), where, "preemptionPolicy", ("PreemptLowerPriority", "Never"))
        self._define(name, where, integer(item.get("value"), f"{where}: value", required=True), may_preempt=policy != "Never", allow_preemption=allow == "true")

    def workload_priority_class(self, name: str, item: dict[str, Any], where: str) -> None:
        self._define(name, where, integer(item.get("value"), f"{where}: value", required=True))

    def _define(self, name: str, where: str, value: int, **flags: bool) -> None:
        if name in self.priority_classes:
            raise ConfigError(f"{where}: a priority class {name} is defined twice (PriorityClass and WorkloadPriorityClass names share one space here)")
        self.priority_classes[name] = PriorityClass(name=name, value=value, **flags)


#: The kinds every model's configuration may hold.
PRIORITY_KINDS = {
    "PriorityClass": Kind("scheduling.k8s.io", {"v1": _PRIORITY_CLASS}, ObjectReader.priority_class),
    "WorkloadPriorityClass": Kind(
        "kueue.x-k8s.io", {"v1beta2": _WORKLOAD_PRIORITY_CLASS, "v1beta1": _WORKLOAD_PRIORITY_CLASS}, ObjectReader.workload_priority_class
    ),
}

CONFIG_MAP = Kind("", {"v1": object_shape(data=ANY, binaryData=ANY, immutable=ANY)}, ObjectReader.config_map)


def is_object(item: Any) -> bool:
    """Whether `item` is a Kubernetes object (rather than, say, a `queues.yaml` document)."""
    return isinstance(item, dict) and ("kind" in item or "apiVersion" in item)


def kubernetes_objects(document: Any, model: str, kinds: str) -> list[Any]:
    """The objects of `document` (a list of objects, lists of them or `kind: List`s; a List; one
    object); `model` and the `kinds` it expects name them in the refusal."""
    if is_object(document):
        document = [document]
    if not isinstance(document, list):
        raise ConfigError(f"a {model} configuration is a list of {kinds}")
    return flat_objects(document)


def flat_objects(documents: list[Any]) -> list[Any]:
    """The objects of `documents`, its lists and `kind: List`s opened (as deep as they nest)."""
    out: list[Any] = []
    stack = [iter(documents)]
    while stack:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
        elif isinstance(item, list):
            stack.append(iter(item))
        elif isinstance(item, dict) and item.get("kind") == "List":
            items = item.get("items")
            if not isinstance(items, list):
                raise ConfigError(f"a kind: List needs `items`, a list of objects; got {shown(items)}")
            stack.append(iter(items))
        else:
            out.append(item)
    return out


_END = object()


def embedded_yaml(text: Any, where: str) -> Any:
    """The file a ConfigMap carries (`where` names it): one YAML document, bounded (`yaml_documents`)."""
    if not isinstance(text, str):
        raise ConfigError(f"{where} must be the file's text")
    documents = yaml_documents(text, where)
    if len(documents) > 1:
        raise ConfigError(f"{where} holds {len(documents)} YAML documents; give one")
    return documents[0] if documents else None


def yaml_documents(text: str, where: str, max_values: int | None = None) -> list[Any]:
    """The YAML documents of `text` (`where` names it in errors), empty ones left out. Bounded
    before they are built: a first pass over the parser's events stops at the first limit
    (`_beyond`), so that a shim's or a file's text costs at most what a configuration may hold;
    then libyaml (PyYAML's pure-Python reader where it is missing) builds them."""
    import yaml  # here: only configuration files and ConfigMaps need it, and every command would load it

    try:
        beyond = _beyond(_json_loader()(text), max_values or _MAX_VALUES)
        if beyond is not None:
            raise ConfigError(f"{where} {beyond}")
        return [document for document in yaml.load_all(text, Loader=_json_loader()) if document is not None]  # noqa: S506 (JSON's values only)
    except yaml.YAMLError as exc:
        if "exceeded maximum nesting depth" in str(exc):  # libyaml's own bound (1,000), met as it looks ahead
            raise ConfigError(f"{where} nests deeper than {MAX_DEPTH} levels") from None
        said = " ".join(str(exc).replace('"<unicode string>"', where).split())
        raise ConfigError(f"{where} is not YAML: {cut_text(said, 400)}") from None


_MAX_VALUES = 100_000  # far more than a configuration file holds; aliases can multiply a few lines


@functools.cache
def _json_loader() -> type:
    """PyYAML's safe loader (libyaml's where present), making JSON's values only: a date stays
    the text it is, and the tags that make other Python values (sets, pairs, ordered maps,
    binary, timestamps) are refused, so that nothing `_beyond` does not count reaches a reader."""
    import yaml

    class JsonLoader(yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):  # type: ignore[misc]
        pass

    timestamp = "tag:yaml.org,2002:timestamp"
    JsonLoader.yaml_implicit_resolvers = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag != timestamp] for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def refuse(loader: yaml.SafeLoader, node: yaml.Node) -> None:
        raise yaml.constructor.ConstructorError(None, None, f"{node.tag} makes no JSON value: quote it, or write a list or a mapping", node.start_mark)

    for name in ("timestamp", "set", "omap", "pairs", "binary"):
        JsonLoader.add_constructor(f"tag:yaml.org,2002:{name}", refuse)
    return JsonLoader


@dataclass
class _Opened:
    """A list or mapping the parser is inside of: its anchor, the values counted before it, how
    many levels the collections it holds nest so far, and (a mapping) whether a key comes next."""

    anchor: str | None
    values_before: int
    height: int = 0
    key_next: bool | None = None  # None: a list


def _beyond(parser: Any, limit: int) -> str | None:
    """How the text `parser` reads is beyond what a configuration holds, or None: nesting
    deeper than events may, more than `limit` values (a mapping's keys aside; what aliases
    repeat counted as often as they repeat it), or an alias to what contains it. Read as
    events, so that it stops at the first limit, before anything is built, and nothing recurses."""
    import yaml

    values = 0
    opened: list[_Opened] = []
    anchored: dict[str, tuple[int, int]] = {}  # anchor: (values, height) of the node it names
    while parser.check_event():
        event = parser.get_event()
        if isinstance(event, yaml.CollectionEndEvent):
            done = opened.pop()
            _ended(done, values, done.height + 1, opened, anchored)
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        counted = not _a_key(opened)
        if isinstance(event, yaml.CollectionStartEvent):
            if len(opened) >= MAX_DEPTH:
                return f"nests deeper than {MAX_DEPTH} levels"
            opened.append(_Opened(event.anchor, values, key_next=True if isinstance(event, yaml.MappingStartEvent) else None))
            values += counted
        elif isinstance(event, yaml.ScalarEvent):
            values += counted
            _ended(_Opened(event.anchor, values - counted), values, 0, opened, anchored)
        else:  # an alias
            if any(outer.anchor == event.anchor for outer in opened):
                return "holds itself (an alias to what contains it)"
            count, height = anchored.get(event.anchor or "", (1, 0))  # an unknown anchor: the loader says so
            if len(opened) + height > MAX_DEPTH:
                return f"nests deeper than {MAX_DEPTH} levels"
            values += count
            _ended(_Opened(None, values - count), values, height, opened, anchored)
        if values > limit:
            return f"holds more than {limit:,} values, counting what its aliases repeat"
    return None


def _a_key(opened: list[_Opened]) -> bool:
    """The node that comes now is a mapping's key (keys and values alternate)."""
    around = opened[-1] if opened else None
    if around is None or around.key_next is None:
        return False
    key = around.key_next
    around.key_next = not key
    return key


def _ended(node: _Opened, values: int, height: int, opened: list[_Opened], anchored: dict[str, tuple[int, int]]) -> None:
    """Note a node just read: what its anchor names, and its height in the collection around it."""
    if node.anchor is not None:
        anchored[node.anchor] = (values - node.values_before, height)
    if opened:
        opened[-1].height = max(opened[-1].height, height)


# -- values ------------------------------------------------------------------------------


#: A Kubernetes object name (a DNS-1123 subdomain), as the API server checks it: what a
#: terminal, a log line, a metric label and a page can show as it is.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_RULE = "lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"


def object_name(item: dict[str, Any], position: int) -> str:
    name = (item.get("metadata") or {}).get("name") if isinstance(item.get("metadata"), dict) else None
    if not isinstance(name, str) or not name:
        raise ConfigError(f"object {position} ({cut_text(str(item.get('kind')), 80)}): metadata.name is required")
    return kubernetes_name(name, f"object {position} ({cut_text(str(item.get('kind')), 80)}): metadata.name")


def kubernetes_name(name: str, where: str) -> str:
    """`name`, if Kubernetes would take it as an object's name."""
    if len(name) > 253 or not _NAME.fullmatch(name):
        raise ConfigError(f"{where} {shown(name)} is not a Kubernetes name ({_NAME_RULE})")
    return name


def unique(name: str, seen: Any, kind: str) -> str:
    if name in seen:
        raise ConfigError(f"{kind} {name} is defined twice")
    return name


def name_or_none(value: Any, where: str) -> str | None:
    """A reference to another object by its name, or None."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a name, got {shown(value)}")
    return kubernetes_name(value, where)


def choice(value: Any, where: str, path: str, allowed: tuple[str, ...]) -> Any:
    """`value`, one of `allowed` (the first when unset), else Kubernetes' refusal."""
    if value is None or value == "":
        return allowed[0]
    if value not in allowed:
        near = closest(value, allowed) if isinstance(value, str) else None
        hint = f" (did you mean {near}?)" if near else ""
        raise ConfigError(f"{where}: {path}: Unsupported value: {shown(value)}{hint}: supported values: {', '.join(map(repr, allowed))}")
    return value


def integer(value: Any, where: str, *, required: bool = False, default: int = 0) -> int:
    """A 32-bit integer, as Kubernetes holds priorities and values."""
    if value is None and not required:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not INT32[0] <= value <= INT32[1]:
        raise ConfigError(f"{where} must be a 32-bit integer, got {shown(value)}" if value is not None else f"{where} is required")
    return value


def duration_annotation(item: dict[str, Any], name: str, where: str) -> int:
    """An annotation of `item` holding a duration such as "30s" (ms; 0 when absent); negative
    durations and other values refused."""
    annotations = (item.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(name) if isinstance(annotations, dict) else None
    if value is None:
        return 0
    if not isinstance(value, str):  # Kubernetes keeps annotations as strings
        raise ConfigError(f'{where}: annotation {name} must be a string duration such as "30s", got {shown(value)}')
    try:
        delay = parse_duration(value)
    except DurationError as exc:
        raise ConfigError(f"{where}: annotation {name}: {exc}") from None
    if delay < 0:
        raise ConfigError(f'{where}: annotation {name} must be "0s" (never) or more, got {shown(value)}')
    return delay
