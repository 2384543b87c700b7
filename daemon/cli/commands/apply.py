"""`preemptd apply FILE`: a configuration file handed to the running daemon, as `kubectl apply` does; `--dry-run` says what it would change."""

from __future__ import annotations

import argparse
from pathlib import Path

from preemptd.events import encode
from preemptd.projections import LogRecord, Rejected
from preemptd.scheduling import apply, config_changes, configured_alone, configured_before, counted, run_cycle, tick_record

from ...errors import UsageError
from .. import render
from ..options import at_least, common_options, log_target, nats_access, nats_url
from ..reading import state_at

NAME = "apply"
HELP = "hand a configuration file to the running daemon (as `run --config` takes it), as kubectl apply does"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file", help="a configuration file: queues.yaml, {model, config}, or `model: NAME` then the model's objects (ConfigMaps, kubectl get -o yaml lists)"
    )
    common_options(p, nats=True, db=True)
    p.add_argument(
        "--dry-run", action="store_true", help="print what it would change against the log's configuration, and what would be decided at once; send nothing"
    )
    p.add_argument("--timeout", type=at_least(0, float), default=30.0, help="how long to wait for the daemon's verdict, in seconds (default: 30)")


async def run(args: argparse.Namespace) -> int:
    """A configuration file, in the forms `run --config` takes, handed to the running daemon as
    its `config.applied` (as `kubectl apply` hands an object to the API server); `--dry-run`
    says what it would change against the log's configuration, and what would be decided now."""
    from ...clock import wall_ms
    from ...config_file import config_events
    from ...records import Outbound, cluster_subject
    from .. import client

    now = wall_ms()
    events = config_events(Path(args.file), now)
    if args.dry_run:
        return await _apply_dry_run(args, events, now)
    messages = [Outbound(cluster_subject(event.partition, "config.applied"), encode(event), event.id) for event in events]
    return await client.send(nats_url(args), events, messages, args.file, access=nats_access(args), wait=args.timeout, verbose=True)


async def _apply_dry_run(args: argparse.Namespace, events: list, now: int) -> int:
    """What `events` would change in the log's state at its end, per partition, in the model's
    words, and what would be decided at once (as `try --config` answers)."""
    from ...log.database import shown_url

    db = log_target(args)
    state, _ = await state_at(db, None)
    for event in events:
        before = configured_before(state, event)
        try:
            after = configured_alone(event)
            apply(state, LogRecord(state.seq + 1, now, event))
        except Rejected as exc:
            raise UsageError(f"{args.file} would be refused by the daemon: {exc.reason}") from None
        changes = config_changes(before, after)
        print(
            render.printable(
                f"partition {event.partition} ({after.model}), against {shown_url(db)} at log seq {state.seq - 1}: "
                + ("it would change" if changes else "nothing `preemptd state` shows would change")
            )
        )
        for change in changes:
            print(f"  {render.printable(change)}")
        decided = run_cycle(state, tick_record(state, now, event.partition)).decisions  # the cycle the change wakes
        print(f"  would decide at once: {counted(len(decided), 'decision')}")
        for decision in decided:
            print("    " + render.summary(decision))
    return 0
