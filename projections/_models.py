"""What the fold needs of a scheduling model, and the generic shape of a model's configuration.

The fold keeps the same aggregates for every model (a queue tree with guarantees and maxes,
nodes, applications, tasks); a model adds its own settings, per queue (`props`) and per
partition (`settings`), a state of its own if it needs one, and decisions only it makes. The
registry of models lives in `scheduling`, which hands it to `Projection`: this package never
names a model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from preemptd.events import Resources

from ._state import PriorityClass, Words

if TYPE_CHECKING:
    from ._apply import Folds

__all__ = ["ModelFold", "ParsedConfig", "QueueConfig"]


class QueueConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One queue of a partition's tree; `path` is the dotted name from the root (`root.a.b`).
    `props` are the model's own settings for the queue (YuniKorn's queue properties, say)."""

    name: str
    path: str
    guaranteed: Resources = Resources()
    max: Resources | None = None
    props: Any = None
    children: tuple[QueueConfig, ...] = ()
    is_parent: bool = False

    @property
    def leaf(self) -> bool:
        return not self.children and not self.is_parent

    def walk(self) -> Iterable[QueueConfig]:
        """This queue and its descendants, parents before children, in configuration order."""
        yield self
        for child in self.children:
            yield from child.walk()


class ParsedConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A model's configuration of one partition: its queue tree, its partition-wide settings,
    and warnings worth reporting once (fields it ignores, values it replaced by defaults).
    `aliases` are other names applications may give for a leaf queue (Kueue's LocalQueues,
    `namespace/name`); `priority_classes` are classes the configuration defines (Kueue's
    WorkloadPriorityClasses), found before those published as events; `words` are the model's
    words for its things, in the fold's refusals."""

    root: QueueConfig
    settings: Any = None
    warnings: tuple[str, ...] = ()
    aliases: dict[str, str] = {}
    priority_classes: dict[str, PriorityClass] = {}
    words: Words = Words()

    def same_as(self, other: ParsedConfig) -> bool:
        """Both configure the partition alike (warnings aside)."""
        return (self.root, self.settings, self.aliases, self.priority_classes) == (other.root, other.settings, other.aliases, other.priority_classes)


class ModelFold(Protocol):
    """A scheduling model, as the fold sees it: its name, its reading of its configuration
    (`parse_config(document, partition)`: the `config` of `config.applied`, `{}` for the
    model's default, for `partition`; raises `ConfigError`) and its part of the fold (`Folds`).

    Read-only properties, so that a frozen dataclass (`scheduling.Model`) is one.
    """

    @property
    def name(self) -> str: ...
    @property
    def parse_config(self) -> Callable[[Any, str], ParsedConfig]: ...
    @property
    def fold(self) -> Folds: ...
