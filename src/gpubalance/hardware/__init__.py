"""Hardware and model catalogs and the memory estimator (layer 0).

* :func:`load_gpu_catalog` / :func:`get_gpu`: GPU types (:class:`GpuSpec`) from the shipped
  ``data/gpus.yaml``, optionally merged with a user file (prices, new GPUs).
* :func:`load_model_catalog` / :func:`get_model` / :func:`load_hf_config` /
  :func:`resolve_model`: models (:class:`ModelSpec`) by name or from a local config.json.
* :func:`estimate_memory`: fits or not, weights per GPU, KV-cache capacity in tokens and
  concurrent sequences, with the arithmetic (:meth:`MemoryEstimate.breakdown`).
"""

from gpubalance.hardware.gpus import (
    GpuCatalog,
    GpuSpec,
    InterconnectSpec,
    get_gpu,
    load_gpu_catalog,
)
from gpubalance.hardware.memory import (
    DEFAULT_CONTEXT_TOKENS,
    MemoryEstimate,
    MemoryLine,
    ShardLayout,
    estimate_memory,
    memory_fit_grid,
    shard_layout,
)
from gpubalance.hardware.models import (
    ModelCatalog,
    ModelSpec,
    MoeSpec,
    ParameterCounts,
    get_model,
    load_hf_config,
    load_model_catalog,
    resolve_model,
)
from gpubalance.hardware.precision import (
    KV_DTYPE_BYTES,
    PRECISIONS,
    Precision,
    kv_dtype_bytes,
    precision_named,
)

__all__ = [
    "DEFAULT_CONTEXT_TOKENS",
    "KV_DTYPE_BYTES",
    "PRECISIONS",
    "GpuCatalog",
    "GpuSpec",
    "InterconnectSpec",
    "MemoryEstimate",
    "MemoryLine",
    "ModelCatalog",
    "ModelSpec",
    "MoeSpec",
    "ParameterCounts",
    "Precision",
    "ShardLayout",
    "estimate_memory",
    "get_gpu",
    "get_model",
    "kv_dtype_bytes",
    "load_gpu_catalog",
    "load_hf_config",
    "load_model_catalog",
    "memory_fit_grid",
    "precision_named",
    "resolve_model",
    "shard_layout",
]
