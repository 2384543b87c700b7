"""The objects users hold, as the events a shim would make of them: a Kueue Workload, a Pod or a
batch/v1 Job with Kueue's queue label, a Volcano Job or PodGroup, a Pod with YuniKorn's labels.
One documented mapping (the contract's "Objects as events"), so that `preemptd try`,
`publish` and `simulate` take what `kubectl get -o yaml` prints. Pure: objects in, event
dicts out (`id` and `ts` are the caller's to fill); `ObjectError` says what is wrong in one line.

A pod asks what Kubernetes schedules it by: the sum of its containers' requests (a limit stands
for a missing request), at least its largest init container's, plus its overhead."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ._errors import PreemptdError
from ._quantity import Resources, format_wire, parse_quantity
from ._text import shown
from ._words import closest

__all__ = ["ObjectError", "object_events", "runtime_object"]


class ObjectError(PreemptdError, ValueError):
    """An object that cannot be read as events; the message says which and why."""


_KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
_YUNIKORN_APP = ("applicationId", "yunikorn.apache.org/app-id")
_YUNIKORN_QUEUE = ("queue", "yunikorn.apache.org/queue")
_VOLCANO_GROUP = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")

#: The spec fields each kind has (Kubernetes', Kueue's, Volcano's API): the others are refused
#: with the one meant; only those named in the mapping are read.
_SPEC_FIELDS = {
    "Workload": ("podSets", "queueName", "priorityClassName", "priority", "priorityClassSource", "active", "maximumExecutionTimeSeconds", "priorityClassRef"),
    "Job/batch": (
        "parallelism",
        "completions",
        "template",
        "backoffLimit",
        "activeDeadlineSeconds",
        "completionMode",
        "suspend",
        "selector",
        "manualSelector",
        "ttlSecondsAfterFinished",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
        "podReplacementPolicy",
        "successPolicy",
        "managedBy",
    ),
    "Job/volcano": (
        "tasks",
        "queue",
        "minAvailable",
        "priorityClassName",
        "schedulerName",
        "policies",
        "plugins",
        "maxRetry",
        "ttlSecondsAfterFinished",
        "volumes",
        "minSuccess",
        "runningEstimate",
        "networkTopology",
    ),
    "PodGroup": ("minMember", "queue", "priorityClassName", "minResources", "minTaskMember", "networkTopology"),
}


def runtime_object(item: Any) -> bool:
    """Whether `item` is an object this mapping reads (a Kubernetes object of a kind it knows)."""
    return isinstance(item, dict) and isinstance(item.get("apiVersion"), str) and _reader(item) is not None


def object_events(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The events `item` stands for; `ObjectError` if it cannot be read."""
    reader = _reader(item)
    if reader is None:
        raise ObjectError(f"{item.get('kind')!s} ({item.get('apiVersion')!s}) is not an object preemptd reads as events: {_KNOWN}")
    return reader(item)


_KNOWN = (
    "a Kueue Workload, a Pod or batch/v1 Job labelled kueue.x-k8s.io/queue-name, a Volcano Job or PodGroup, or a Pod labelled with YuniKorn's "
    "applicationId and queue"
)


_Reader = Callable[[dict[str, Any]], list[dict[str, Any]]]


def _reader(item: dict[str, Any]) -> _Reader | None:
    group, kind = str(item.get("apiVersion", "")).split("/", 1)[0] if "/" in str(item.get("apiVersion", "")) else "", item.get("kind")
    match (group, kind):
        case ("kueue.x-k8s.io", "Workload"):
            return _workload
        case ("batch", "Job"):
            return _batch_job
        case ("", "Pod"):
            return _pod
        case ("batch.volcano.sh", "Job"):
            return _volcano_job
        case ("scheduling.volcano.sh", "PodGroup"):
            return _pod_group
    return None


# -- the kinds ---------------------------------------------------------------------------------


def _workload(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A Kueue Workload: an application in its LocalQueue (`namespace/queueName`), a pod per
    count of each pod set."""
    name, namespace = _name(item), _namespace(item)
    spec = _spec(item, "Workload")
    queue = _text(spec, "queueName", item)
    app = {"type": "app.submitted", "app": name, "queue": f"{namespace}/{queue}", "namespace": namespace, **_priority(spec, "priorityClassName", "priority")}
    return [app, *_pods(item, f"Workload {name}", spec.get("podSets"), "pod set", "count")]


def _batch_job(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A batch/v1 Job with Kueue's queue label: a workload of `parallelism` pods (1 when left out)."""
    name, namespace = _name(item), _namespace(item)
    labels = _labels(item)
    if _KUEUE_QUEUE_LABEL not in labels:
        raise ObjectError(f"Job {name} has no {_KUEUE_QUEUE_LABEL} label: Kueue would not admit it; add the label with its LocalQueue")
    spec = _spec(item, "Job/batch")
    count = _count(spec.get("parallelism", 1), f"Job {name}: spec.parallelism")
    resources = _pod_resources(spec.get("template"), f"Job {name}")
    app = {"type": "app.submitted", "app": name, "queue": f"{namespace}/{labels[_KUEUE_QUEUE_LABEL]}", "namespace": namespace}
    if _KUEUE_PRIORITY_LABEL in labels:
        app["priority_class"] = labels[_KUEUE_PRIORITY_LABEL]
    return [app, *({"type": "task.submitted", "task": f"{name}-{i}", "app": name, "resources": resources} for i in range(count))]


def _pod(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A Pod with Kueue's queue label (a workload of one pod), or with YuniKorn's
    applicationId and queue labels (a task of that application, in that queue)."""
    name, namespace, labels = _name(item), _namespace(item), _labels(item)
    resources = _pod_resources({"spec": item.get("spec")}, f"Pod {name}")
    priority = _priority(item.get("spec") or {}, "priorityClassName", "priority")
    if _KUEUE_QUEUE_LABEL in labels:
        app = {"type": "app.submitted", "app": name, "queue": f"{namespace}/{labels[_KUEUE_QUEUE_LABEL]}", "namespace": namespace, **priority}
        return [app, {"type": "task.submitted", "task": name, "app": name, "resources": resources}]
    app_id, queue = next((labels[k] for k in _YUNIKORN_APP if k in labels), None), next((labels[k] for k in _YUNIKORN_QUEUE if k in labels), None)
    if app_id is None or queue is None:
        raise ObjectError(
            f"Pod {name} has neither a {_KUEUE_QUEUE_LABEL} label (Kueue) nor applicationId and queue labels (YuniKorn): no model knows where it goes"
        )
    return [{"type": "task.submitted", "task": name, "app": str(app_id), "queue": str(queue), "namespace": namespace, "resources": resources, **priority}]


def _volcano_job(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A Volcano Job: an application in its queue (`default` when left out) with its gang
    (`minAvailable`; left out, every pod), a pod per replica of each task."""
    name, namespace = _name(item), _namespace(item)
    spec = _spec(item, "Job/volcano")
    app = _volcano_app(name, namespace, spec)
    if "minAvailable" in spec:
        app["min_available"] = _count(spec["minAvailable"], f"Volcano Job {name}: spec.minAvailable")
    return [app, *_pods(item, f"Volcano Job {name}", spec.get("tasks"), "task", "replicas")]


def _volcano_app(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The `app.submitted` of a Volcano Job or PodGroup: in its queue (`default` when left out)."""
    return {
        "type": "app.submitted",
        "app": name,
        "queue": str(spec.get("queue", "default")),
        "namespace": namespace,
        **_priority(spec, "priorityClassName", None),
    }


def _pods(item: dict[str, Any], what: str, sets: Any, set_word: str, count_key: str) -> list[dict[str, Any]]:
    """A `task.submitted` per pod of each of `sets` (a Workload's pod sets, a Volcano Job's
    tasks: name, `count_key`, template), named `<object>-<set>-<i>`."""
    if not isinstance(sets, list) or not sets:
        raise ObjectError(f"{what}: its spec must list its {set_word}s (name, {count_key}, template)")
    name, events = _name(item), []
    for each in sets:
        set_name = _text(each, "name", item, where=f"a {set_word}")
        count = _count(each.get(count_key, 1), f"{what}: {set_word} {set_name}'s {count_key}")
        resources = _pod_resources(each.get("template"), f"{what}: {set_word} {set_name}")
        events += [{"type": "task.submitted", "task": f"{name}-{set_name}-{i}", "app": name, "resources": resources} for i in range(count)]
    return events


def _pod_group(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A Volcano PodGroup: the application its pods join (they name it by the group-name
    annotation), with its gang (`minMember`); its pods come as their own objects or events."""
    name, namespace = _name(item), _namespace(item)
    spec = _spec(item, "PodGroup")
    app = _volcano_app(name, namespace, spec)
    app["min_available"] = _count(spec.get("minMember", 1), f"PodGroup {name}: spec.minMember")
    return [app]


# -- reading ------------------------------------------------------------------------------------


def _name(item: dict[str, Any]) -> str:
    metadata = item.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        raise ObjectError(f"a {item.get('kind')} without metadata.name: each object needs its name")
    return name


def _namespace(item: dict[str, Any]) -> str:
    metadata = item.get("metadata") or {}
    return str(metadata.get("namespace") or "default")


def _labels(item: dict[str, Any]) -> dict[str, str]:
    metadata = item.get("metadata") or {}
    labels = {**(metadata.get("annotations") or {}), **(metadata.get("labels") or {})}  # Volcano and YuniKorn read either
    return {str(key): str(value) for key, value in labels.items()}


def _spec(item: dict[str, Any], kind: str) -> dict[str, Any]:
    spec = item.get("spec")
    if not isinstance(spec, dict):
        raise ObjectError(f"{item.get('kind')} {_name(item)} has no spec")
    known = _SPEC_FIELDS[kind]
    for key in spec:
        if key not in known:
            near = closest(str(key), known)
            raise ObjectError(f"{item.get('kind')} {_name(item)}: unknown field spec.{shown(key)}" + (f" (did you mean {near}?)" if near else ""))
    return spec


def _text(mapping: Any, key: str, item: dict[str, Any], *, where: str = "the spec") -> str:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if not isinstance(value, str) or not value:
        raise ObjectError(f"{item.get('kind')} {_name(item)}: {where} needs {key}")
    return value


def _count(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 10_000:
        raise ObjectError(f"{what} must be a whole number from 0 to 10,000, not {shown(value)}")
    return value


def _priority(spec: dict[str, Any], class_field: str, value_field: str | None) -> dict[str, Any]:
    """The application's priority: its class by name, else its value."""
    if isinstance(spec.get(class_field), str):
        return {"priority_class": spec[class_field]}
    if value_field is not None and isinstance(spec.get(value_field), int):
        return {"priority": spec[value_field]}
    return {}


def _pod_resources(template: Any, what: str) -> dict[str, int | str]:
    """What a pod of `template` (`{spec: {containers, initContainers, overhead}}`) asks."""
    spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list) or not spec["containers"]:
        raise ObjectError(f"{what}: its pod template needs spec.containers")
    containers = spec["containers"]
    try:
        total = _summed(_asks(container) for container in containers)
        for init in spec.get("initContainers") or []:
            total = {name: max(amount, total.get(name, 0)) for name, amount in {**total, **_asks(init)}.items()}
        total = _summed([total, _quantities(spec.get("overhead") or {})])
    except (ValueError, TypeError) as exc:
        raise ObjectError(f"{what}: {exc}") from None
    if not total:
        raise ObjectError(f"{what}: its containers request nothing: give resources.requests (cpu, memory, ...)")
    return {name: format_wire(name, amount) for name, amount in Resources(total).items()}


def _asks(container: Any) -> dict[str, int]:
    resources = container.get("resources") if isinstance(container, dict) else None
    resources = resources if isinstance(resources, dict) else {}
    return {**_quantities(resources.get("limits") or {}), **_quantities(resources.get("requests") or {})}  # a limit stands for a missing request


def _quantities(values: Any) -> dict[str, int]:
    if not isinstance(values, dict):
        raise TypeError(f"resources must be a mapping of quantities, not {shown(values)}")
    return {str(name): parse_quantity(str(name), value) for name, value in values.items()}


def _summed(parts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for part in parts:
        for name, amount in part.items():
            total[name] = total.get(name, 0) + amount
    return total
