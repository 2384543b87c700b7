"""Where a log stands in the cluster stream of the NATS it is connected to.

Positions are kept per stream instance (named by its creation time), so that a daemon moved to
another NATS, or whose stream was recreated, reads that stream from its start, and finds its
place again when it comes back, instead of applying one stream's position to another.
"""

from __future__ import annotations

import logging

from .logs import log
from .nats_source import CLUSTER_STREAM, CONSUMER, Bus
from .store import Batch, Store

__all__ = ["start_position"]

_LEGACY_TRACKING = f"{CLUSTER_STREAM}/{CONSUMER}"  # the position's name before streams were told apart


async def start_position(store: Store, bus: Bus) -> tuple[str, int]:
    """The cluster stream's name in the log (`source`) and how far this log has read it."""
    created, end = await bus.cluster_stream()
    source = f"{CLUSTER_STREAM}@{created}"
    positions = await store.tracking_positions()
    if source in positions:
        position = positions[source]
    elif set(positions) == {_LEGACY_TRACKING} and positions[_LEGACY_TRACKING] <= end:
        position = positions[_LEGACY_TRACKING]  # a log from before positions were per stream
        await bus.remove_consumer(CONSUMER)  # and its consumer, named before consumers were per log
    else:
        position = 0
        if positions:
            log("this log has not read this cluster stream before (another NATS, or a recreated stream): reading it from its start", logging.WARNING, stream_created=created, stream_end=end)
    if source not in positions:
        await store.commit(Batch(tracking=(source, position)))
    others = await bus.other_consumers(f"{CONSUMER}-{store.log_id}")
    if others:
        log(
            "other preemptd logs consume the cluster stream of this NATS: each daemon will publish its own decisions "
            "(the consumer of a log no longer used can be removed: nats consumer rm PREEMPTD_CLUSTER <name>)",
            logging.WARNING,
            consumers=",".join(others),
        )
    return source, position
