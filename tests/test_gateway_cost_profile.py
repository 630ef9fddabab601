"""A pool prices requests with the profile `gpubalance calibrate` wrote (file references)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from gpubalance.cost import TokenCostModel
from gpubalance.cost.roofline import RooflineEfficiency, RooflineModel
from gpubalance.errors import UserInputError
from gpubalance.gateway.config import CostConfig
from gpubalance.gateway.runtime import pool_cost_model


def test_token_file_is_the_pools_cost_model(tmp_path: Path) -> None:
    p = tmp_path / "token.yaml"
    TokenCostModel(overhead_s=0.5, decode_s_per_token=0.01).save(p)
    model = pool_cost_model(CostConfig(token_file=str(p)))
    assert model.cost_s(1000, 100) == pytest.approx(0.5 + 100 * 0.01)


def test_efficiency_file_slows_the_roofline(tmp_path: Path) -> None:
    # Halving bandwidth efficiency doubles the bandwidth-bound decode time, so a long
    # decode-only request costs close to twice as much as with the ideal roofline.
    ideal = tmp_path / "ideal.yaml"
    half = tmp_path / "half.yaml"
    RooflineEfficiency.ideal().save(ideal)
    RooflineEfficiency(
        compute_efficiency=1.0, bandwidth_efficiency=0.5, comm_efficiency=1.0, overhead_s=0.0
    ).save(half)
    cfg = {"gpu": "H100", "model": "llama-3.1-8b"}
    fast = pool_cost_model(CostConfig(**cfg, efficiency_file=str(ideal)))
    slow = pool_cost_model(CostConfig(**cfg, efficiency_file=str(half)))
    assert isinstance(fast, RooflineModel)
    assert slow.cost_s(1, 2000) / fast.cost_s(1, 2000) == pytest.approx(2.0, rel=0.02)


def test_missing_or_conflicting_profile_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="not found"):
        pool_cost_model(CostConfig(token_file=str(tmp_path / "nope.yaml")))
    with pytest.raises(ValidationError, match="either token or token_file"):
        CostConfig(token=TokenCostModel(), token_file="x.yaml")
