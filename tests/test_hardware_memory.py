"""Memory estimator against figures worked out by hand."""

from __future__ import annotations

import pytest

from gpubalance.hardware import ModelSpec, estimate_memory, get_gpu, get_model, shard_layout

GIB = 2**30


def test_llama_8b_bf16_weights_and_kv_per_token() -> None:
    est = estimate_memory(get_gpu("H100"), get_model("Llama-3.1-8B"), "bf16")
    # 8,030,261,248 params x 2 bytes
    assert est.weights_bytes_total == 16_060_522_496
    assert est.weights_bytes_per_gpu == 16_060_522_496
    assert est.weights_bytes_total / 1e9 == pytest.approx(16.06, abs=0.005)
    # 2 (K,V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes = 128 KiB
    assert est.kv_bytes_per_token == 131_072 == 128 * 1024
    assert est.fits


def test_llama_8b_kv_capacity_on_h100_by_hand() -> None:
    est = estimate_memory(get_gpu("H100"), get_model("Llama-3.1-8B"), "bf16")
    usable = 81559 * 2**20 * 0.9  # 76,968,728,985.6
    activation = 8192 * 2 * (4 * 4096 + (32 + 16) * 128 + 2 * 14336) + 256 * 128256 * 4
    assert activation == 970_194_944
    budget = usable - 16_060_522_496 - 970_194_944 - 1.5 * GIB  # 58,327,398,809.6
    assert est.kv_budget_bytes_per_gpu == pytest.approx(budget)
    blocks = 58_327_398_809 // (131_072 * 16)  # 27,812 whole blocks of 16 tokens
    assert est.kv_capacity_tokens == blocks * 16 == 444_992
    assert est.max_concurrent_seqs == 27_812 // 512 == 54  # 8192-token sequences
    assert est.max_seqs_at(1000) == 27_812 // 63  # 1000 tokens -> 63 blocks


def test_llama_70b_bf16_does_not_fit_on_one_80gb_gpu() -> None:
    model = get_model("Llama-3.1-70B")
    for gpu in ("H100-SXM", "A100-80GB", "H100-PCIe"):
        est = estimate_memory(get_gpu(gpu), model, "bf16")
        assert not est.fits
        assert est.weights_bytes_per_gpu == 70_553_706_496 * 2  # 141.1 GB > 80 GB
        assert est.kv_capacity_tokens == 0
        assert "weights need 141.11 GB" in est.reason
        text = est.breakdown()
        assert "141.11 GB" in text and "does NOT fit" in text


def test_llama_70b_tp4_per_gpu_weights_by_hand() -> None:
    est = estimate_memory(get_gpu("H100"), get_model("Llama-3.1-70B"), "bf16", tp=4)
    attn = 8192 * 16 * 128 * 2 + 2 * 8192 * 2 * 128  # q,o: 16 heads; k,v: 2 KV heads
    mlp = 3 * 8192 * (28672 // 4)
    per_gpu = 80 * (attn + mlp) + 2 * 128256 * 8192 // 4 + 161 * 8192  # norms replicated
    assert est.weights_bytes_per_gpu == pytest.approx(per_gpu * 2, rel=1e-12)
    assert est.kv_bytes_per_token_per_gpu == 2 * 80 * 2 * 128 * 2
    assert est.fits


def test_70b_fits_one_h200_at_fp8_but_not_bf16() -> None:
    h200, model = get_gpu("H200"), get_model("Llama-3.1-70B")
    assert not estimate_memory(h200, model, "bf16").fits
    est = estimate_memory(h200, model, "fp8")
    # layers at 1 byte, embedding + head kept at 2 bytes
    layers = 70_553_706_496 - 2 * 128256 * 8192 - 161 * 8192
    assert est.weights_bytes_per_gpu == layers + 2 * (2 * 128256 * 8192 + 161 * 8192)
    assert est.fits


def test_int4_weights_with_group_scales_by_hand() -> None:
    est = estimate_memory(get_gpu("L4"), get_model("Llama-3.1-8B"), "int4")
    layers = 8_030_261_248 - 1_050_673_152 - 65 * 4096  # 6,979,321,856
    expected = layers * (0.5 + 2 / 128) + (1_050_673_152 + 65 * 4096) * 2
    assert est.weights_bytes_per_gpu == expected == 5_700_591_616
    assert est.fits


def test_fp8_kv_cache_halves_bytes_per_token() -> None:
    est = estimate_memory(get_gpu("L4"), get_model("llama-3.1-8b"), kv_dtype="fp8")
    assert est.kv_bytes_per_token == 65_536


def test_tp_beyond_kv_heads_replicates_one_head_per_gpu() -> None:
    m = get_model("Qwen2.5-7B")  # 28 heads, 4 KV heads
    est = estimate_memory(get_gpu("H100"), m, "bf16", tp=4)
    assert est.kv_bytes_per_token_per_gpu == 2 * 28 * 1 * 128 * 2
    bad = estimate_memory(get_gpu("H100"), m, "bf16", tp=8)
    assert not bad.fits and "not divisible by tp=8" in bad.reason
    assert bad.kv_capacity_tokens == 0
    toy = ModelSpec(
        name="toy",
        num_layers=4,
        hidden_size=1024,
        num_attention_heads=16,
        num_kv_heads=2,
        head_dim=64,
        intermediate_size=4096,
        vocab_size=1000,
        max_context_tokens=4096,
    )
    lay = shard_layout(toy, 8)
    assert lay.valid and lay.kv_heads_per_gpu == 1 and lay.heads_per_gpu == 2


def test_small_gpu_reports_kv_shortfall_against_context() -> None:
    # Llama-3.1-8B bf16 on a 24 GB L4: 21.74 GB usable - 16.06 weights - 0.97 act - 1.61
    est = estimate_memory(get_gpu("L4"), get_model("Llama-3.1-8B"), "bf16", context_tokens=32768)
    assert est.kv_budget_bytes_per_gpu == pytest.approx(
        24_152_899_584 * 0.9 - 16_060_522_496 - 970_194_944 - 1.5 * GIB
    )
    assert est.kv_capacity_tokens == int(est.kv_budget_bytes_per_gpu // 2_097_152) * 16
    assert est.kv_capacity_tokens < 32768 and not est.fits
    assert "less than one 32,768-token sequence" in est.reason
    assert estimate_memory(
        get_gpu("L4"), get_model("Llama-3.1-8B"), "bf16", context_tokens=8192
    ).fits


def test_more_tp_gives_more_kv_tokens() -> None:
    gpu, m = get_gpu("A100-80GB"), get_model("Llama-3.1-70B")
    caps = [estimate_memory(gpu, m, "bf16", tp=tp).kv_capacity_tokens for tp in (2, 4, 8)]
    assert caps[0] < caps[1] < caps[2]


def test_mixtral_tp_splits_experts() -> None:
    gpu, m = get_gpu("H100"), get_model("Mixtral-8x7B")
    one = estimate_memory(gpu, m, "bf16", tp=1)
    two = estimate_memory(gpu, m, "bf16", tp=2)
    assert one.weights_bytes_total == 46_702_792_704 * 2
    assert not one.fits  # 93.4 GB of weights on an 80 GB GPU
    assert two.fits
    # only norms and router (replicated) keep the split from being exactly half
    replicated = (65 * 4096 + 32 * 4096 * 8) * 2
    assert two.weights_bytes_per_gpu == pytest.approx((one.weights_bytes_per_gpu + replicated) / 2)
