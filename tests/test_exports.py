"""The public surface of the pure layers: what shims, tools and the daemon import by name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import events
import projections
import scheduling

SURFACE = {
    events: {
        "ClusterEvent", "DecisionEvent", "LogEvent", "ConfigApplied", "NodeUpserted", "TaskSubmitted", "TaskBound",
        "TaskReleased", "Tick", "Allocated", "Preempted", "Blocked", "Unreserved", "Victim", "Resources", "Scenario",
        "decode_cluster_event", "decode_log_event", "decode_decision", "encode", "json_schema", "parse_quantity",
        "parse_duration", "parse_yunikorn_config", "DecodeError", "QuantityError", "ConfigError",
    },
    projections: {"ClusterState", "PartitionState", "LogRecord", "Rejected", "apply", "fold", "snapshot", "restore", "partition_view"},
    scheduling: {"run_cycle", "next_wakeup", "tick_record", "decision_id", "MODELS", "simulate", "check", "replay", "Replayer"},
}


@pytest.mark.parametrize("module", list(SURFACE), ids=lambda m: m.__name__)
def test_the_public_names_are_exported(module) -> None:
    assert SURFACE[module] <= set(dir(module))


@pytest.mark.parametrize("package", ["events", "projections", "scheduling"])
def test_the_pure_layers_import_no_io_clock_or_randomness(package: str) -> None:
    """The layers replay depends on read no clock, randomness or environment and do no I/O."""
    banned = ("nats", "sqlalchemy", "anyio", "time", "datetime", "random", "os", "uuid", "socket", "daemon")
    for source in (Path(__file__).resolve().parent.parent / package).glob("*.py"):
        tree = ast.parse(source.read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not imported & set(banned), f"{source.name} imports {sorted(imported & set(banned))}"
