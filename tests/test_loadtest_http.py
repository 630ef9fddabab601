"""Load generator against a real loopback server (the echo backend in a subprocess).

Delays are set by the server path (``/sleep/<ms>``, ``/gap/<ms>``) so the expected
latencies are known by construction; faults are injected by path prefixes.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("uvicorn")

from gpubalance.loadtest import (
    Endpoint,
    TokenSpec,
    open_loop_schedule,
    run_async,
    run_closed_loop,
    run_open_loop,
    summarize,
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpubalance.loadtest.echo_server", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    else:  # pragma: no cover
        proc.kill()
        pytest.fail("echo server did not start")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def _run(
    url: str,
    kind: str = "chat",
    stream: bool = True,
    n: int = 20,
    rate: float = 20.0,
    inp: int = 20,
    out: int = 5,
    timeout_s: float = 10.0,
):  # type: ignore[no-untyped-def]
    ep = Endpoint(url=url, kind=kind, stream=stream, timeout_s=timeout_s)  # type: ignore[arg-type]
    specs = open_loop_schedule("constant", rate, n, TokenSpec(inp, out), seed=1)
    recs = run_async(run_open_loop(ep, specs))
    return recs, summarize(recs, offered_rps=rate)


def test_non_streaming_latency_matches_server_delay(echo_url: str) -> None:
    recs, s = _run(f"{echo_url}/sleep/50/v1/chat/completions", stream=False)
    assert s.n_ok == 20 and s.errors == {}
    assert 0.050 <= s.latency_s["e2e"].p50 <= 0.060
    assert all(r.output_tokens == 5 for r in recs)  # the server's usage figure


def test_streaming_ttft_itl_e2e(echo_url: str) -> None:
    # first token after 30 ms, then 4 more tokens 10 ms apart: e2e = 30 + 40 ms
    recs, s = _run(f"{echo_url}/sleep/30/gap/10/v1/chat/completions", n=10, rate=10)
    assert s.n_ok == 10
    assert 0.030 <= s.latency_s["ttft"].p50 <= 0.040
    assert 0.010 <= s.latency_s["itl"].p50 <= 0.014
    assert 0.070 <= s.latency_s["e2e"].p50 <= 0.085
    assert all(len(r.itl_s) == 4 and r.output_tokens == 5 for r in recs)
    assert s.latency_s["itl"].n == 40


def test_completions_stream_and_embeddings(echo_url: str) -> None:
    _, s = _run(f"{echo_url}/v1/completions", kind="completions", n=5)
    assert s.n_ok == 5 and s.latency_s["itl"].n == 20
    recs, s = _run(f"{echo_url}/v1/embeddings", kind="embeddings", n=5, inp=30)
    assert s.n_ok == 5
    # the echo server counts whitespace words; synthesised prompts are 1 token per word
    # after a 2-word tag ("request <i>:"), so 30 targeted tokens -> 27 words + 2
    assert all(27 <= r.input_tokens <= 30 for r in recs)


@pytest.mark.parametrize(
    ("prefix", "stream", "kind"),
    [
        ("/fail500", True, "http_status"),
        ("/nonjson", False, "bad_body"),
        ("/notopenai", False, "bad_body"),
        ("/disconnect", True, "disconnect"),
    ],
)
def test_errors_are_counted_by_kind(echo_url: str, prefix: str, stream: bool, kind: str) -> None:
    _, s = _run(f"{echo_url}{prefix}/v1/chat/completions", stream=stream, n=6, rate=50)
    assert s.n_ok == 0 and s.errors == {kind: 6}
    assert s.latency_s["e2e"].n == 0  # failed requests are not in latency figures
    assert s.error_examples[kind]


def test_unreachable_and_timeout(echo_url: str) -> None:
    _, s = _run(f"http://127.0.0.1:{_free_port()}/v1/chat/completions", n=3)
    assert s.errors == {"connect": 3}
    recs, s = _run(f"{echo_url}/sleep/400/v1/chat/completions", n=3, timeout_s=0.1)
    assert s.errors == {"timeout": 3}
    # event-loop timers have millisecond resolution
    assert all(0.095 <= r.e2e_s <= 0.3 for r in recs), [r.e2e_s for r in recs]


def test_mixed_failures_leave_latency_of_the_rest(echo_url: str) -> None:
    # every 4th request (server-wide count) gets a 503: 20 requests, closed loop of 1
    ep = Endpoint(url=f"{echo_url}/flaky/4/sleep/20/v1/chat/completions", stream=False)
    specs = open_loop_schedule("constant", 1.0, 20, TokenSpec(10, 2), seed=0)
    recs = run_async(run_closed_loop(ep, specs, 1))
    s = summarize(recs, concurrency=1)
    assert s.n_requests == 20
    assert s.errors.get("http_status", 0) in (5, 6)  # the module's server count is shared
    assert s.latency_s["e2e"].n == s.n_ok
    assert 0.020 <= s.latency_s["e2e"].p50 <= 0.030


def test_open_loop_does_not_wait_for_slow_answers(echo_url: str) -> None:
    # server answers after 300 ms; 30 requests at 100 req/s must still go out every 10 ms
    recs, s = _run(f"{echo_url}/sleep/300/v1/chat/completions", stream=False, n=30, rate=100)
    assert s.n_ok == 30
    # a closed loop would take 30 x 0.3 s = 9 s; open loop sends within 0.29 s. Bounds are
    # loose because CI machines are shared (scheduler precision is a benchmark's job)
    sched = sorted(r.scheduled_s for r in recs)
    assert sched[-1] - sched[0] == pytest.approx(0.29)
    assert s.send_lateness_s is not None and s.send_lateness_s.p50 < 0.005
    sent = sorted(r.sent_s for r in recs)
    assert sent[-1] - sent[0] < 0.35
    assert 0.300 <= s.latency_s["e2e"].p50 <= 0.340


def test_closed_loop_concurrency_span(echo_url: str) -> None:
    # 12 requests, 3 in flight, 50 ms each: 4 rounds = 200 ms
    ep = Endpoint(url=f"{echo_url}/sleep/50/v1/chat/completions", stream=False)
    specs = open_loop_schedule("constant", 1.0, 12, TokenSpec(10, 2), seed=0)
    recs = run_async(run_closed_loop(ep, specs, 3))
    s = summarize(recs, concurrency=3)
    assert s.n_ok == 12
    assert 0.200 <= s.span_s <= 0.260
    assert s.throughput_rps == pytest.approx(12 / s.span_s)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpubalance.cli.main", "loadtest", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_json_csv_html_and_results_file(echo_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out, csv, html = tmp_path / "r.json", tmp_path / "r.csv", tmp_path / "r.html"
    res = _cli(
        f"{echo_url}/sleep/20",
        "--rate",
        "20,40",
        "--requests",
        "10",
        "--shape",
        "constant",
        "--input-tokens",
        "30",
        "--output-tokens",
        "3",
        "--json",
        "--quiet",
        "--out",
        str(out),
        "--csv",
        str(csv),
        "--html",
        str(html),
        "--gpus",
        "2",
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["model"] == "echo"  # discovered from /v1/models
    assert 0.020 <= doc["latency_s"]["e2e"]["p50"] <= 0.030
    assert len(doc["runs"]) == 2 and "records" not in doc["runs"][0]
    assert doc["runs"][0]["throughput_rps_per_gpu"] == pytest.approx(
        doc["runs"][0]["throughput_rps"] / 2
    )
    full = json.loads(out.read_text())
    assert len(full["runs"][1]["records"]) == 10
    assert csv.read_text().count("\n") == 21  # header + 20 records
    assert "<svg" in html.read_text()


def test_cli_reports_all_failed_and_bad_input(echo_url: str) -> None:
    res = _cli(f"{echo_url}/fail500", "--rate", "20", "--requests", "4", "--quiet")
    assert res.returncode == 1
    assert "http_status" in res.stdout and "all 4 requests failed" in res.stderr
    res = _cli("ftp://nowhere", "--rate", "1", "--requests", "1")
    assert res.returncode == 2 and "not an http(s) URL" in res.stderr
    res = _cli(echo_url, "--sla", "e2e:p95 < 1", "--quiet")
    assert res.returncode == 2 and "bad SLA" in res.stderr


def test_cli_trace_replay_with_time_scale(echo_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    trace = tmp_path / "t.csv"
    rows = [f"{100 + 0.5 * i:.1f},{40 + i},{3 + i % 4}" for i in range(8)]  # every 0.5 s
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    out = tmp_path / "r.json"
    res = _cli(f"{echo_url}/sleep/10", "--trace", str(trace), "--time-scale", "5", "--quiet",
               "--json", "--out", str(out))  # fmt: skip
    assert res.returncode == 0, res.stderr
    recs = json.loads(out.read_text())["runs"][0]["records"]
    assert len(recs) == 8
    # 0.5 s gaps replayed 5x faster: sent every 100 ms
    sent = sorted(r["sent_s"] for r in recs)
    assert sent[-1] - sent[0] == pytest.approx(0.7, abs=0.01)
    # answers have the traced output length (max_tokens = GeneratedTokens)
    assert sorted(r["output_tokens"] for r in recs) == sorted(3 + i % 4 for i in range(8))


def test_cli_goodput_search_runs_trials(echo_url: str) -> None:
    res = _cli(f"{echo_url}/sleep/5", "--goodput", "--sla", "e2e:p95<=1s", "--duration",
               "0.5", "--goodput-start", "4", "--goodput-trials", "3", "--json", "--quiet",
               "--no-stream")  # fmt: skip
    assert res.returncode == 0, res.stderr
    g = json.loads(res.stdout)["goodput"]
    assert [t["rate_rps"] for t in g["trials"]] == [4.0, 8.0, 16.0]
    assert g["best_rps"] == 16.0 and g["first_fail_rps"] is None
