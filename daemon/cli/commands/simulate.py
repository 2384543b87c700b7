"""`preemptd simulate FILE`: a scenario run offline through the engine, its decisions printed, checked or written as a log."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from preemptd.events import Scenario, encode, type_of, why_not
from preemptd.scheduling import ScenarioError, check, simulate

from ...errors import UsageError
from .. import render

if TYPE_CHECKING:
    from ...log.store import Store

NAME = "simulate"
HELP = "run a scenario file offline; decisions as JSON lines"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a scenario file (YAML: name, model, config, events, until, expect)")
    p.add_argument("--state", action="store_true", help="print the final state as JSON")
    p.add_argument("--check", action="store_true", help="verify the scenario's `expect`; exit 1 on a mismatch")
    p.add_argument("--db", help="also write the log to this new SQLite file (for replay, explain, state)")
    p.add_argument("--quiet", action="store_true", help="do not print decisions")


async def run(args: argparse.Namespace) -> int:
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


def _load_scenario(path: str) -> Scenario:
    import msgspec.yaml

    try:
        return msgspec.yaml.decode(Path(path).read_bytes(), type=Scenario)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    except msgspec.ValidationError:
        raise UsageError(f"{path}: not a scenario: {why_not(msgspec.yaml.decode(Path(path).read_bytes()), Scenario)}") from None
    except msgspec.DecodeError as exc:
        raise UsageError(f"{path}: not YAML: {str(exc).replace('<byte string>', path)}") from None


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
    from ...log.database import shown_url
    from ...log.store import Store

    store = await Store.open(target)
    if await store.last_seq():
        await store.close()
        raise UsageError(f"{shown_url(target)} already holds a log; write the simulation to a new file")
    return store


async def _write_log(store: Store, log_records) -> None:
    from ...records import Batch, outbox_rows, to_row

    for start in range(0, len(log_records), 5000):
        chunk = log_records[start : start + 5000]
        await store.commit(Batch(rows=[to_row(r) for r in chunk], outbox=outbox_rows(chunk)))
