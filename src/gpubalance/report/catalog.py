"""Rendering of the hardware and model catalogs and memory estimates (Rich tables, JSON)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.table import Table

from gpubalance.hardware.gpus import GpuSpec
from gpubalance.hardware.memory import MemoryEstimate
from gpubalance.hardware.models import ModelSpec

__all__ = [
    "estimate_to_dict",
    "fit_table",
    "gpu_table",
    "gpu_to_dict",
    "model_table",
    "model_to_dict",
    "price_sources",
]


_LINK = {"nvlink": "NVLink", "pcie": "PCIe", "infinity_fabric": "IF"}


def _short_reason(e: MemoryEstimate) -> str:
    if e.fits:
        return ""
    if e.weights_bytes_per_gpu > e.usable_bytes:
        return f"weights {e.weights_bytes_per_gpu / 1e9:,.1f} > {e.usable_bytes / 1e9:,.1f} GB"
    return e.reason


def _tera(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e12:,.0f}"


def gpu_table(gpus: list[GpuSpec]) -> Table:
    """One row per GPU: memory, bandwidth, dense TFLOP/s, link, price (sources in caption)."""
    t = Table(
        title="GPU catalog",
        caption="TFLOP/s dense; link per GPU, one way; price sources below "
        "(override with --gpus-file)",
    )
    cols = ("GPU", "mem GB", "TB/s", "bf16 TF", "fp8 TF", "link GB/s", "node", "$/GPU-h")
    for col in cols:
        t.add_column(col, justify="left" if col in ("GPU", "link GB/s") else "right", no_wrap=True)
    for g in gpus:
        link = g.interconnect
        t.add_row(
            g.name,
            f"{g.memory_bytes / 1e9:,.1f}",
            f"{g.memory_bandwidth_bytes_per_s / 1e12:.2f}",
            _tera(g.bf16_flops_per_s or g.fp16_flops_per_s),
            _tera(g.fp8_flops_per_s),
            f"{_LINK[link.kind]} {link.bandwidth_bytes_per_s / 1e9:,.0f}",
            str(g.max_gpus_per_node),
            f"{g.price_per_gpu_hour_usd:.2f}",
        )
    return t


def price_sources(gpus: list[GpuSpec]) -> list[str]:
    """'NAME: $x.xx/GPU-h, SOURCE (as of YYYY-MM)' lines, one per GPU."""
    return [
        f"{g.name}: ${g.price_per_gpu_hour_usd:.2f}/GPU-h, {g.price_source} ({g.price_as_of})"
        for g in gpus
    ]


def model_table(models: list[ModelSpec]) -> Table:
    """One row per model: parameters, layers, heads, KV per token at 16 bits."""
    t = Table(title="Model catalog")
    cols = (
        "model",
        "params B",
        "active B",
        "layers",
        "hidden",
        "heads",
        "KV h",
        "head",
        "KV KiB/tok",
        "max ctx",
    )
    for col in cols:
        t.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    for m in models:
        t.add_row(
            m.name,
            f"{m.total_parameters / 1e9:.2f}",
            f"{m.active_params / 1e9:.2f}",
            str(m.num_layers),
            str(m.hidden_size),
            str(m.num_attention_heads),
            str(m.num_kv_heads),
            str(m.head_dim),
            f"{m.kv_bytes_per_token(2.0) / 1024:g}",
            f"{m.max_context_tokens:,}",
        )
    return t


def fit_table(estimates: list[MemoryEstimate]) -> Table:
    """One row per (GPU, tp): fits, weights per GPU, KV tokens, sequences at the context."""
    first = estimates[0] if estimates else None
    title = (
        f"Memory fit: {first.model} at {first.precision}, KV {first.kv_dtype}, "
        f"{first.context_tokens:,}-token sequences"
        if first
        else "Memory fit"
    )
    t = Table(title=title, caption="GB per GPU; KV tokens per replica; seqs at that length")
    for col in ("GPU", "tp", "fits", "weights GB", "KV GB", "KV tokens", "seqs", "why"):
        t.add_column(
            col, justify="left" if col in ("GPU", "fits", "why") else "right", no_wrap=col != "why"
        )
    for e in estimates:
        t.add_row(
            e.gpu,
            str(e.tp),
            "[green]yes[/]" if e.fits else "[red]no[/]",
            f"{e.weights_bytes_per_gpu / 1e9:,.2f}",
            f"{e.kv_budget_bytes_per_gpu / 1e9:,.2f}",
            f"{e.kv_capacity_tokens:,}",
            f"{e.max_concurrent_seqs:,}",
            _short_reason(e),
        )
    return t


def gpu_to_dict(gpu: GpuSpec) -> dict[str, Any]:
    """JSON-ready dict of a GPU spec."""
    return gpu.model_dump(mode="json")


def model_to_dict(model: ModelSpec) -> dict[str, Any]:
    """JSON-ready dict of a model spec, with computed total and active parameters."""
    d = model.model_dump(mode="json")
    d["total_parameters"] = model.total_parameters
    d["active_parameters"] = model.active_params
    d["kv_bytes_per_token_16bit"] = model.kv_bytes_per_token(2.0)
    return d


def estimate_to_dict(est: MemoryEstimate) -> dict[str, Any]:
    """JSON-ready dict of a memory estimate, with its text breakdown."""
    d = dataclasses.asdict(est)
    d["breakdown"] = est.breakdown()
    return d
