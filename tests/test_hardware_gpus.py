"""GPU catalog: shipped figures, aliases, unknown names, user overrides and bad files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpubalance.errors import UserInputError
from gpubalance.hardware import get_gpu, load_gpu_catalog

REQUIRED = ["H200", "H100-SXM", "H100-PCIe", "A100-80GB", "A100-40GB", "L40S", "L4", "A10", "T4"]


def test_catalog_has_required_gpus_with_prices_and_sources() -> None:
    cat = load_gpu_catalog()
    for name in REQUIRED:
        spec = cat.get(name)
        assert spec.price_per_gpu_hour_usd > 0
        assert spec.price_source.strip() and len(spec.price_as_of) == 7  # YYYY-MM
        assert spec.spec_source.strip()


def test_datasheet_figures_are_dense_and_in_si_units() -> None:
    h100 = get_gpu("H100-SXM")
    # datasheet: 3.35 TB/s; bf16 1,979 TFLOPS *with sparsity* -> 989.4 dense
    assert h100.memory_bandwidth_bytes_per_s == 3.35e12
    assert h100.bf16_flops_per_s == 989.4e12
    assert h100.fp8_flops_per_s == 1978.9e12
    # 81559 MiB as nvidia-smi reports an "80 GB" H100
    assert h100.memory_bytes == 81559 * 2**20
    # NVLink 4 is quoted as 900 GB/s bidirectional: 450 GB/s each way
    assert h100.interconnect.kind == "nvlink"
    assert h100.interconnect.bandwidth_bytes_per_s == 450e9
    assert get_gpu("L4").interconnect.kind == "pcie"
    assert get_gpu("H200").memory_bytes > 140e9


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("H100", "H100-SXM"),
        ("h100 sxm", "H100-SXM"),
        ("H100_SXM5", "H100-SXM"),
        ("a100-80gb", "A100-80GB"),
        ("A100", "A100-80GB"),
        ("nvidia l4", "L4"),
        ("h100-pcie", "H100-PCIe"),
        ("Tesla T4", "T4"),
    ],
)
def test_aliases_are_case_and_punctuation_insensitive(alias: str, canonical: str) -> None:
    assert get_gpu(alias).name == canonical


def test_unknown_gpu_suggests_nearest() -> None:
    with pytest.raises(UserInputError) as exc:
        get_gpu("H10")
    assert "unknown GPU 'H10'" in str(exc.value)
    assert "did you mean 'H100-SXM'" in str(exc.value)


def test_flops_fall_back_to_16_bit_without_native_units() -> None:
    t4, a100, h100 = get_gpu("T4"), get_gpu("A100-80GB"), get_gpu("H100")
    assert t4.flops_per_s("bf16") == 65e12  # no bf16 on Turing: fp16 rate
    assert a100.flops_per_s("fp8") == 312e12  # no fp8 on Ampere: weight-only
    assert not a100.native_math("fp8")
    assert a100.flops_per_s("int8") == 624e12
    assert h100.flops_per_s("fp8") == 1978.9e12
    assert h100.flops_per_s("int4") == 989.4e12  # W4A16 runs 16-bit math


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "gpus.yaml"
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def test_user_file_overrides_fields_by_alias_and_adds_gpus(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        """\
        gpus:
          h100:
            price_per_gpu_hour_usd: 2.10
            price_source: our contract
            price_as_of: "2026-11"
          RTX-4090:
            aliases: [4090]
            form_factor: PCIe
            memory_bytes: 25757220864
            memory_bandwidth_bytes_per_s: 1.008e12
            bf16_flops_per_s: 165.2e12
            fp16_flops_per_s: 165.2e12
            interconnect: {kind: pcie, generation: "PCIe Gen4 x16",
                           bandwidth_bytes_per_s: 32e9, allreduce_latency_s: 3e-5}
            max_gpus_per_node: 8
            price_per_gpu_hour_usd: 0.69
            price_source: example
            price_as_of: "2026-11"
            spec_source: example
        """,
    )
    cat = load_gpu_catalog(p)
    h100 = cat.get("H100-SXM")
    assert h100.price_per_gpu_hour_usd == 2.10
    assert h100.price_source == "our contract"
    assert h100.memory_bandwidth_bytes_per_s == 3.35e12  # untouched fields kept
    assert cat.get("4090").name == "RTX-4090"
    assert len(cat) == len(load_gpu_catalog()) + 1
    # the shipped catalog is not changed by loading a user file
    assert load_gpu_catalog().get("H100").price_per_gpu_hour_usd != 2.10


def test_nested_interconnect_override_keeps_other_link_fields(tmp_path: Path) -> None:
    p = _write(tmp_path, "gpus:\n  L4:\n    interconnect: {allreduce_latency_s: 1.0e-4}\n")
    l4 = load_gpu_catalog(p).get("L4")
    assert l4.interconnect.allreduce_latency_s == 1.0e-4
    assert l4.interconnect.bandwidth_bytes_per_s == 32e9


def test_bad_field_names_file_line_and_field(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        """\
        gpus:
          L4:
            price_source: x
            price_per_gpu_hour_usd: -1
        """,
    )
    with pytest.raises(UserInputError) as exc:
        load_gpu_catalog(p)
    err = exc.value
    assert err.file == str(p)
    assert err.line == 4
    assert err.field == "gpus.L4.price_per_gpu_hour_usd"


def test_new_gpu_missing_fields_is_an_error(tmp_path: Path) -> None:
    p = _write(tmp_path, "gpus:\n  MyGPU:\n    form_factor: PCIe\n")
    with pytest.raises(UserInputError) as exc:
        load_gpu_catalog(p)
    assert exc.value.line == 2 and "MyGPU" in (exc.value.field or "")


def test_unknown_field_and_wrong_top_level_are_errors(tmp_path: Path) -> None:
    p = _write(tmp_path, "gpus:\n  L4:\n    memory_gb: 24\n")
    with pytest.raises(UserInputError) as exc:
        load_gpu_catalog(p)
    assert exc.value.field == "gpus.L4.memory_gb" and exc.value.line == 3
    q = _write(tmp_path, "gpu:\n  L4: {}\n")
    with pytest.raises(UserInputError, match="top-level key 'gpus'"):
        load_gpu_catalog(q)


def test_memory_given_in_gb_is_caught(tmp_path: Path) -> None:
    p = _write(tmp_path, "gpus:\n  L4:\n    memory_bytes: 24\n")
    with pytest.raises(UserInputError, match="bytes, not GB"):
        load_gpu_catalog(p)


def test_edited_user_file_is_read_again(tmp_path: Path) -> None:
    p = _write(tmp_path, "gpus:\n  L4: {price_per_gpu_hour_usd: 0.5}\n")
    assert load_gpu_catalog(p).get("L4").price_per_gpu_hour_usd == 0.5
    p.write_text("gpus:\n  L4: {price_per_gpu_hour_usd: 0.625}\n", encoding="utf-8")
    assert load_gpu_catalog(p).get("L4").price_per_gpu_hour_usd == 0.625
