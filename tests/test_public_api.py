"""Every name in gpubalance.__all__ resolves, and the package import stays light."""

from __future__ import annotations

import subprocess
import sys

import gpubalance


def test_every_public_name_resolves_to_its_definition() -> None:
    from gpubalance import sim as sim_package

    for name in gpubalance.__all__:
        getattr(gpubalance, name)  # AttributeError would fail the test
    assert gpubalance.simulate is sim_package.simulate


def test_import_does_not_pull_heavy_dependencies() -> None:
    code = (
        "import sys, gpubalance; heavy = [m for m in ('torch', 'aiohttp', 'uvicorn', 'numba', "
        "'matplotlib') if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
