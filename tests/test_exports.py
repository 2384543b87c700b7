"""The public surface of the pure layers: what shims, tools and the daemon import by name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from preemptd import events, projections, scheduling

SURFACE = {
    events: {
        "ClusterEvent",
        "DecisionEvent",
        "LogEvent",
        "ConfigApplied",
        "NodeUpserted",
        "TaskSubmitted",
        "TaskBound",
        "TaskReleased",
        "Tick",
        "Allocated",
        "Preempted",
        "Blocked",
        "Unreserved",
        "Victim",
        "Resources",
        "Scenario",
        "decode_cluster_event",
        "decode_log_event",
        "decode_decision",
        "encode",
        "json_schema",
        "parse_quantity",
        "parse_duration",
        "DecodeError",
        "QuantityError",
        "ConfigError",
        "PreemptdError",
        "type_of",
    },
    projections: {"ClusterState", "PartitionState", "LogRecord", "Rejected", "Projection", "ModelFold", "partition_view"},
    scheduling: {
        "apply",
        "fold",
        "snapshot",
        "restore",
        "run_cycle",
        "CycleRecords",
        "next_wakeup",
        "tick_record",
        "decision_id",
        "MODELS",
        "DEFAULT_MODEL",
        "Model",
        "Pacer",
        "simulate",
        "check",
        "replay",
        "Replayer",
    },
}


@pytest.mark.parametrize("module", list(SURFACE), ids=lambda m: m.__name__)
def test_the_public_names_are_exported(module) -> None:
    assert SURFACE[module] <= set(dir(module))


#: What the pure layers may import besides msgspec, PyYAML's pure-Python loader (a nesting bomb
#: ends in a RecursionError, not in a crash) and the layers below them: standard modules
#: that do no I/O and read no clock, environment or randomness. Add to it knowingly.
PURE_STDLIB = {
    "__future__",
    "abc",
    "bisect",
    "collections",
    "contextlib",
    "dataclasses",
    "decimal",
    "difflib",
    "enum",
    "fractions",
    "functools",
    "hashlib",
    "json",  # json.loads only, to say where a refused message stops being JSON
    "heapq",
    "itertools",
    "math",
    "operator",
    "re",
    "reprlib",
    "typing",
    "unicodedata",
}
LAYERS = {"events": (), "projections": ("events",), "scheduling": ("events", "projections")}  # each may import those before it
IO_BUILTINS = {"open", "print", "input", "breakpoint", "exec", "eval", "__import__"}


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
    """What the code of `module`, in one of the pure layers, imports or calls that it may not."""
    layer = module.split(".")[1]
    allowed = PURE_STDLIB | {"msgspec", "yaml", "sortedcontainers", "preemptd"} | {f"preemptd.{name}" for name in (*LAYERS[layer], layer)}
    tops = {name: ".".join(name.split(".")[:2]) if name.startswith("preemptd.") else name.split(".")[0] for name in imported(source, module)}
    calls = {
        f"{node.func.id}()"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in IO_BUILTINS
    }
    return sorted({name for name, top in tops.items() if top not in allowed} | calls)


def module_name(source: Path, root: Path) -> str:
    """`preemptd.scheduling._engine`; a package's `__init__` keeps its name, so that the
    package is what `from . import x` in it anchors at."""
    return ".".join(["preemptd", *source.relative_to(root).with_suffix("").parts])


@pytest.mark.parametrize("package", list(LAYERS))
def test_the_pure_layers_import_no_io_clock_or_randomness_and_nothing_above_them(package: str) -> None:
    """The layers replay depends on read no clock, randomness or environment, do no I/O, and
    import only the layers below them (events, then projections, then scheduling)."""
    root = Path(__file__).resolve().parent.parent
    sources = sorted((root / package).rglob("*.py"))
    assert sources
    found = {str(source.relative_to(root)): forbidden(source.read_text(), module_name(source, root)) for source in sources}
    assert {path: names for path, names in found.items() if names} == {}


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("import time", "preemptd.events._codec"),
        ("from os import environ", "preemptd.events._codec"),
        ("import pathlib", "preemptd.projections._state"),
        ("import logging", "preemptd.scheduling._engine"),
        ("import anyio.abc", "preemptd.scheduling._engine"),
        ("from preemptd.daemon.log.store import Store", "preemptd.scheduling._engine"),
        ("from preemptd import daemon", "preemptd.scheduling._engine"),
        ("from ...daemon import store", "preemptd.scheduling.yunikorn._cycle"),
        ("from ... import daemon", "preemptd.scheduling.yunikorn._cycle"),
        ("from preemptd.scheduling import apply", "preemptd.projections._apply"),
        ("from ..projections import Rejected", "preemptd.events._codec"),
        ("data = open('queues.yaml').read()", "preemptd.scheduling.yunikorn._config"),
        ("print('cycle done')", "preemptd.scheduling.yunikorn._cycle"),
    ],
)
def test_the_import_guard_catches_what_it_forbids(source: str, module: str) -> None:
    assert forbidden(source, module), source


def test_the_import_guard_lets_the_pure_layers_use_each_other() -> None:
    source = "from ..._cycle import Cycle\nfrom preemptd.events import Tick\nfrom preemptd.projections import apply\nfrom . import _ordering\nimport heapq"
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
                # errors: a stop signal carried as a BaseException (like KeyboardInterrupt) is not one
                if isinstance(value, type) and issubclass(value, Exception) and value.__module__ == module.__name__
            ]
    assert len(found) >= 10, "the walk finds the errors"
    assert [error.__qualname__ for error in found if not issubclass(error, PreemptdError)] == []
