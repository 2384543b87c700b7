"""The house style is checked, not hoped for: ruff's rules as `pyproject.toml` declares them
(pyflakes, syntax, imports in order, lines of at most 160 characters) and its formatting."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def ruff(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *arguments], cwd=ROOT, capture_output=True, text=True)


def test_the_code_passes_the_declared_lint_rules() -> None:
    checked = ruff("check", "--no-cache", ".")
    assert checked.returncode == 0, checked.stdout[-5000:] + checked.stderr


def test_the_code_is_formatted_as_declared() -> None:
    formatted = ruff("format", "--check", "--no-cache", ".")
    assert formatted.returncode == 0, formatted.stdout[-5000:] + formatted.stderr
