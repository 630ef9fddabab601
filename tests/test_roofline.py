"""RooflineModel against hand calculations, limits, brute force and the CostModel contract."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpubalance.cost import CostModel, RooflineEfficiency, RooflineModel
from gpubalance.errors import UserInputError
from gpubalance.hardware import GpuSpec, get_gpu, get_model

IDEAL = RooflineEfficiency.ideal()
H100_BW = 3.35e12
H100_F = 989.4e12
_TP2 = RooflineModel.from_names("H100", "mixtral-8x7b", tp=2)


@pytest.fixture(scope="module")
def llama8b() -> RooflineModel:
    return RooflineModel.from_names("H100", "llama-3.1-8b", efficiency=IDEAL)


def test_interface_attributes(llama8b: RooflineModel) -> None:
    assert llama8b.gpus == llama8b.tp == 1
    assert llama8b.gpu.name == "H100-SXM" and llama8b.model.name == "Llama-3.1-8B"
    assert llama8b.kv_capacity_tokens == 444_992  # see test_hardware_memory (by hand)
    assert isinstance(llama8b, CostModel)


def test_decode_batch1_is_weight_bandwidth_bound(llama8b: RooflineModel) -> None:
    # Weights read per step: everything but the input embedding (a row lookup):
    # (8,030,261,248 - 128,256 x 4096) x 2 B = 15,009,849,344 B. KV read+write: 1001 tokens.
    t = llama8b.iteration_time_s(0, 0.0, 1, 1000)
    expected = 15_009_849_344 / H100_BW + 1001 * 131_072 / H100_BW
    assert t == pytest.approx(expected, rel=1e-12)
    # the rule of thumb "16.06 GB / 3.35 TB/s = 4.8 ms" less the 1.05 GB embedding table
    assert 4.4e-3 < t < 4.8e-3


def test_large_prefill_is_compute_bound(llama8b: RooflineModel) -> None:
    tokens = 16384
    # matmul parameters: all but embedding and output head (2 x 525,336,576)
    matmul = 8_030_261_248 - 1_050_673_152  # = 6,979,588,096
    t_lin = 2 * matmul * tokens / H100_F  # 0.231 s >> 4.5 ms of weights
    t_kv_write = tokens * 131_072 / H100_BW  # attention pairs 0: only the KV write
    assert llama8b.iteration_time_s(tokens, 0.0, 0, 0) == pytest.approx(t_lin + t_kv_write)
    # ... and approaches 2 x P x T / FLOP/s within the embedding share (13%)
    assert llama8b.iteration_time_s(tokens, 0.0, 0, 0) == pytest.approx(
        2 * 8.03e9 * tokens / H100_F, rel=0.14
    )


def test_attention_flops_per_pair(llama8b: RooflineModel) -> None:
    pairs = 4096 * 4096
    base = llama8b.iteration_time_s(4096, 0.0, 0, 0)
    with_attn = llama8b.iteration_time_s(4096, float(pairs), 0, 0)
    attn = 4 * 32 * 32 * 128 * pairs / H100_F
    kv_write = 4096 * 131_072 / H100_BW
    assert with_attn - base == pytest.approx(attn - kv_write, rel=1e-9)


def test_monotone_in_every_argument(llama8b: RooflineModel) -> None:
    f = llama8b.iteration_time_s
    assert f(0, 0, 0, 0) == 0.0
    assert f(0, 0, 1, 100) < f(0, 0, 1, 10_000) < f(0, 0, 64, 640_000)
    assert f(128, 128.0 * 128, 0, 0) <= f(1024, 1024.0 * 1024, 0, 0) < f(8192, 8192.0**2, 0, 0)
    assert f(512, 512.0 * 512, 32, 32_000) > f(0, 0, 32, 32_000)


def test_moe_reads_only_routed_experts() -> None:
    m = RooflineModel.from_names("H100", "mixtral-8x7b", "fp8", tp=1, efficiency=IDEAL)
    # fp8: experts and attention 1 B/param; output head + norms + router 2 B (+ head 2 B)
    expert_b = 32 * 8 * 3 * 4096 * 14336  # 1 B each
    other = 46_702_792_704 - 32 * 8 * 3 * 4096 * 14336 - 2 * 32000 * 4096 - 65 * 4096
    other -= 32 * 4096 * 8  # router (kept 16-bit)
    dense_b = other * 1 + 32000 * 4096 * 2 + (65 * 4096 + 32 * 4096 * 8) * 2
    t1 = m.iteration_time_s(0, 0.0, 1, 0)
    assert t1 == pytest.approx((dense_b + 0.25 * expert_b + 131_072) / H100_BW, rel=1e-9)
    # a big decode batch touches (almost) every expert: 1 - 0.75**256 ~ 1
    t256 = m.iteration_time_s(0, 0.0, 256, 0)
    weights_all = (dense_b + expert_b) / H100_BW
    assert t256 == pytest.approx(weights_all + 256 * 131_072 / H100_BW, rel=1e-6)


def test_tensor_parallel_all_reduce_by_hand() -> None:
    m = RooflineModel.from_names("H100", "llama-3.1-70b", tp=4, efficiency=IDEAL)
    no_comm_tokens = 1
    comm = 160 * 8e-6 + 160 * (2 * 3 / 4) * no_comm_tokens * 8192 * 2 / 450e9
    # per-GPU weights read: layers/4 + head/4 + norms (embedding table not read)
    attn = 8192 * 16 * 128 * 2 + 2 * 8192 * 2 * 128
    mlp = 3 * 8192 * 7168
    weights = (80 * (attn + mlp) + 128256 * 8192 // 4 + 161 * 8192) * 2
    kv = 2 * 80 * 2 * 128 * 2  # 2 KV heads per GPU
    expected = weights / H100_BW + 2001 * kv / H100_BW + comm
    assert m.iteration_time_s(0, 0.0, 1, 2000) == pytest.approx(expected, rel=1e-9)


def test_tp_speeds_up_decode_but_not_linearly() -> None:
    one = RooflineModel.from_names("H100", "llama-3.1-8b", efficiency=IDEAL)
    two = RooflineModel.from_names("H100", "llama-3.1-8b", tp=2, efficiency=IDEAL)
    t1, t2 = one.iteration_time_s(0, 0, 8, 8000), two.iteration_time_s(0, 0, 8, 8000)
    assert t1 / 2 < t2 < t1


def test_efficiency_scales_the_roofline() -> None:
    ideal = RooflineModel.from_names("H100", "llama-3.1-8b", efficiency=IDEAL)
    half_bw = RooflineModel.from_names(
        "H100",
        "llama-3.1-8b",
        efficiency=RooflineEfficiency(
            compute_efficiency=1, bandwidth_efficiency=0.5, comm_efficiency=1, overhead_s=0.002
        ),
    )
    t0 = ideal.iteration_time_s(0, 0, 1, 1000)
    assert half_bw.iteration_time_s(0, 0, 1, 1000) == pytest.approx(2 * t0 + 0.002)


def _brute_force_cost(m: RooflineModel, i: int, o: int) -> float:
    t = m.iteration_time_s(i, float(i) * i, 0, 0) if i > 0 else 0.0
    steps = o - 1 if i > 0 else o
    for k in range(1, max(steps, 0) + 1):
        t += m.iteration_time_s(0, 0.0, 1, i + k)
    return t


@pytest.mark.parametrize(("i", "o"), [(1, 1), (100, 0), (100, 1), (100, 2), (2000, 300), (0, 5)])
def test_cost_s_equals_iteration_sum(llama8b: RooflineModel, i: int, o: int) -> None:
    assert llama8b.cost_s(i, o) == pytest.approx(_brute_force_cost(llama8b, i, o), rel=1e-12)


def test_cost_s_closed_form_across_compute_memory_crossover() -> None:
    # A made-up GPU whose decode attention is slightly compute-bound: per context token,
    # attention FLOPs / F = 1.01 x KV bytes / B, so max() switches at context ~100.
    h100 = get_gpu("H100")
    model = get_model("llama-3.1-8b")
    bw = 1e12
    flops = (32 / 8) * bw / 1.01  # (heads/kv_heads) x (B/F) = 1.01
    gpu = GpuSpec(
        **{
            **h100.model_dump(),
            "name": "slow",
            "aliases": [],
            "bf16_flops_per_s": flops,
            "memory_bandwidth_bytes_per_s": bw,
        }
    )
    m = RooflineModel(gpu, model, "bf16", 1, IDEAL)
    for i, o in [(10, 300), (50, 60), (99, 3), (100, 2), (150, 40)]:
        assert m.cost_s(i, o) == pytest.approx(_brute_force_cost(m, i, o), rel=1e-12)
        assert m.costs_s(np.array([i]), np.array([o]))[0] == pytest.approx(m.cost_s(i, o))


def test_costs_s_matches_cost_s(llama8b: RooflineModel) -> None:
    rng = np.random.default_rng(7)
    inp = rng.integers(0, 4000, size=200)
    out = rng.integers(0, 800, size=200)
    vec = llama8b.costs_s(inp, out)
    assert vec.dtype == np.float64 and vec.shape == (200,)
    for a, b, v in zip(inp, out, vec, strict=True):
        assert v == pytest.approx(llama8b.cost_s(int(a), int(b)), rel=1e-12)


def test_model_that_does_not_fit_raises_with_arithmetic() -> None:
    with pytest.raises(UserInputError) as exc:
        RooflineModel.from_names("H100", "llama-3.1-70b")
    assert "does not fit" in str(exc.value) and "141.11 GB" in str(exc.value)
    m = RooflineModel.from_names("H100", "llama-3.1-70b", require_fit=False)
    assert m.kv_capacity_tokens == 0


def test_unknown_names_suggest() -> None:
    with pytest.raises(UserInputError, match="did you mean 'H100-SXM'"):
        RooflineModel.from_names("H10", "llama-3.1-8b")
    with pytest.raises(UserInputError, match="unknown precision"):
        RooflineModel.from_names("H100", "llama-3.1-8b", precision="bf61x")


def test_efficiency_file_round_trip_and_errors(tmp_path: Path) -> None:
    eff = RooflineEfficiency(compute_efficiency=0.55, bandwidth_efficiency=0.7, overhead_s=0.003)
    p = tmp_path / "eff.yaml"
    eff.save(p)
    assert RooflineEfficiency.load(p) == eff
    bad = tmp_path / "bad.yaml"
    bad.write_text("compute_efficiency: 0.5\nbandwidth_efficiency: -2\n")
    with pytest.raises(UserInputError) as exc:
        RooflineEfficiency.load(bad)
    assert exc.value.line == 2 and exc.value.field == "bandwidth_efficiency"


@settings(max_examples=200, deadline=None)
@given(
    pre=st.integers(0, 20_000),
    extra_ctx=st.integers(0, 50_000),
    seqs=st.integers(0, 512),
    ctx_per_seq=st.integers(1, 20_000),
    bump=st.sampled_from(["pre", "ctx", "seqs", "ctx_per_seq"]),
)
def test_iteration_time_never_decreases_with_more_work(
    pre: int, extra_ctx: int, seqs: int, ctx_per_seq: int, bump: str
) -> None:
    m = _TP2
    base = (pre, float(pre) * (pre + extra_ctx), seqs, seqs * ctx_per_seq)
    more = {
        "pre": (pre + 64, float(pre + 64) * (pre + 64 + extra_ctx), seqs, seqs * ctx_per_seq),
        "ctx": (pre, float(pre) * (pre + extra_ctx + 64), seqs, seqs * ctx_per_seq),
        "seqs": (pre, base[1], seqs + 1, (seqs + 1) * ctx_per_seq),
        "ctx_per_seq": (pre, base[1], seqs, seqs * (ctx_per_seq + 64)),
    }[bump]
    assert m.iteration_time_s(*more) >= m.iteration_time_s(*base)


def test_iteration_terms_name_the_bound(llama8b: RooflineModel) -> None:
    terms = llama8b.iteration_terms(0, 0.0, 1, 1000)
    assert terms["weights_read_s"] == pytest.approx(15_009_849_344 / H100_BW)
    assert terms["linear_compute_s"] < terms["weights_read_s"]  # batch-1 decode: memory-bound
    assert terms["decode_kv_s"] == pytest.approx(1001 * 131_072 / H100_BW)
    assert terms["allreduce_s"] == 0.0 and terms["overhead_s"] == 0.0
    big = llama8b.iteration_terms(16384, 0.0, 0, 0)
    assert big["linear_compute_s"] > big["weights_read_s"]  # big prefill: compute-bound
    assert llama8b.iteration_terms(0, 0.0, 0, 0)["total_s"] == 0.0
