"""Where a log stands in the cluster stream of the NATS it is connected to.

Positions are kept per stream instance (named by its creation time), so that a daemon moved to
another NATS, or whose stream was recreated, reads that stream from its start, and finds its
place again when it comes back, instead of applying one stream's position to another. A log
that reads some partitions only (`run --partitions`) names them in its position: it keeps to
them, since a partition added later would have to be read from an earlier point than the rest.
"""

from __future__ import annotations

import logging

from .bus import Bus, Reader
from .errors import UsageError
from .log.store import Store
from .operations.logs import log
from .records import CLUSTER_STREAM, CONSUMER, Batch

__all__ = ["start_position"]

_LEGACY_TRACKING = f"{CLUSTER_STREAM}/{CONSUMER}"  # the position's name before streams were told apart


def _source(created: str, partitions: tuple[str, ...] | None) -> str:
    stream = f"{CLUSTER_STREAM}@{created}"
    return stream if partitions is None else f"{stream}/{','.join(partitions)}"


def _partitions_of(source: str) -> str:
    return f"partitions {source.split('/', 1)[1]}" if "/" in source else "every partition"


async def start_position(store: Store, bus: Bus, partitions: tuple[str, ...] | None = None) -> tuple[str, int]:
    """The cluster stream's name in the log (`source`) and how far this log has read it, for
    a daemon that reads `partitions` (None: all). Refuses another set of partitions than the
    log read before from the same stream, and partitions another running daemon reads."""
    created, end = await bus.streams.cluster_stream()
    source = _source(created, partitions)
    positions = await store.tracking_positions()
    same_stream = [_partitions_of(name) for name in positions if name.split("/", 1)[0] == f"{CLUSTER_STREAM}@{created}" and name != source]
    if partitions is not None and _LEGACY_TRACKING in positions:
        same_stream.append("every partition")  # a log from before positions were per stream read them all
    if same_stream and source not in positions:
        raise UsageError(
            f"this log has read {same_stream[0]} of this cluster stream, not {_partitions_of(source)}: "
            "a daemon keeps to the partitions its log began with (start another daemon, with its own --state-dir, for the others)"
        )
    if source in positions:
        position = positions[source]
    elif set(positions) == {_LEGACY_TRACKING} and positions[_LEGACY_TRACKING] <= end:
        position = positions[_LEGACY_TRACKING]  # a log from before positions were per stream
        await bus.streams.remove_consumer(CONSUMER)  # and its consumer, named before consumers were per log
    else:
        position = 0
        if positions:
            log(
                "this log has not read this cluster stream before (another NATS, or a recreated stream): reading it from its start",
                logging.WARNING,
                stream_created=created,
                stream_end=end,
            )
    _check_claims(await bus.streams.readers(), f"{CONSUMER}-{store.log_id}", partitions)
    if source not in positions:
        await store.commit(Batch(tracking=(source, position)))
    return source, position


def _check_claims(readers: list[Reader], mine: str, partitions: tuple[str, ...] | None) -> None:
    """Refuse partitions that a running daemon already reads, when this one reads only some;
    warn about the other consumers otherwise (each daemon publishes its own decisions)."""
    others = [reader for reader in readers if reader.name != mine]
    if partitions is not None:
        taken = [
            f"partition {', '.join(p for p in partitions if reader.reads(p))} is read by another running daemon "
            f"(consumer {reader.name} of {CLUSTER_STREAM}, {'every partition' if reader.partitions is None else 'partitions ' + ','.join(reader.partitions)})"
            for reader in others
            if reader.active and any(reader.reads(p) for p in partitions)
        ]
        if taken:
            raise UsageError(f"{'; '.join(taken)}: two daemons deciding for one partition would both publish decisions; give each partition to one daemon")
        others = [reader for reader in others if any(reader.reads(p) for p in partitions)]
    if others:
        log(
            "other preemptd logs consume the cluster stream of this NATS for these partitions: each daemon will publish its own decisions "
            "(the consumer of a log no longer used can be removed: nats consumer rm PREEMPTD_CLUSTER <name>)",
            logging.WARNING,
            consumers=",".join(reader.name for reader in others),
        )
