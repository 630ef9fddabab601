"""The house rules hold: ruff lint and format are clean, and mypy passes on the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed")
def test_ruff_lint_and_format_are_clean() -> None:
    lint = run("ruff", "check", ".")
    assert lint.returncode == 0, lint.stdout[-4000:]
    fmt = run("ruff", "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout[-4000:]


def test_mypy_is_clean_on_the_package() -> None:
    pytest.importorskip("mypy")
    res = run(sys.executable, "-m", "mypy")
    assert res.returncode == 0, res.stdout[-4000:]
