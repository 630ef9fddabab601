"""Gateway configuration (YAML, validated by pydantic; every field described).

Example::

    auth:
      api_keys: [{tenant: team-a, sha256: "<gpubalance serve hash-key output>"}]
      admin_key_sha256: "<hash>"
    pools:
      - name: h100
        policy: least_cost
        models: [llama-3.1-8b]
        backends:
          - {name: a, url: "http://10.0.0.1:8000", labels: {gpu: H100, region: eu}}
          - {name: b, url: "http://10.0.0.2:8000", weight: 0.1}   # canary
    rules:
      - {pool: h100, models: ["llama-*"], max_input_tokens: 4096}
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpubalance.config import load_model
from gpubalance.cost import TokenCostModel

__all__ = [
    "AdmissionConfig",
    "AuthConfig",
    "BackendConfig",
    "BatchingConfig",
    "CacheConfig",
    "ClientKey",
    "CostConfig",
    "GatewayConfig",
    "HealthConfig",
    "LimitsConfig",
    "PoolConfig",
    "RuleConfig",
    "ScrapeConfig",
    "load_gateway_config",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BackendConfig(_Model):
    """One OpenAI-compatible backend server (vLLM, SGLang, TGI, llama.cpp, Ollama, ...)."""

    name: str = Field(description="Unique name of the backend inside its pool.")
    url: str = Field(description="Base URL, e.g. http://10.0.0.1:8000 (no /v1 suffix).")
    weight: float = Field(
        default=1.0, ge=0, description="Relative capacity / canary share; 0 takes no traffic."
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Free-form labels, e.g. {gpu: H100, region: eu}."
    )
    api_key: str | None = Field(
        default=None, description="Bearer key the gateway sends to this backend (if it needs one)."
    )

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return v.rstrip("/")


class AdmissionConfig(_Model):
    """Strict caps per pool; beyond them the gateway answers 429 with Retry-After."""

    max_queued: int | None = Field(
        default=None, ge=1, description="Most requests outstanding in the pool (None: no cap)."
    )
    max_in_flight_cost_s: float | None = Field(
        default=None,
        gt=0,
        description="Most summed predicted cost (seconds of GPU work) outstanding in the pool.",
    )


class CostConfig(_Model):
    """Cost model that prices a request (input tokens estimated, output = max_tokens).

    Admission caps (``max_in_flight_cost_s``) use its standalone cost. Routing (least
    outstanding cost, and each backend's in-flight cost) uses, for the roofline model, the
    request's marginal cost on a busy continuous-batching replica
    (:class:`~gpubalance.cost.BatchedCost`: prefill plus each decode token's share), as the
    simulator does; a fitted token model prices routing too.
    """

    token: TokenCostModel | None = Field(
        default=None, description="Fitted token cost model (from `gpubalance calibrate`)."
    )
    token_file: str | None = Field(
        default=None,
        description="Path of a TokenCostModel YAML/JSON written by `gpubalance calibrate` "
        "(instead of `token` inline).",
    )
    efficiency_file: str | None = Field(
        default=None,
        description="Path of a RooflineEfficiency YAML/JSON written by `gpubalance calibrate "
        "--model roofline`, applied to the roofline model (`gpu` + `model`).",
    )
    gpu: str | None = Field(default=None, description="GPU name for the roofline cost model.")
    model: str | None = Field(default=None, description="Model name for the roofline model.")
    precision: str = Field(default="bf16", description="Weights precision for the roofline model.")
    tp: int = Field(default=1, ge=1, description="Tensor-parallel degree for the roofline model.")
    default_max_tokens: int = Field(
        default=256, ge=1, description="Output tokens assumed when a request has no max_tokens."
    )

    @model_validator(mode="after")
    def _one_token_source(self) -> CostConfig:
        if self.token is not None and self.token_file is not None:
            raise ValueError("give either token or token_file, not both")
        return self


class ScrapeConfig(_Model):
    """Scrape vLLM-style backend /metrics into routing state (waiting requests, KV usage)."""

    enabled: bool = Field(default=False, description="Turn scraping on.")
    interval_s: float = Field(default=1.0, gt=0, description="Seconds between scrapes.")
    path: str = Field(default="/metrics", description="Metrics path on each backend.")


class PoolConfig(_Model):
    """A pool of interchangeable backends serving the same models."""

    name: str = Field(description="Unique pool name (rules refer to it).")
    models: list[str] = Field(
        default_factory=list,
        description="Model names this pool serves (listed by /v1/models; requests naming "
        "them go here when no rule matches first).",
    )
    policy: str = Field(
        default="least_cost",
        description="Routing policy: round_robin, least_requests, least_cost, power_of_two, "
        "weighted.",
    )
    seed: int = Field(default=0, description="Seed for randomised policies.")
    backends: list[BackendConfig] = Field(min_length=1, description="Backends of the pool.")
    admission: AdmissionConfig = Field(
        default_factory=AdmissionConfig, description="Admission caps of the pool."
    )
    cost: CostConfig = Field(default_factory=CostConfig, description="How requests are priced.")
    scrape: ScrapeConfig = Field(
        default_factory=ScrapeConfig, description="Backend /metrics scraping."
    )

    @field_validator("policy")
    @classmethod
    def _policy(cls, v: str) -> str:
        from gpubalance.route import POLICIES

        if v not in POLICIES:
            raise ValueError(f"unknown routing policy {v!r}; known: {', '.join(POLICIES.names())}")
        return v.lower()

    @model_validator(mode="after")
    def _unique(self) -> PoolConfig:
        names = [b.name for b in self.backends]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate backend name(s) {sorted(dup)} in pool {self.name!r}")
        return self


class RuleConfig(_Model):
    """Routing rule; rules are tried in order, the first that matches picks the pool."""

    pool: str = Field(description="Pool that gets the request when the rule matches.")
    models: list[str] = Field(
        default_factory=list, description="Model names or globs (llama-*); empty = any."
    )
    min_input_tokens: int = Field(
        default=0, ge=0, description="Smallest estimated input size, tokens (inclusive)."
    )
    max_input_tokens: int | None = Field(
        default=None, ge=0, description="Largest estimated input size, tokens (inclusive)."
    )
    header: str | None = Field(default=None, description="Request header to test (any case).")
    header_values: list[str] = Field(
        default_factory=list, description="Accepted header values; empty = header present."
    )
    tenants: list[str] = Field(
        default_factory=list, description="Tenants (from client keys) that match; empty = any."
    )


class ClientKey(_Model):
    """A client API key, stored only as its SHA-256 hex digest."""

    tenant: str = Field(default="default", description="Tenant name the key belongs to.")
    sha256: str = Field(description="sha256 hex of the key (see `gpubalance serve hash-key`).")

    @field_validator("sha256")
    @classmethod
    def _hex(cls, v: str) -> str:
        v = v.lower()
        if len(v) != 64 or any(c not in "0123456789abcdef" for c in v):
            raise ValueError("must be a 64-character sha256 hex digest")
        return v


class AuthConfig(_Model):
    """Client and admin authentication (Authorization: Bearer <key>)."""

    api_keys: list[ClientKey] = Field(
        default_factory=list, description="Accepted client keys (hashed); empty = no client auth."
    )
    admin_key_sha256: str | None = Field(
        default=None, description="sha256 hex of the admin key; None disables /admin."
    )


class HealthConfig(_Model):
    """Active health checks and passive ejection (circuit breaker)."""

    interval_s: float = Field(default=1.0, gt=0, description="Seconds between active checks.")
    path: str = Field(default="/health", description="Health path probed on each backend.")
    timeout_s: float = Field(default=1.0, gt=0, description="Timeout of one active check.")
    failure_threshold: int = Field(
        default=3, ge=1, description="Consecutive failures that eject a backend."
    )
    eject_s: float = Field(
        default=5.0, gt=0, description="Seconds an ejected backend stays out before a retry."
    )
    active: bool = Field(default=True, description="Run active checks.")


class LimitsConfig(_Model):
    """Request limits and timeouts."""

    max_body_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1024, description="Largest accepted request body, bytes."
    )
    request_timeout_s: float = Field(
        default=600.0, gt=0, description="Whole-request timeout (seconds) for a backend call."
    )
    connect_timeout_s: float = Field(
        default=2.0, gt=0, description="Connect timeout to a backend, seconds."
    )
    max_attempts: int = Field(
        default=3, ge=1, description="Backends tried per request (retries only before first byte)."
    )
    max_connections_per_backend: int = Field(
        default=1024, ge=1, description="Keep-alive connection pool size per backend."
    )


class CacheConfig(_Model):
    """Response cache for deterministic requests (embeddings; temperature-0 completions)."""

    enabled: bool = Field(default=False, description="Turn the cache on.")
    ttl_s: float = Field(default=300.0, gt=0, description="Time to live of an entry, seconds.")
    max_entries: int = Field(default=10_000, ge=1, description="Most entries kept in memory.")
    max_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024, description="Most response bytes kept in memory."
    )
    max_entry_bytes: int = Field(
        default=1024 * 1024, ge=1, description="Largest response stored, bytes."
    )
    redis_url: str | None = Field(
        default=None, description="redis://host:port/db to share the cache across replicas."
    )
    namespace: str = Field(default="gpubalance:cache:", description="Redis key prefix.")


class BatchingConfig(_Model):
    """Micro-batching of embedding requests."""

    enabled: bool = Field(default=False, description="Coalesce compatible embedding requests.")
    max_wait_s: float = Field(
        default=0.002, gt=0, le=1.0, description="Most time a request waits for company, s."
    )
    max_batch_inputs: int = Field(
        default=64, ge=1, description="Most inputs (strings) in one upstream request."
    )


class GatewayConfig(_Model):
    """Everything `gpubalance serve` needs."""

    host: str = Field(default="127.0.0.1", description="Listen address.")
    port: int = Field(default=8080, ge=0, le=65535, description="Listen port.")
    pools: list[PoolConfig] = Field(min_length=1, description="Backend pools.")
    rules: list[RuleConfig] = Field(default_factory=list, description="Ordered routing rules.")
    default_pool: str | None = Field(
        default=None, description="Pool for requests no rule or pool model list matches."
    )
    auth: AuthConfig = Field(default_factory=AuthConfig, description="Keys.")
    health: HealthConfig = Field(default_factory=HealthConfig, description="Health checks.")
    limits: LimitsConfig = Field(default_factory=LimitsConfig, description="Limits, timeouts.")
    cache: CacheConfig = Field(default_factory=CacheConfig, description="Response cache.")
    batching: BatchingConfig = Field(
        default_factory=BatchingConfig, description="Embedding micro-batching."
    )
    tokenizer_path: str | None = Field(
        default=None,
        description="Local tokenizer.json for exact input token counts (else chars/4 estimate).",
    )
    access_log: str | None = Field(
        default=None, description="JSON access log: a file path, '-' for stdout, None for off."
    )
    log_flush_s: float = Field(
        default=0.2, gt=0, description="Seconds between access-log buffer flushes."
    )

    @model_validator(mode="after")
    def _refs(self) -> GatewayConfig:
        names = [p.name for p in self.pools]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate pool name(s) {sorted(dup)}")
        known = set(names)
        for i, r in enumerate(self.rules):
            if r.pool not in known:
                raise ValueError(f"rules[{i}] names unknown pool {r.pool!r}; known: {names}")
        if self.default_pool is not None and self.default_pool not in known:
            raise ValueError(f"default_pool {self.default_pool!r} is not a pool; known: {names}")
        return self


def load_gateway_config(path: str | Path) -> GatewayConfig:
    """Read and validate a gateway YAML file (errors name file, line and field)."""
    return load_model(GatewayConfig, path)
