"""`preemptd run`: the daemon, on its embedded defaults or the NATS and log given; its retention policy."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from preemptd.events import DurationError, parse_duration
from preemptd.scheduling import DEFAULT_MODEL

from ...errors import UsageError
from ..options import at_least, common_options, duration, log_target, nats_access, nats_security_options, partitions, port, state_dir

if TYPE_CHECKING:
    from ...log.segments import Retention

NAME = "run"
HELP = "run the daemon"


def add_arguments(p: argparse.ArgumentParser) -> None:
    common_options(p, db=True)
    p.add_argument(
        "--nats-url",
        help="use this NATS server instead of starting the bundled one; several, comma-separated, for a cluster; tls:// for TLS (default: $PREEMPTD_NATS_URL)",
    )
    nats_security_options(p)
    p.add_argument(
        "--nats-port", type=port, default=0, help="port for the bundled nats-server; refused if in use (default: the previous one if free, else a free one)"
    )
    p.add_argument("--config", help=f"a configuration file, {{model, config}} or the {DEFAULT_MODEL} model's alone, applied at start where it differs")
    p.add_argument("--tick", default="1s", help="time between scheduling cycles of a partition with pending tasks (default: 1s)")
    p.add_argument(
        "--cycle-time",
        default="5ms",
        help="how long a cycle decides before it stops and the next goes on, events read in between, so that an arrival in a queue with room is not "
        "held behind a long one; the log records where each stopped, so replay is exact (default: 5ms)",
    )
    p.add_argument(
        "--idle-tick",
        default="30s",
        help="time between cycles while the last one decided nothing and nothing happened since; a delay running out still wakes a cycle at once "
        "(default: 30s)",
    )
    p.add_argument("--batch", type=at_least(1), default=1000, help="events fetched and committed per transaction (default: 1000)")
    p.add_argument("--snapshot-every", type=at_least(1), default=100_000, help="log records between snapshots (default: 100000)")
    p.add_argument(
        "--archive",
        metavar="DIR|URL",
        help="where segments of the log go once closed, as compressed files: a directory, or an fsspec URL such as s3://bucket/preemptd (with its "
        "library, e.g. s3fs); off keeps the whole log live (default: STATE_DIR/archive)",
    )
    p.add_argument(
        "--retain", default="7d", metavar="DURATION", help="the live log keeps at least this much history; older archived segments leave it (default: 7d)"
    )
    p.add_argument(
        "--retain-bytes", default="8Gi", metavar="SIZE", help="the live log's size on disk above which its oldest archived segments leave it (default: 8Gi)"
    )
    p.add_argument(
        "--sqlite-synchronous", default="FULL", choices=["FULL", "NORMAL"], help="FULL survives power loss; NORMAL only process crashes (default: FULL)"
    )
    p.add_argument(
        "--partitions",
        type=partitions,
        metavar="A,B",
        help="read and decide for these partitions only, so that several daemons (each with its own log) share one NATS (default: every partition)",
    )
    p.add_argument(
        "--max-partitions",
        type=at_least(1),
        help="keep at most this many partitions: an event that would make one more is a dead letter (default: 1000)",
    )
    p.add_argument(
        "--lease-expiry",
        metavar="DURATION",
        help="a PostgreSQL log's writer renews its lease every second; a standby ends the session of one silent this long (hung, frozen) and takes "
        "over (default: 15s)",
    )
    p.add_argument(
        "--metrics-addr",
        metavar="HOST:PORT",
        help="serve Prometheus metrics (/metrics), /healthz and /readyz here; a bare port listens on loopback only (default: off)",
    )


async def run(args: argparse.Namespace) -> int:
    from ...operations.metrics import listen_address
    from ...runtime import Settings, run

    settings = Settings(
        state_dir=state_dir(args),
        db=log_target(args, as_written=False),  # what this run is given, not what an earlier one was
        nats_url=args.nats_url or os.environ.get("PREEMPTD_NATS_URL"),
        nats_port=args.nats_port,
        nats_access=nats_access(args),
        config=Path(args.config) if args.config else None,
        tick=duration(args.tick, "--tick"),
        cycle_time=duration(args.cycle_time, "--cycle-time"),
        idle_tick=duration(args.idle_tick, "--idle-tick"),
        batch=args.batch,
        snapshot_every=args.snapshot_every,
        synchronous=args.sqlite_synchronous,
        metrics_addr=listen_address(args.metrics_addr) if args.metrics_addr else None,
        partitions=args.partitions,
        retention=_retention(args),
        **({"max_partitions": args.max_partitions} if args.max_partitions is not None else {}),
        **({"lease_expiry": _lease_expiry(args.lease_expiry)} if args.lease_expiry is not None else {}),
    )
    secured = [option for option in ("nats_creds", "nats_tls_ca", "nats_tls_cert", "nats_tls_key") if getattr(args, option)]
    if secured and not settings.nats_url:
        raise UsageError(
            f"--{secured[0].replace('_', '-')} is for a NATS server of your own (--nats-url); the bundled one is on loopback, without TLS or credentials"
        )
    if settings.nats_access.creds:  # before anything starts
        from ...bus import check_credentials
        from ...errors import BusError

        try:
            check_credentials(settings.nats_access.creds)
        except BusError as exc:
            raise UsageError(str(exc)) from None
    await run(settings)
    return 0


def _retention(args: argparse.Namespace) -> Retention:
    """`run`'s retention policy: on by default, off with `--archive off`."""
    from ...errors import StoreError
    from ...log.archive import Archive
    from ...log.segments import Retention

    if args.archive == "off":
        return Retention(None)
    archive = args.archive or str(state_dir(args) / "archive")
    try:
        Archive(archive)  # an unknown scheme, or an object store without its library, is said before anything starts
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    return Retention(archive, age=_days_or_duration(args.retain, "--retain"), bytes=_size(args.retain_bytes, "--retain-bytes"))


def _days_or_duration(text: str, option: str) -> int:
    """`7d` (days, as retention is said), or a duration (`12h`, `30m`)."""
    if re.fullmatch(r"[0-9]+d", text):
        return int(text[:-1]) * 24 * 3600 * 1000 or duration("0s", option)
    try:
        return parse_duration(text) or duration("0s", option)
    except DurationError:
        raise UsageError(f"{option} {text!r}: expected days or a duration, such as 7d, 12h or 30m") from None


def _size(text: str, option: str) -> int:
    from preemptd.events import QuantityError, parse_quantity

    try:
        amount = parse_quantity("memory", text)
    except QuantityError:
        amount = 0
    if amount <= 0:
        raise UsageError(f"{option} {text!r}: expected a size such as 8Gi, 500Mi or 2G")
    return amount


def _lease_expiry(text: str) -> int:
    """`--lease-expiry`: at least three renewals (a writer renews every second), or a standby
    would end the sessions of a writer that is only slow."""
    milliseconds = duration(text, "--lease-expiry")
    if milliseconds < 3000:
        raise UsageError(f"--lease-expiry {text}: at least 3s (a writer renews its lease every second)")
    return milliseconds
