"""Shared test fixtures: paths to the shared data (never copied into the repo)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACE = REPO.parent / "shared" / "data" / "azure-llm-inference-2023-code.csv"


@pytest.fixture(scope="session")
def shared_trace() -> Path:
    """The public Azure code trace from ../shared/data (skips if the folder is absent)."""
    if not SHARED_TRACE.exists():
        pytest.skip(f"shared trace not found at {SHARED_TRACE}")
    return SHARED_TRACE
