"""Decisions do not change by accident.

- Every scenario file makes exactly the decisions recorded in tests/golden (byte for byte, as
  `preemptd simulate` prints them). A change meant to alter decisions re-records them with
  `tests/record_decisions.py`, and the diff of tests/golden shows its effect.
- A log written by the daemon of version 0.1.0 (tests/fixtures, made by make_daemon_log.py)
  replays with this version: every stored decision is reproduced.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import preemptd
from record_decisions import SCENARIOS, decisions, golden_path


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_scenario_makes_the_recorded_decisions(scenario: Path) -> None:
    recorded = golden_path(scenario)
    assert recorded.exists(), f"no recording for {scenario.name}: run tests/record_decisions.py"
    made, expected = decisions(scenario).splitlines(), recorded.read_bytes().splitlines()
    first = next((i for i, (a, b) in enumerate(zip(made, expected)) if a != b), min(len(made), len(expected)))
    assert made == expected, f"decision {first} differs:\n  made:     {made[first : first + 1]}\n  recorded: {expected[first : first + 1]}"


def upgraded_fixture(tmp_path: Path) -> Path:
    """A copy of the 0.1.0 log, upgraded as a user upgrading preemptd does (reading commands
    refuse a log of an older schema)."""
    log = tmp_path / "daemon-log.db"
    shutil.copyfile(Path(__file__).parent / "fixtures" / "daemon-log-0.1.0.db", log)
    refused = preemptd("replay", "--db", str(log), "--quiet")
    assert refused.returncode == 2 and f"run `preemptd db upgrade --db {log}`" in refused.stderr
    upgraded = preemptd("db", "upgrade", "--db", str(log))
    assert upgraded.returncode == 0 and "schema up to date" in upgraded.stdout, upgraded.stderr
    return log


def test_a_daemon_log_of_an_earlier_version_replays(tmp_path: Path) -> None:
    log = upgraded_fixture(tmp_path)
    replay = preemptd("replay", "--db", str(log), "--quiet")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "all 13 decisions reproduced" in replay.stdout


def test_a_daemon_log_of_an_earlier_version_passes_over_its_snapshot_and_shows_its_state(tmp_path: Path) -> None:
    """Its snapshot has the state layout of 0.1.0: it is not misread but passed over, and the
    whole log folded instead."""
    log = upgraded_fixture(tmp_path)
    shown = preemptd("state", "--db", str(log), "--json")
    assert shown.returncode == 0, shown.stderr
    assert "snapshot not used; folding the log from the start" in shown.stderr and "this version reads format 5" in shown.stderr
    queues = json.loads(shown.stdout)["queues"]
    assert queues["root.team-a"]["allocated"] == {"vcore": 4, "memory": 8 * 2**30}
    assert queues["root.team-b"]["pending"] == {"vcore": 2}


@pytest.mark.parametrize(("model", "decided"), [("kueue", 7), ("volcano", 14)])
def test_a_daemon_log_of_each_model_replays(model: str, decided: int, tmp_path: Path) -> None:
    """Logs a daemon wrote under Kueue and Volcano (tests/fixtures, made by make_model_logs.py,
    with admissions, an eviction, a refusal, reclaims and reservations landing): a change to a
    model's state or cycle reproduces every decision they hold."""
    log = tmp_path / f"{model}.db"
    shutil.copyfile(Path(__file__).parent / "fixtures" / f"daemon-log-{model}.db", log)
    replay = preemptd("replay", "--db", str(log), "--quiet")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert f"all {decided} decisions reproduced" in replay.stdout
