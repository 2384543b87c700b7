"""The shell's layout: each role in its own package, the libraries of I/O each in one place, no
import circle, and the ingest step free of both the broker's and the database's libraries."""

from __future__ import annotations

import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from test_exports import imported, module_name

ROOT = Path(__file__).resolve().parent.parent
SHELL = sorted((ROOT / "daemon").rglob("*.py"))

#: The only packages of the shell that may import each library (what talks to NATS, what talks
#: to the database), so that a change of either touches one place.
HOMES = {"nats": "preemptd.daemon.bus", "sqlalchemy": "preemptd.daemon.log", "alembic": "preemptd.daemon.log"}


def _imports() -> dict[str, set[str]]:
    """Each shell module's imports of other shell modules (a package counts as its `__init__`)."""
    modules = {module_name(source, ROOT).removesuffix(".__init__"): source for source in SHELL}
    return {name: {other for other in imported(source.read_text(), name) if other in modules and other != name} for name, source in modules.items()}


def test_the_shell_has_no_import_circle() -> None:
    graph = _imports()
    assert len(graph) > 25
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"an import circle: {' -> '.join(exc.args[1])}") from None


def test_nats_and_the_database_are_each_imported_by_one_package_of_the_shell() -> None:
    strays = []
    for source in SHELL:
        name = module_name(source, ROOT)
        for library in {other.split(".")[0] for other in imported(source.read_text(), name)} & set(HOMES):
            if not name.startswith(HOMES[library] + "."):
                strays.append(f"{source.relative_to(ROOT)} imports {library}")
    assert strays == []


def test_the_ingest_step_loads_neither_nats_nor_sqlalchemy() -> None:
    """`ingest` is the daemon's pure step (a delivery in, records and dead letters out): it
    shares the shell's records, not the libraries of the sides that carry them."""
    code = "import sys, preemptd.daemon.ingest; print(sorted({m.split('.')[0] for m in sys.modules} & {'nats', 'sqlalchemy', 'aiosqlite', 'asyncpg', 'anyio'}))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT / "tests").stdout.strip()
    assert loaded == "[]"


def test_the_start_up_stays_short() -> None:
    """The foundation's bound on the daemon's wiring: what grows goes to its role's package."""
    lines = (ROOT / "daemon" / "runtime.py").read_text().count("\n")
    assert lines <= 350, f"daemon/runtime.py has {lines} lines"
