"""`preemptd db upgrade`: the log database's migrations, also applied at start."""

from __future__ import annotations

import argparse

from ..options import common_options, log_target

NAME = "db"
HELP = "log database maintenance"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..options import Parser

    actions = p.add_subparsers(dest="db_command", required=True, metavar="ACTION", parser_class=Parser)
    upgrade = actions.add_parser("upgrade", help="apply migrations (also done at start-up)")
    common_options(upgrade, db=True)
    upgrade.set_defaults(func=run)


async def run(args: argparse.Namespace) -> int:
    from ...log.database import shown_url
    from ...log.store import Store

    store = await Store.open(log_target(args))
    try:
        counts = await store.counts()
    finally:
        await store.close()
    print(
        f"{shown_url(log_target(args))}: schema up to date (log {store.log_id}, {counts['log']} records, {counts['unpublished']} decisions "
        f"unpublished, {counts['passed_over']} passed over)"
    )
    return 0
