"""The `preemptd` command line.

    preemptd run            the daemon (embedded nats-server and SQLite log by default)
    preemptd publish FILE   JSON lines or YAML events to NATS, checked first, and the daemon's verdict: the simplest shim
    preemptd tail           follow decisions, or rejected events
    preemptd try FILE       what the daemon would decide if these events arrived now (nothing logged)
    preemptd simulate FILE  run a scenario offline
    preemptd replay         recompute every decision of a log, or try another configuration
    preemptd explain NAME   why a decision was taken, or every decision about an application or task
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
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from preemptd.events import (
    PARTITION_PATTERN,
    DurationError,
    PreemptdError,
    Scenario,
    closest,
    decode_decision,
    encode,
    field_meant,
    json_schema,
    parse_duration,
    to_builtins,
    type_of,
)
from preemptd.projections import ClusterState, LogRecord, Rejected, partition_view
from preemptd.scheduling import (
    DEFAULT_MODEL,
    MODELS,
    ReplayConfig,
    Replayer,
    ScenarioError,
    TrialRefused,
    apply,
    check,
    config_changes,
    configured_alone,
    configured_before,
    queue_usage,
    run_cycle,
    simulate,
    tick_record,
    trial,
)

from ..early import early_stops, version
from ..errors import UsageError, first_leaf
from ..operations.logs import configure
from . import render
from .explain import Models, QueueStory, Story, closest_name, model_at, models_of, queue_stories, stories, terms_of

if TYPE_CHECKING:
    from ..bus import NatsAccess
    from ..log.archive import Retention
    from ..log.store import Store
    from ..records import LogRow

# The database (SQLAlchemy, Alembic), NATS, anyio and tqdm are imported by the commands that use
# them: `--help`, `--version` and `schema` start in a tenth of the time.

__all__ = ["main"]

DEFAULT_STATE_DIR = "preemptd-state"


def _state_dir(args: argparse.Namespace) -> Path:
    return Path(args.state_dir or os.environ.get("PREEMPTD_STATE_DIR") or DEFAULT_STATE_DIR)


def _db(args: argparse.Namespace, *, as_written: bool = True) -> str:
    """--db, else (`as_written`) the log the daemon of the state directory wrote it uses (a
    PostgreSQL URL without its password: give it with $PGPASSWORD or ~/.pgpass), else the
    directory's SQLite file."""
    from ..settings import LOG_FILE

    if args.db:
        return args.db
    written = _state_dir(args) / LOG_FILE
    if as_written and written.is_file():
        return written.read_text().strip()
    return str(_state_dir(args) / "preemptd.db")


def _nats_access(args: argparse.Namespace) -> NatsAccess:
    """Credentials and TLS files from the options, else from the environment (secrets such as
    passwords and tokens only from there, or in the URL: never on a command line others see)."""
    from ..bus import NatsAccess

    env = os.environ.get
    return NatsAccess(
        creds=args.nats_creds or env("PREEMPTD_NATS_CREDS"),
        user=env("PREEMPTD_NATS_USER"),
        password=env("PREEMPTD_NATS_PASSWORD"),
        token=env("PREEMPTD_NATS_TOKEN"),
        tls_ca=args.nats_tls_ca or env("PREEMPTD_NATS_TLS_CA"),
        tls_cert=args.nats_tls_cert or env("PREEMPTD_NATS_TLS_CERT"),
        tls_key=args.nats_tls_key or env("PREEMPTD_NATS_TLS_KEY"),
        inbox_prefix=args.nats_inbox_prefix or env("PREEMPTD_NATS_INBOX_PREFIX"),
    )


def _nats_url(args: argparse.Namespace) -> str:
    """--nats-url, else $PREEMPTD_NATS_URL, else the URL a local daemon wrote in its state dir."""
    if args.nats_url or os.environ.get("PREEMPTD_NATS_URL"):
        return args.nats_url or os.environ["PREEMPTD_NATS_URL"]
    written = _state_dir(args) / "nats.url"
    if written.exists():
        return written.read_text().strip()
    raise UsageError(f"no NATS URL: pass --nats-url, set PREEMPTD_NATS_URL, or start `preemptd run` (it writes {written})")


# -- commands -----------------------------------------------------------------------------


async def cmd_run(args: argparse.Namespace) -> int:
    from ..operations.metrics import listen_address
    from ..runtime import Settings, run

    settings = Settings(
        state_dir=_state_dir(args),
        db=_db(args, as_written=False),  # what this run is given, not what an earlier one was
        nats_url=args.nats_url or os.environ.get("PREEMPTD_NATS_URL"),
        nats_port=args.nats_port,
        nats_access=_nats_access(args),
        config=Path(args.config) if args.config else None,
        tick=_duration(args.tick, "--tick"),
        cycle_time=_duration(args.cycle_time, "--cycle-time"),
        idle_tick=_duration(args.idle_tick, "--idle-tick"),
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
        raise UsageError(f"--{secured[0].replace('_', '-')} is for a NATS server of your own (--nats-url); the bundled one is on loopback, without TLS or credentials")
    if settings.nats_access.creds:  # before anything starts
        from ..bus import check_credentials
        from ..errors import BusError

        try:
            check_credentials(settings.nats_access.creds)
        except BusError as exc:
            raise UsageError(str(exc)) from None
    await run(settings)
    return 0


def _retention(args: argparse.Namespace) -> Retention:
    """`run`'s retention policy: on by default, off with `--archive off`."""
    from ..errors import StoreError
    from ..log.archive import Archive, Retention

    if args.archive == "off":
        return Retention(None)
    archive = args.archive or str(_state_dir(args) / "archive")
    try:
        Archive(archive)  # an unknown scheme, or an object store without its library, is said before anything starts
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    return Retention(archive, age=_days_or_duration(args.retain, "--retain"), bytes=_size(args.retain_bytes, "--retain-bytes"))


def _days_or_duration(text: str, option: str) -> int:
    """`7d` (days, as retention is said), or a duration (`12h`, `30m`)."""
    if re.fullmatch(r"[0-9]+d", text):
        return int(text[:-1]) * 24 * 3600 * 1000 or _duration("0s", option)
    try:
        return parse_duration(text) or _duration("0s", option)
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
    milliseconds = _duration(text, "--lease-expiry")
    if milliseconds < 3000:
        raise UsageError(f"--lease-expiry {text}: at least 3s (a writer renews its lease every second)")
    return milliseconds


def _duration(text: str, option: str) -> int:
    try:
        milliseconds = parse_duration(text)
    except DurationError as exc:
        raise UsageError(f"{option}: {exc}") from None
    if milliseconds <= 0:
        raise UsageError(f"{option} must be longer than 0s")
    return milliseconds


async def cmd_apply(args: argparse.Namespace) -> int:
    """A configuration file, in the forms `run --config` takes, handed to the running daemon as
    its `config.applied` (as `kubectl apply` hands an object to the API server); `--dry-run`
    says what it would change against the log's configuration, and what would be decided now."""
    from ..clock import wall_ms
    from ..config_file import config_events
    from ..records import Outbound, cluster_subject
    from . import client

    now = wall_ms()
    events = config_events(Path(args.file), now)
    if args.dry_run:
        return await _apply_dry_run(args, events, now)
    messages = [Outbound(cluster_subject(event.partition, "config.applied"), encode(event), event.id) for event in events]
    return await client.send(_nats_url(args), events, messages, args.file, access=_nats_access(args), wait=args.timeout, verbose=True)


async def _apply_dry_run(args: argparse.Namespace, events: list, now: int) -> int:
    """What `events` would change in the log's state at its end, per partition, in the model's
    words, and what would be decided at once (as `try --config` answers)."""
    from ..log.database import shown_url

    db = _db(args)
    state, _ = await _state_at(db, None)
    for event in events:
        before = configured_before(state, event)
        try:
            after = configured_alone(event)
            apply(state, LogRecord(state.seq + 1, now, event))
        except Rejected as exc:
            raise UsageError(f"{args.file} would be refused by the daemon: {exc.reason}") from None
        changes = config_changes(before, after)
        print(render.printable(f"partition {event.partition} ({after.model}), against {shown_url(db)} at log seq {state.seq - 1}: " + ("it would change" if changes else "nothing `preemptd state` shows would change")))
        for change in changes:
            print(f"  {render.printable(change)}")
        decided = run_cycle(state, tick_record(state, now, event.partition)).decisions  # the cycle the change wakes
        print(f"  would decide at once: {render.count(len(decided), 'decision')}")
        for decision in decided:
            print("    " + render.summary(decision))
    return 0


async def cmd_publish(args: argparse.Namespace) -> int:
    from . import client

    if args.wait and args.no_wait:
        raise UsageError("--wait and --no-wait say opposite things: give one (waiting is the default)")

    return await client.publish(
        _nats_url(args), args.file, access=_nats_access(args), check=not args.no_check, wait=None if args.no_wait else args.timeout, verbose=args.verbose, show_events=args.show_events
    )


async def cmd_try(args: argparse.Namespace) -> int:
    from . import client

    if args.db is None:
        if args.at is not None or args.config is not None or args.archive is not None:
            raise UsageError("--at, --config and --archive ask a log, not the daemon: give the log with --db")
        return await client.ask(_nats_url(args), args.file, access=_nats_access(args), as_json=args.json, show_events=args.show_events)
    from ..queries import answer_json, ask_events

    partition, items = client.query_events(args.file)
    if args.show_events:
        client.shown_events(items)
    state, now = await _state_at(args.db, args.at, args.archive)
    asked_of = state.seq  # the log position, before another configuration is applied to it
    if args.config is not None:
        _apply_config(state, Path(args.config), partition, now)
    try:
        events = ask_events(json.dumps(items).encode(), partition, now)
        result = trial(state, partition, events, now)
    except TrialRefused as exc:
        raise UsageError(f"cannot ask it of {args.db}: {exc.reason}") from None
    return client.print_answer({**json.loads(answer_json(result)), "seq": asked_of}, as_json=args.json)


async def _state_at(db: str, at: str | None, archive: str | None = None) -> tuple[ClusterState, int]:
    """The state of the log `db` at `at` (a log position or a time; default: its end), and the
    time a question asked of it is asked at (that time, else the last record's); archived
    segments are read where the daemon wrote them, or in `archive`."""
    from ..log.history import load_state, records
    from .report import window

    bounds = window(None, at)
    store = await _reading(db, archive)
    try:
        if bounds.until is None:
            if bounds.last is not None and bounds.last > await store.last_seq():
                raise UsageError(f"--at {at} is past the end of the log (seq {await store.last_seq()})")
            state = await load_state(store, until=bounds.last)
            return state, max((p.last_tick for p in state.partitions.values()), default=0)
        state = ClusterState(log_id=store.log_id)
        async for page in records(store):
            for record in page:
                if record.received > bounds.until:
                    return state, bounds.until
                apply(state, record)
        return state, bounds.until
    finally:
        await store.close()


def _apply_config(state: ClusterState, path: Path, partition: str, now: int) -> None:
    """`path`'s configuration of `partition`, applied to `state` as a change arriving at `now`."""
    from ..config_file import config_events

    for event in config_events(path, now):
        if event.partition == partition:
            try:
                apply(state, LogRecord(state.seq + 1, now, event))
            except Rejected as exc:
                raise UsageError(f"--config {path} cannot be applied to this state: {exc.reason}") from None
            return
    raise UsageError(f"--config {path} configures no partition {partition!r}")


async def cmd_tail(args: argparse.Namespace) -> int:
    from . import client

    return await client.tail(
        _nats_url(args),
        access=_nats_access(args),
        partition=args.partition, rejected=args.rejected, as_json=args.json, from_start=args.from_start, count=args.count, timeout=args.timeout
    )


def _load_scenario(path: str) -> Scenario:
    import msgspec.yaml

    try:
        return msgspec.yaml.decode(Path(path).read_bytes(), type=Scenario)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    except msgspec.ValidationError as exc:
        raise UsageError(f"{path}: not a scenario: {field_meant(str(exc), Scenario)}") from None
    except msgspec.DecodeError as exc:
        raise UsageError(f"{path}: not YAML: {str(exc).replace('<byte string>', path)}") from None


async def cmd_simulate(args: argparse.Namespace) -> int:
    scenario = _load_scenario(args.file)
    store = await _fresh_store(args.db) if args.db else None
    try:
        result = simulate(scenario, log_id=store.log_id if store else "sim")
    except ScenarioError as exc:
        raise UsageError(f"{args.file}: {exc}") from None
    try:
        if store is not None:
            await _write_log(store, result.records)
    finally:
        if store is not None:
            await store.close()
    if not args.quiet:
        for decision in result.decisions:
            sys.stdout.write(encode(decision).decode() + "\n")
    for warning in result.warnings:
        print(f"warning: {render.printable(warning)}", file=sys.stderr)
    for event, reason in result.rejected:
        print(f"rejected {type_of(event)} {render.printable(event.id)}: {render.printable(reason)}", file=sys.stderr)
    if args.state:
        print(json.dumps(result.view(scenario.partition), indent=2))
    if args.db:
        print(f"wrote {len(result.records)} log records to {args.db}", file=sys.stderr)
    return _check(args, scenario, result)


def _check(args: argparse.Namespace, scenario: Scenario, result) -> int:
    if not args.check:
        return 0
    if scenario.expect is None:
        raise UsageError(f"{args.file} has no `expect` section to check")
    failures = check(result, scenario.expect, scenario.partition)
    for failure in failures:
        print(f"FAIL {scenario.name}: {failure}", file=sys.stderr)
    if not failures:
        print(f"ok {scenario.name}: {len(result.decisions)} decisions, expectations met", file=sys.stderr)
    return 1 if failures else 0


async def _fresh_store(target: str) -> Store:
    from ..log.store import Store, shown_url

    store = await Store.open(target)
    if await store.last_seq():
        await store.close()
        raise UsageError(f"{shown_url(target)} already holds a log; write the simulation to a new file")
    return store


async def _write_log(store: Store, log_records) -> None:
    from ..records import Batch, outbox_rows, to_row

    for start in range(0, len(log_records), 5000):
        chunk = log_records[start : start + 5000]
        await store.commit(Batch(rows=[to_row(r) for r in chunk], outbox=outbox_rows(chunk)))


async def _reading(target: str, archive: str | None = None) -> Store:
    """A log opened to read, with its archived segments where the daemon wrote them, or in
    `archive` (moved since)."""
    from ..log.store import Store

    store = await Store.open(target, create=False)
    store.archives_in = archive
    return store


async def cmd_replay(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from preemptd.scheduling import Timeline

    from ..log.history import records
    from ..log.store import shown_url
    from .report import what_if

    if args.report and not args.config:
        raise UsageError("--report shows what another configuration changes: give it with --config")
    store = await _reading(_db(args), args.archive)
    try:
        configs = _replay_configs(Path(args.config)) if args.config else None
        last = await store.last_seq()
        total = last if args.until is None else min(args.until, last)
        replayer = Replayer(store.log_id, configs)
        timeline = Timeline(store.log_id, total) if args.report else None
        with tqdm(total=total, unit="rec", unit_scale=True, disable=args.quiet or None, file=sys.stderr, desc="replay") as bar:
            async for page in records(store, until=args.until):
                stepped, whole = 0, True
                for record in page:
                    if not replayer.step(record):
                        whole = False
                        break
                    if timeline is not None:
                        timeline.step(record)
                    stepped += 1
                bar.update(stepped)
                if not whole:
                    break
        replayer.finish(cut=total < last)
    finally:
        await store.close()
    print(render.replay_summary(replayer.report, what_if=bool(configs)))
    if timeline is not None:
        _write_report(Path(args.report), what_if(timeline.result(f"preemptd replay of {shown_url(_db(args))} under {args.config}"), replayer.report, f"--config {args.config}"))
    return 1 if replayer.report.divergence is not None else 0


def _replay_configs(path: Path) -> dict[str, ReplayConfig]:
    from ..config_file import config_events

    return {event.partition: (event.model, event.config) for event in config_events(path, 0)}


async def cmd_explain(args: argparse.Namespace) -> int:
    from ..log.archive import Searched
    from ..log.store import shown_url
    from ..records import to_record

    store = await _reading(_db(args), args.archive)
    try:
        log = Searched(store, [segment for segment in await store.segments() if segment.dropped is not None], args.archive)
        row = None if args.task else await log.find(args.decision)
        if row is not None and row.type != "config.applied" and not row.type.startswith("decision."):
            row = None  # another event's id: it may still be the name of an application or task
        configs = await log.configs_applied()
        models = models_of(configs)
        found = [] if row is not None else await stories(log, args.decision, models)
        queues = [] if row is not None or args.task else await queue_stories(log, args.decision, configs)
        usage = await _queue_usage(store, queues) if queues and not args.json else {}
        near = await closest_name(log, args.decision) if row is None and not found and not queues else None
    finally:
        await store.close()
    if row is not None and row.type == "config.applied":
        earlier = [c for c in configs if c.seq < row.seq and c.partition == row.partition]
        print(render.config_change(to_record(row), to_record(earlier[-1]) if earlier else None))
        return 0
    if row is not None and row.type.startswith("decision."):
        _print_decisions([row], models, args.json)
        return 0
    if not found and not queues:
        no_id = "" if args.task else f"no decision with id {args.decision!r} and "
        hint = f" (did you mean {render.printable(near)}?)" if near else ""
        raise UsageError(f"{no_id}no application, task or queue named {args.decision!r} in {shown_url(_db(args))}{hint}")
    told: list[Story | QueueStory] = [*found, *queues]
    for story in told:
        if not args.json:
            print(story.heading())
        if isinstance(story, QueueStory) and story.partition in usage:
            print("\n".join(queue_usage(usage[story.partition], story.described, story.peers)))
        _print_decisions(story.rows, models, args.json)
    return 0


async def _queue_usage(store: Store, told: list[QueueStory]) -> dict[str, dict[str, Any]]:
    """The report's data of each partition a queue story is told in: what its queues held over the log."""
    from preemptd.scheduling import Window

    from .report import build

    partitions = {story.partition for story in told}
    data = await build(store, window=Window(), partition=next(iter(partitions)) if len(partitions) == 1 else None, title="", quiet=False)
    return {drawn["name"]: drawn for drawn in data["partitions"] if drawn["name"] in partitions}


def _print_decisions(rows: list[LogRow], models: Models, as_json: bool) -> None:
    """Each decision as a JSON line, or explained in its partition's model's terms."""
    for row in rows:
        decision = decode_decision(row.payload)
        print(json.dumps(to_builtins(decision)) if as_json else render.explanation(decision, row.seq, terms_of(model_at(models, decision.partition, row.seq)).words))


async def cmd_state(args: argparse.Namespace) -> int:
    from ..log.history import load_state

    store = await _reading(_db(args), args.archive)
    try:
        last = await store.last_seq()
        if args.at is not None and args.at > last:
            raise UsageError(f"--at {args.at} is past the end of the log (seq {last})")
        state = await load_state(store, until=args.at)
    finally:
        await store.close()
    partitions = [p for name, p in sorted(state.partitions.items()) if args.partition in (None, name)]
    if not partitions:
        if args.partition:
            raise UsageError(f"no partition {args.partition!r} at seq {state.seq}")
        raise UsageError("the log is empty" if not last else f"no partition yet at seq {state.seq} (the log runs from 1 to {last})")
    for partition in partitions:
        if args.json:
            view = partition_view(partition)
            for path, said in render.queue_columns_json(partition).items():  # the table's columns, in the model's terms
                queue = view["queues"][path]
                del queue["guaranteed"], queue["max"]  # the model says what bounds a queue (YuniKorn's columns are these)
                lineage = partition.queues[path].lineage
                queue.update(parent=lineage[1] if len(lineage) > 1 else None, **said)
            view.update(render.tables_json(partition))
            print(json.dumps(view, indent=2))
        else:
            print(render.queue_table(partition, state.seq) + "\n")
    return 0


async def cmd_dead_letters(args: argparse.Namespace) -> int:
    from ..log.store import Store

    store = await Store.open(_db(args), create=False)
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
    passed = f"; {render.count(counts['passed_over'], 'decision')} passed over by the publisher (the daemon's log says why)" if counts["passed_over"] else ""
    print(f"{render.count(counts['dead_letters'], 'dead letter')} in all{passed}", file=sys.stderr)
    return 0


async def cmd_report(args: argparse.Namespace) -> int:
    from ..log.store import shown_url
    from .report import window, with_comparison

    span = window(args.since, args.until)
    data = await _report_data(_db(args), args, span, args.archive)
    if args.compare:
        data = with_comparison(data, await _report_data(args.compare, args, span), shown_url(args.compare))
    _write_report(Path(args.output), data)
    return 0


def _write_report(output: Path, data: dict[str, Any]) -> None:
    from .report import page

    try:
        output.write_text(page(data), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from None
    decisions = sum(len(p["decisions"]) for p in data["partitions"])
    queues = sum(len(p["queues"]) for p in data["partitions"])
    print(f"wrote {output} ({output.stat().st_size / 1e6:.1f} MB): {render.count(decisions, 'decision')}, {render.count(queues, 'queue')}", file=sys.stderr)


async def _report_data(target: str, args: argparse.Namespace, span, archive: str | None = None) -> dict[str, Any]:
    from ..log.store import shown_url
    from .report import build

    store = await _reading(target, archive)
    try:
        data = await build(store, window=span, partition=args.partition, title=args.title or f"preemptd report of {shown_url(target)}", quiet=args.quiet)
    finally:
        await store.close()
    if args.partition is not None and not data["partitions"]:
        raise UsageError(f"no partition {args.partition!r} in {shown_url(target)} within the window")
    return data


def cmd_schema(args: argparse.Namespace) -> int:
    if args.kind in ("try", "answer"):
        from ..queries import schema

        print(json.dumps(schema(args.kind), indent=2))
        return 0
    print(json.dumps(json_schema(args.kind, models=sorted(MODELS)), indent=2))
    return 0


async def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from ..log.store import Store, shown_url

    store = await Store.open(_db(args))
    try:
        counts = await store.counts()
    finally:
        await store.close()
    print(f"{shown_url(_db(args))}: schema up to date (log {store.log_id}, {counts['log']} records, {counts['unpublished']} decisions unpublished, {counts['passed_over']} passed over)")
    return 0


# -- parser -------------------------------------------------------------------------------


def _at_least(minimum: int, kind=int):
    """An argparse type: a number not below `minimum`."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {text}")
        return value

    return parse


class _Version(argparse.Action):
    """`--version`, read from the installed distribution only when asked (importlib.metadata
    costs every other command a fifth of its start)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(version())
        parser.exit()


def _partitions(text: str) -> tuple[str, ...]:
    """`a,b`: partition names (the contract's), each once."""
    names = [name.strip() for name in text.split(",")]
    for name in names:
        if not re.match(PARTITION_PATTERN, name):
            raise argparse.ArgumentTypeError(f"{name!r} is not a partition name (1-64 letters, digits, _ or -)")
    if len(set(names)) < len(names):
        raise argparse.ArgumentTypeError(f"{text!r} names a partition twice")
    return tuple(sorted(names))


def _port(text: str) -> int:
    port = _at_least(0)(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port (0-65535)")
    return port


def _common(parser: argparse.ArgumentParser, *, nats: bool = False, db: bool = False, archived: bool = False) -> None:
    parser.add_argument("--state-dir", help=f"where the daemon keeps its log and NATS data (default: $PREEMPTD_STATE_DIR or ./{DEFAULT_STATE_DIR})")
    if db:
        parser.add_argument("--db", help="the log: a SQLite file or a SQLAlchemy URL (default: STATE_DIR/preemptd.db; the commands that read a log take the one the daemon of STATE_DIR uses, from STATE_DIR/log.url, without its password: give that with $PGPASSWORD or ~/.pgpass)")
    if archived:
        parser.add_argument("--archive", metavar="DIR|URL", help="where the log's archived segments are now, if moved since the daemon wrote them (default: where it wrote them)")
    if nats:
        parser.add_argument("--nats-url", help="NATS server (default: $PREEMPTD_NATS_URL, else the local daemon's)")
        _nats_security(parser)


def _nats_security(parser: argparse.ArgumentParser) -> None:
    """The options of a secured NATS; user and password or token go in the URL
    (nats://user:password@host) or in $PREEMPTD_NATS_USER, $PREEMPTD_NATS_PASSWORD, $PREEMPTD_NATS_TOKEN."""
    parser.add_argument("--nats-creds", metavar="FILE", help="JWT and nkey credentials file (default: $PREEMPTD_NATS_CREDS)")
    parser.add_argument("--nats-tls-ca", metavar="FILE", help="CA certificates that signed the server's (default: $PREEMPTD_NATS_TLS_CA, else the system's)")
    parser.add_argument("--nats-tls-cert", metavar="FILE", help="client certificate, for a server that verifies clients (default: $PREEMPTD_NATS_TLS_CERT)")
    parser.add_argument("--nats-tls-key", metavar="FILE", help="the client certificate's key (default: $PREEMPTD_NATS_TLS_KEY)")
    parser.add_argument(
        "--nats-inbox-prefix", metavar="PREFIX", help="where replies come, the user's own where permissions grant each user its inbox (default: $PREEMPTD_NATS_INBOX_PREFIX, else _INBOX)"
    )


_INVALID_CHOICE = re.compile(r"invalid choice: '(.*)' \(choose from (.*)\)$", re.DOTALL)


class _Parser(argparse.ArgumentParser):
    """argparse, whose refusal of an unknown command, choice or option names the one meant."""

    def error(self, message: str) -> NoReturn:
        invalid = _INVALID_CHOICE.search(message)
        if invalid is not None:
            near = closest(invalid[1], re.findall(r"'([^']*)'", invalid[2]))
            message += f"; did you mean {near}?" if near else ""
        super().error(message)

    def parse_args(self, args=None, namespace=None):
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            command = getattr(parsed, "func", None)
            parser = _COMMAND_PARSERS.get(command, self)
            known = [option for action in parser._actions if action.help != argparse.SUPPRESS for option in action.option_strings]
            hints = [f"{word} (did you mean {near}?)" if (near := closest(word, known)) else word for word in extra]
            parser.error(f"unrecognized arguments: {' '.join(hints)}")
        return parsed


_COMMAND_PARSERS: dict[Any, argparse.ArgumentParser] = {}  # a command's function -> its parser, for its usage


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="preemptd", description="An event-sourced preemption daemon for shared batch and AI clusters.")
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"], help="before the command: `preemptd --log-level debug run`")
    parser.add_argument("--log-format", default="logfmt", choices=["logfmt", "json"], help="daemon logs on stderr (default: logfmt)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    p = commands.add_parser("run", help="run the daemon")
    _common(p, db=True)
    p.add_argument(
        "--nats-url",
        help="use this NATS server instead of starting the bundled one; several, comma-separated, for a cluster; tls:// for TLS (default: $PREEMPTD_NATS_URL)",
    )
    _nats_security(p)
    p.add_argument("--nats-port", type=_port, default=0, help="port for the bundled nats-server; refused if in use (default: the previous one if free, else a free one)")
    p.add_argument("--config", help=f"a configuration file, {{model, config}} or the {DEFAULT_MODEL} model's alone, applied at start where it differs")
    p.add_argument("--tick", default="1s", help="time between scheduling cycles of a partition with pending tasks (default: 1s)")
    p.add_argument(
        "--cycle-time",
        default="5ms",
        help="how long a cycle decides before it stops and the next goes on, events read in between, so that an arrival in a queue with room is not held behind a long one; the log records where each stopped, so replay is exact (default: 5ms)",
    )
    p.add_argument(
        "--idle-tick",
        default="30s",
        help="time between cycles while the last one decided nothing and nothing happened since; a delay running out still wakes a cycle at once (default: 30s)",
    )
    p.add_argument("--batch", type=_at_least(1), default=1000, help="events fetched and committed per transaction (default: 1000)")
    p.add_argument("--snapshot-every", type=_at_least(1), default=100_000, help="log records between snapshots (default: 100000)")
    p.add_argument(
        "--archive",
        metavar="DIR|URL",
        help="where segments of the log go once closed, as compressed files: a directory, or an fsspec URL such as s3://bucket/preemptd (with its library, e.g. s3fs); off keeps the whole log live (default: STATE_DIR/archive)",
    )
    p.add_argument("--retain", default="7d", metavar="DURATION", help="the live log keeps at least this much history; older archived segments leave it (default: 7d)")
    p.add_argument("--retain-bytes", default="8Gi", metavar="SIZE", help="the live log's size on disk above which its oldest archived segments leave it (default: 8Gi)")
    p.add_argument("--sqlite-synchronous", default="FULL", choices=["FULL", "NORMAL"], help="FULL survives power loss; NORMAL only process crashes (default: FULL)")
    p.add_argument(
        "--partitions",
        type=_partitions,
        metavar="A,B",
        help="read and decide for these partitions only, so that several daemons (each with its own log) share one NATS (default: every partition)",
    )
    p.add_argument(
        "--max-partitions",
        type=_at_least(1),
        help="keep at most this many partitions: an event that would make one more is a dead letter (default: 1000)",
    )
    p.add_argument(
        "--lease-expiry",
        metavar="DURATION",
        help="a PostgreSQL log's writer renews its lease every second; a standby ends the session of one silent this long (hung, frozen) and takes over (default: 15s)",
    )
    p.add_argument(
        "--metrics-addr",
        metavar="HOST:PORT",
        help="serve Prometheus metrics (/metrics), /healthz and /readyz here; a bare port listens on loopback only (default: off)",
    )
    p.set_defaults(func=cmd_run)

    p = commands.add_parser("publish", help="publish events from a file (JSON lines or YAML; - for stdin) and report the daemon's verdict")
    p.add_argument("file", help="events as JSON lines, or a YAML list or documents, or the objects a shim would translate (a Kueue Workload, a Volcano Job, ...: see the contract); - reads stdin; `id` and `ts` are filled when missing")
    p.add_argument("--show-events", action="store_true", help="print the events the file stands for (its objects' as the contract maps them), as JSON lines, first")
    _common(p, nats=True)
    p.add_argument("--no-check", action="store_true", help="send events even if they are not valid events of the contract (the daemon will reject them)")
    p.add_argument("--no-wait", action="store_true", help="send and return, without waiting for the daemon's verdict on each event")
    p.add_argument("--wait", action="store_true", help=argparse.SUPPRESS)  # the default since 0.2; kept so that scripts written before still run
    p.add_argument("--verbose", "-v", action="store_true", help="print the verdict on every event, accepted ones too (default: only those not accepted)")
    p.add_argument("--timeout", type=_at_least(0, float), default=30.0, help="how long to wait for a running daemon to read them, in seconds (default: 30)")
    p.set_defaults(func=cmd_publish)

    p = commands.add_parser("apply", help="hand a configuration file to the running daemon (as `run --config` takes it), as kubectl apply does")
    p.add_argument("file", help="a configuration file: queues.yaml, {model, config}, or `model: NAME` then the model's objects (ConfigMaps, kubectl get -o yaml lists)")
    _common(p, nats=True, db=True)
    p.add_argument("--dry-run", action="store_true", help="print what it would change against the log's configuration, and what would be decided at once; send nothing")
    p.add_argument("--timeout", type=_at_least(0, float), default=30.0, help="how long to wait for the daemon's verdict, in seconds (default: 30)")
    p.set_defaults(func=cmd_apply)

    p = commands.add_parser("try", help="ask what would be decided if these events arrived now (nothing is logged or published)")
    p.add_argument("file", help="events as publish takes them (JSON lines or YAML; - for stdin), for one partition: a job's app.submitted and task.submitted, ..., or the job's object (a Kueue Workload, a Volcano Job, ...)")
    p.add_argument("--show-events", action="store_true", help="print the events the file stands for (its objects' as the contract maps them), as JSON lines, first")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    _common(p, nats=True)
    p.add_argument("--db", help="ask a log instead of the running daemon: a SQLite file or a SQLAlchemy URL")
    p.add_argument("--at", metavar="SEQ|TIME", help="with --db: the log's state at this position or time (default: its end)")
    p.add_argument("--config", help="with --db: under this configuration (the same model or another)")
    p.add_argument("--archive", metavar="DIR|URL", help="with --db: where the log's archived segments are now, if moved since the daemon wrote them")
    p.set_defaults(func=cmd_try)

    p = commands.add_parser("tail", help="follow decisions, or rejected events")
    _common(p, nats=True)
    p.add_argument("--rejected", action="store_true", help="follow the notices of rejected events (each with its reason) instead of decisions")
    p.add_argument("--json", action="store_true", help="print decisions (or notices) as JSON lines")
    p.add_argument("--partition", default="*", help="only this partition's decisions or rejections (default: all)")
    p.add_argument("--from-start", action="store_true", help="begin with the oldest the stream keeps (by default 7 days and 4 GiB: the daemon's --retain and --retain-bytes)")
    p.add_argument("--count", type=_at_least(0), default=0, help="stop after this many (default: 0, never)")
    p.add_argument("--timeout", type=_at_least(0, float), default=0, help="stop after this many seconds (default: 0, never)")
    p.set_defaults(func=cmd_tail)

    p = commands.add_parser("simulate", help="run a scenario file offline; decisions as JSON lines")
    p.add_argument("file", help="a scenario file (YAML: name, model, config, events, until, expect)")
    p.add_argument("--state", action="store_true", help="print the final state as JSON")
    p.add_argument("--check", action="store_true", help="verify the scenario's `expect`; exit 1 on a mismatch")
    p.add_argument("--db", help="also write the log to this new SQLite file (for replay, explain, state)")
    p.add_argument("--quiet", action="store_true", help="do not print decisions")
    p.set_defaults(func=cmd_simulate)

    p = commands.add_parser("replay", help="recompute every decision of a log and compare")
    _common(p, db=True, archived=True)
    p.add_argument("--until", type=_at_least(0), help="stop after this log position")
    p.add_argument("--config", help="replay under this configuration and list the decisions that differ")
    p.add_argument("--report", metavar="HTML", help="with --config: also write the timeline report of the log, with the decisions that differ")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_replay)

    p = commands.add_parser("explain", help="show a decision and the checks behind it, every decision about an application or task, or what a configuration change runs")
    p.add_argument("decision", metavar="NAME", help="a decision id, the id of a config.applied, an application or task: every decision about it (Kueue: a workload or any of its pods; Volcano: a job or a task), or a queue (Kueue: a ClusterQueue, LocalQueue or cohort): what was placed or admitted into it, taken from it and for it")
    p.add_argument("--task", action="store_true", help="take NAME for an application or task only, never a decision id")
    p.add_argument("--json", action="store_true", help="print the decisions as JSON lines")
    _common(p, db=True, archived=True)
    p.set_defaults(func=cmd_explain)

    p = commands.add_parser("state", help="the queue tree: usage, and each queue in its model's terms (guaranteed and max; Kueue's quotas; Volcano's deserved, share and jobs)")
    _common(p, db=True, archived=True)
    p.add_argument("--at", type=_at_least(0), help="as of this log position (default: the end)")
    p.add_argument("--partition", help="only this partition (default: all)")
    p.add_argument("--json", action="store_true", help="print each partition's state as JSON")
    p.set_defaults(func=cmd_state)

    p = commands.add_parser("dead-letters", help="rejected input, newest last")
    _common(p, db=True)
    p.add_argument("--limit", type=_at_least(1), default=20, help="show the newest this many (default: 20)")
    p.add_argument("--json", action="store_true", help="print each dead letter as JSON, with its raw bytes")
    p.set_defaults(func=cmd_dead_letters)

    p = commands.add_parser("report", help="write a self-contained HTML page of the log's timeline")
    _common(p, db=True, archived=True)
    p.add_argument("--partition", help="only this partition (default: all)")
    p.add_argument("--from", dest="since", metavar="SEQ|TIME", help="from this log position or time (ISO 8601, e.g. 2026-11-21T09:43:00Z)")
    p.add_argument("--to", dest="until", metavar="SEQ|TIME", help="up to this log position or time")
    p.add_argument("--compare", metavar="DB", help="another log of the same history (another configuration): the decisions that differ")
    p.add_argument("--title", help="the page's title (default: the log's name)")
    p.add_argument("-o", "--output", default="report.html", help="where to write the page (default: report.html)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_report)

    p = commands.add_parser("schema", help="print the JSON Schema of cluster events, decisions, or a query and its answer")
    p.add_argument("kind", nargs="?", default="cluster", choices=["cluster", "decisions", "try", "answer"], help="what shims send (default), what the daemon publishes, a query of preemptd.try.<partition> or its answer")
    p.set_defaults(func=cmd_schema)

    p = commands.add_parser("db", help="log database maintenance")
    db_commands = p.add_subparsers(dest="db_command", required=True, metavar="ACTION", parser_class=_Parser)
    upgrade = db_commands.add_parser("upgrade", help="apply migrations (also done at start-up)")
    _common(upgrade, db=True)
    upgrade.set_defaults(func=cmd_db_upgrade)
    for sub in (*commands.choices.values(), *db_commands.choices.values()):
        if sub.get_default("func") is not None:
            _COMMAND_PARSERS[sub.get_default("func")] = sub
    return parser


#: The state is hundreds of thousands of objects that hold no reference cycles: with Python's
#: default thresholds the collector went through them again and again, a tenth of a fold.
GC_THRESHOLDS = (50_000, 20, 100)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    gc.set_threshold(*GC_THRESHOLDS)
    configure(args.log_level, args.log_format)
    if args.func is not cmd_run:  # `run` handles stop signals itself; the others end at once, as ever
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if early_stops:  # a stop while loading (checked after the above, so none is missed): nothing has started
        return 0
    try:
        if not _is_async(args.func):
            return args.func(args)
        import anyio

        return anyio.run(args.func, args, backend="asyncio")
    except PreemptdError as exc:
        print(f"preemptd: {render.printable_lines(str(exc))}", file=sys.stderr)
        return 2
    except BaseExceptionGroup as group:  # from a task group: ours are still one-line errors
        ours, others = group.split(PreemptdError)
        if ours is None:
            raise
        if others is not None and others.split(_consequences())[1] is not None:  # a bug beside ours: both shown
            raise
        print(f"preemptd: {render.printable_lines(str(first_leaf(ours)))}", file=sys.stderr)  # the rest followed from it
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

