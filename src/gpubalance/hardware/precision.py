"""Numeric precisions for weights and KV cache: bytes per value and which math units run.

Weights:

======== ===================== =========================== ==============================
name     bytes per parameter   default scale overhead      matrix math runs at
======== ===================== =========================== ==============================
bf16     2                     0                           16-bit tensor cores
fp16     2                     0                           16-bit tensor cores
fp8      1                     0 (per-tensor/channel)      fp8 tensor cores if the GPU has
                                                           them, else 16-bit (weight-only)
int8     1                     0 (per-channel)             int8 tensor cores (W8A8) if the
                                                           GPU has them, else 16-bit
int4     0.5                   2 bytes per 128-group       16-bit (W4A16: AWQ/GPTQ/Marlin)
                               = 0.015625 bytes/param
======== ===================== =========================== ==============================

Quantised checkpoints keep the input embedding and the output head at 16 bits (what vLLM
does for AWQ, GPTQ and fp8 checkpoints); the memory estimator accounts for that.

KV cache: ``auto`` (the model's 16-bit activation dtype, 2 bytes), ``bf16``/``fp16`` (2),
``fp8`` (1).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpubalance.errors import UserInputError
from gpubalance.registry import suggest

__all__ = [
    "KV_DTYPE_BYTES",
    "PRECISIONS",
    "Precision",
    "kv_dtype_bytes",
    "precision_named",
]


@dataclass(frozen=True, slots=True)
class Precision:
    """A weight precision.

    Attributes:
        name: canonical name (``bf16``, ``fp16``, ``fp8``, ``int8``, ``int4``).
        weight_bytes_per_param: storage of one quantised weight, bytes.
        scale_bytes_per_param: default extra bytes per weight for quantisation scales
            (e.g. one fp16 scale per group of 128 int4 weights = 2/128).
        math: which tensor-core throughput the matrix multiplications run at:
            ``"16bit"``, ``"fp8"`` or ``"int8"`` (falls back to 16-bit on GPUs without it).
        quantized: True when embeddings and output head stay at 16 bits while the
            transformer layers are stored at this precision.
    """

    name: str
    weight_bytes_per_param: float
    scale_bytes_per_param: float
    math: str
    quantized: bool


PRECISIONS: dict[str, Precision] = {
    "bf16": Precision("bf16", 2.0, 0.0, "16bit", False),
    "fp16": Precision("fp16", 2.0, 0.0, "16bit", False),
    "fp8": Precision("fp8", 1.0, 0.0, "fp8", True),
    "int8": Precision("int8", 1.0, 0.0, "int8", True),
    "int4": Precision("int4", 0.5, 2.0 / 128.0, "16bit", True),
}

_PRECISION_ALIASES: dict[str, str] = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8": "fp8",
    "fp8_e4m3": "fp8",
    "e4m3": "fp8",
    "w8a8": "int8",
    "w4a16": "int4",
    "awq": "int4",
    "gptq": "int4",
}

#: KV-cache dtype -> bytes per stored value.
KV_DTYPE_BYTES: dict[str, float] = {"auto": 2.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


def precision_named(name: str | Precision) -> Precision:
    """Return the :class:`Precision` called ``name`` (case-insensitive; ``awq`` -> int4).

    Unknown names raise :class:`~gpubalance.errors.UserInputError` naming the nearest.
    """
    if isinstance(name, Precision):
        return name
    key = name.strip().lower()
    key = _PRECISION_ALIASES.get(key, key)
    try:
        return PRECISIONS[key]
    except KeyError:
        known = [*PRECISIONS, *_PRECISION_ALIASES]
        raise UserInputError(
            f"unknown precision {name!r}{suggest(name, known)}; known: {', '.join(PRECISIONS)}",
            field="precision",
        ) from None


def kv_dtype_bytes(kv_dtype: str) -> float:
    """Bytes per KV-cache value for ``kv_dtype`` (``auto`` = 16-bit)."""
    key = kv_dtype.strip().lower()
    key = {"bfloat16": "bf16", "float16": "fp16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}.get(
        key, key
    )
    try:
        return KV_DTYPE_BYTES[key]
    except KeyError:
        known = list(KV_DTYPE_BYTES)
        raise UserInputError(
            f"unknown KV-cache dtype {kv_dtype!r}{suggest(kv_dtype, known)}; "
            f"known: {', '.join(known)}",
            field="kv_dtype",
        ) from None
