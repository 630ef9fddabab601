"""GPU catalog: memory, bandwidth, tensor throughput, interconnect and price per GPU type.

The catalog ships as ``gpubalance/data/gpus.yaml`` (every figure there cites its source);
:func:`load_gpu_catalog` merges a user's file over it to override fields (a contract price)
or add GPU types. Units: bytes, bytes per second, FLOP/s (dense, not the 2:4-sparse
figures NVIDIA also quotes), seconds, US dollars per GPU-hour.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpubalance.hardware.catalog_file import file_stamp, load_catalog_entries
from gpubalance.hardware.names import SpecCatalog
from gpubalance.hardware.precision import Precision, precision_named

__all__ = ["GpuCatalog", "GpuSpec", "InterconnectSpec", "get_gpu", "load_gpu_catalog"]


class InterconnectSpec(BaseModel):
    """How the GPUs of one node talk to each other (for tensor-parallel all-reduce)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["nvlink", "pcie", "infinity_fabric"] = Field(
        description="Link technology between GPUs of one node."
    )
    generation: str = Field(description="Link generation, e.g. 'NVLink 4' or 'PCIe Gen5 x16'.")
    bandwidth_bytes_per_s: float = Field(
        gt=0,
        description="Per-GPU bandwidth in ONE direction, bytes/s (NVIDIA quotes NVLink as the "
        "bidirectional sum: 900 GB/s NVLink 4 = 450e9 here).",
    )
    allreduce_latency_s: float = Field(
        ge=0,
        description="Fixed latency of one small all-reduce across the node, seconds "
        "(launch + synchronisation; an estimate, calibrate to measure).",
    )


class GpuSpec(BaseModel):
    """One GPU type. Throughputs are dense peak figures from the vendor's datasheet."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Canonical name, e.g. 'H100-SXM'.")
    aliases: list[str] = Field(
        default_factory=list, description="Other names accepted for this GPU (any case)."
    )
    vendor: str = Field(default="NVIDIA", description="Maker of the GPU.")
    form_factor: str = Field(description="SXM, PCIe or OAM module.")
    memory_bytes: int = Field(gt=0, description="Device memory, bytes.")
    memory_bandwidth_bytes_per_s: float = Field(gt=0, description="Peak memory bandwidth, B/s.")
    bf16_flops_per_s: float | None = Field(
        default=None, gt=0, description="Dense bf16 tensor FLOP/s; null if no bf16 support."
    )
    fp16_flops_per_s: float = Field(gt=0, description="Dense fp16 tensor FLOP/s.")
    fp8_flops_per_s: float | None = Field(
        default=None, gt=0, description="Dense fp8 tensor FLOP/s; null if no fp8 tensor cores."
    )
    int8_ops_per_s: float | None = Field(
        default=None, gt=0, description="Dense int8 tensor OP/s; null if none."
    )
    interconnect: InterconnectSpec = Field(description="Intra-node GPU-to-GPU link.")
    max_gpus_per_node: int = Field(
        ge=1, le=64, description="Typical maximum number of these GPUs in one server."
    )
    power_watts: float | None = Field(default=None, gt=0, description="Board power (TDP), watts.")
    price_per_gpu_hour_usd: float = Field(
        gt=0, description="Default on-demand price, US dollars per GPU-hour."
    )
    price_source: str = Field(description="Where the default price comes from.")
    price_as_of: str = Field(description="When that price was listed (YYYY-MM).")
    spec_source: str = Field(description="Where the technical figures come from.")

    @field_validator("aliases", mode="before")
    @classmethod
    def _aliases_as_text(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [str(v) if isinstance(v, int | float) else v for v in value]
        return value

    @model_validator(mode="after")
    def _check_memory(self) -> GpuSpec:
        if self.memory_bytes < 2**30:
            raise ValueError("memory_bytes is below 1 GiB: give bytes, not GB")
        return self

    @property
    def memory_gib(self) -> float:
        """Device memory in GiB (2**30 bytes)."""
        return self.memory_bytes / 2**30

    def flops_per_s(self, precision: str | Precision = "bf16") -> float:
        """Dense tensor throughput the matrix multiplications run at for ``precision``.

        bf16/fp16 and weight-only int4 use the 16-bit rate (bf16 if the GPU has it, else
        fp16 — e.g. T4 runs bf16 checkpoints in fp16). fp8 uses fp8 tensor cores and int8
        uses int8 tensor cores when the GPU has them; otherwise they run as weight-only
        quantisation at the 16-bit rate.
        """
        p = precision_named(precision)
        sixteen = self.bf16_flops_per_s or self.fp16_flops_per_s
        if p.math == "fp8" and self.fp8_flops_per_s is not None:
            return self.fp8_flops_per_s
        if p.math == "int8" and self.int8_ops_per_s is not None:
            return self.int8_ops_per_s
        return sixteen

    def native_math(self, precision: str | Precision) -> bool:
        """True when ``precision``'s matrix math runs natively (not as weight-only fallback)."""
        p = precision_named(precision)
        if p.math == "fp8":
            return self.fp8_flops_per_s is not None
        if p.math == "int8":
            return self.int8_ops_per_s is not None
        return True


class GpuCatalog(SpecCatalog[GpuSpec]):
    """GPU types by canonical name; lookup by name or alias, case-insensitive.

    ``get`` of an unknown name raises UserInputError suggesting the nearest.
    """

    kind = "GPU"


@functools.lru_cache(maxsize=16)
def _load_cached(path: str | None, stamp: tuple[int, int]) -> GpuCatalog:
    return GpuCatalog(load_catalog_entries(GpuSpec, "gpus", "gpus.yaml", path))


def load_gpu_catalog(path: str | Path | None = None) -> GpuCatalog:
    """The shipped GPU catalog, with the user's YAML file at ``path`` merged over it.

    Entries in the user's file whose name or alias matches a shipped GPU override its
    fields; other entries add GPU types (all required fields then). Malformed files raise
    UserInputError with file, line and field. Results are cached per path, size and
    modification time.
    """
    if path is None:
        return _load_cached(None, (0, 0))
    resolved = Path(path).resolve()
    return _load_cached(str(resolved), file_stamp(resolved))


def get_gpu(name: str, path: str | Path | None = None) -> GpuSpec:
    """Shortcut: ``load_gpu_catalog(path).get(name)``."""
    return load_gpu_catalog(path).get(name)
