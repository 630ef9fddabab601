"""`gpubalance plan` end to end: bad input exits 2 with one clear line and writes nothing;
small real runs (simulator + roofline + catalog) give answers that follow from the inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpubalance.cli.main import main
from gpubalance.hardware import load_gpu_catalog

SMALL = ["--requests", "600"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["plan", *argv])
        raise SystemExit(0)
    out = capsys.readouterr()
    code = exc.value.code
    return (0 if code is None else int(code)), out.out, out.err


def plan_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    code, out, err = run([*argv, "--json"], capsys)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--gpus", "H100-SMX"], "did you mean 'H100-SXM'"),
        (["--model", "llama-3.1-8c"], "did you mean 'Llama-3.1-8B'"),
        (["--precision", "bf17"], "bf17"),
        (["--node-sizes", "1,3"], "node sizes"),
        (["--rate", "-3"], "rate_rps"),
        (["--sla-ttft-p99", "0", "--sla-e2e-p99", "0"], "SLA sets no bound"),
        (["--growth-monthly", "-2"], "growth_monthly"),
        (["--trace", "/nonexistent/trace.csv"], "not found"),
    ],
)
def test_bad_flags_exit_2_with_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    html = tmp_path / "r.html"
    code, out, err = run([*argv, *SMALL, "--html", str(html)], capsys)
    assert code == 2
    assert needle in err
    assert err.startswith("error:") and err.strip().count("\n") == 0
    assert not html.exists() and out == ""


def test_unmeetable_sla_names_best_achievable(capsys: pytest.CaptureFixture[str]) -> None:
    # a 20 ms p99 TTFT is below the prefill time of the workload's longest prompts on an L4
    code, _, err = run(["--gpus", "L4", "--sla-ttft-p99", "0.02", *SMALL], capsys)
    assert code == 2
    assert "no candidate meets the SLA" in err
    assert "best achievable: p99 TTFT" in err and "on L4 TP" in err


def test_model_that_fits_nowhere_shows_memory_arithmetic(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 405B parameters x 2 bytes = 810 GB > 8 x 24 GB
    code, _, err = run(["--model", "llama-3.1-405b", "--gpus", "L4", *SMALL], capsys)
    assert code == 2
    assert "fits on no candidate GPU" in err
    assert "weights" in err and "GB" in err
    assert err.strip().count("\n") == 0


def test_malformed_price_file_names_file_line_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("gpu_hour_usd:\n  H100-SXM: 2.0\n  L4: cheap\n")
    code, _, err = run(["--gpus", "L4", "--price-file", str(prices), *SMALL], capsys)
    assert code == 2
    assert f"{prices}:3" in err and "gpu_hour_usd.L4" in err


def test_malformed_catalog_names_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cat = tmp_path / "gpus.yaml"
    cat.write_text("gpus:\n  L4:\n    price_per_gpu_hour_usd: -1\n")
    code, _, err = run(["--gpus", "L4", "--catalog", str(cat), *SMALL], capsys)
    assert code == 2
    assert str(cat) in err and ":3" in err


def test_json_plan_follows_from_inputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("gpu_hour_usd:\n  H100-SXM: 2.0\nnode_hour_usd: 0.5\n")
    d = plan_json(["--gpus", "H100-SXM,L4", "--price-file", str(prices), *SMALL], capsys)
    rec = d["recommendation"]
    assert rec["meets_sla_now"] and rec["meets_sla_growth"]
    ok = [c for c in d["candidates"] if c["status"] == "ok"]
    assert ok and rec["monthly_cost_usd"] == min(c["monthly_cost_usd"] for c in ok)
    for c in ok:
        price = (
            2.0 if c["gpu"] == "H100-SXM" else load_gpu_catalog().get("L4").price_per_gpu_hour_usd
        )
        # by hand: nodes x GPUs/node x price x 730 h + nodes x $0.5 x 730 h
        want = c["nodes"] * (c["gpus_per_node"] * price + 0.5) * 730
        assert c["monthly_cost_usd"] == pytest.approx(want)
        assert c["p99_ttft_s"] <= 2.0 and c["p99_e2e_s"] <= 20.0
        fd = c["failure_domain"]
        assert fd["capacity_lost_fraction_one_node"] == pytest.approx(1 / c["nodes"])
        assert fd["gpus_lost_one_node"] == c["gpus_per_node"]
        # a spare node is there: the SLA holds at the projected load with one node down
        assert fd["sla_holds_one_node_down_growth"]
        assert c["nodes"] >= c["nodes_min"] >= c["nodes_now"] >= 1
    # 20 req/s growing 5 %/month for 12 months
    assert d["inputs"]["rate_growth_rps"] == pytest.approx(20 * 1.05**12)


def test_70b_bf16_never_lands_on_one_80gb_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    # 70.6e9 params x 2 bytes = 141 GB of weights > 80 GB
    d = plan_json(
        ["--model", "llama-3.1-70b", "--gpus", "H100-SXM,A100-80GB", "--rate", "1", *SMALL],
        capsys,
    )
    assert {(x["gpu"], x["tp"]) for x in d["dropped"]} >= {("H100-SXM", 1), ("A100-80GB", 1)}
    for c in d["candidates"]:
        assert c["tp"] >= 2
    assert d["recommendation"]["tp"] >= 2


def test_tighter_sla_and_more_load_never_cost_less(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--gpus", "H100-SXM,A100-80GB", "--months", "0", *SMALL]
    loose = plan_json([*base, "--sla-ttft-p99", "3"], capsys)["recommendation"]
    tight = plan_json([*base, "--sla-ttft-p99", "0.5"], capsys)["recommendation"]
    busier = plan_json([*base, "--sla-ttft-p99", "3", "--rate", "60"], capsys)["recommendation"]
    assert tight["monthly_cost_usd"] >= loose["monthly_cost_usd"]
    assert busier["monthly_cost_usd"] >= loose["monthly_cost_usd"]
    assert tight["p99_ttft_s"] <= 0.5


def test_html_report_is_self_contained(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    html = tmp_path / "plan.html"
    code, out, err = run(["--gpus", "H100-SXM,L4", *SMALL, "--html", str(html)], capsys)
    assert code == 0, err
    text = html.read_text()
    assert text.count("<svg") >= 3  # cost vs p99, CDFs, utilisation
    assert "Recommendation" in text
    # no external assets: no scripts, stylesheets or images fetched from anywhere
    assert "<script" not in text and "<link" not in text and "<img" not in text
    assert "Recommendation:" in out


def test_trace_plan(capsys: pytest.CaptureFixture[str], shared_trace: Path) -> None:
    d = plan_json(
        ["--trace", str(shared_trace), "--gpus", "H100-SXM", "--rate", "10", *SMALL], capsys
    )
    assert d["inputs"]["rate_now_rps"] == pytest.approx(10.0)
    assert "trace" in d["inputs"]["workload"]
    assert d["recommendation"]["gpu"] == "H100-SXM"


def test_console_script_runs(tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpubalance.cli.main",
            "plan",
            "--gpus",
            "H100-SXM",
            *SMALL,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["recommendation"]["gpu"] == "H100-SXM"
    assert {"recommendation", "candidates"} <= d.keys()


def test_calibrated_efficiency_profile_changes_the_plan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A profile from `gpubalance calibrate --model roofline`: a GPU measured at a fifth of the
    # default compute and bandwidth efficiency needs at least as many GPUs, and costs more.
    from gpubalance.cost.roofline import RooflineEfficiency

    slow = tmp_path / "eff.yaml"
    RooflineEfficiency(
        compute_efficiency=0.12, bandwidth_efficiency=0.16, comm_efficiency=0.7, overhead_s=0.0005
    ).save(slow)
    args = ["--gpus", "L4", "--rate", "4", "--no-spare-node", *SMALL]
    base = plan_json(args, capsys)["recommendation"]
    calibrated = plan_json([*args, "--efficiency", str(slow)], capsys)["recommendation"]
    assert calibrated["gpus_total"] > base["gpus_total"]
    assert calibrated["monthly_cost_usd"] > base["monthly_cost_usd"]


def test_malformed_efficiency_profile_names_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "eff.yaml"
    bad.write_text("compute_efficiency: 0.5\nbandwidth_efficiency: -1\n")
    code, out, err = run(["--efficiency", str(bad), *SMALL], capsys)
    assert code == 2 and out == ""
    assert "eff.yaml:2: field 'bandwidth_efficiency'" in err
