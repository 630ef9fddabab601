"""Live NVML sampling for ``gpubalance monitor`` (data only; the table is in report)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from gpubalance.diagnose.nvml import GpuSample, Nvml

__all__ = ["sample_all", "sample_loop"]


def sample_all(nv: Nvml) -> tuple[list[GpuSample], list[str]]:
    """One sample of every GPU; counters a GPU lacks are reported, not fatal."""
    out: list[GpuSample] = []
    errors: list[str] = []
    uuids = {d.index: d.uuid for d in nv.devices()}
    for i in range(nv.count):
        try:
            out.append(nv.sample(i, uuid=uuids.get(i)))
        except Exception as exc:
            errors.append(f"GPU {i}: {exc}")
    return out, errors


def sample_loop(
    nv: Nvml,
    interval_s: float,
    count: int = 0,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[tuple[list[GpuSample], list[str]]]:
    """Yield a round of samples every ``interval_s`` seconds; ``count`` rounds (0: forever)."""
    n = 0
    while True:
        t0 = time.monotonic()
        yield sample_all(nv)
        n += 1
        if count and n >= count:
            return
        sleep(max(interval_s - (time.monotonic() - t0), 0.0))
