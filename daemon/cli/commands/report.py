"""`preemptd report`: one self-contained HTML page of a log's timeline."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ..options import common_options, log_target
from ..reading import reading

NAME = "report"
HELP = "write a self-contained HTML page of the log's timeline"


def add_arguments(p: argparse.ArgumentParser) -> None:
    common_options(p, db=True, archived=True)
    p.add_argument("--partition", help="only this partition (default: all)")
    p.add_argument("--from", dest="since", metavar="SEQ|TIME", help="from this log position or time (ISO 8601, e.g. 2026-11-21T09:43:00Z)")
    p.add_argument("--to", dest="until", metavar="SEQ|TIME", help="up to this log position or time")
    p.add_argument("--compare", metavar="DB", help="another log of the same history (another configuration): the decisions that differ")
    p.add_argument("--title", help="the page's title (default: the log's name)")
    p.add_argument("-o", "--output", default="report.html", help="where to write the page (default: report.html)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


async def run(args: argparse.Namespace) -> int:
    from ...log.database import shown_url
    from ..page import window, with_comparison, write_report

    span = window(args.since, args.until)
    data = await _report_data(log_target(args), args, span, args.archive)
    if args.compare:
        data = with_comparison(data, await _report_data(args.compare, args, span), shown_url(args.compare))
    write_report(Path(args.output), data)
    return 0


async def _report_data(target: str, args: argparse.Namespace, span, archive: str | None = None) -> dict[str, Any]:
    from ...log.database import shown_url
    from ..page import build

    history = await reading(target, archive)
    try:
        data = await build(history, window=span, partition=args.partition, title=args.title or f"preemptd report of {shown_url(target)}", quiet=args.quiet)
    finally:
        await history.close()
    if args.partition is not None and not data["partitions"]:
        raise UsageError(f"no partition {args.partition!r} in {shown_url(target)} within the window")
    return data
