"""`preemptd tail`: follow decisions, or the notices of rejected events."""

from __future__ import annotations

import argparse

from ..options import at_least, common_options, nats_access, nats_url

NAME = "tail"
HELP = "follow decisions, or rejected events"


def add_arguments(p: argparse.ArgumentParser) -> None:
    common_options(p, nats=True)
    p.add_argument("--rejected", action="store_true", help="follow the notices of rejected events (each with its reason) instead of decisions")
    p.add_argument("--json", action="store_true", help="print decisions (or notices) as JSON lines")
    p.add_argument("--partition", default="*", help="only this partition's decisions or rejections (default: all)")
    p.add_argument(
        "--from-start",
        action="store_true",
        help="begin with the oldest the stream keeps (by default 7 days and 4 GiB: the daemon's --retain and --retain-bytes)",
    )
    p.add_argument("--count", type=at_least(0), default=0, help="stop after this many (default: 0, never)")
    p.add_argument("--timeout", type=at_least(0, float), default=0, help="stop after this many seconds (default: 0, never)")


async def run(args: argparse.Namespace) -> int:
    from .. import client

    return await client.tail(
        nats_url(args),
        access=nats_access(args),
        partition=args.partition,
        rejected=args.rejected,
        as_json=args.json,
        from_start=args.from_start,
        count=args.count,
        timeout=args.timeout,
    )
