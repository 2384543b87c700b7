"""`preemptd try FILE`: what would be decided if these events arrived now, asked of the running daemon or of a log at a point (nothing is logged)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from preemptd.projections import ClusterState, LogRecord, Rejected
from preemptd.scheduling import TrialRefused, apply, trial

from ...errors import UsageError
from ..options import common_options, nats_access, nats_url
from ..reading import state_at

NAME = "try"
HELP = "ask what would be decided if these events arrived now (nothing is logged or published)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file",
        help="events as publish takes them (JSON lines or YAML; - for stdin), for one partition: a job's app.submitted and task.submitted, ..., or the "
        "job's object (a Kueue Workload, a Volcano Job, ...)",
    )
    p.add_argument(
        "--show-events", action="store_true", help="print the events the file stands for (its objects' as the contract maps them), as JSON lines, first"
    )
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    common_options(p, nats=True)
    p.add_argument("--db", help="ask a log instead of the running daemon: a SQLite file or a SQLAlchemy URL")
    p.add_argument("--at", metavar="SEQ|TIME", help="with --db: the log's state at this position or time (default: its end)")
    p.add_argument("--config", help="with --db: under this configuration (the same model or another)")
    p.add_argument("--archive", metavar="DIR|URL", help="with --db: where the log's archived segments are now, if moved since the daemon wrote them")


async def run(args: argparse.Namespace) -> int:
    from .. import client

    if args.db is None:
        if args.at is not None or args.config is not None or args.archive is not None:
            raise UsageError("--at, --config and --archive ask a log, not the daemon: give the log with --db")
        return await client.ask(nats_url(args), args.file, access=nats_access(args), as_json=args.json, show_events=args.show_events)
    from ...queries import answer_json, ask_events

    partition, items = client.query_events(args.file)
    if args.show_events:
        client.shown_events(items)
    state, now = await state_at(args.db, args.at, args.archive)
    asked_of = state.seq  # the log position, before another configuration is applied to it
    if args.config is not None:
        _apply_config(state, Path(args.config), partition, now)
    try:
        events = ask_events(json.dumps(items).encode(), partition, now)
        result = trial(state, partition, events, now)
    except TrialRefused as exc:
        raise UsageError(f"cannot ask it of {args.db}: {exc.reason}") from None
    return client.print_answer({**json.loads(answer_json(result)), "seq": asked_of}, as_json=args.json)


def _apply_config(state: ClusterState, path: Path, partition: str, now: int) -> None:
    """`path`'s configuration of `partition`, applied to `state` as a change arriving at `now`."""
    from ...config_file import config_events

    for event in config_events(path, now):
        if event.partition == partition:
            try:
                apply(state, LogRecord(state.seq + 1, now, event))
            except Rejected as exc:
                raise UsageError(f"--config {path} cannot be applied to this state: {exc.reason}") from None
            return
    raise UsageError(f"--config {path} configures no partition {partition!r}")
