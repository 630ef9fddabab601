"""Roofline performance model of one serving replica (one GPU or a tensor-parallel group).

One continuous-batching iteration (one forward pass over every scheduled token) costs,
per GPU of the replica (work is split ``tp`` ways)::

    t = overhead_s
      + max(linear FLOPs / F,  weight bytes / B)           matrix multiplications
      + max(prefill attention FLOPs / F,  prefill KV write bytes / B)
      + max(decode attention FLOPs / F,   decode KV read + write bytes / B)
      + all-reduce time                                     (tp > 1)

with F = dense tensor FLOP/s at the precision x compute_efficiency and
B = memory bandwidth x bandwidth_efficiency. The terms:

* linear FLOPs = 2 x (active parameters - embedding and output-head parameters) x tokens
  + 2 x vocab x hidden per logits row (one per decoding sequence; prefill chunks' single
  logits rows are left out), all / tp.
* weight bytes = every weight the pass reads once: all layers plus the output head (the
  input embedding is a row lookup, not read whole). MoE layers read only the experts the
  batch's tokens are routed to: expected fraction 1 - (1 - k/E)**tokens of the experts.
* attention FLOPs = 4 x layers x heads x head_dim per query-key pair (QK^T and PV), / tp.
* KV bytes per token = 2 x layers x KV heads per GPU x head_dim x KV dtype bytes.
* all-reduce: 2 per layer of tokens x hidden x 2 bytes, ring cost
  2(tp-1)/tp x bytes / (link bandwidth x comm_efficiency) + the link's latency each.

The model is also a core :class:`~gpubalance.cost.base.CostModel`: ``cost_s(input, output)``
is the time of that request served alone (closed form, no loop).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from gpubalance.config import load_model, save_model
from gpubalance.errors import UserInputError
from gpubalance.hardware.gpus import GpuSpec, load_gpu_catalog
from gpubalance.hardware.memory import MemoryEstimate, estimate_memory, shard_layout
from gpubalance.hardware.models import ModelSpec, resolve_model
from gpubalance.hardware.precision import Precision, precision_named

__all__ = ["RooflineEfficiency", "RooflineModel"]


class RooflineEfficiency(BaseModel):
    """Fractions of peak a real serving engine reaches, and its fixed per-iteration cost.

    The defaults are rough figures for a tuned engine (vLLM/SGLang class) on NVIDIA data
    centre GPUs; ``gpubalance calibrate`` fits them to measurements. ``ideal()`` is the
    pure roofline (all 1, no overhead).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(default="roofline_efficiency", description="Discriminator for files.")
    compute_efficiency: float = Field(
        default=0.6, gt=0, le=1.5, description="Achieved / peak tensor FLOP/s (MFU)."
    )
    bandwidth_efficiency: float = Field(
        default=0.8, gt=0, le=1.5, description="Achieved / peak memory bandwidth."
    )
    comm_efficiency: float = Field(
        default=0.7, gt=0, le=1.5, description="Achieved / peak interconnect bandwidth."
    )
    overhead_s: float = Field(
        default=0.0005, ge=0, description="Fixed time per iteration (scheduling, launch), s."
    )

    @classmethod
    def ideal(cls) -> RooflineEfficiency:
        """Peak hardware, zero overhead: the pure roofline."""
        return cls(
            compute_efficiency=1.0, bandwidth_efficiency=1.0, comm_efficiency=1.0, overhead_s=0.0
        )

    def save(self, path: str | Path) -> None:
        """Write as YAML (``.yaml``/``.yml``) or JSON (anything else), atomically."""
        save_model(self, path)

    @classmethod
    def load(cls, path: str | Path) -> RooflineEfficiency:
        """Read a YAML/JSON file; errors name file, line and field."""
        return load_model(cls, path)


def _sum_max_linear(alpha: float, beta: float, lo: int, hi: int) -> float:
    """Σ_{c=lo}^{hi} max(alpha·c, beta·(c+1)) for alpha, beta >= 0, 0 <= lo (0 if hi < lo)."""
    if hi < lo:
        return 0.0

    def s(m: float, k: float, a: int, b: int) -> float:  # Σ_{c=a}^{b} (m c + k)
        if b < a:
            return 0.0
        n = b - a + 1
        return m * (a + b) * n / 2.0 + k * n

    if alpha <= beta:
        return s(beta, beta, lo, hi)
    cross = int(beta // (alpha - beta))  # c <= cross: beta line is the larger (or equal)
    mid = min(max(cross, lo - 1), hi)
    return s(beta, beta, lo, mid) + s(alpha, 0.0, mid + 1, hi)


def _sum_max_linear_np(alpha: float, beta: float, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Vectorised :func:`_sum_max_linear` over integer arrays ``lo``, ``hi``."""
    lo = lo.astype(np.float64)
    hi = hi.astype(np.float64)

    def s(m: float, k: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        n = np.maximum(b - a + 1.0, 0.0)
        return m * (a + b) * n / 2.0 + k * n

    if alpha <= beta:
        return s(beta, beta, lo, hi)
    cross = float(beta // (alpha - beta))
    mid = np.minimum(np.maximum(cross, lo - 1.0), hi)
    return s(beta, beta, lo, mid) + s(alpha, 0.0, mid + 1.0, hi)


class RooflineModel:
    """Per-iteration time of one replica of ``model`` on ``tp`` x ``gpu``.

    Attributes:
        gpu, model: the specs. precision: the weight :class:`Precision`. tp, gpus: GPUs
        per replica (equal). efficiency: the :class:`RooflineEfficiency` in use.
        memory: the :class:`MemoryEstimate` behind ``kv_capacity_tokens`` (KV-cache tokens
        the replica holds). kv_bytes_per_token_per_gpu: KV bytes one token takes per GPU.

    Raises UserInputError (with the memory arithmetic) when the model does not fit,
    unless ``require_fit=False``. Construction does arithmetic only (no files).
    """

    def __init__(
        self,
        gpu: GpuSpec,
        model: ModelSpec,
        precision: str | Precision = "bf16",
        tp: int = 1,
        efficiency: RooflineEfficiency | None = None,
        *,
        kv_dtype: str = "auto",
        gpu_memory_utilization: float = 0.9,
        context_tokens: int | None = None,
        require_fit: bool = True,
    ) -> None:
        if tp < 1:
            raise UserInputError(f"tensor-parallel degree must be >= 1, got {tp}", field="tp")
        p = precision_named(precision)
        eff = efficiency if efficiency is not None else RooflineEfficiency()
        self.gpu = gpu
        self.model = model
        self.precision = p
        self.tp = tp
        self.gpus = tp
        self.efficiency = eff
        self.memory: MemoryEstimate = estimate_memory(
            gpu,
            model,
            p,
            tp,
            kv_dtype=kv_dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            context_tokens=context_tokens,
        )
        if require_fit and not self.memory.fits:
            raise UserInputError(
                f"{model.name} at {p.name} does not fit on {tp} x {gpu.name}: "
                f"{self.memory.reason}\n{self.memory.breakdown()}",
                field="model",
            )
        self.kv_capacity_tokens: int = self.memory.kv_capacity_tokens
        self.kv_bytes_per_token_per_gpu: float = self.memory.kv_bytes_per_token_per_gpu

        layout = shard_layout(model, tp)
        flops = gpu.flops_per_s(p) * eff.compute_efficiency
        bw = gpu.memory_bandwidth_bytes_per_s * eff.bandwidth_efficiency
        counts = model.parameter_counts()
        scale = model.total_parameters / counts.total
        embed_params = (counts.embedding + counts.lm_head) * scale
        head_params = counts.embedding * scale  # one vocab x hidden matrix (tied or not)
        layer_b = p.weight_bytes_per_param + p.scale_bytes_per_param
        embed_b = 2.0 if p.quantized else p.weight_bytes_per_param

        # seconds per token of linear-layer math, per logits row, per attention pair
        self._c_lin = 2.0 * (model.active_params - embed_params) / tp / flops
        self._c_head = 2.0 * head_params / tp / flops
        self._c_attn = 4.0 * model.num_layers * layout.heads_per_gpu * model.head_dim / flops
        # seconds to stream weights: always-read part, and all routed experts
        dense_bytes = (
            (layout.layer_params_per_gpu - layout.expert_params_per_gpu) * layer_b
            + head_params / tp * embed_b
            + layout.replicated_params * 2.0
        )
        self._t_weights = dense_bytes / bw
        self._t_experts = layout.expert_params_per_gpu * layer_b / bw
        moe = model.moe
        self._expert_miss = 1.0 - moe.experts_per_token / moe.num_experts if moe else 0.0
        # seconds per KV token read or written
        self._c_kv = self.kv_bytes_per_token_per_gpu / bw
        # all-reduce: fixed seconds per iteration, seconds per token
        if tp > 1:
            link = gpu.interconnect
            n_ar = 2.0 * model.num_layers
            ring = 2.0 * (tp - 1) / tp
            self._t_comm = n_ar * link.allreduce_latency_s
            self._c_comm = (
                n_ar
                * ring
                * model.hidden_size
                * 2.0
                / (link.bandwidth_bytes_per_s * eff.comm_efficiency)
            )
        else:
            self._t_comm = 0.0
            self._c_comm = 0.0
        self._overhead = eff.overhead_s
        # batch-1 decode step, without its attention term (for cost_s)
        self._t_decode1 = (
            self._overhead
            + max(
                self._c_lin + self._c_head,
                self._t_weights + self._t_experts * (1.0 - self._expert_miss),
            )
            + self._t_comm
            + self._c_comm
        )

    @classmethod
    def from_names(
        cls,
        gpu: str,
        model: str,
        precision: str = "bf16",
        tp: int = 1,
        efficiency: RooflineEfficiency | None = None,
        *,
        gpus_file: str | Path | None = None,
        models_file: str | Path | None = None,
        kv_dtype: str = "auto",
        gpu_memory_utilization: float = 0.9,
        context_tokens: int | None = None,
        require_fit: bool = True,
    ) -> RooflineModel:
        """Build from catalog names (aliases, any case) or a local HF ``config.json`` path.

        ``gpus_file``/``models_file`` are user catalogs merged over the shipped ones.
        Unknown names raise UserInputError suggesting the nearest.
        """
        return cls(
            load_gpu_catalog(gpus_file).get(gpu),
            resolve_model(model, models_file),
            precision,
            tp,
            efficiency,
            kv_dtype=kv_dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            context_tokens=context_tokens,
            require_fit=require_fit,
        )

    def iteration_time_s(
        self,
        prefill_tokens: int,
        prefill_attention_pairs: float,
        decode_seqs: int,
        decode_context_tokens: int,
    ) -> float:
        """Seconds for one continuous-batching iteration of this replica.

        Args:
            prefill_tokens: new prompt tokens prefilled this iteration (chunks of one or
                more sequences).
            prefill_attention_pairs: query-key pairs the attention computes, for its FLOPs:
                Σ over those chunks of chunk_len x context length after the chunk (the
                simulator's convention). That counts the masked half of each chunk's own
                square too; a causal kernel computes chunk x prior + chunk(chunk+1)/2, and
                passing that count instead makes long-prompt attention half as dear.
            decode_seqs: sequences decoding one token each.
            decode_context_tokens: Σ of those sequences' context lengths (KV tokens read).

        Returns 0.0 for an empty iteration (no tokens). Plain float arithmetic.
        """
        tokens = prefill_tokens + decode_seqs
        if tokens <= 0:
            return 0.0
        t_weights = self._t_weights
        if self._t_experts:
            t_weights += self._t_experts * (1.0 - self._expert_miss**tokens)
        t_math = tokens * self._c_lin + decode_seqs * self._c_head
        t = self._overhead + self._t_comm + tokens * self._c_comm
        t += t_math if t_math > t_weights else t_weights
        c_attn = self._c_attn
        c_kv = self._c_kv
        if prefill_tokens:
            a = prefill_attention_pairs * c_attn
            b = prefill_tokens * c_kv
            t += a if a > b else b
        if decode_seqs:
            a = decode_context_tokens * c_attn
            b = (decode_context_tokens + decode_seqs) * c_kv
            t += a if a > b else b
        return t

    def iteration_terms(
        self,
        prefill_tokens: int,
        prefill_attention_pairs: float,
        decode_seqs: int,
        decode_context_tokens: int,
    ) -> dict[str, float]:
        """The parts of :meth:`iteration_time_s` (seconds each), for reports and calibration.

        Keys: ``linear_compute_s`` and ``weights_read_s`` (the matmul roofline takes the
        larger), ``prefill_attention_s`` / ``prefill_kv_s`` and ``decode_attention_s`` /
        ``decode_kv_s`` (likewise pairwise), ``allreduce_s``, ``overhead_s``, and
        ``total_s`` (= iteration_time_s). All zero for an empty iteration.
        """
        tokens = prefill_tokens + decode_seqs
        keys = (
            "linear_compute_s",
            "weights_read_s",
            "prefill_attention_s",
            "prefill_kv_s",
            "decode_attention_s",
            "decode_kv_s",
            "allreduce_s",
            "overhead_s",
            "total_s",
        )
        if tokens <= 0:
            return dict.fromkeys(keys, 0.0)
        weights = self._t_weights + self._t_experts * (1.0 - self._expert_miss**tokens)
        pre_on = 1.0 if prefill_tokens else 0.0
        dec_on = 1.0 if decode_seqs else 0.0
        parts = {
            "linear_compute_s": tokens * self._c_lin + decode_seqs * self._c_head,
            "weights_read_s": weights,
            "prefill_attention_s": pre_on * prefill_attention_pairs * self._c_attn,
            "prefill_kv_s": prefill_tokens * self._c_kv,
            "decode_attention_s": dec_on * decode_context_tokens * self._c_attn,
            "decode_kv_s": dec_on * (decode_context_tokens + decode_seqs) * self._c_kv,
            "allreduce_s": self._t_comm + tokens * self._c_comm,
            "overhead_s": self._overhead,
        }
        parts["total_s"] = self.iteration_time_s(
            prefill_tokens, prefill_attention_pairs, decode_seqs, decode_context_tokens
        )
        return parts

    # ---- CostModel ---------------------------------------------------------------------

    def cost_s(self, input_tokens: int, output_tokens: int) -> float:
        """Seconds to serve one request alone on this replica.

        One prefill iteration of ``input_tokens`` (which also yields the first output
        token), then ``output_tokens - 1`` batch-1 decode iterations whose context grows
        from input_tokens + 1 (with no input, ``output_tokens`` decode iterations from
        context 1). Closed form; equals summing :meth:`iteration_time_s` over the steps.
        """
        i = int(input_tokens)
        o = int(output_tokens)
        t = 0.0
        if i > 0:
            t = self.iteration_time_s(i, float(i) * i, 0, 0)
            n = o - 1 if o > 0 else 0
        else:
            n = o
        if n > 0:
            t += n * self._t_decode1 + _sum_max_linear(self._c_attn, self._c_kv, i + 1, i + n)
        return t

    def costs_s(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`cost_s` (float64 seconds)."""
        i = np.asarray(input_tokens, dtype=np.int64)
        o = np.asarray(output_tokens, dtype=np.int64)
        fi = i.astype(np.float64)
        has = i > 0
        # prefill iteration (only where input > 0)
        t_weights = self._t_weights + self._t_experts * (
            1.0 - np.power(self._expert_miss, np.maximum(fi, 1.0))
        )
        t_math = fi * self._c_lin
        pre = (
            self._overhead
            + self._t_comm
            + fi * self._c_comm
            + np.maximum(t_math, t_weights)
            + np.maximum(fi * fi * self._c_attn, fi * self._c_kv)
        )
        pre = np.where(has, pre, 0.0)
        n = np.where(has, np.maximum(o - 1, 0), np.maximum(o, 0))
        dec = n * self._t_decode1 + _sum_max_linear_np(self._c_attn, self._c_kv, i + 1, i + n)
        return pre + dec

    def __repr__(self) -> str:
        return (
            f"RooflineModel({self.model.name} {self.precision.name} on {self.tp} x "
            f"{self.gpu.name}, kv_capacity_tokens={self.kv_capacity_tokens})"
        )
