"""Model catalog: decoder-only transformers described by their architecture numbers.

The catalog ships as ``gpubalance/data/models.yaml`` (sources cited there);
:func:`load_model_catalog` merges a user's file over it, and :func:`load_hf_config` reads a
Hugging Face ``config.json`` from a local path (no network). Parameter counts are computed
from the architecture when a file does not state them (:meth:`ModelSpec.parameter_counts`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpubalance.config import load_mapping
from gpubalance.errors import UserInputError
from gpubalance.hardware.catalog_file import file_stamp, load_catalog_entries
from gpubalance.hardware.names import SpecCatalog

__all__ = [
    "ModelCatalog",
    "ModelSpec",
    "MoeSpec",
    "ParameterCounts",
    "get_model",
    "load_hf_config",
    "load_model_catalog",
    "resolve_model",
]


class MoeSpec(BaseModel):
    """Mixture-of-experts feed-forward layers (every layer is MoE)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    num_experts: int = Field(ge=2, description="Routed experts per layer.")
    experts_per_token: int = Field(ge=1, description="Experts each token is routed to (top-k).")
    expert_intermediate_size: int | None = Field(
        default=None,
        ge=1,
        description="Hidden size of one expert's MLP; null = the model's intermediate_size.",
    )
    shared_expert_intermediate_size: int = Field(
        default=0, ge=0, description="Hidden size of an always-active shared expert (0 = none)."
    )

    @model_validator(mode="after")
    def _check_topk(self) -> MoeSpec:
        if self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token exceeds num_experts")
        return self


@dataclass(frozen=True, slots=True)
class ParameterCounts:
    """Parameters computed from the architecture, by component (whole model, no TP).

    embedding: input token embedding (vocab x hidden); lm_head: output projection (0 when
    tied to the embedding); attention: q, k, v, o projections (+ biases) over all layers;
    mlp_dense: dense or shared-expert MLP over all layers; experts: all routed experts over
    all layers; router: MoE gate over all layers; norms: RMSNorm weights.
    """

    embedding: int
    lm_head: int
    attention: int
    mlp_dense: int
    experts: int
    router: int
    norms: int
    active_experts: int

    @property
    def total(self) -> int:
        """All parameters."""
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.mlp_dense
            + self.experts
            + self.router
            + self.norms
        )

    @property
    def active(self) -> int:
        """Parameters one token uses (routed experts counted top-k of n)."""
        return self.total - self.experts + self.active_experts


class ModelSpec(BaseModel):
    """A decoder-only transformer by its architecture numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Canonical name, e.g. 'Llama-3.1-8B'.")
    aliases: list[str] = Field(
        default_factory=list, description="Other names accepted for this model (any case)."
    )
    hf_id: str | None = Field(default=None, description="Hugging Face repository id.")
    family: str = Field(default="", description="Model family, e.g. 'llama'.")
    num_layers: int = Field(ge=1, description="Transformer decoder layers.")
    hidden_size: int = Field(ge=1, description="Model (residual stream) width.")
    num_attention_heads: int = Field(ge=1, description="Query heads per layer.")
    num_kv_heads: int = Field(
        ge=1, description="Key/value heads per layer (< attention heads with GQA)."
    )
    head_dim: int = Field(ge=1, description="Width of one attention head.")
    intermediate_size: int = Field(ge=1, description="MLP hidden width (per expert for MoE).")
    vocab_size: int = Field(ge=1, description="Vocabulary size (embedding rows).")
    max_context_tokens: int = Field(ge=1, description="Longest supported context, tokens.")
    tied_embeddings: bool = Field(
        default=False, description="Output head shares the input embedding matrix."
    )
    attention_bias: bool = Field(
        default=False, description="q/k/v projections have biases (Qwen2 does)."
    )
    gated_mlp: bool = Field(
        default=True, description="MLP has gate+up+down matrices (SwiGLU); false = up+down."
    )
    parameters: int | None = Field(
        default=None, ge=1, description="Published total parameters; null = computed."
    )
    active_parameters: int | None = Field(
        default=None, ge=1, description="Published parameters active per token (MoE)."
    )
    moe: MoeSpec | None = Field(default=None, description="Mixture-of-experts layout, if any.")
    source: str = Field(default="", description="Where these numbers come from.")

    @field_validator("aliases", mode="before")
    @classmethod
    def _aliases_as_text(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [str(v) if isinstance(v, int | float) else v for v in value]
        return value

    @model_validator(mode="before")
    @classmethod
    def _default_head_dim(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("head_dim") is None:
            heads, hidden = data.get("num_attention_heads"), data.get("hidden_size")
            if isinstance(heads, int) and isinstance(hidden, int) and heads > 0:
                data = {**data, "head_dim": hidden // heads}
        return data

    @model_validator(mode="after")
    def _check_heads(self) -> ModelSpec:
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.active_parameters is not None and self.moe is None:
            raise ValueError("active_parameters is only meaningful for MoE models (set moe)")
        return self

    # ---- derived figures -----------------------------------------------------------------

    def parameter_counts(self) -> ParameterCounts:
        """Parameters by component, computed from the architecture alone."""
        h, layers, d = self.hidden_size, self.num_layers, self.head_dim
        q_width = self.num_attention_heads * d
        kv_width = self.num_kv_heads * d
        attn = h * q_width + 2 * h * kv_width + q_width * h
        if self.attention_bias:
            attn += q_width + 2 * kv_width
        mats = 3 if self.gated_mlp else 2
        moe = self.moe
        if moe is None:
            mlp_dense, experts, router, active_experts = mats * h * self.intermediate_size, 0, 0, 0
        else:
            inter = moe.expert_intermediate_size or self.intermediate_size
            per_expert = mats * h * inter
            mlp_dense = mats * h * moe.shared_expert_intermediate_size
            experts = moe.num_experts * per_expert
            active_experts = moe.experts_per_token * per_expert
            router = h * moe.num_experts
        embedding = self.vocab_size * h
        return ParameterCounts(
            embedding=embedding,
            lm_head=0 if self.tied_embeddings else embedding,
            attention=layers * attn,
            mlp_dense=layers * mlp_dense,
            experts=layers * experts,
            router=layers * router,
            norms=(2 * layers + 1) * h,
            active_experts=layers * active_experts,
        )

    @property
    def total_parameters(self) -> int:
        """Published total parameters, else computed from the architecture."""
        return self.parameters if self.parameters is not None else self.parameter_counts().total

    @property
    def active_params(self) -> int:
        """Parameters used per token: total for dense models; published or computed for MoE."""
        if self.moe is None:
            return self.total_parameters
        if self.active_parameters is not None:
            return self.active_parameters
        counts = self.parameter_counts()
        return round(counts.active * self.total_parameters / counts.total)

    @property
    def is_moe(self) -> bool:
        """True for mixture-of-experts models."""
        return self.moe is not None

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV-cache bytes one token occupies across the whole model (all layers, K and V).

        = 2 (K and V) x layers x KV heads x head_dim x bytes per value. With grouped-query
        attention this uses the KV heads, not the attention heads.
        """
        return 2.0 * self.num_layers * self.num_kv_heads * self.head_dim * kv_dtype_bytes


class ModelCatalog(SpecCatalog[ModelSpec]):
    """Models by canonical name; lookup by name or alias, case-insensitive."""

    kind = "model"


@functools.lru_cache(maxsize=16)
def _load_cached(path: str | None, stamp: tuple[int, int]) -> ModelCatalog:
    return ModelCatalog(load_catalog_entries(ModelSpec, "models", "models.yaml", path))


def load_model_catalog(path: str | Path | None = None) -> ModelCatalog:
    """The shipped model catalog with the user's YAML file at ``path`` merged over it.

    Same rules as :func:`gpubalance.hardware.gpus.load_gpu_catalog`.
    """
    if path is None:
        return _load_cached(None, (0, 0))
    resolved = Path(path).resolve()
    return _load_cached(str(resolved), file_stamp(resolved))


def get_model(name: str, path: str | Path | None = None) -> ModelSpec:
    """Shortcut: ``load_model_catalog(path).get(name)``."""
    return load_model_catalog(path).get(name)


# ---- Hugging Face config.json --------------------------------------------------------------

_HF_REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")


def load_hf_config(path: str | Path, *, name: str | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from a Hugging Face ``config.json`` (a file or its folder).

    Reads only the local file. Understands Llama, Mistral, Qwen2, Mixtral and Qwen-MoE style
    keys (``num_key_value_heads``, ``head_dim``, ``tie_word_embeddings``,
    ``num_local_experts``/``num_experts``, ``num_experts_per_tok``,
    ``moe_intermediate_size``, ``shared_expert_intermediate_size``); multimodal configs are
    read from their ``text_config``. Parameter counts are computed from the architecture.
    Missing or malformed fields raise UserInputError naming the file, line and field.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    data, lines = load_mapping(p)
    if not isinstance(data, dict):
        raise UserInputError("expected a JSON object", file=p, line=1)
    prefix: tuple[str, ...] = ()
    cfg = data
    if "text_config" in data and isinstance(data["text_config"], dict):
        cfg, prefix = {**data["text_config"]}, ("text_config",)

    def where(key: str) -> int | None:
        return lines.get((*prefix, key), lines.get(()))

    for key in _HF_REQUIRED:
        if key not in cfg:
            raise UserInputError("required field missing", file=p, line=1, field=key)
    if "intermediate_size" not in cfg and "moe_intermediate_size" not in cfg:
        raise UserInputError("required field missing", file=p, line=1, field="intermediate_size")

    def integer(key: str, default: int | None = None) -> int:
        value = cfg.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UserInputError(
                f"expected a non-negative integer, got {value!r}",
                file=p,
                line=where(key),
                field=key,
            )
        return value

    heads = integer("num_attention_heads")
    hidden = integer("hidden_size")
    n_experts = cfg.get("num_local_experts", cfg.get("num_experts"))
    moe: dict[str, Any] | None = None
    if n_experts:
        moe = {
            "num_experts": integer(
                "num_local_experts" if "num_local_experts" in cfg else "num_experts"
            ),
            "experts_per_token": integer("num_experts_per_tok", 2),
            "expert_intermediate_size": cfg.get("moe_intermediate_size"),
            "shared_expert_intermediate_size": cfg.get("shared_expert_intermediate_size") or 0,
        }
    model_type = str(cfg.get("model_type", data.get("model_type", "")))
    default_name = str(cfg.get("_name_or_path") or data.get("_name_or_path") or p.parent.name)
    spec: dict[str, Any] = {
        "name": name or default_name.rstrip("/").split("/")[-1] or "hf-model",
        "hf_id": str(data.get("_name_or_path")) if data.get("_name_or_path") else None,
        "family": model_type,
        "num_layers": integer("num_hidden_layers"),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": integer("num_key_value_heads", heads),
        "head_dim": cfg.get("head_dim") or (hidden // heads if heads else None),
        "intermediate_size": integer(
            "intermediate_size" if "intermediate_size" in cfg else "moe_intermediate_size"
        ),
        "vocab_size": integer("vocab_size"),
        "max_context_tokens": integer("max_position_embeddings", 4096),
        "tied_embeddings": bool(
            cfg.get("tie_word_embeddings", data.get("tie_word_embeddings", False))
        ),
        "attention_bias": bool(cfg.get("attention_bias", model_type.startswith("qwen2"))),
        "moe": moe,
        "source": f"Hugging Face config.json at {p}",
    }
    from gpubalance.config import validate_model

    try:
        return validate_model(ModelSpec, spec, source=str(p))
    except UserInputError as exc:
        raise UserInputError(
            exc.message, file=p, line=where(exc.field or ""), field=exc.field
        ) from None


def resolve_model(
    name_or_path: str | ModelSpec, catalog_path: str | Path | None = None
) -> ModelSpec:
    """A catalog model by name/alias, or a Hugging Face config.json when given a local path.

    A string is a path when it ends in ``.json``, or names an existing file or folder and
    either contains a path separator or is not a catalog name; otherwise it is looked up in
    the catalog (unknown names suggest the nearest).
    """
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    catalog = load_model_catalog(catalog_path)
    as_path = Path(name_or_path)
    looks_like_path = "/" in name_or_path or "\\" in name_or_path
    if name_or_path.endswith(".json") or (
        as_path.exists() and (looks_like_path or name_or_path not in catalog)
    ):
        return load_hf_config(as_path)
    return catalog.get(name_or_path)
