"""Configuration files (`run --config`, `replay --config`): read, checked by the model they name,
and turned into one `config.applied` per partition they set up.

A file is `{model, config}`, or `model: NAME` followed by the model's objects as more YAML
documents (as `kubectl get -o yaml` writes them, or ConfigMaps), or the default model's
configuration alone (a YuniKorn `queues.yaml`). At start, the daemon appends the events of the
partitions whose configuration differs from the one in force; a file the model refuses stops
the start.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import anyio.to_thread
import msgspec

from preemptd.events import MAX_MESSAGE_BYTES, ConfigApplied, ConfigError, closest, encode, shown
from preemptd.projections import ClusterState, ConfigReading, LogRecord, Rejected
from preemptd.scheduling import (
    DEFAULT_MODEL,
    apply,
    claiming,
    config_changes,
    configured_alone,
    configured_before,
    describe,
    flat_objects,
    is_object,
    model_named,
    read_config,
    remember_config,
    yaml_documents,
)

from .errors import UsageError
from .log.store import Store
from .operations.logs import log
from .records import Batch, to_row

__all__ = ["apply_config_file", "check_config_file", "check_partitions", "config_events", "model_and_config", "read_config_file"]


def config_events(path: Path, now: int, data: bytes | None = None) -> list[ConfigApplied]:
    """One `config.applied` per partition the file at `path` sets up, each saying the file (its
    absolute path, as given: a ConfigMap's symlinks are not followed into its versions) and the
    digest of its bytes; `UsageError` if it cannot be read or its model refuses it."""
    data = read_config_file(path) if data is None else data  # `data`: the file's bytes, read already
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read the configuration {path}: {exc}") from None
    try:
        documents = yaml_documents(text, str(path))
    except ConfigError as exc:  # it names the file
        raise UsageError(str(exc)) from None
    try:
        for item in flat_objects(documents):
            if isinstance(item, dict) and isinstance(item.get("metadata"), dict):
                item["metadata"].pop("managedFields", None)  # the server's bookkeeping, often most of a `kubectl get -o yaml` object
        name, config = model_and_config(documents)
        model = model_named(name)
    except ConfigError as exc:
        raise UsageError(f"{path}: {exc}") from None
    size = len(encode(config))
    if size > MAX_MESSAGE_BYTES:  # the same bound as a shim's config.applied
        raise UsageError(f"{path}: the configuration is {size:,} bytes as JSON; the limit is {MAX_MESSAGE_BYTES:,} bytes, as for a shim's config.applied")
    events = []
    source, digest = str(path.absolute()), hashlib.sha256(data).hexdigest()
    try:
        partitions = model.partitions(config)
    except ConfigError as exc:
        raise UsageError(f"{path}: {exc}") from None
    for partition in partitions:
        where = f"partition {partition}: " if len(partitions) > 1 or partition != "default" else ""
        try:
            model.parse_config(config, partition)
        except ConfigError as exc:
            raise UsageError(f"{path}: {where}{exc}") from None
        except Exception as exc:  # a model's bug: said in one line, as the daemon's fold says it
            raise UsageError(f"{path}: {where}the {model.name} model failed to read it ({type(exc).__name__}: {exc}); please report it") from None
        events.append(
            ConfigApplied(id=f"config-file-{partition}-{now}", ts=now, partition=partition, model=model.name, config=config, source=source, digest=digest)
        )
    return events


def read_config_file(path: Path) -> bytes:
    """The file's bytes, at most `MAX_FILE_BYTES` of them; `UsageError` if it cannot be read."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read the configuration {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise UsageError(f"{path}: more than {MAX_FILE_BYTES:,} bytes; a configuration file is at most {MAX_FILE_BYTES:,} bytes")
    return data


#: A configuration file's text: room for YAML's comments and layout around an event's worth.
MAX_FILE_BYTES = 8 * MAX_MESSAGE_BYTES


_WRAPPER = ("model", "config")


def model_and_config(documents: list[Any]) -> tuple[str, Any]:
    """The model a file's YAML documents name and the configuration they give it. A file is
    `{model, config}`; or `model: NAME` then the model's objects, as further documents (each an
    object or a `kind: List`, as `kubectl get -o yaml` writes them); or the default model's
    configuration alone (a YuniKorn `queues.yaml`, or its objects). Objects of another model
    without `model:` are refused, naming the model to give."""
    if not documents:
        raise ConfigError("the file holds no configuration")
    head, rest = documents[0], documents[1:]
    if isinstance(head, dict) and "model" in head:
        extra = [str(key) for key in head if key not in _WRAPPER]
        if extra:
            raise ConfigError(
                f"unknown field {_did_you_mean(extra[0], _WRAPPER)} beside `model` (a file is {{model, config}}, or `model:` then the objects as documents)"
            )
        name = head["model"]
        if not isinstance(name, str):
            raise ConfigError(f"`model` must be a model's name, such as {DEFAULT_MODEL}; got {shown(name)}")
        if "config" in head and rest:
            raise ConfigError(f"the file gives `config` and {len(rest)} more YAML documents: put the configuration in one or the other")
        config = head["config"] if "config" in head else rest
        if not isinstance(config, dict | list) or config == []:
            raise ConfigError(f"with `model`, the file needs a `config`, or the {name} model's objects as the documents that follow")
        return name, config
    objects = documents if len(documents) > 1 or isinstance(head, list) or is_object(head) else None
    if isinstance(head, dict) and "config" in head:
        owner = _owner(head["config"] if isinstance(head["config"], list) else [head["config"]])
        raise ConfigError(f"`config` needs `model` beside it (model: {owner or 'yunikorn, kueue or volcano'})")
    if objects is None:
        misspelt = [str(key) for key in head if closest(str(key), _WRAPPER)] if isinstance(head, dict) else []
        if misspelt:
            raise ConfigError(f"unknown field {_did_you_mean(misspelt[0], _WRAPPER)}; without `model:` the file is the {DEFAULT_MODEL} model's configuration")
        if not isinstance(head, dict):
            raise ConfigError(
                f"expected a configuration document ({DEFAULT_MODEL}'s, or {{model, config}}; a list of objects goes in `config`), got {shown(head)}"
            )
        return DEFAULT_MODEL, head
    owner = _owner(objects)
    if owner is not None and owner != DEFAULT_MODEL:
        raise ConfigError(
            f"these are {owner} objects, and the file names no model: add a first YAML document `model: {owner}` (then `---`), or wrap them as "
            f"{{model: {owner}, config: [...]}}"
        )
    return DEFAULT_MODEL, documents


def _owner(objects: list[Any]) -> str | None:
    """The model whose own objects most of `objects` are, if any."""
    counts: dict[str, int] = {}
    for item in flat_objects(objects):
        owner = claiming(item)
        if owner is not None:
            counts[owner] = counts.get(owner, 0) + 1
    return max(sorted(counts), key=counts.__getitem__) if counts else None


def _did_you_mean(key: str, known: tuple[str, ...]) -> str:
    near = closest(key, known)
    return f"{shown(key)} (did you mean {near}?)" if near else shown(key)


def check_config_file(path: Path, partitions: tuple[str, ...] | None) -> None:
    """`UsageError` if the file at `path` cannot be applied by a daemon reading `partitions`
    (None: all): said before anything starts."""
    check_partitions(path, config_events(path, 0), partitions)


def check_partitions(path: Path, events: list[ConfigApplied], partitions: tuple[str, ...] | None) -> None:
    """`UsageError` if `events` (the file's) configure a partition besides `partitions` (None: all)."""
    others = sorted({event.partition for event in events} - set(partitions or ()))
    if partitions is not None and others:
        raise UsageError(f"--config {path} configures partition {', '.join(others)}, which this daemon does not read (--partitions {','.join(partitions)})")


async def apply_config_file(path: Path, now: int, state: ClusterState, store: Store) -> list[str]:
    """Append the file's `config.applied` for each partition it sets up, unless this file
    applied it to the log as it is now (the digest it last applied there is its digest now):
    then the log's configuration runs, newer or not (a `preemptd apply`, a shim's), and the
    daemon says which and why. Returns the partitions appended. The file is read off the event
    loop, and a stop meanwhile stops at once."""
    touched = []
    appended, kept = await anyio.to_thread.run_sync(_changes, path, now, state, abandon_on_cancel=True)
    for event in kept:
        p = state.partitions[event.partition]
        came = "this file" if p.config_source == event.source else (p.config_source or "a shim's config.applied")
        log(
            "config file unchanged since it applied it: the log's configuration runs",
            partition=event.partition,
            file=str(path),
            seq=p.config_seq,
            came_from=came,
            runs=describe(p),
        )
    for event, reading in appended:
        if reading is not None:
            remember_config(reading)
        record = LogRecord(state.seq + 1, event.ts, event)
        before = configured_before(state, event)
        try:
            for warning in apply(state, record):
                log("config warning", logging.WARNING, partition=event.partition, warning=warning)
        except Rejected as exc:
            reason = exc.reason.removeprefix("configuration refused, the previous one stays: ")
            raise UsageError(f"{path} refused, the daemon does not start: {reason}") from None
        await store.commit(Batch(rows=[to_row(record)]))
        touched.append(event.partition)
        changes = "; ".join(config_changes(before, configured_alone(event))) or "nothing preemptd state shows"
        log(
            "config applied",
            partition=event.partition,
            file=str(path),
            seq=record.seq,
            id=event.id,
            runs=describe(state.partitions[event.partition]),
            changed=changes,
        )
    return touched


def _changes(path: Path, now: int, state: ClusterState) -> tuple[list[tuple[ConfigApplied, ConfigReading | None]], list[ConfigApplied]]:
    """The file's `config.applied` to append (those of partitions where this file last applied
    other content, or never did), read as the fold will need them; and those not appended."""
    appended, kept = [], []
    for event in config_events(path, now):
        p = state.partitions.get(event.partition)
        if p is not None and event.source is not msgspec.UNSET and p.config_from.get(event.source) == event.digest:
            kept.append(event)
        else:
            appended.append((event, read_config(event)))
    return appended, kept
