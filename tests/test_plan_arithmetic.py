"""Pricing, failure-domain and search arithmetic of the planner, checked by hand."""

from __future__ import annotations

import math

import pytest

from gpubalance.errors import UserInputError
from gpubalance.plan import (
    PriceBook,
    Shape,
    enumerate_shapes,
    failure_domain,
    fleet_cost,
    growth_factor,
    load_price_file,
    nodes_needed,
    smallest_passing,
)
from gpubalance.plan.shapes import GpuOffer


def test_fleet_cost_by_hand() -> None:
    book = PriceBook(
        node_hour_usd=0.10,
        storage_month_usd_per_node=20,
        operations_month_usd_per_node=150,
        network_month_usd=300,
    )
    cost = fleet_cost(Shape("X", 2, 1), 3, 2.5, book)
    # 3 nodes x 2 GPUs x 730 h x $2.5 = 10,950; nodes 3 x 0.1 x 730 = 219
    assert cost.gpu_hours_month == pytest.approx(4380.0)
    assert cost.gpu_month_usd == pytest.approx(10950.0)
    assert cost.node_month_usd == pytest.approx(219.0)
    assert cost.storage_month_usd == pytest.approx(60.0)
    assert cost.operations_month_usd == pytest.approx(450.0)
    assert cost.month_usd == pytest.approx(11979.0)
    # 10 req/s x 1000 tokens x 730 h x 3600 s = 26,280 million tokens a month
    assert cost.usd_per_million_tokens(10.0, 1000.0) == pytest.approx(11979.0 / 26280.0)


def test_zero_nodes_cost_nothing() -> None:
    assert fleet_cost(Shape("X", 8, 8), 0, 3.0, PriceBook(network_month_usd=99)).month_usd == 0


def test_failure_domain_by_hand() -> None:
    s = Shape("X", 8, 2)  # 4 replicas per node
    assert nodes_needed(13, s) == 4
    assert nodes_needed(13, s, spare_nodes=1) == 5
    assert nodes_needed(16, s) == 4
    fd = failure_domain(s, 4, 13, holds_one_down_now=True, holds_one_down_growth=False)
    assert fd.capacity_lost_fraction == pytest.approx(0.25)
    assert fd.gpus_lost == 8
    assert fd.replicas_lost == 4
    assert fd.spare_replicas == 3
    assert fd.sla_holds_one_node_down_now and not fd.sla_holds_one_node_down_growth
    single = failure_domain(s, 1, 2, holds_one_down_now=True, holds_one_down_growth=True)
    assert single.capacity_lost_fraction == 1.0
    assert not single.sla_holds_one_node_down_now  # losing the only node loses everything


def test_growth_factor_compounds() -> None:
    assert growth_factor(0.10, 2) == pytest.approx(1.21)
    assert growth_factor(0.0, 12) == 1.0
    assert growth_factor(0.05, 12) == pytest.approx(1.795856, rel=1e-6)
    with pytest.raises(UserInputError):
        growth_factor(-1.5, 3)


def test_enumerate_shapes_respects_node_cap_and_divisors() -> None:
    offers = [GpuOffer("A", 80 * 10**9, 8, 2.0), GpuOffer("B", 24 * 10**9, 2, 1.0)]
    got = {(s.gpu, s.gpus_per_node, s.tp) for s in enumerate_shapes(offers)}
    want_a = {(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (8, 1), (8, 2), (8, 4), (8, 8)}
    want = {("A", n, t) for n, t in want_a} | {("B", 1, 1), ("B", 2, 1), ("B", 2, 2)}
    assert got == want
    with pytest.raises(ValueError):
        Shape("A", 4, 3)


@pytest.mark.parametrize("threshold", [1, 2, 3, 7, 8, 9, 31, 64, 100, 173])
@pytest.mark.parametrize("start", [1, 5, 50, 300])
def test_search_finds_true_minimum(threshold: int, start: int) -> None:
    calls: list[int] = []

    def passes(n: int) -> bool:
        calls.append(n)
        return n >= threshold

    out = smallest_passing(passes, start=start, cap=300)
    assert out.value == threshold
    # galloping + bisection: logarithmic in the distance from the start, not linear
    assert len(calls) <= 2 * math.ceil(math.log2(abs(threshold - start) + 2)) + 3


def test_search_reports_unreachable_cap() -> None:
    out = smallest_passing(lambda n: n >= 500, start=3, cap=100)
    assert out.value is None
    assert out.probes[-1] == 100


def test_price_file_errors_name_file_line_field(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "prices.yaml"
    p.write_text("gpu_hour_usd:\n  H100-SXM: 2.5\n  H100-SMX: 2.0\nnode_hour_usd: 0.1\n")
    with pytest.raises(UserInputError) as err:
        load_price_file(p, known_gpus=["H100-SXM", "A100-80GB"])
    assert err.value.line == 3
    assert err.value.field == "gpu_hour_usd.H100-SMX"
    assert "did you mean 'H100-SXM'" in str(err.value)

    p.write_text("gpu_hour_usd:\n  H100-SXM: 2.5\nnode_hour_usd: -1\n")
    with pytest.raises(UserInputError) as err:
        load_price_file(p)
    assert err.value.line == 3 and err.value.field == "node_hour_usd"

    p.write_text("gpu_hour_usd:\n  H100-SXM: lots\n")
    with pytest.raises(UserInputError) as err:
        load_price_file(p)
    assert err.value.line == 2 and err.value.field == "gpu_hour_usd.H100-SXM"

    p.write_text("gpu_hour_usd: {H100-SXM: 2.5}\nnetwork_month: 10\n")
    with pytest.raises(UserInputError) as err:
        load_price_file(p)
    assert err.value.line == 2 and err.value.field == "network_month"

    p.write_text("gpu_hour_usd: [oops\n")
    with pytest.raises(UserInputError) as err:
        load_price_file(p)
    assert "malformed" in str(err.value)


def test_price_file_normalises_gpu_names(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "prices.yaml"
    p.write_text("gpu_hour_usd:\n  h100-sxm: 1.75\n")
    book = load_price_file(p, known_gpus=["H100-SXM"])
    assert book.gpu_hour_usd == {"H100-SXM": 1.75}
