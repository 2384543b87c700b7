"""The `preemptd` command line: the parser of every command (each in `commands/`, with its
options and what it runs) and the dispatch, which turns errors of ours into one line.

    preemptd run            the daemon (embedded nats-server and SQLite log by default)
    preemptd publish FILE   JSON lines or YAML events to NATS, checked first, and the daemon's verdict: the simplest shim
    preemptd apply FILE     a configuration file to the running daemon (--dry-run: what it would change)
    preemptd tail           follow decisions, or rejected events
    preemptd try FILE       what the daemon would decide if these events arrived now (nothing logged)
    preemptd simulate FILE  run a scenario offline
    preemptd replay         recompute every decision of a log, or try another configuration
    preemptd explain NAME   why a decision was taken, or every decision about an application, task or queue
    preemptd state          the queue tree at any log position
    preemptd dead-letters   rejected input and why
    preemptd report         a self-contained HTML timeline of a log
    preemptd schema         the JSON Schema of events and decisions
    preemptd db upgrade     apply the log database migrations
"""

from __future__ import annotations

import argparse
import gc
import inspect
import os
import signal
import sys

from preemptd.events import PreemptdError, printable_lines

from ..early import early_stops
from ..errors import first_leaf
from ..operations.logs import configure
from .commands import COMMANDS, run as run_command
from .options import COMMAND_PARSERS, Parser, Version

# The database (SQLAlchemy, Alembic), NATS, anyio and tqdm are imported by the commands that use
# them: `--help`, `--version` and `schema` start in a tenth of the time.

__all__ = ["GC_THRESHOLDS", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="preemptd", description="An event-sourced preemption daemon for shared batch and AI clusters.")
    parser.add_argument("--version", action=Version, nargs=0, help="show the version and exit")
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"], help="before the command: `preemptd --log-level debug run`"
    )
    parser.add_argument("--log-format", default="logfmt", choices=["logfmt", "json"], help="daemon logs on stderr (default: logfmt)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        sub = commands.add_parser(command.NAME, help=command.HELP)
        sub.set_defaults(func=command.run)
        command.add_arguments(sub)  # a command with actions of its own (`db upgrade`) sets theirs
    for sub in commands.choices.values():
        for parser_of in (sub, *_actions_of(sub)):
            COMMAND_PARSERS[parser_of.get_default("func")] = parser_of
    return parser


def _actions_of(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of a command's own actions (`db upgrade`)."""
    return [action for group in parser._actions if isinstance(group, argparse._SubParsersAction) for action in group.choices.values()]


#: The state is hundreds of thousands of objects that hold no reference cycles: with Python's
#: default thresholds the collector went through them again and again, a tenth of a fold.
GC_THRESHOLDS = (50_000, 20, 100)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    gc.set_threshold(*GC_THRESHOLDS)
    configure(args.log_level, args.log_format)
    if args.func is not run_command.run:  # `run` handles stop signals itself; the others end at once, as ever
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if early_stops:  # a stop while loading (checked after the above, so none is missed): nothing has started
        return 0
    try:
        if not _is_async(args.func):
            return args.func(args)
        import anyio

        return anyio.run(args.func, args, backend="asyncio")
    except PreemptdError as exc:
        print(f"preemptd: {printable_lines(str(exc))}", file=sys.stderr)
        return 2
    except BaseExceptionGroup as group:  # from a task group: ours are still one-line errors
        ours, others = group.split(PreemptdError)
        if ours is None:
            raise
        if others is not None and others.split(_consequences())[1] is not None:  # a bug beside ours: both shown
            raise
        print(f"preemptd: {printable_lines(str(first_leaf(ours)))}", file=sys.stderr)  # the rest followed from it
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `preemptd schema | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _consequences() -> tuple[type[BaseException], ...]:
    """What other tasks meet once one ended with an error of ours (a stream closed under them):
    consequences, not news. (anyio is loaded by then: only async commands make groups.)"""
    import anyio

    return (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, ConnectionError, OSError)


def _is_async(func) -> bool:
    return inspect.iscoroutinefunction(func)
