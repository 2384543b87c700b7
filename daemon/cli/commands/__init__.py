"""One module per command: `NAME`, `HELP`, `add_arguments(parser)` and `run(args)` (async
where it reads a log or NATS), in the order `preemptd --help` lists them."""

from . import apply, db, dead_letters, explain, publish, replay, report, run, schema, simulate, state, tail, try_

__all__ = ["COMMANDS"]

COMMANDS = (run, publish, apply, try_, tail, simulate, replay, explain, state, dead_letters, report, schema, db)
