"""`preemptd explain NAME`: a decision and the checks behind it, a configuration change, or the story of an application, task or queue."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from preemptd.events import decode_decision, to_builtins
from preemptd.scheduling import queue_usage

from ...errors import UsageError
from .. import render
from ..options import common_options, log_target
from ..reading import reading
from ..stories import Models, QueueStory, Story, closest_name, model_at, models_of, queue_stories, stories, terms_of

if TYPE_CHECKING:
    from ...log.history import History
    from ...records import LogRow

NAME = "explain"
HELP = "show a decision and the checks behind it, every decision about an application or task, or what a configuration change runs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "decision",
        metavar="NAME",
        help="a decision id, the id of a config.applied, an application or task: every decision about it (Kueue: a workload or any of its pods; "
        "Volcano: a job or a task), or a queue (Kueue: a ClusterQueue, LocalQueue or cohort): what was placed or admitted into it, taken from it and for it",
    )
    p.add_argument("--task", action="store_true", help="take NAME for an application or task only, never a decision id")
    p.add_argument("--json", action="store_true", help="print the decisions as JSON lines")
    common_options(p, db=True, archived=True)


async def run(args: argparse.Namespace) -> int:
    from ...log.database import shown_url
    from ...records import to_record

    history = await reading(log_target(args), args.archive)
    try:
        row = None if args.task else await history.find(args.decision)
        if row is not None and row.type != "config.applied" and not row.type.startswith("decision."):
            row = None  # another event's id: it may still be the name of an application or task
        configs = await history.configs_applied()
        models = models_of(configs)
        found = [] if row is not None else await stories(history, args.decision, models)
        queues = [] if row is not None or args.task else await queue_stories(history, args.decision, configs)
        usage = await _queue_usage(history, queues) if queues and not args.json else {}
        near = await closest_name(history, args.decision) if row is None and not found and not queues else None
    finally:
        await history.close()
    if row is not None and row.type == "config.applied":
        earlier = [c for c in configs if c.seq < row.seq and c.partition == row.partition]
        print(render.config_change(to_record(row), to_record(earlier[-1]) if earlier else None))
        return 0
    if row is not None and row.type.startswith("decision."):
        _print_decisions([row], models, args.json)
        return 0
    if not found and not queues:
        no_id = "" if args.task else f"no decision with id {args.decision!r} and "
        hint = f" (did you mean {render.printable(near)}?)" if near else ""
        raise UsageError(f"{no_id}no application, task or queue named {args.decision!r} in {shown_url(log_target(args))}{hint}")
    told: list[Story | QueueStory] = [*found, *queues]
    for story in told:
        if not args.json:
            print(story.heading())
        if isinstance(story, QueueStory) and story.partition in usage:
            print("\n".join(queue_usage(usage[story.partition], story.described, story.peers)))
        _print_decisions(story.rows, models, args.json)
    return 0


async def _queue_usage(history: History, told: list[QueueStory]) -> dict[str, dict[str, Any]]:
    """The report's data of each partition a queue story is told in: what its queues held over the log."""
    from preemptd.scheduling import Window

    from ..page import build

    partitions = {story.partition for story in told}
    data = await build(
        history, window=Window(), partition=next(iter(partitions)) if len(partitions) == 1 else None, title="", quiet=False, desc="usage"
    )  # a bar on a terminal: the fold reads the whole log
    return {drawn["name"]: drawn for drawn in data["partitions"] if drawn["name"] in partitions}


def _print_decisions(rows: list[LogRow], models: Models, as_json: bool) -> None:
    """Each decision as a JSON line, or explained in its partition's model's terms."""
    for row in rows:
        decision = decode_decision(row.payload)
        print(
            json.dumps(to_builtins(decision))
            if as_json
            else render.explanation(decision, row.seq, terms_of(model_at(models, decision.partition, row.seq)).words)
        )
