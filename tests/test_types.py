"""The whole package type-checks: mypy over every folder, and over the pure layers (events,
projections, scheduling) at --strict, 0 errors. The folders install as `preemptd.<folder>`, so
the check runs on a tree of links laid out that way (what `pip install -e . --config-settings
editable_mode=strict` builds, without building it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("events", "projections", "scheduling", "daemon", "migrations")
PURE = ("events", "projections", "scheduling")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    top = tmp_path_factory.mktemp("typed")
    (top / "preemptd").mkdir()
    for folder in FOLDERS:
        (top / "preemptd" / folder).symlink_to(ROOT / folder, target_is_directory=True)
    return top


def mypy(tree: Path, *arguments: str) -> str:
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tree / ".mypy_cache"), *arguments]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_whole_package_type_checks(tree: Path) -> None:
    assert "Success" in mypy(tree, "-p", "preemptd")


def test_the_pure_layers_type_check_strictly(tree: Path) -> None:
    assert "Success" in mypy(tree, "--strict", *(argument for folder in PURE for argument in ("-p", f"preemptd.{folder}")))
