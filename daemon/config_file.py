"""Configuration files (`run --config`, `replay --config`): read, checked by the model they name,
and turned into one `config.applied` per partition they set up.

A file is `{model, config}` (`config` an object or, for Kueue, a list of objects), or the
default model's configuration alone (a YuniKorn `queues.yaml`). At start, the daemon appends the events of the partitions whose configuration
differs from the one in force; a file the model refuses stops the start.
"""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec

from preemptd.events import ConfigApplied, ConfigError
from preemptd.projections import ClusterState, LogRecord, Rejected
from preemptd.scheduling import DEFAULT_MODEL, apply, model_named

from .errors import UsageError
from .history import to_row
from .logs import log
from .store import Batch, Store

__all__ = ["apply_config_file", "changed", "config_events"]


def config_events(path: Path, now: int) -> list[ConfigApplied]:
    """One `config.applied` per partition the file at `path` sets up; `UsageError` if it cannot
    be read or its model refuses it."""
    try:
        document = msgspec.yaml.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError) as exc:
        raise UsageError(f"cannot read the configuration {path}: {' '.join(str(exc).split())}") from None
    if not isinstance(document, dict):
        raise UsageError(f"{path}: expected a configuration document ({DEFAULT_MODEL}'s, or {{model, config}}; a list of objects goes in `config`)")
    name, config = (document.get("model"), document.get("config")) if "model" in document else (DEFAULT_MODEL, document)
    if not isinstance(name, str):
        raise UsageError(f"{path}: `model` must be a model's name, such as {DEFAULT_MODEL}; got {name!r}")
    try:
        model = model_named(name)
    except ConfigError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if not isinstance(config, (dict, list)):
        raise UsageError(f"{path}: with `model`, the file needs a `config` (the {model.name} model's configuration)")
    events = []
    for partition in model.partitions(config):
        try:
            model.parse_config(config, partition)
        except ConfigError as exc:
            raise UsageError(f"{path}: partition {partition}: {exc}") from None
        events.append(ConfigApplied(id=f"config-file-{partition}-{now}", ts=now, partition=partition, model=model.name, config=config))
    return events


def changed(state: ClusterState, event: ConfigApplied) -> bool:
    """`event` would configure its partition otherwise than the configuration in force."""
    current = state.partitions.get(event.partition)
    model = model_named(event.model)
    if current is None or current.model != model.name:
        return True
    wanted, applied = (model.parse_config(document, event.partition) for document in (event.config, current.applied_config()))
    return not wanted.same_as(applied)


async def apply_config_file(path: Path, now: int, state: ClusterState, store: Store) -> list[str]:
    """Append the file's `config.applied` for each partition it changes; return those."""
    touched = []
    for event in config_events(path, now):
        if not changed(state, event):
            continue
        record = LogRecord(state.seq + 1, event.ts, event)
        try:
            for warning in apply(state, record):
                log("config warning", logging.WARNING, partition=event.partition, warning=warning)
        except Rejected as exc:
            reason = exc.reason.removeprefix("configuration refused, the previous one stays: ")
            raise UsageError(f"{path} refused, the daemon does not start: {reason}") from None
        await store.commit(Batch(rows=[to_row(record)]))
        touched.append(event.partition)
        log("config applied", partition=event.partition, file=str(path), seq=record.seq)
    return touched
