"""Calibration: reading measurements, and recovering known coefficients from synthetic ones."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpubalance.calibrate import (
    BatchLimits,
    Measurements,
    fit_roofline,
    fit_step,
    fit_token,
    isolated_mask,
    load_measurements,
    predict_e2e_s,
)
from gpubalance.cost import TokenCostModel
from gpubalance.cost.roofline import RooflineEfficiency, RooflineModel
from gpubalance.errors import UserInputError
from gpubalance.sim import LinearStepTime
from gpubalance.workload import generate_arrivals


def _meas(inp, out, e2e, sent, run="r", ttft=None, rate=math.nan) -> Measurements:  # type: ignore[no-untyped-def]
    n = len(e2e)
    return Measurements(
        np.asarray(inp, dtype=np.int64),
        np.asarray(out, dtype=np.int64),
        np.asarray(e2e, dtype=np.float64),
        np.full(n, np.nan) if ttft is None else np.asarray(ttft, dtype=np.float64),
        np.asarray(sent, dtype=np.float64),
        np.asarray([run] * n if isinstance(run, str) else run, dtype=object),
        np.full(n, rate),
        ("synthetic",),
    )


def test_isolated_mask_by_hand() -> None:
    # a: [0,1] alone; b: [2,4] overlaps c: [3,5]; d: [6,7] alone; e: other run at [3.5,4]
    m = _meas(
        [1] * 5, [1] * 5, [1.0, 2.0, 2.0, 1.0, 0.5], [0.0, 2.0, 3.0, 6.0, 3.5],
        run=["x", "x", "x", "x", "y"],
    )  # fmt: skip
    assert isolated_mask(m).tolist() == [True, False, False, True, True]


def test_token_fit_recovers_coefficients_from_isolated_requests() -> None:
    rng = np.random.default_rng(0)
    n = 300
    inp = rng.integers(10, 3000, n)
    out = rng.integers(1, 500, n)
    # by hand: 20 ms + 0.1 ms per input token + 10 ms per output token
    e2e = 0.020 + 1e-4 * inp + 0.010 * out
    sent = np.cumsum(e2e + 0.5) - e2e  # one at a time
    # plus 100 queued requests whose latency is inflated: must be left out
    q_inp, q_out = rng.integers(10, 3000, 100), rng.integers(1, 500, 100)
    q_e2e = 3.0 * (0.020 + 1e-4 * q_inp + 0.010 * q_out)
    q_sent = np.full(100, sent[-1] + 1000.0) + np.arange(100) * 0.01
    m = _meas(np.r_[inp, q_inp], np.r_[out, q_out], np.r_[e2e, q_e2e], np.r_[sent, q_sent])
    cal = fit_token(m)
    p = cal.profile
    assert isinstance(p, TokenCostModel)
    assert cal.used == 300 and cal.total == 400
    assert p.overhead_s == pytest.approx(0.020, rel=1e-3)
    assert p.prefill_s_per_token == pytest.approx(1e-4, rel=1e-3)
    assert p.decode_s_per_token == pytest.approx(0.010, rel=1e-3)
    assert p.prefill_s_per_token2 == pytest.approx(0.0, abs=1e-10)
    assert cal.fit.r2 > 0.9999


def test_roofline_fit_recovers_efficiencies() -> None:
    true = RooflineEfficiency(compute_efficiency=0.42, bandwidth_efficiency=0.66, overhead_s=0.003)
    rm = RooflineModel.from_names("h100", "llama-3.1-8b", efficiency=true)
    rng = np.random.default_rng(1)
    n = 200
    inp, out = rng.integers(50, 4000, n), rng.integers(2, 400, n)
    e2e = rm.costs_s(inp, out) * (1 + rng.normal(0, 0.01, n))
    ttft = rm.costs_s(inp, np.ones(n, dtype=np.int64)) * (1 + rng.normal(0, 0.01, n))
    sent = np.cumsum(e2e + 0.01) - e2e
    cal = fit_roofline(_meas(inp, out, e2e, sent, ttft=ttft), gpu="h100", model="llama-3.1-8b")
    eff = cal.profile
    assert isinstance(eff, RooflineEfficiency)
    assert eff.compute_efficiency == pytest.approx(0.42, rel=0.03)
    assert eff.bandwidth_efficiency == pytest.approx(0.66, rel=0.03)
    assert eff.overhead_s == pytest.approx(0.003, rel=0.1)
    assert cal.fit.mape < 0.02


def test_predict_e2e_by_hand() -> None:
    # batch time 10 ms + 0.1 ms/token; 5 requests of 100 tokens, 1 ms apart, overhead 1 ms:
    # first runs alone (20 ms), the other four queue and run as one batch of 400 tokens
    # (10 + 40 = 50 ms) from t=20 ms to 70 ms.
    step = LinearStepTime(base_s=0.010, per_prefill_token_s=1e-4)
    t = np.array([0.0, 0.001, 0.002, 0.003, 0.004])
    e2e = predict_e2e_s(step, 0.001, t, np.full(5, 100), np.zeros(5, dtype=np.int64),
                        BatchLimits(max_num_seqs=8))  # fmt: skip
    assert e2e == pytest.approx([0.021, 0.070, 0.069, 0.068, 0.067])
    # batch cap of 2: t=20 ms: batch {1,2} (30 ms) -> 50 ms; then {3,4} -> 80 ms
    e2e = predict_e2e_s(step, 0.0, t, np.full(5, 100), np.zeros(5, dtype=np.int64),
                        BatchLimits(max_num_seqs=2))  # fmt: skip
    assert e2e == pytest.approx([0.020, 0.049, 0.048, 0.077, 0.076])


def test_step_fit_recovers_batch_cost_from_replayed_runs() -> None:
    true = LinearStepTime(base_s=0.010, per_prefill_token_s=3e-4)
    limits = BatchLimits(max_num_seqs=16)
    rng = np.random.default_rng(0)
    parts = []
    for rate in (5.0, 15.0, 25.0):
        n = 200
        t = generate_arrivals(n, rate, seed=int(rate))
        inp = rng.integers(16, 64, n)
        zeros = np.zeros(n, dtype=np.int64)
        e2e = predict_e2e_s(true, 0.002, t, inp, zeros, limits) * (1 + rng.normal(0, 0.02, n))
        parts.append((inp, zeros, e2e, t, np.array([f"r{rate}"] * n, dtype=object)))
    m = _meas(*(np.concatenate([p[i] for p in parts]) for i in range(4)),
              run=np.concatenate([p[4] for p in parts]))  # fmt: skip
    cal = fit_step(m, limits)
    step = cal.profile
    assert isinstance(step, LinearStepTime)
    for tokens in (40, 160, 400):  # a batch of 1, 4 and 10 typical requests
        want = 0.010 + 3e-4 * tokens
        assert step.iteration_time_s(tokens, 0.0, 0, 0) == pytest.approx(want, rel=0.06)
    assert cal.extra["overhead_s"] == pytest.approx(0.002, abs=0.0015)
    for row in cal.checks:
        assert row["predicted_p95_s"] == pytest.approx(row["measured_p95_s"], rel=0.05)


def _results_file(path: Path) -> None:
    recs = []
    for i in range(30):
        inp, out = 100 + 10 * i, 5 + (7 * i) % 13  # not collinear
        e2e = 0.01 + 1e-4 * inp + 0.002 * out
        sent = 1.0 * i
        recs.append({"index": i, "ok": True, "sent_s": sent, "e2e_s": e2e, "ttft_s": None,
                     "input_tokens": inp, "output_tokens": out})  # fmt: skip
    recs.append({"index": 30, "ok": False, "sent_s": 31.0, "e2e_s": 9.0, "ttft_s": None,
                 "input_tokens": 5, "output_tokens": 0})  # fmt: skip
    doc = {"format": "gpubalance-loadtest/1", "runs": [{"label": "rate=1", "offered_rps": 1.0,
           "records": recs}]}  # fmt: skip
    path.write_text(json.dumps(doc))


def test_load_results_and_access_log(tmp_path: Path) -> None:
    res = tmp_path / "r.json"
    _results_file(res)
    log = tmp_path / "access.jsonl"
    log.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {
                    "ts": 100.5,
                    "status": 200,
                    "input_tokens": 10,
                    "output_tokens": 3,
                    "latency_s": 0.5,
                    "ttft_s": 0.1,
                    "backend": "a",
                },
                {
                    "ts": 101.0,
                    "status": 502,
                    "input_tokens": 10,
                    "output_tokens": None,
                    "latency_s": 0.1,
                    "error": "upstream",
                },
                {
                    "ts": 102.0,
                    "status": 200,
                    "input_tokens": 10,
                    "output_tokens": 3,
                    "latency_s": 0.001,
                    "cache": "hit",
                },
                {"status": 200, "input_tokens": 7, "output_tokens": 0, "duration_s": 0.2},
            ]
        )
    )
    m = load_measurements([res, log])
    assert len(m) == 30 + 2
    assert m.sent_s[30] == pytest.approx(100.0) and m.ttft_s[30] == pytest.approx(0.1)
    assert math.isnan(m.sent_s[31]) and m.e2e_s[31] == pytest.approx(0.2)
    assert m.runs() == ["r.json:rate=1", "access.jsonl:a", "access.jsonl:"]
    assert m.offered_rps[0] == 1.0


def test_bad_measurement_files_name_line_and_field(tmp_path: Path) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text('{"input_tokens": 1, "output_tokens": 1, "latency_s": 0.1}\n'
                   '{"input_tokens": -3, "output_tokens": 1, "latency_s": 0.1}\n')  # fmt: skip
    with pytest.raises(UserInputError) as exc:
        load_measurements([log])
    assert exc.value.line == 2 and exc.value.field == "input_tokens"
    log.write_text('{"input_tokens": 1, "output_tokens": 1}\n')
    with pytest.raises(UserInputError, match="no latency field"):
        load_measurements([log])
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"format": "gpubalance-loadtest/1", "runs": [{"label": "x"}]}))
    with pytest.raises(UserInputError, match="--out"):
        load_measurements([summary])
    with pytest.raises(UserInputError, match="not found"):
        load_measurements([tmp_path / "missing.json"])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpubalance.cli.main", "calibrate", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_cli_writes_loadable_profiles(tmp_path: Path) -> None:
    res = tmp_path / "r.json"
    _results_file(res)
    prof = tmp_path / "token.yaml"
    run = _cli(str(res), "--out", str(prof), "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["used"] == 30 and doc["fit"]["r2"] > 0.9999
    model = TokenCostModel.load(prof)
    assert model.prefill_s_per_token == pytest.approx(1e-4, rel=1e-3)
    assert model.decode_s_per_token == pytest.approx(0.002, rel=1e-3)
    run = _cli(str(res), "--model", "roofline")
    assert run.returncode == 2 and "--gpu" in run.stderr
    run = _cli(str(res), "--model", "magic")
    assert run.returncode == 2 and "unknown model" in run.stderr


def test_step_fit_learns_service_time_variability() -> None:
    # a server whose batches take 1x (75%) or 2.5x (25%) the base time, e.g. a shared CPU
    true = LinearStepTime(base_s=0.005, per_prefill_token_s=2e-4)
    factors = np.array([1.0, 1.0, 1.0, 2.5])
    limits = BatchLimits(max_num_seqs=16)
    rng = np.random.default_rng(3)
    parts = []
    for k, rate in enumerate((4.0, 12.0, 20.0)):
        n = 300
        t = generate_arrivals(n, rate, seed=10 + k)
        inp = rng.integers(30, 60, n)
        zeros = np.zeros(n, dtype=np.int64)
        e2e = predict_e2e_s(true, 0.001, t, inp, zeros, limits, slowdowns=factors, seed=99 + k)
        parts.append((inp, zeros, e2e, t, np.array([f"r{rate}"] * n, dtype=object)))
    m = _meas(*(np.concatenate([p[i] for p in parts]) for i in range(4)),
              run=np.concatenate([p[4] for p in parts]))  # fmt: skip
    cal = fit_step(m, limits)
    assert cal.slowdowns is not None
    # 25% of lone requests were 2.5x slower than the median one
    assert np.percentile(cal.slowdowns, 90) == pytest.approx(2.5, rel=0.15)
    assert np.percentile(cal.slowdowns, 50) == pytest.approx(1.0)
    for row in cal.checks:
        assert row["predicted_p50_s"] == pytest.approx(row["measured_p50_s"], rel=0.1)
        assert row["predicted_p95_s"] == pytest.approx(row["measured_p95_s"], rel=0.15)


def test_cli_step_and_roofline_profiles_load_where_they_are_used(tmp_path: Path) -> None:
    from gpubalance.config import load_model

    res = tmp_path / "r.json"
    _results_file(res)
    step_path, eff_path = tmp_path / "step.yaml", tmp_path / "eff.yaml"
    run = _cli(str(res), "--model", "step", "--max-batch", "4", "--out", str(step_path), "--json")
    assert run.returncode == 0, run.stderr
    overhead_s = json.loads(run.stdout)["extra"]["overhead_s"]
    step = load_model(LinearStepTime, step_path)  # what `gpubalance emulate --step-model` reads
    # lone requests: 10 ms + 0.1 ms/input token + 2 ms/output token; a 300-token prompt with
    # 10 output tokens took 10 + 30 + 20 = 60 ms
    assert step.cost_s(300, 10) + overhead_s == pytest.approx(0.060, rel=0.1)
    run = _cli(str(res), "--model", "roofline", "--gpu", "l4", "--llm", "llama-3.1-8b",
               "--out", str(eff_path))  # fmt: skip
    assert run.returncode == 0, run.stderr
    eff = RooflineEfficiency.load(eff_path)
    assert 0 < eff.compute_efficiency <= 1.5 and 0 < eff.bandwidth_efficiency <= 1.5
