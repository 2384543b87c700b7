"""`preemptd state`: each partition's queue tree at any log position, in its model's terms."""

from __future__ import annotations

import argparse
import json

from preemptd.projections import partition_view

from ...errors import UsageError
from .. import render
from ..options import at_least, common_options, log_target
from ..reading import reading

NAME = "state"
HELP = "the queue tree: usage, and each queue in its model's terms (guaranteed and max; Kueue's quotas; Volcano's deserved, share and jobs)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    common_options(p, db=True, archived=True)
    p.add_argument("--at", type=at_least(0), help="as of this log position (default: the end)")
    p.add_argument("--partition", help="only this partition (default: all)")
    p.add_argument("--json", action="store_true", help="print each partition's state as JSON")


async def run(args: argparse.Namespace) -> int:
    from ...log.history import load_state

    history = await reading(log_target(args), args.archive)
    try:
        last = await history.store.last_seq()
        if args.at is not None and args.at > last:
            raise UsageError(f"--at {args.at} is past the end of the log (seq {last})")
        state = await load_state(history, until=args.at)
    finally:
        await history.close()
    partitions = [p for name, p in sorted(state.partitions.items()) if args.partition in (None, name)]
    if not partitions:
        if args.partition:
            raise UsageError(f"no partition {args.partition!r} at seq {state.seq}")
        raise UsageError("the log is empty" if not last else f"no partition yet at seq {state.seq} (the log runs from 1 to {last})")
    for partition in partitions:
        if args.json:
            view = partition_view(partition)
            for path, said in render.queue_columns_json(partition).items():  # the table's columns, in the model's terms
                queue = view["queues"][path]
                del queue["guaranteed"], queue["max"]  # the model says what bounds a queue (YuniKorn's columns are these)
                lineage = partition.queues[path].lineage
                queue.update(parent=lineage[1] if len(lineage) > 1 else None, **said)
            view.update(render.tables_json(partition))
            print(json.dumps(view, indent=2))
        else:
            print(render.queue_table(partition, state.seq) + "\n")
    return 0
