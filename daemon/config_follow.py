"""The daemon follows its `--config` file, as YuniKorn follows its ConfigMap: when the file's
content changes (a mounted ConfigMap swapped through its symlink, an editor renaming over it),
its `config.applied` go to the cluster stream, and the daemon folds them as any shim's, within
`CONFIG_POLL` seconds. A file that cannot be read or that its model refuses leaves the
configuration in force running: the daemon says why in one line, counts it
(`preemptd_config_file_refusals_total`) and keeps it as a dead letter; it never stops for it."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import anyio
import anyio.to_thread

from preemptd.events import MAX_MESSAGE_BYTES, ConfigApplied, encode
from preemptd.projections import ClusterState

from .bus import Bus
from .clock import wall_ms
from .config_file import check_partitions, config_events, read_config_file
from .errors import BusError, UsageError
from .log.store import Store
from .operations.logs import log
from .operations.metrics import Metrics
from .records import Batch, DeadLetter, Outbound, cluster_subject

__all__ = ["CONFIG_POLL", "ConfigFollower"]

#: How often the daemon reads its `--config` file again (seconds).
CONFIG_POLL = 2.0


class ConfigFollower:
    """Reads the file every `CONFIG_POLL` seconds; a content it has not sent yet, nor applied to
    the log (`PartitionState.config_from`), is published as the file's `config.applied`."""

    def __init__(self, path: Path, partitions: tuple[str, ...] | None, state: ClusterState, bus: Bus, store: Store, metrics: Metrics | None) -> None:
        self.path, self.partitions, self.bus, self.store, self.metrics = path, partitions, bus, store, metrics
        source = str(path.absolute())
        self.sent = next(
            (p.config_from[source] for _, p in sorted(state.partitions.items()) if source in p.config_from), None
        )  # the digest last sent or applied
        self.refused: str | None = None  # the digest last refused: said once

    async def run(self) -> None:
        while True:
            await anyio.sleep(CONFIG_POLL)
            await self.follow()

    async def follow(self) -> None:
        """Read the file once; send it if its content is new."""
        try:
            data = await anyio.to_thread.run_sync(read_config_file, self.path, abandon_on_cancel=True)
        except UsageError as exc:  # gone for a moment (a swap), or unreadable: said once
            await self._refuse(str(exc), b"", "unreadable")
            return
        digest = hashlib.sha256(data).hexdigest()
        if digest in (self.sent, self.refused):
            return
        try:
            events = await anyio.to_thread.run_sync(self._events, data, abandon_on_cancel=True)
        except UsageError as exc:
            await self._refuse(str(exc), data, digest)
            return
        messages = [Outbound(cluster_subject(event.partition, "config.applied"), encode(event), event.id) for event in events]
        try:
            await self.bus.publisher.publish(messages)
        except BusError as exc:  # NATS away: the next read sends it again
            log("config file changed, but could not be sent; trying again", logging.WARNING, file=str(self.path), error=str(exc))
            return
        self.sent, self.refused = digest, None
        log("config file changed: applying it", file=str(self.path), partitions=",".join(event.partition for event in events))

    def _events(self, data: bytes) -> list[ConfigApplied]:
        """The file's `config.applied` for `data`, its bytes as read; `UsageError` if refused."""
        events = config_events(self.path, wall_ms(), data)
        check_partitions(self.path, events, self.partitions)
        return events

    async def _refuse(self, reason: str, data: bytes, digest: str) -> None:
        """Say once why the file's content is not applied, count it, and keep it as a dead letter."""
        if digest == self.refused:
            return
        self.refused = digest
        log("config file refused, the configuration in force stays", logging.WARNING, file=str(self.path), reason=reason)
        letter = DeadLetter(
            received=wall_ms(),
            subject=f"file:{self.path.absolute()}",
            reason=reason,
            raw=data[:MAX_MESSAGE_BYTES],
            event_type="config.applied",
            kind="rejected",
        )
        await self.store.commit(Batch(dead=[letter]))
        if self.metrics is not None:
            self.metrics.config_file_refusals.inc()
            self.metrics.ingested([], [letter])
