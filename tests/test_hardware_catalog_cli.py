"""`gpubalance catalog`: tables, JSON, the memory arithmetic, and exit code 2 on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpubalance.cli.main import main


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(["catalog", *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_lists_gpus_and_models(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--json")
    assert code == 0
    data = json.loads(out)
    names = [g["name"] for g in data["gpus"]]
    assert {"H200", "H100-SXM", "L4", "T4"} <= set(names)
    llama = next(m for m in data["models"] if m["name"] == "Llama-3.1-8B")
    assert llama["total_parameters"] == 8_030_261_248
    assert llama["kv_bytes_per_token_16bit"] == 131_072


def test_fit_single_shows_arithmetic(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "fit", "--model", "llama-3.1-70b", "--gpu", "h100", "--tp", "1")
    assert code == 0
    assert "141.11 GB" in out and "does NOT fit" in out


def test_fit_grid_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys, "fit", "--model", "llama-3.1-8b", "--gpu", "L4", "--gpu", "H100", "--json"
    )
    assert code == 0
    data = json.loads(out)
    rows = {(e["gpu"], e["tp"]): e for e in data["estimates"]}
    assert set(rows) == {(g, t) for g in ("L4", "H100-SXM") for t in (1, 2, 4, 8)}
    assert rows[("H100-SXM", 1)]["kv_capacity_tokens"] == 444_992
    assert rows[("H100-SXM", 1)]["weights_bytes_per_gpu"] == 16_060_522_496
    assert data["fits_anywhere"] is True


def test_fits_nowhere_prints_closest_arithmetic(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "fit", "--model", "llama-3.1-405b", "--gpu", "L4", "--gpu", "A10")
    assert code == 0
    assert "Fits nowhere" in out and "811.71 GB in all" in out


def test_bad_input_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, "fit", "--model", "llama-3.1-8b", "--gpu", "H10")
    assert code == 2 and "did you mean 'H100-SXM'" in err
    code, _, err = _run(capsys, "fit", "--gpu", "H100")
    assert code == 2 and "needs --model" in err
    bad = tmp_path / "gpus.yaml"
    bad.write_text("gpus:\n  L4:\n    price_per_gpu_hour_usd: cheap\n")
    code, _, err = _run(capsys, "gpus", "--gpus-file", str(bad))
    assert code == 2 and f"{bad}:3" in err and "price_per_gpu_hour_usd" in err
