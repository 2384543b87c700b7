"""The registry: every scheduling model of this version, by the name `config.applied` gives it,
and the fold bound to them.

Adding a model is a new wing beside `yunikorn/` (its configuration, its cycle, its state, its
docs; see the README's development section) and one line in `MODELS`. Nothing else names a
model: the fold, the daemon's `--config`, `schema`, `simulate` and `replay` all ask here.
"""

from __future__ import annotations

from typing import cast

from preemptd.projections import Projection

from . import kueue, volcano, yunikorn
from ._model import Model

__all__ = ["DEFAULT_MODEL", "MODELS", "PROJECTION", "apply", "fold", "model_named", "restore", "snapshot"]

MODELS: dict[str, Model] = {
    model.name: model
    for model in (
        yunikorn.MODEL,
        kueue.MODEL,
        volcano.MODEL,
    )
}  # fmt: skip

#: The model of a partition before any `config.applied`, and of one that names none.
DEFAULT_MODEL = yunikorn.MODEL.name

#: The fold, asking the registered models about their configurations, states and decisions.
PROJECTION = Projection(MODELS, DEFAULT_MODEL)
apply = PROJECTION.apply
fold = PROJECTION.fold
snapshot = PROJECTION.snapshot
restore = PROJECTION.restore


def model_named(name: str | None) -> Model:
    """The model called `name` (None: the default); `ConfigError` naming the known ones."""
    return cast(Model, PROJECTION.model(name))
