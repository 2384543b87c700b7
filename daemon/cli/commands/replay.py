"""`preemptd replay`: every decision of a log made again and compared, or the same history under another configuration."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from preemptd.scheduling import ReplayConfig, Replayer

from ...errors import UsageError
from .. import render
from ..options import at_least, common_options, log_target
from ..reading import reading

NAME = "replay"
HELP = "recompute every decision of a log and compare"


def add_arguments(p: argparse.ArgumentParser) -> None:
    common_options(p, db=True, archived=True)
    p.add_argument("--until", type=at_least(0), help="stop after this log position")
    p.add_argument("--config", help="replay under this configuration and list the decisions that differ")
    p.add_argument("--report", metavar="HTML", help="with --config: also write the timeline report of the log, with the decisions that differ")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


async def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from preemptd.scheduling import Timeline

    from ...log.database import shown_url
    from ..page import what_if, write_report

    if args.report and not args.config:
        raise UsageError("--report shows what another configuration changes: give it with --config")
    history = await reading(log_target(args), args.archive)
    try:
        configs = _replay_configs(Path(args.config)) if args.config else None
        last = await history.store.last_seq()
        total = last if args.until is None else min(args.until, last)
        replayer = Replayer(history.log_id, configs)
        timeline = Timeline(history.log_id, total) if args.report else None
        with tqdm(total=total, unit="rec", unit_scale=True, disable=args.quiet or None, file=sys.stderr, desc="replay") as bar:
            async for page in history.records(until=args.until):
                stepped, whole = 0, True
                for record in page:
                    if not replayer.step(record):
                        whole = False
                        break
                    if timeline is not None:
                        timeline.step(record)
                    stepped += 1
                bar.update(stepped)
                if not whole:
                    break
        replayer.finish(cut=total < last)
    finally:
        await history.close()
    print(render.replay_summary(replayer.report, what_if=bool(configs)))
    if timeline is not None:
        write_report(
            Path(args.report),
            what_if(timeline.result(f"preemptd replay of {shown_url(log_target(args))} under {args.config}"), replayer.report, f"--config {args.config}"),
        )
    return 1 if replayer.report.divergence is not None else 0


def _replay_configs(path: Path) -> dict[str, ReplayConfig]:
    from ...config_file import config_events

    return {event.partition: (event.model, event.config) for event in config_events(path, 0)}
