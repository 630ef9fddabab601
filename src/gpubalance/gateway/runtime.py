"""Live gateway state built from a :class:`GatewayConfig`: pools, backends, rules, keys.

A :class:`Runtime` is immutable in shape (swapped whole on reload); the mutable parts are
the per-backend :class:`~gpubalance.route.BackendState` counters and circuit breakers,
which a reload carries over for backends that keep their pool, name and URL.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpubalance.cost import BatchedCost, CostModel, TokenCostModel
from gpubalance.gateway.config import BackendConfig, CostConfig, GatewayConfig, PoolConfig
from gpubalance.route import BackendState, RoutingPolicy, make_policy
from gpubalance.route.admission import Admission, AdmissionCaps
from gpubalance.route.rules import PoolRule, PoolRules

__all__ = [
    "Backend",
    "Pool",
    "Runtime",
    "build_runtime",
    "default_cost_model",
    "routing_cost_model",
]


def default_cost_model() -> TokenCostModel:
    """Generic 8B-class GPU prices used when a pool names no cost model: 5 ms per request,
    0.2 ms per input token, 2 ms per output token (only the ratios matter for routing)."""
    return TokenCostModel(overhead_s=0.005, prefill_s_per_token=2e-4, decode_s_per_token=2e-3)


def pool_cost_model(cfg: CostConfig) -> CostModel:
    """The cost model a pool's config names: fitted token model, else roofline, else default."""
    if cfg.token is not None:
        return cfg.token
    if cfg.token_file is not None:
        return TokenCostModel.load(cfg.token_file)
    if cfg.gpu and cfg.model:
        from gpubalance.errors import UserInputError

        try:
            from gpubalance.cost.roofline import RooflineModel
        except ImportError:
            raise UserInputError(
                "cost.gpu/cost.model need gpubalance.cost.roofline, which is not installed",
                field="cost",
            ) from None
        from gpubalance.cost.roofline import RooflineEfficiency

        eff = None if cfg.efficiency_file is None else RooflineEfficiency.load(cfg.efficiency_file)
        model: CostModel = RooflineModel.from_names(
            cfg.gpu, cfg.model, cfg.precision, cfg.tp, efficiency=eff
        )
        return model
    return default_cost_model()


def routing_cost_model(cost_model: CostModel) -> CostModel:
    """The price the routing policy and the backends' in-flight cost use: for a cost model
    that times batching iterations (roofline), the marginal cost of a request on a busy
    continuous-batching replica (:class:`~gpubalance.cost.BatchedCost`, as the simulator
    routes); otherwise the cost model itself. Admission caps keep the pool's cost model."""
    if hasattr(cost_model, "iteration_time_s"):
        return BatchedCost(cost_model)  # type: ignore[arg-type]
    return cost_model


@dataclass(eq=False)
class Backend:
    """One backend: routing state, circuit breaker and (after start) its HTTP session."""

    pool: str
    config: BackendConfig
    state: BackendState
    session: Any = None  # aiohttp.ClientSession, created by the app on start
    fast: Any = None  # http1.Http1Pool for plain-http backends, created by the app on start
    consecutive_failures: int = 0
    ejected_until: float = 0.0
    active_ok: bool = True
    sent_total: int = 0

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def url(self) -> str:
        return self.config.url

    def record_success(self) -> None:
        """A response arrived: close the breaker."""
        self.consecutive_failures = 0

    def record_failure(self, threshold: int, eject_s: float, now: float | None = None) -> bool:
        """A connect error / 5xx / timeout; returns True when this one ejects the backend."""
        self.consecutive_failures += 1
        if self.consecutive_failures >= threshold and self.state.healthy:
            self.state.healthy = False
            self.ejected_until = (time.monotonic() if now is None else now) + eject_s
            return True
        return False

    def maybe_readmit(self, now: float) -> None:
        """After the ejection time, let the backend take traffic again (half-open) if its
        last active check (when any) passed."""
        if not self.state.healthy and now >= self.ejected_until and self.active_ok:
            self.state.healthy = True
            self.consecutive_failures = 0


@dataclass(eq=False)
class Pool:
    """Backends serving the same models, with their policy, caps and cost model."""

    config: PoolConfig
    backends: list[Backend]
    policy: RoutingPolicy
    admission: Admission
    cost_model: CostModel
    states: list[BackendState] = field(default_factory=list)
    cost_fn: Callable[[int, int], float] = field(init=False)
    route_cost_fn: Callable[[int, int], float] = field(init=False)

    def __post_init__(self) -> None:
        self.states = [b.state for b in self.backends]
        self.cost_fn = self.cost_model.cost_s
        self.route_cost_fn = routing_cost_model(self.cost_model).cost_s

    @property
    def name(self) -> str:
        return self.config.name

    def choose(self, cost_s: float, exclude: set[int] | None = None) -> int:
        """Index of the backend for a request of ``cost_s``, skipping ``exclude`` indices."""
        if not exclude:
            return self.policy.choose(self.states, cost_s)
        keep = [i for i in range(len(self.states)) if i not in exclude]
        j = self.policy.choose([self.states[i] for i in keep], cost_s)
        return keep[j]


@dataclass(eq=False)
class Runtime:
    """Everything a request needs, precomputed from the config."""

    config: GatewayConfig
    pools: dict[str, Pool]
    rules: PoolRules
    model_pool: dict[str, str]
    keys: dict[str, str]  # sha256 hex -> tenant
    admin_sha256: str | None
    models_body: bytes

    def backends(self) -> list[Backend]:
        return [b for p in self.pools.values() for b in p.backends]


def build_runtime(config: GatewayConfig, old: Runtime | None = None) -> Runtime:
    """Build a runtime; backends with the same (pool, name, url) as in ``old`` keep their
    state, breaker and session (so in-flight accounting survives a reload)."""
    import orjson

    previous: dict[tuple[str, str, str], Backend] = {}
    if old is not None:
        for b in old.backends():
            previous[(b.pool, b.name, b.url)] = b
    pools: dict[str, Pool] = {}
    model_pool: dict[str, str] = {}
    for pc in config.pools:
        backends: list[Backend] = []
        for bc in pc.backends:
            prev = previous.get((pc.name, bc.name, bc.url))
            if prev is not None:
                prev.config = bc
                prev.state.weight = bc.weight
                prev.state.labels = dict(bc.labels)
                backends.append(prev)
            else:
                st = BackendState(bc.name, weight=bc.weight, labels=dict(bc.labels))
                backends.append(Backend(pool=pc.name, config=bc, state=st))
        capacity = sum(b.weight for b in pc.backends) or 1.0
        caps = AdmissionCaps(pc.admission.max_queued, pc.admission.max_in_flight_cost_s)
        admission = Admission(caps, capacity)
        if old is not None and pc.name in old.pools:  # keep outstanding counts
            admission.queued = old.pools[pc.name].admission.queued
            admission.in_flight_cost_s = old.pools[pc.name].admission.in_flight_cost_s
        pools[pc.name] = Pool(
            config=pc,
            backends=backends,
            policy=make_policy(pc.policy, seed=pc.seed),
            admission=admission,
            cost_model=pool_cost_model(pc.cost),
        )
        for m in pc.models:
            model_pool.setdefault(m, pc.name)
    rules = PoolRules(
        [
            PoolRule(
                pool=r.pool,
                models=tuple(r.models),
                min_input_tokens=r.min_input_tokens,
                max_input_tokens=r.max_input_tokens,
                header=r.header,
                header_values=tuple(r.header_values),
                tenants=tuple(r.tenants),
            )
            for r in config.rules
        ],
        default_pool=None,
    )
    models = sorted(model_pool)
    models_body = orjson.dumps(
        {
            "object": "list",
            "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": model_pool[m]}
                for m in models
            ],
        }
    )
    return Runtime(
        config=config,
        pools=pools,
        rules=rules,
        model_pool=model_pool,
        keys={k.sha256: k.tenant for k in config.auth.api_keys},
        admin_sha256=None
        if config.auth.admin_key_sha256 is None
        else config.auth.admin_key_sha256.lower(),
        models_body=models_body,
    )
