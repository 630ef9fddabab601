"""Rich table of NVML samples for ``gpubalance monitor``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from gpubalance.diagnose.nvml import GpuSample

__all__ = ["samples_table"]


def samples_table(samples: list[GpuSample], errors: list[str] | None = None) -> Table:
    """One row per GPU: utilisation, memory, PCIe TX/RX, SM clock, power, temperature."""
    from rich.table import Table

    t = Table(title="GPU telemetry (NVML)", caption="; ".join(errors or []) or None)
    for col in ("GPU", "UUID", "util %", "mem util %", "memory used", "PCIe TX", "PCIe RX",
                "SM MHz", "power W", "temp °C"):  # fmt: skip
        t.add_column(col, justify="right")
    for s in samples:
        t.add_row(
            str(s.index),
            s.uuid[:12],
            f"{s.util_gpu_pct:.0f}",
            f"{s.util_mem_pct:.0f}",
            f"{s.mem_used_bytes / 2**30:.1f} / {s.mem_total_bytes / 2**30:.0f} GiB",
            f"{s.pcie_tx_bytes_s / 1e9:.2f} GB/s",
            f"{s.pcie_rx_bytes_s / 1e9:.2f} GB/s",
            f"{s.sm_clock_mhz:.0f}",
            f"{s.power_w:.0f}",
            f"{s.temperature_c:.0f}",
        )
    return t
