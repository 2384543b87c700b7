"""`preemptd publish FILE`: events (or the objects a shim would translate) to NATS, checked first, and the daemon's verdict on each."""

from __future__ import annotations

import argparse

from ...errors import UsageError
from ..options import at_least, common_options, nats_access, nats_url

NAME = "publish"
HELP = "publish events from a file (JSON lines or YAML; - for stdin) and report the daemon's verdict"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file",
        help="events as JSON lines, or a YAML list or documents, or the objects a shim would translate (a Kueue Workload, a Volcano Job, ...: see the "
        "contract); - reads stdin; `id` and `ts` are filled when missing",
    )
    p.add_argument(
        "--show-events", action="store_true", help="print the events the file stands for (its objects' as the contract maps them), as JSON lines, first"
    )
    common_options(p, nats=True)
    p.add_argument("--no-check", action="store_true", help="send events even if they are not valid events of the contract (the daemon will reject them)")
    p.add_argument("--no-wait", action="store_true", help="send and return, without waiting for the daemon's verdict on each event")
    p.add_argument("--wait", action="store_true", help=argparse.SUPPRESS)  # the default since 0.2; kept so that scripts written before still run
    p.add_argument("--verbose", "-v", action="store_true", help="print the verdict on every event, accepted ones too (default: only those not accepted)")
    p.add_argument("--timeout", type=at_least(0, float), default=30.0, help="how long to wait for a running daemon to read them, in seconds (default: 30)")


async def run(args: argparse.Namespace) -> int:
    from .. import client

    if args.wait and args.no_wait:
        raise UsageError("--wait and --no-wait say opposite things: give one (waiting is the default)")

    return await client.publish(
        nats_url(args),
        args.file,
        access=nats_access(args),
        check=not args.no_check,
        wait=None if args.no_wait else args.timeout,
        verbose=args.verbose,
        show_events=args.show_events,
    )
