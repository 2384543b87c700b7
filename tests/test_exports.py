"""The public surface of the pure layers: what shims, tools and the daemon import by name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from preemptd import events, projections, scheduling

SURFACE = {
    events: {
        "ClusterEvent", "DecisionEvent", "LogEvent", "ConfigApplied", "NodeUpserted", "TaskSubmitted", "TaskBound",
        "TaskReleased", "Tick", "Allocated", "Preempted", "Blocked", "Unreserved", "Victim", "Resources", "Scenario",
        "decode_cluster_event", "decode_log_event", "decode_decision", "encode", "json_schema", "parse_quantity",
        "parse_duration", "DecodeError", "QuantityError", "ConfigError", "PreemptdError",
    },
    projections: {"ClusterState", "PartitionState", "LogRecord", "Rejected", "Projection", "ModelFold", "snapshot", "partition_view"},
    scheduling: {
        "apply", "fold", "restore", "run_cycle", "next_wakeup", "tick_record", "decision_id", "MODELS", "DEFAULT_MODEL", "Model",
        "Pacer", "simulate", "check", "replay", "Replayer",
    },
}


@pytest.mark.parametrize("module", list(SURFACE), ids=lambda m: m.__name__)
def test_the_public_names_are_exported(module) -> None:
    assert SURFACE[module] <= set(dir(module))


BANNED = {"nats", "sqlalchemy", "anyio", "time", "datetime", "random", "os", "uuid", "socket", "preemptd.daemon"}


def imported(source: str, module: str) -> set[str]:
    """Every module `source` (the code of `module`, e.g. `preemptd.scheduling._cycle`) imports,
    relative imports resolved, `from X import y` counted as both X and X.y."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: -node.level]
                base = ".".join([*anchor, base] if base else anchor)
            names |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return names


def forbidden(source: str, module: str) -> list[str]:
    return sorted(n for n in imported(source, module) if any(n == b or n.startswith(b + ".") for b in BANNED))


@pytest.mark.parametrize("package", ["events", "projections", "scheduling"])
def test_the_pure_layers_import_no_io_clock_or_randomness(package: str) -> None:
    """The layers replay depends on read no clock, randomness or environment and do no I/O."""
    root = Path(__file__).resolve().parent.parent
    sources = sorted((root / package).rglob("*.py"))
    assert sources
    for source in sources:
        parts = source.relative_to(root).with_suffix("").parts
        module = ".".join(["preemptd", *(parts[:-1] if parts[-1] == "__init__" else parts)])
        if parts[-1] == "__init__":
            module += ".__init__"  # so that `from . import x` anchors at the package itself
        assert forbidden(source.read_text(), module) == [], f"{source.relative_to(root)} imports what the pure layers may not"


@pytest.mark.parametrize(
    "source",
    [
        "import time",
        "from os import environ",
        "from preemptd.daemon.store import Store",
        "from preemptd import daemon",
        "from ...daemon import store",
        "from ... import daemon",
        "import anyio.abc",
    ],
)
def test_the_import_guard_catches_what_it_forbids(source: str) -> None:
    assert forbidden(source, "preemptd.scheduling.yunikorn._cycle"), source


def test_the_import_guard_lets_the_pure_layers_use_each_other() -> None:
    source = "from ..._cycle import Cycle\nfrom preemptd.events import Tick\nfrom . import _ordering\nimport heapq"
    assert forbidden(source, "preemptd.scheduling.yunikorn.x._y") == []


def test_every_error_of_ours_is_a_preemptd_error() -> None:
    """The CLI catches `PreemptdError` alone and shows one line: an exception class of ours
    outside that tree would reach the user as a traceback."""
    import importlib
    import pkgutil

    from preemptd.events import PreemptdError

    found = []
    for package in ("events", "projections", "scheduling", "daemon"):
        root = importlib.import_module(f"preemptd.{package}")
        for info in pkgutil.walk_packages(root.__path__, f"{root.__name__}."):
            module = importlib.import_module(info.name)
            found += [
                value
                for value in vars(module).values()
                if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module.__name__
            ]
    assert len(found) >= 10, "the walk finds the errors"
    assert [error.__qualname__ for error in found if not issubclass(error, PreemptdError)] == []
