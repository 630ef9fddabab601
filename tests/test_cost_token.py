"""Token cost model: prediction by hand, NNLS recovery, fit quality, files, callables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpubalance.cost import (
    CallableCost,
    CostModel,
    TokenCostModel,
    as_cost_model,
    fit_token_cost_model,
)
from gpubalance.errors import UserInputError


def test_cost_by_hand() -> None:
    m = TokenCostModel(
        overhead_s=0.01,
        prefill_s_per_token=1e-4,
        prefill_s_per_token2=1e-8,
        decode_s_per_token=0.02,
    )
    # 0.01 + 1000*1e-4 + 1e6*1e-8 + 50*0.02 = 0.01 + 0.1 + 0.01 + 1.0
    assert m.cost_s(1000, 50) == pytest.approx(1.12)
    assert m.costs_s(np.array([1000, 0]), np.array([50, 0])) == pytest.approx([1.12, 0.01])
    assert isinstance(m, CostModel)


def test_nnls_recovers_known_coefficients_and_keeps_them_nonnegative() -> None:
    true = TokenCostModel(
        overhead_s=0.02,
        prefill_s_per_token=5e-5,
        prefill_s_per_token2=2e-9,
        decode_s_per_token=0.015,
    )
    rng = np.random.default_rng(0)
    i = rng.integers(1, 8000, 2000)
    o = rng.integers(1, 600, 2000)
    y = true.costs_s(i, o) * rng.lognormal(0, 0.02, 2000)  # 2% multiplicative noise
    fit, rep = fit_token_cost_model(i, o, y)
    assert fit.overhead_s >= 0 and fit.prefill_s_per_token2 >= 0
    assert fit.decode_s_per_token == pytest.approx(0.015, rel=0.02)
    assert fit.prefill_s_per_token == pytest.approx(5e-5, rel=0.1)
    assert fit.prefill_s_per_token2 == pytest.approx(2e-9, rel=0.1)
    assert rep.r2 > 0.99 and rep.mape < 0.03 and rep.n == 2000


def test_nnls_clamps_a_negative_effect_to_zero() -> None:
    # durations fall with output tokens: least squares would give a negative slope; NNLS 0.
    i = np.zeros(4)
    o = np.array([0, 1, 2, 3])
    y = np.array([4.0, 3.0, 2.0, 1.0])
    fit, _ = fit_token_cost_model(i, o, y, quadratic=False)
    assert fit.decode_s_per_token == 0.0
    assert fit.overhead_s == pytest.approx(2.5)


def test_fit_quality_by_hand() -> None:
    # Only the overhead column is non-zero, so the fit is the mean (3.0): R² = 0 exactly and
    # MAPE = mean(2/1, 1/2, 0/3, 3/6) = 0.75.
    fit, rep = fit_token_cost_model([0, 0, 0, 0], [0, 0, 0, 0], [1.0, 2.0, 3.0, 6.0])
    assert fit.overhead_s == pytest.approx(3.0)
    assert rep.r2 == pytest.approx(0.0, abs=1e-12)
    assert rep.mape == pytest.approx(0.75)


def test_fit_rejects_bad_measurements() -> None:
    with pytest.raises(UserInputError, match="at least 2"):
        fit_token_cost_model([1], [1], [1.0])
    with pytest.raises(UserInputError, match="finite"):
        fit_token_cost_model([1, 2], [1, 2], [1.0, float("nan")])


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_save_load_round_trip(tmp_path: Path, suffix: str) -> None:
    m = TokenCostModel(overhead_s=0.5, decode_s_per_token=0.01)
    p = tmp_path / f"c{suffix}"
    m.save(p)
    assert TokenCostModel.load(p) == m


def test_load_bad_file_names_line_and_field(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("kind: token\noverhead_s: 0.1\ndecode_s_per_token: -1\n")
    with pytest.raises(UserInputError, match=r"c\.yaml:3: field 'decode_s_per_token'"):
        TokenCostModel.load(p)
    p.write_text("overhead_s: [unclosed\n")
    with pytest.raises(UserInputError, match=r"c\.yaml:2: malformed"):
        TokenCostModel.load(p)


def test_callable_cost_vectorised_and_scalar_fallback() -> None:
    vec = CallableCost(lambda i, o: i * 2.0 + o)
    assert vec.costs_s(np.array([1, 2]), np.array([3, 4])) == pytest.approx([5.0, 8.0])

    def branchy(i: int, o: int) -> float:  # not array-safe: `if` on an array raises
        return 1.0 if i > 10 else 0.5

    c = as_cost_model(branchy)
    assert c.costs_s(np.array([5, 50]), np.array([0, 0])) == pytest.approx([0.5, 1.0])
    assert c.cost_s(50, 0) == 1.0
    m = TokenCostModel()
    assert as_cost_model(m) is m
