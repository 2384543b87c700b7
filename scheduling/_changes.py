"""What a new configuration changes, in its model's words: the queues it adds and removes, and
each value of `preemptd state`'s columns (guarantee, max, nominal quota, weight, ...) it moves.
Said by the daemon when it applies one, by `preemptd apply --dry-run`, and by `explain`."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from preemptd.events import ConfigApplied, format_human, printable
from preemptd.projections import ClusterState, LogRecord, PartitionState, Rejected

from ._registry import apply, model_named

__all__ = ["amounts_text", "column_text", "config_changes", "configured_alone", "configured_before"]


def amounts_text(values: Mapping[str, int] | None) -> str:
    """Amounts as people read them (`cpu 4, memory 8Gi`); `-` for none."""
    if values is None:
        return "-"
    return ", ".join(f"{printable(name)} {format_human(name, amount)}" for name, amount in values.items()) or "0"


def column_text(value: Any) -> str:
    """A value of a `Column` as the `state` table shows it."""
    if value is None:
        return "-"
    if isinstance(value, Fraction):
        return f"{float(value):.2f}"
    if isinstance(value, Mapping) and any(isinstance(v, Mapping) for v in value.values()):  # per flavor
        return "; ".join(f"{printable(flavor)}: {amounts_text(amounts)}" for flavor, amounts in value.items())
    if isinstance(value, Mapping):
        return amounts_text(value)
    return printable(str(value))


def config_changes(before: PartitionState | None, after: PartitionState) -> list[str]:
    """One line per change from `before` (None: a new partition) to `after`, in the order of
    `after`'s queues; [] when nothing `state` shows changed."""
    if before is None:
        return [f"the partition's first configuration, of the {after.model} model"]
    if before.model != after.model:
        return [f"model {after.model} (was {before.model})"]
    queue = after.words.queue
    lines = [f"{queue} {printable(path)} added" for path in after.queues if path not in before.queues]
    lines += [f"{queue} {printable(path)} removed" for path in before.queues if path not in after.queues]
    old = dict(model_named(before.model).views.queue_columns(before))
    for name, values in model_named(after.model).views.queue_columns(after):
        was = old.get(name, {})
        for path in after.queues:
            if path in before.queues and was.get(path) != values.get(path):
                lines.append(f"{queue} {printable(path)}: {name.replace('_', ' ')} {column_text(was.get(path))} -> {column_text(values.get(path))}")
    return lines


def configured_alone(event: ConfigApplied) -> PartitionState:
    """The partition as `event`'s configuration alone sets it up (no nodes, no workloads): what
    `config_changes` compares, so that what it says follows from the configurations only.
    `Rejected` if the configuration is refused."""
    state = ClusterState()
    apply(state, LogRecord(1, event.ts, event))
    return state.partitions[event.partition]


def configured_before(state: ClusterState, event: object) -> PartitionState | None:
    """Before a `config.applied` is folded into `state`: its partition as the configuration in
    force alone sets it up (what the new one's changes are said against); None for another
    event, or a partition not configured yet."""
    partition = state.partitions.get(event.partition) if isinstance(event, ConfigApplied) else None
    if partition is None or not partition.config_seq:
        return None
    try:
        return configured_alone(ConfigApplied(id="in-force", ts=0, partition=partition.name, model=partition.model, config=partition.applied_config()))
    except Rejected:  # one this version would not take any more: the new one is said whole
        return None
