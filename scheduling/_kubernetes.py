"""Reading Kubernetes objects as a user pastes them from a cluster: what the models that take
their configuration as objects (Kueue's, Volcano's) share. A configuration is a list of objects,
a `kind: List` with `items`, or one object; each object's fields are checked as they are read,
and fields preemptd does not use are listed as ignored rather than refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from preemptd.events import ConfigError, cut_text

__all__ = ["Fields", "Warnings", "kubernetes_objects", "name_or_none", "object_name", "shown", "unique"]


def kubernetes_objects(document: Any, model: str, kinds: str) -> list[Any]:
    """The objects of `document`; `model` and the `kinds` it expects name them in the refusal."""
    if isinstance(document, list):
        return document
    if isinstance(document, dict) and document.get("kind") == "List" and isinstance(document.get("items"), list):
        return document["items"]
    if isinstance(document, dict) and "kind" in document:
        return [document]
    raise ConfigError(f"a {model} configuration is a list of {kinds}")


class Warnings(list[str]):
    """What a configuration's reading reports, in the order found; each thing ignored once."""

    def ignore(self, what: str) -> None:
        line = f"ignored: {what} (preemptd does not use it)"
        if line not in self:
            self.append(line)


class Fields:
    """Field checks of one object: unknown fields are listed as ignored, with their path."""

    def __init__(self, where: str, ignore: Callable[[str], None]) -> None:
        self.where = where
        self._ignore = ignore

    def only(self, value: Any, path: str, used: set[str], *, ignored: set[str] = frozenset()) -> dict[str, Any]:
        """`value`, a mapping; its keys outside `used` are listed as ignored (`ignored` names
        those known to be without effect here, listed the same way)."""
        if not isinstance(value, dict):
            raise ConfigError(f"{self.where}: {path or 'the object'} must be a mapping, got {type(value).__name__}")
        for key in value:
            if key not in used:
                self.ignore(f"{path}.{key}" if path else key)
        return value

    def ignore(self, path: str) -> None:
        self._ignore(f"{self.where.split()[0]} field {path}")

    def choice(self, value: Any, path: str, allowed: tuple[str, ...]) -> Any:
        """`value`, one of `allowed` (the first when unset), else Kubernetes' refusal."""
        if value is None or value == "":
            return allowed[0]
        if value not in allowed:
            raise ConfigError(f"{self.where}: {path}: Unsupported value: {value!r}: supported values: {', '.join(map(repr, allowed))}")
        return value


def object_name(item: dict[str, Any], position: int) -> str:
    name = (item.get("metadata") or {}).get("name") if isinstance(item.get("metadata"), dict) else None
    if not isinstance(name, str) or not name:
        raise ConfigError(f"object {position} ({item.get('kind')}): metadata.name is required")
    return name


def unique(name: str, seen: Any, kind: str) -> str:
    if name in seen:
        raise ConfigError(f"{kind} {name} is defined twice")
    return name


def name_or_none(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a name, got {shown(value)}")
    return value


def shown(value: Any) -> str:
    """A value a refusal quotes, cut short: what a shim sent may be of any size."""
    return cut_text(repr(value), 80)
