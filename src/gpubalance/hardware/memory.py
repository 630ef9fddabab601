"""Memory estimator: does a model fit on a GPU (or a tensor-parallel group), and how much
KV cache is left for concurrent sequences?

Per GPU, in the way vLLM budgets memory::

    usable        = memory_bytes x gpu_memory_utilization            (default 0.9; the rest
                                                                     absorbs fragmentation)
    kv_budget     = usable - weights_per_gpu - activation_reserve - runtime_overhead
    kv_per_token  = 2 (K,V) x layers x kv_heads_per_gpu x head_dim x kv_dtype_bytes
    kv_capacity   = floor(kv_budget / kv_per_token / block) x block   tokens per replica

* weights: transformer layers at the precision's bytes per parameter (+ quantisation
  scales); for quantised precisions the embedding and output head stay at 16 bits.
* tensor parallelism ``tp``: attention heads, MLP/expert widths, embedding and output head
  are split ``tp`` ways; norms and the MoE router are replicated; when ``tp`` exceeds the KV
  heads, each GPU keeps a replica of one KV head (so KV per token per GPU stops shrinking).
  vLLM requires attention heads divisible by ``tp``; other ``tp`` are reported as not valid.
* activation reserve: the peak of one profile forward pass of ``max_batched_tokens`` tokens
  (residual, q/k/v, MLP intermediate at 16 bits) plus fp32 logits for ``max_num_seqs``.
* runtime overhead: CUDA context, cuBLAS workspaces, CUDA graphs (and NCCL buffers when
  tp > 1): 1.5 GiB per GPU, 2 GiB with tp > 1, unless given.

All sizes are bytes; "GB" in the text breakdown is 10**9 bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpubalance.hardware.gpus import GpuSpec
from gpubalance.hardware.models import ModelSpec
from gpubalance.hardware.precision import Precision, kv_dtype_bytes, precision_named

__all__ = [
    "DEFAULT_CONTEXT_TOKENS",
    "MemoryEstimate",
    "MemoryLine",
    "ShardLayout",
    "estimate_memory",
    "memory_fit_grid",
    "shard_layout",
]

#: Context length one sequence must fit when the caller does not say (clipped to the model).
DEFAULT_CONTEXT_TOKENS = 8192
_GIB = 2**30


@dataclass(frozen=True, slots=True)
class ShardLayout:
    """How one model is split over ``tp`` GPUs (per-GPU parameter counts and heads).

    valid is False (with ``reason``) for a ``tp`` the serving engine cannot use.
    Parameter counts are per GPU and scaled so the unsplit totals equal the model's
    published parameter count.
    """

    tp: int
    valid: bool
    reason: str
    heads_per_gpu: int
    kv_heads_per_gpu: int
    layer_params_per_gpu: float  # attention + MLP/experts (quantisable), per GPU
    embed_params_per_gpu: float  # input embedding + output head, per GPU
    replicated_params: float  # norms + router, on every GPU
    total_params: int  # whole model (one copy)
    expert_params_per_gpu: float  # routed expert weights (part of layer_params_per_gpu)


def shard_layout(model: ModelSpec, tp: int) -> ShardLayout:
    """Split ``model`` over ``tp`` GPUs; see :class:`ShardLayout`."""
    if tp < 1:
        raise ValueError(f"tp must be >= 1, got {tp}")
    heads, kv = model.num_attention_heads, model.num_kv_heads
    valid, reason = True, ""
    if heads % tp:
        valid, reason = False, f"{heads} attention heads not divisible by tp={tp}"
    elif kv >= tp and kv % tp:
        valid, reason = False, f"{kv} KV heads not divisible by tp={tp}"
    elif kv < tp and tp % kv:
        valid, reason = False, f"tp={tp} is not a multiple of the {kv} KV heads"
    heads_pg = max(heads // tp, 1)
    kv_pg = max(kv // tp, 1)
    counts = model.parameter_counts()
    scale = model.total_parameters / counts.total
    h, d, layers = model.hidden_size, model.head_dim, model.num_layers
    attn_pg = layers * (2 * h * heads_pg * d + 2 * h * kv_pg * d)
    if model.attention_bias:
        attn_pg += layers * (heads_pg + 2 * kv_pg) * d
    mlp_pg = (counts.mlp_dense + counts.experts) / tp
    return ShardLayout(
        tp=tp,
        valid=valid,
        reason=reason,
        heads_per_gpu=heads_pg,
        kv_heads_per_gpu=kv_pg,
        layer_params_per_gpu=(attn_pg + mlp_pg) * scale,
        embed_params_per_gpu=(counts.embedding + counts.lm_head) / tp * scale,
        replicated_params=(counts.norms + counts.router) * scale,
        total_params=model.total_parameters,
        expert_params_per_gpu=counts.experts / tp * scale,
    )


@dataclass(frozen=True, slots=True)
class MemoryLine:
    """One line of the memory arithmetic: a label, bytes per GPU (None for text) and how."""

    label: str
    bytes_per_gpu: float | None
    how: str


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """Result of :func:`estimate_memory` (bytes per GPU unless the name says otherwise)."""

    gpu: str
    model: str
    precision: str
    kv_dtype: str
    tp: int
    fits: bool
    reason: str
    gpu_memory_bytes: int
    gpu_memory_utilization: float
    usable_bytes: float
    weights_bytes_total: float  # one full copy of the model
    weights_bytes_per_gpu: float
    activation_bytes_per_gpu: float
    runtime_overhead_bytes_per_gpu: float
    kv_budget_bytes_per_gpu: float  # may be negative: the shortfall
    kv_bytes_per_token: float  # whole model (all GPUs of the replica)
    kv_bytes_per_token_per_gpu: float
    block_size_tokens: int
    kv_capacity_tokens: int  # per replica
    context_tokens: int
    max_concurrent_seqs: int  # at context_tokens each
    lines: tuple[MemoryLine, ...]

    def max_seqs_at(self, context_tokens: int) -> int:
        """Sequences of ``context_tokens`` tokens each that the KV cache holds at once."""
        if context_tokens <= 0:
            raise ValueError("context_tokens must be > 0")
        blocks = self.kv_capacity_tokens // self.block_size_tokens
        return blocks // math.ceil(context_tokens / self.block_size_tokens)

    def breakdown(self) -> str:
        """The memory arithmetic as text, one step per line (for 'fits nowhere' messages)."""
        head = (
            f"{self.model} at {self.precision} on {self.tp} x {self.gpu} (tp={self.tp}), "
            f"KV cache {self.kv_dtype}{' (16-bit)' if self.kv_dtype == 'auto' else ''}:"
        )
        body = []
        for line in self.lines:
            amount = "" if line.bytes_per_gpu is None else f"{_gb(line.bytes_per_gpu):>10}"
            body.append(f"  {line.label:<22}{amount}  {line.how}".rstrip())
        verdict = "fits" if self.fits else "does NOT fit"
        return "\n".join([head, *body, f"  => {verdict}: {self.reason}"])


def _gb(n: float) -> str:
    return f"{n / 1e9:,.2f} GB"


def estimate_memory(
    gpu: GpuSpec,
    model: ModelSpec,
    precision: str | Precision = "bf16",
    tp: int = 1,
    *,
    kv_dtype: str = "auto",
    gpu_memory_utilization: float = 0.9,
    context_tokens: int | None = None,
    runtime_overhead_bytes: float | None = None,
    max_batched_tokens: int = 8192,
    max_num_seqs: int = 256,
    scale_bytes_per_param: float | None = None,
    block_size_tokens: int = 16,
) -> MemoryEstimate:
    """Estimate memory per GPU of ``model`` on ``tp`` x ``gpu`` (one replica).

    Args:
        precision: weight precision (bf16, fp16, fp8, int8, int4; see ``precision.py``).
        tp: tensor-parallel degree (GPUs per replica).
        kv_dtype: KV-cache dtype (``auto`` = 16-bit, or ``fp8``).
        gpu_memory_utilization: fraction of device memory the engine may use (vLLM's flag).
        context_tokens: length one sequence must fit for the model to count as fitting
            (vLLM's max_model_len); default min(8192, model max context).
        runtime_overhead_bytes: per-GPU non-weight, non-KV memory (CUDA context, graphs,
            NCCL); default 1.5 GiB, 2 GiB when tp > 1.
        max_batched_tokens, max_num_seqs: engine caps that size the activation reserve.
        scale_bytes_per_param: quantisation-scale bytes per weight (default: precision's).
        block_size_tokens: KV-cache block (page) size; capacity is whole blocks.
    """
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError("gpu_memory_utilization must lie in (0, 1]")
    p = precision_named(precision)
    kv_b = kv_dtype_bytes(kv_dtype)
    layout = shard_layout(model, tp)
    ctx = (
        min(model.max_context_tokens, DEFAULT_CONTEXT_TOKENS)
        if context_tokens is None
        else context_tokens
    )
    if ctx <= 0:
        raise ValueError("context_tokens must be > 0")

    scale_b = p.scale_bytes_per_param if scale_bytes_per_param is None else scale_bytes_per_param
    layer_b = p.weight_bytes_per_param + scale_b
    embed_b = 2.0 if p.quantized else p.weight_bytes_per_param
    weights_gpu = (
        layout.layer_params_per_gpu * layer_b
        + layout.embed_params_per_gpu * embed_b
        + layout.replicated_params * 2.0
    )
    full = shard_layout(model, 1)
    weights_total = (
        full.layer_params_per_gpu * layer_b
        + full.embed_params_per_gpu * embed_b
        + full.replicated_params * 2.0
    )

    h, d = model.hidden_size, model.head_dim
    if model.moe is None:
        inter_pg = model.intermediate_size / tp
    else:
        moe = model.moe
        expert_inter = moe.expert_intermediate_size or model.intermediate_size
        inter_pg = (moe.experts_per_token * expert_inter + moe.shared_expert_intermediate_size) / tp
    act_width = 4 * h + (layout.heads_per_gpu + 2 * layout.kv_heads_per_gpu) * d + 2 * inter_pg
    activation = max_batched_tokens * 2.0 * act_width + max_num_seqs * model.vocab_size / tp * 4.0
    overhead = (
        (2.0 if tp > 1 else 1.5) * _GIB
        if runtime_overhead_bytes is None
        else runtime_overhead_bytes
    )

    usable = gpu.memory_bytes * gpu_memory_utilization
    kv_budget = usable - weights_gpu - activation - overhead
    kv_token_gpu = 2.0 * model.num_layers * layout.kv_heads_per_gpu * d * kv_b
    kv_token = model.kv_bytes_per_token(kv_b)
    usable_kv = kv_budget > 0 and layout.valid
    blocks = int(kv_budget // (kv_token_gpu * block_size_tokens)) if usable_kv else 0
    capacity = blocks * block_size_tokens
    per_seq_blocks = math.ceil(ctx / block_size_tokens)
    max_seqs = blocks // per_seq_blocks

    if not layout.valid:
        fits, reason = False, layout.reason
    elif weights_gpu > usable:
        fits, reason = (
            False,
            (f"weights need {_gb(weights_gpu)} per GPU but only {_gb(usable)} is usable"),
        )
    elif kv_budget <= 0:
        fits, reason = False, (f"no room left for KV cache: short by {_gb(-kv_budget)} per GPU")
    elif max_seqs < 1:
        fits, reason = (
            False,
            (f"KV cache holds {capacity:,} tokens, less than one {ctx:,}-token sequence"),
        )
    else:
        fits, reason = (
            True,
            (f"KV cache holds {capacity:,} tokens = {max_seqs:,} sequences of {ctx:,} tokens"),
        )

    kvh = model.num_kv_heads
    lines = [
        MemoryLine("GPU memory", float(gpu.memory_bytes), f"{gpu.name}"),
        MemoryLine("usable", usable, f"x gpu_memory_utilization {gpu_memory_utilization:g}"),
        MemoryLine(
            "- weights",
            weights_gpu,
            f"{model.total_parameters:,} params at {p.name} "
            f"({layer_b:g} B/param{', 16-bit embeddings' if p.quantized else ''})"
            f" = {_gb(weights_total)} in all" + (f", split over tp={tp}" if tp > 1 else ""),
        ),
        MemoryLine(
            "- activations",
            activation,
            f"{max_batched_tokens:,} batched tokens x {act_width:,.0f} values x 2 B"
            f" + {max_num_seqs} x {model.vocab_size:,}/{tp} fp32 logits",
        ),
        MemoryLine("- runtime overhead", overhead, "CUDA context, graphs, workspaces, NCCL"),
        MemoryLine("= KV budget", kv_budget, "per GPU"),
        MemoryLine(
            "KV per token",
            None,
            f"2 x {model.num_layers} layers x {kvh} KV heads x {d} head_dim x {kv_b:g} B"
            f" = {kv_token:,.0f} B"
            + (
                f" ({layout.kv_heads_per_gpu} KV head(s) per GPU: {kv_token_gpu:,.0f} B)"
                if tp > 1
                else ""
            ),
        ),
        MemoryLine(
            "KV capacity",
            None,
            f"{capacity:,} tokens per replica ({blocks:,} blocks of {block_size_tokens})"
            f" = {max_seqs:,} sequences of {ctx:,} tokens",
        ),
    ]
    if not gpu.native_math(p):
        lines.append(
            MemoryLine(
                "note", None, f"{gpu.name} has no {p.math} tensor cores: weight-only {p.name}"
            )
        )
    return MemoryEstimate(
        gpu=gpu.name,
        model=model.name,
        precision=p.name,
        kv_dtype=kv_dtype,
        tp=tp,
        fits=fits,
        reason=reason,
        gpu_memory_bytes=gpu.memory_bytes,
        gpu_memory_utilization=gpu_memory_utilization,
        usable_bytes=usable,
        weights_bytes_total=weights_total,
        weights_bytes_per_gpu=weights_gpu,
        activation_bytes_per_gpu=activation,
        runtime_overhead_bytes_per_gpu=overhead,
        kv_budget_bytes_per_gpu=kv_budget,
        kv_bytes_per_token=kv_token,
        kv_bytes_per_token_per_gpu=kv_token_gpu,
        block_size_tokens=block_size_tokens,
        kv_capacity_tokens=capacity,
        context_tokens=ctx,
        max_concurrent_seqs=max_seqs,
        lines=tuple(lines),
    )


def memory_fit_grid(
    model: ModelSpec,
    gpus: list[GpuSpec],
    precision: str | Precision = "bf16",
    tps: tuple[int, ...] = (1, 2, 4, 8),
    **options: Any,
) -> list[MemoryEstimate]:
    """:func:`estimate_memory` for every GPU x tensor-parallel degree (tp up to the GPU's
    ``max_gpus_per_node``), in the given order; ``options`` pass through."""
    return [
        estimate_memory(gpu, model, precision, tp, **options)
        for gpu in gpus
        for tp in tps
        if tp <= gpu.max_gpus_per_node
    ]
