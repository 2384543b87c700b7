"""The registry: every scheduling model of this version, by the name `config.applied` gives it,
and the fold bound to them.

Adding a model is a new wing beside `yunikorn/` (its configuration, its cycle, its state, its
docs; see docs/development.md) and one line in `MODELS`. Nothing else names a
model: the fold, the daemon's `--config`, `schema`, `simulate` and `replay` all ask here.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from preemptd.events import ConfigError
from preemptd.projections import ParsedConfig, PartitionState, Projection

from . import kueue, volcano, yunikorn
from ._kubernetes import UnknownKind
from ._model import Model
from ._quota_timers import FIELDS_LAYOUT, fields_moved_in

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "PROJECTION",
    "apply",
    "claiming",
    "describe",
    "fold",
    "model_named",
    "read_config",
    "remember_config",
    "restore",
    "snapshot",
]

WINGS = (
    yunikorn.MODEL,
    kueue.MODEL,
    volcano.MODEL,
)  # fmt: skip


def claiming(item: Any) -> str | None:
    """The model whose own object `item` is (a ClusterQueue: kueue), if any."""
    return next((model.name for model in WINGS if model.claims(item)), None)


def _saying_whose(model: Model) -> Model:
    """`model`, whose refusal of a kind it does not know names the model that reads it."""

    def parse_config(document: Any, partition: str) -> ParsedConfig:
        try:
            return model.parse_config(document, partition)
        except UnknownKind as exc:
            owner = claiming(exc.item)
            if owner is None or owner == model.name:
                raise
            raise ConfigError(
                f"object {exc.position}: a {exc.item['kind']} is the {owner} model's, and this configuration is the {model.name} model's (give model: {owner})"
            ) from None

    return dataclasses.replace(model, parse_config=parse_config)


MODELS: dict[str, Model] = {model.name: _saying_whose(model) for model in WINGS}

#: The model of a partition before any `config.applied`, and of one that names none.
DEFAULT_MODEL = yunikorn.MODEL.name

#: The fold, asking the registered models about their configurations, states and decisions.
PROJECTION = Projection(MODELS, DEFAULT_MODEL, earlier_layouts={FIELDS_LAYOUT: fields_moved_in})
apply = PROJECTION.apply
fold = PROJECTION.fold
snapshot = PROJECTION.snapshot
restore = PROJECTION.restore
read_config = PROJECTION.read
remember_config = PROJECTION.remember


def describe(partition: PartitionState) -> str:
    """What runs in `partition`, in one line (its model's `describe`)."""
    return model_named(partition.model).views.describe(partition)


def model_named(name: str | None) -> Model:
    """The model called `name` (None: the default); `ConfigError` naming the known ones."""
    return cast(Model, PROJECTION.model(name))
