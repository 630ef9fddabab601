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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def redis_url():  # type: ignore[no-untyped-def]
    """A real redis-server on a free loopback port for the session (no persistence);
    skips only when the redis-server binary is not installed."""
    import shutil
    import socket
    import subprocess
    import time

    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server binary not installed (apt-get install redis-server)")
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("redis-server did not start") from None
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
