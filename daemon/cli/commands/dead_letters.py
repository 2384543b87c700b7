"""`preemptd dead-letters`: rejected input and why, newest last."""

from __future__ import annotations

import argparse
import json
import sys

from preemptd.scheduling import counted

from .. import render
from ..options import at_least, common_options, log_target

NAME = "dead-letters"
HELP = "rejected input, newest last"


def add_arguments(p: argparse.ArgumentParser) -> None:
    common_options(p, db=True)
    p.add_argument("--limit", type=at_least(1), default=20, help="show the newest this many (default: 20)")
    p.add_argument("--json", action="store_true", help="print each dead letter as JSON, with its raw bytes")


async def run(args: argparse.Namespace) -> int:
    from ...log.store import Store

    store = await Store.open(log_target(args), create=False)
    try:
        letters = await store.dead_letters(args.limit)
        counts = await store.counts()
    finally:
        await store.close()
    for dead in letters:
        if args.json:
            print(json.dumps({**dead.stored(), "raw": dead.raw.decode(errors="replace")}))
        else:
            print(render.dead_letter(dead))
    passed = f"; {counted(counts['passed_over'], 'decision')} passed over by the publisher (the daemon's log says why)" if counts["passed_over"] else ""
    print(f"{counted(counts['dead_letters'], 'dead letter')} in all{passed}", file=sys.stderr)
    return 0
