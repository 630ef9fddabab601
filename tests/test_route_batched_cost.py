"""The routing price under continuous batching (BatchedCost) and least-cost routing on it."""

from __future__ import annotations

import numpy as np
import pytest

from gpubalance.cost import BatchedCost, TokenCostModel
from gpubalance.cost.roofline import RooflineModel
from gpubalance.gateway.runtime import routing_cost_model
from gpubalance.sim import LinearStepTime, ReplicaSpec, simulate
from gpubalance.workload import Request

# affine iteration time: every term of a busy iteration but the request's own cancels
M = LinearStepTime(
    base_s=0.01,
    per_prefill_token_s=1e-4,
    per_prefill_pair_s=1e-8,
    per_decode_seq_s=2e-3,
    per_context_token_s=1e-6,
)


def test_marginal_prices_of_an_affine_step_model_by_hand() -> None:
    c = BatchedCost(M, reference_tokens=512)
    # prefill of 1000 tokens: 1000 x 1e-4 + (1000 x 1001 / 2 causal pairs) x 1e-8
    # = 0.1 + 0.005005 (base cancels)
    assert c.prefill_s(1000) == pytest.approx(0.105005, rel=1e-12)
    assert c.prefill_s(0) == 0.0
    # one decoding sequence at context 1234: 2e-3 + 1234e-6
    assert c.decode_token_s(1234) == pytest.approx(0.003234, rel=1e-12)
    # 1000 in, 11 out: prefill + 10 decode tokens at contexts 1001..1010
    # = 0.105005 + 10 x 2e-3 + 1e-6 x (1001 + ... + 1010 = 10055)
    assert c.cost_s(1000, 11) == pytest.approx(0.13506, rel=1e-12)
    assert c.cost_s(1000, 1) == pytest.approx(0.105005, rel=1e-12)
    assert c.cost_s(1000, 0) == pytest.approx(0.105005, rel=1e-12)
    # no prompt: 3 decode iterations at contexts 1, 2, 3
    assert c.cost_s(0, 3) == pytest.approx(3 * 2e-3 + 6e-6, rel=1e-12)
    # a different reference batch changes nothing for an affine model
    assert BatchedCost(M, reference_tokens=4096).cost_s(1000, 11) == pytest.approx(0.13506)
    # vectorised, with repeated pairs
    got = c.costs_s(np.array([1000, 0, 1000]), np.array([11, 3, 11]))
    assert got.tolist() == pytest.approx([0.13506, 0.006006, 0.13506], rel=1e-12)
    with pytest.raises(ValueError):
        BatchedCost(M, reference_tokens=0)


def test_roofline_batched_price_ranks_long_prompts_above_long_outputs() -> None:
    """On an H100 serving llama-3.1-8b, a 4,000-token prompt with 10 output tokens is more
    load on a busy replica than a 100-token prompt with 300 output tokens (prefill is
    compute-bound; decode shares the weight reads), though alone it finishes sooner."""
    roof = RooflineModel.from_names("H100", "llama-3.1-8b")
    big_prompt, long_output = (4000, 10), (100, 300)
    assert roof.cost_s(*big_prompt) < roof.cost_s(*long_output)  # standalone
    c = BatchedCost(roof)
    assert c.cost_s(*big_prompt) > 3 * c.cost_s(*long_output)
    # each decode token costs well under a batch-1 decode iteration (weights read ~ 5 ms)
    assert c.decode_token_s(1000) < 0.1 * (roof.cost_s(1000, 2) - roof.cost_s(1000, 1))
    # the gateway routes a roofline pool by this price, a token model pool by its own
    assert isinstance(routing_cost_model(roof), BatchedCost)
    tok = TokenCostModel(overhead_s=0.005, prefill_s_per_token=2e-4, decode_s_per_token=2e-3)
    assert routing_cost_model(tok) is tok


def test_least_cost_routes_by_marginal_load_in_the_simulator() -> None:
    """Two replicas. A (10 in, 1000 out) goes to replica 0, B (4000 in, 2 out) to the idle
    replica 1, then C arrives while both run. Marginal prices (base_s cancels):
    A = 10 x 1e-4 + 999 x 1e-4 = 0.1009 s, B = 0.4 + 1e-4 = 0.4001 s, so C joins A's replica.
    Priced standalone, A = 0.011 + 999 x 0.0101 = 10.1 s and B = 0.4201 s: C joins B's."""
    m = LinearStepTime(base_s=0.01, per_prefill_token_s=1e-4, per_decode_seq_s=1e-4)
    spec = ReplicaSpec(m, kv_capacity_tokens=100_000, max_num_seqs=64, max_batched_tokens=8192)
    reqs = [Request("A", 0.0, 10, 1000), Request("B", 0.001, 4000, 2), Request("C", 0.002, 2000, 2)]
    batched = simulate(reqs, spec, n_replicas=2, policy="least_cost")
    assert batched.replica.tolist() == [0, 1, 0]
    standalone = simulate(reqs, spec, n_replicas=2, policy="least_cost", cost_model=m)
    assert standalone.replica.tolist() == [0, 1, 1]


def test_gateway_pool_routes_by_batched_cost_and_admits_by_standalone() -> None:
    from gpubalance.gateway import GatewayConfig
    from gpubalance.gateway.runtime import build_runtime

    cfg = GatewayConfig.model_validate(
        {
            "pools": [
                {
                    "name": "p",
                    "models": ["m"],
                    "policy": "least_cost",
                    "backends": [{"name": "b0", "url": "http://127.0.0.1:9"}],
                    "cost": {"gpu": "H100", "model": "llama-3.1-8b"},
                }
            ]
        }
    )
    pool = build_runtime(cfg).pools["p"]
    roof = RooflineModel.from_names("H100", "llama-3.1-8b")
    assert pool.cost_fn(100, 300) == roof.cost_s(100, 300)
    assert pool.route_cost_fn(100, 300) == BatchedCost(roof).cost_s(100, 300)


def test_vectorised_prices_equal_scalar_prices_on_a_roofline() -> None:
    c = BatchedCost(RooflineModel.from_names("H100", "llama-3.1-8b"))
    rng = np.random.default_rng(3)
    i = rng.integers(0, 8000, 500)
    o = rng.integers(0, 600, 500)
    i[:5] = 0
    o[5:10] = 0
    scalar = [BatchedCost(c.step_model).cost_s(int(a), int(b)) for a, b in zip(i, o, strict=True)]
    assert c.costs_s(i, o).tolist() == pytest.approx(scalar, rel=1e-12)
