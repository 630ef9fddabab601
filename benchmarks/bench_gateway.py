"""Gateway benchmarks in one run: overhead vs direct and vs LiteLLM's proxy, max req/s,
routing quality on a replayed trace, 1,000 concurrent streams, memory growth over 100,000
requests, and a backend killed mid-run.

Every server is a real process on loopback: emulated backends (`gpubalance emulate`), the
gateway (`gpubalance serve`), LiteLLM's proxy (from its own venv, /tmp/litellm-venv) and
the load generator (this script re-run with ``--loadgen``). The machine is shared, so
absolute figures drift; the ratios are what count.

    python benchmarks/bench_gateway.py            # everything (~6 minutes)
    python benchmarks/bench_gateway.py --parts overhead,maxrps --json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO.parent / "shared" / "data" / "azure-llm-inference-2023-code.csv"
LITELLM = Path("/tmp/litellm-venv/bin/litellm")
PY = sys.executable
ADMIN_KEY = "bench-admin"
CLIENT_KEY = "sk-bench-0123456789abcdef0123456789abcdef"  # both proxies check a client key
SMALL_CHAT = {
    "model": "m",
    "messages": [{"role": "user", "content": "Say hello in five words."}],
    "max_tokens": 8,
}


# ---------------------------------------------------------------------------- processes
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited ({proc.returncode}) before serving {url}")
        try:
            with urllib.request.urlopen(url, timeout=1.0):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up in {timeout_s} s")


class Procs:
    """Started subprocesses, all stopped on exit."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="bench_gateway_"))

    def start(
        self, args: list[str], env: dict[str, str] | None = None, log: str | None = None
    ) -> subprocess.Popen[bytes]:
        out = open(self.tmp / log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
        p = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
        self.procs.append(p)
        return p

    def emulator(self, *, instant: bool, max_num_seqs: int = 256) -> tuple[str, Any]:
        port = free_port()
        args = [
            PY,
            "-m",
            "gpubalance.cli.main",
            "emulate",
            "--port",
            str(port),
            "--served-model-name",
            "m",
            "--max-num-seqs",
            str(max_num_seqs),
        ]
        args += ["--instant"] if instant else ["--gpu", "H100", "--model", "llama-3.1-8b"]
        p = self.start(args)
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", p)
        return url, p

    def gateway(
        self, backends: list[str], policy: str = "least_cost", **extra: Any
    ) -> tuple[str, Any]:
        port = free_port()
        import yaml

        from gpubalance.gateway import hash_key

        cfg = {
            "port": port,
            "pools": [
                {
                    "name": "p",
                    "models": ["m"],
                    "policy": policy,
                    "backends": [{"name": f"b{i}", "url": u} for i, u in enumerate(backends)],
                    "cost": {"gpu": "H100", "model": "llama-3.1-8b"},
                }
            ],
            "auth": {
                "admin_key_sha256": hash_key(ADMIN_KEY),
                "api_keys": [{"tenant": "bench", "sha256": hash_key(CLIENT_KEY)}],
            },
            **extra,
        }
        path = self.tmp / f"gw-{port}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        p = self.start([PY, "-m", "gpubalance.cli.main", "serve", str(path)], log=f"gw-{port}.log")
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", p)
        return url, p

    def litellm(self, backend: str) -> tuple[str, Any]:
        port = free_port()
        cfg = self.tmp / "litellm.yaml"
        cfg.write_text(
            "model_list:\n  - model_name: m\n    litellm_params:\n      model: openai/m\n"
            f"      api_base: {backend}/v1\n      api_key: none\n"
            "litellm_settings:\n  drop_params: true\n  set_verbose: false\n"
        )
        env = {
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_LOG": "ERROR",
            "DISABLE_SCHEMA_UPDATE": "True",
            "LITELLM_MASTER_KEY": CLIENT_KEY,
        }
        p = self.start(
            [
                str(LITELLM),
                "--config",
                str(cfg),
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
                "--num_workers",
                "1",
            ],
            env=env,
            log="litellm.log",
        )
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health/liveliness", p, timeout_s=180)
        return url, p

    def stop(self, p: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def close(self) -> None:
        for p in self.procs:
            self.stop(p)


def loadgen(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the load generator in its own process; returns its JSON result."""
    out = subprocess.run(
        [PY, __file__, "--loadgen", json.dumps(spec)], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"loadgen failed: {out.stderr[-2000:]}")
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(
            f"loadgen output not JSON: {out.stdout[:200]!r}...{out.stdout[-300:]!r}"
            f" stderr: {out.stderr[-1000:]}"
        ) from None


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def admin_state(gw: str) -> dict[str, Any]:
    req = urllib.request.Request(
        gw + "/admin/state", headers={"authorization": f"Bearer {ADMIN_KEY}"}
    )
    with urllib.request.urlopen(req, timeout=2) as r:
        return json.loads(r.read())


# ---------------------------------------------------------------------------- load generator
async def _lg_main(spec: dict[str, Any]) -> dict[str, Any]:
    import aiohttp

    mode = spec["mode"]
    conn = aiohttp.TCPConnector(limit=0, keepalive_timeout=60)
    timeout = aiohttp.ClientTimeout(total=spec.get("timeout_s", 120))
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as s:
        url = spec.get("url") or spec["urls"][0]
        headers = {"content-type": "application/json", "authorization": f"Bearer {CLIENT_KEY}"}

        async def one(body: bytes, target: str = url) -> tuple[float, int, str]:
            t = time.perf_counter()
            try:
                async with s.post(target, data=body, headers=headers) as r:
                    await r.read()
                    return (
                        time.perf_counter() - t,
                        r.status,
                        r.headers.get("x-gpubalance-backend", ""),
                    )
            except Exception as exc:
                return time.perf_counter() - t, -1, type(exc).__name__

        if mode == "open":  # fixed rate per target, open loop, targets interleaved
            body = json.dumps(spec["body"]).encode()
            urls = spec["urls"]
            k = len(urls)
            rate, n = spec["rate"] * k, int(spec["rate"] * spec["duration_s"]) * k
            for i in range(spec.get("warmup", 200) * k):
                await one(body, urls[i % k])
            t0 = time.perf_counter()
            tasks = []
            for i in range(n):
                delay = t0 + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(one(body, urls[i % k])))
            res = await asyncio.gather(*tasks)
            took = time.perf_counter() - t0
            return {
                "lat_s": [[r[0] for r in res[j::k]] for j in range(k)],
                "status": [[r[1] for r in res[j::k]] for j in range(k)],
                "achieved_rps": n / k / took,
            }
        if mode == "closed":  # max throughput: fixed concurrency
            body = json.dumps(spec["body"]).encode()
            total, conc = spec["requests"], spec["concurrency"]
            done = errors = 0
            lat: list[float] = []
            marks: list[tuple[int, float]] = []

            async def worker() -> None:
                nonlocal done, errors
                while done < total:
                    done += 1
                    dt, st, _ = await one(body)
                    if st != 200:
                        errors += 1
                    if len(lat) < 200_000:
                        lat.append(dt)
                    if done % spec.get("mark_every", 10**9) == 0:
                        marks.append((done, time.perf_counter()))
                        print(json.dumps({"mark": done}), file=sys.stderr, flush=True)

            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(conc)))
            took = time.perf_counter() - t0
            return {"rps": total / took, "errors": errors, "lat_s": lat[-20000:]}
        if mode == "replay":  # trace arrivals, one request each
            items = spec["items"]  # [arrival_s, input_tokens, output_tokens]
            t0 = time.perf_counter() + 0.5

            async def send(a: float, i: int, o: int) -> tuple[float, int, str]:
                delay = t0 + a - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                body = json.dumps(
                    {"model": "m", "prompt": "abcd" * max(1, i), "max_tokens": max(1, o)}
                )
                return await one(body.encode())

            res = await asyncio.gather(*(send(*it) for it in items))
            return {"lat_s": [r[0] for r in res], "status": [r[1] for r in res]}
        if mode == "streams":  # N concurrent streaming requests
            n = spec["n"]
            body = json.dumps({**spec["body"], "stream": True}).encode()

            async def stream() -> tuple[bool, int]:
                try:
                    async with s.post(url, data=body, headers=headers) as r:
                        data = await r.read()
                        ok = (
                            r.status == 200
                            and data.endswith(b"data: [DONE]\n\n")
                            and b'"error"' not in data
                        )
                        return ok, data.count(b"data: ")
                except Exception:
                    return False, 0

            t0 = time.perf_counter()
            res = await asyncio.gather(*(stream() for _ in range(n)))
            return {
                "ok": sum(r[0] for r in res),
                "n": n,
                "events": sum(r[1] for r in res),
                "took_s": time.perf_counter() - t0,
            }
        if mode == "timeline":  # open loop, recording (time, status) for the kill test
            body = json.dumps(spec["body"]).encode()
            rate, n = spec["rate"], int(spec["rate"] * spec["duration_s"])
            t0 = time.perf_counter()
            wall0 = time.time()

            async def timed(i: int) -> tuple[float, int, str]:
                delay = t0 + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                _dt, st, b = await one(body)
                return wall0 + i / rate, st, b

            res = await asyncio.gather(*(timed(i) for i in range(n)))
            return {
                "t": [r[0] for r in res],
                "status": [r[1] for r in res],
                "backend": [r[2] for r in res],
            }
    raise ValueError(mode)


def _loadgen_entry(spec_json: str) -> None:
    try:
        import uvloop

        run = uvloop.run
    except ImportError:  # pragma: no cover
        run = asyncio.run
    print(json.dumps(run(_lg_main(json.loads(spec_json)))))


# ---------------------------------------------------------------------------- parts
def q(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p)) if xs else float("nan")


def part_overhead(
    P: Procs, rates: list[float], duration_s: float, with_litellm: bool
) -> dict[str, Any]:
    backend, _ = P.emulator(instant=True)
    gw, _ = P.gateway([backend])
    targets = {"direct": backend, "gpubalance": gw}
    why_no_litellm = None
    if with_litellm:
        if not LITELLM.exists():
            why_no_litellm = (
                f"{LITELLM} not found (install: python -m venv /tmp/litellm-venv && "
                "/tmp/litellm-venv/bin/pip install 'litellm[proxy]')"
            )
        else:
            try:
                targets["litellm"] = P.litellm(backend)[0]
            except RuntimeError as exc:
                why_no_litellm = (
                    f"LiteLLM proxy did not start: {exc} (log: {P.tmp / 'litellm.log'})"
                )
    out: dict[str, Any] = {"rates": {}, "litellm_missing": why_no_litellm}
    path = "/v1/chat/completions"
    for rate in rates:
        row: dict[str, Any] = {}
        for name, url in targets.items():
            if name == "direct":
                continue
            # each proxy runs interleaved with direct calls, so machine noise hits both alike
            r = loadgen(
                {
                    "mode": "open",
                    "urls": [backend + path, url + path],
                    "rate": rate,
                    "duration_s": duration_s,
                    "body": SMALL_CHAT,
                    "timeout_s": 60,
                }
            )
            stats = []
            for lat, st in zip(r["lat_s"], r["status"], strict=True):
                ok = [x for x, c in zip(lat, st, strict=True) if c == 200]
                stats.append(
                    {
                        "p50_s": q(ok, 50),
                        "p99_s": q(ok, 99),
                        "errors": len(st) - len(ok),
                        "achieved_rps": r["achieved_rps"],
                    }
                )
            d, v = stats
            v["direct_p50_s"], v["direct_p99_s"] = d["p50_s"], d["p99_s"]
            v["added_p50_s"] = v["p50_s"] - d["p50_s"]
            v["added_p99_s"] = v["p99_s"] - d["p99_s"]
            row.setdefault("direct", d)
            row[name] = v
        out["rates"][str(rate)] = row
    return out


def part_maxrps(P: Procs, requests: int) -> dict[str, Any]:
    backend, _ = P.emulator(instant=True)
    gw, _ = P.gateway([backend])
    res = {}
    for name, url in (("direct", backend), ("gpubalance", gw)):
        r = loadgen(
            {
                "mode": "closed",
                "url": url + "/v1/chat/completions",
                "requests": requests,
                "concurrency": 64,
                "body": SMALL_CHAT,
            }
        )
        res[name] = {"rps": r["rps"], "errors": r["errors"]}
    return res


class _Pooled:
    """A step model ``k`` times as fast as ``m``, with ``k`` times its KV capacity."""

    def __init__(self, m: Any, k: int) -> None:
        self.m, self.k = m, k
        self.kv_capacity_tokens = m.kv_capacity_tokens * k

    def iteration_time_s(self, p: int, pairs: float, d: int, ctx: int) -> float:
        return float(self.m.iteration_time_s(p, pairs, d, ctx)) / self.k


def part_routing(
    P: Procs, window_s: float, target_busy: float, policies: list[str]
) -> dict[str, Any]:
    from gpubalance.cost.roofline import RooflineModel
    from gpubalance.sim import ReplicaSpec, simulate
    from gpubalance.workload import load_azure_csv

    reqs = load_azure_csv(TRACE)
    roof = RooflineModel.from_names("H100", "llama-3.1-8b")
    spec = ReplicaSpec(roof, max_num_seqs=256)

    def busy_at(scale: float) -> tuple[float, list[Any]]:
        sub = [r for r in reqs if r.arrival_s / scale <= window_s]
        res = simulate(
            sub, spec, n_replicas=4, policy="round_robin", rate_scale=scale, cost_model=roof
        )
        # offered utilisation over the arrival window: GPU-busy seconds the window's requests
        # need / GPU-seconds the window holds (the drain after the last arrival not counted,
        # which would make an overloaded replay look 80% busy)
        return float(res.replica_busy_s.sum() / (len(res.replica_busy_s) * window_s)), sub

    lo, hi = 1.0, 400.0  # time compression factor: busy fraction grows with it
    for _ in range(14):
        mid = (lo * hi) ** 0.5
        b, _ = busy_at(mid)
        lo, hi = (mid, hi) if b < target_busy else (lo, mid)
    scale = (lo * hi) ** 0.5
    busy, sub = busy_at(scale)
    # the same replay in the simulator (routing price as the gateway's: BatchedCost), and
    # the ideal balance: the 4 GPUs as ONE replica 4x as fast with 4x the KV and budget (a
    # single queue, no routing at all), which no router over 4 separate replicas beats
    sim: dict[str, Any] = {}
    for pol in policies:
        s = simulate(sub, spec, n_replicas=4, policy=pol, rate_scale=scale)
        sim[pol] = {"p99_s": s.e2e.p99_s, "ttft_p99_s": s.ttft.p99_s}
    pooled_spec = ReplicaSpec(_Pooled(roof, 4), max_num_seqs=4 * 256, max_batched_tokens=4 * 8192)
    s = simulate(sub, pooled_spec, n_replicas=1, rate_scale=scale)
    sim["pooled_4x"] = {"p99_s": s.e2e.p99_s, "ttft_p99_s": s.ttft.p99_s}
    items = [[r.arrival_s / scale, r.input_tokens, r.output_tokens] for r in sub]
    backends = [P.emulator(instant=False)[0] for _ in range(4)]
    out: dict[str, Any] = {
        "scale": scale,
        "requests": len(items),
        "sim_busy": busy,
        "sim": sim,
        "policies": {},
    }
    for pol in policies:
        gw, gp = P.gateway(backends, policy=pol)
        r = loadgen(
            {"mode": "replay", "url": gw + "/v1/completions", "items": items, "timeout_s": 600}
        )
        ok = [lat for lat, st in zip(r["lat_s"], r["status"], strict=True) if st == 200]
        out["policies"][pol] = {
            "p50_s": q(ok, 50),
            "p99_s": q(ok, 99),
            "errors": len(items) - len(ok),
        }
        P.stop(gp)
        time.sleep(1.0)
    return out


def part_streams(P: Procs, n: int) -> dict[str, Any]:
    backend, _ = P.emulator(instant=False, max_num_seqs=1024)
    gw, _ = P.gateway([backend], limits={"max_connections_per_backend": 2048})
    r = loadgen(
        {
            "mode": "streams",
            "url": gw + "/v1/chat/completions",
            "n": n,
            "body": {**SMALL_CHAT, "max_tokens": 32},
        }
    )
    return {
        "n": n,
        "ok": r["ok"],
        "errors": n - r["ok"],
        "events": r["events"],
        "took_s": r["took_s"],
    }


def part_rss(P: Procs, requests: int) -> dict[str, Any]:
    backend, _ = P.emulator(instant=True)
    gw, gp = P.gateway([backend])
    warm = loadgen(
        {
            "mode": "closed",
            "url": gw + "/v1/chat/completions",
            "requests": 10_000,
            "concurrency": 64,
            "body": SMALL_CHAT,
        }
    )
    rss0 = rss_bytes(gp.pid)
    r = loadgen(
        {
            "mode": "closed",
            "url": gw + "/v1/chat/completions",
            "requests": requests,
            "concurrency": 64,
            "body": SMALL_CHAT,
        }
    )
    rss1 = rss_bytes(gp.pid)
    return {
        "requests": requests,
        "rss_start_bytes": rss0,
        "rss_end_bytes": rss1,
        "growth": rss1 / rss0 - 1.0,
        "errors": r["errors"] + warm["errors"],
        "rps": r["rps"],
    }


def part_kill(P: Procs, rate: float, duration_s: float, kill_at_s: float) -> dict[str, Any]:
    bk = [P.emulator(instant=False) for _ in range(3)]
    gw, _ = P.gateway(
        [u for u, _ in bk],
        policy="least_requests",
        health={"interval_s": 0.5, "failure_threshold": 3, "eject_s": 10},
    )
    import threading

    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):
                st = admin_state(gw)
                samples.append((time.time(), st["pools"]["p"]["backends"][0]["sent_total"]))
            time.sleep(0.05)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    killed_at: list[float] = []

    def killer() -> None:
        time.sleep(kill_at_s + 1.0)  # loadgen start-up ~1 s
        killed_at.append(time.time())
        bk[0][1].kill()

    kt = threading.Thread(target=killer, daemon=True)
    kt.start()
    r = loadgen(
        {
            "mode": "timeline",
            "url": gw + "/v1/chat/completions",
            "rate": rate,
            "duration_s": duration_s,
            "body": {**SMALL_CHAT, "max_tokens": 16},
        }
    )
    kt.join()
    stop.set()
    th.join()
    t_kill = killed_at[0]
    last_sent = max(samples, key=lambda s: s[1])[1]
    first_at_last = min(t for t, v in samples if v == last_sent)
    failures = sum(1 for st in r["status"] if st != 200)
    after = [b for t, b in zip(r["t"], r["backend"], strict=True) if t > t_kill]
    return {
        "requests": len(r["status"]),
        "failures": failures,
        "stopped_receiving_after_s": max(0.0, first_at_last - t_kill),
        "served_by_dead_after_kill": sum(1 for b in after if b == "b0"),
    }


# ---------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--parts", default="overhead,maxrps,routing,streams,rss,kill")
    ap.add_argument("--json", action="store_true", help="print results as JSON")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    ap.add_argument("--no-litellm", action="store_true")
    ap.add_argument("--loadgen", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.loadgen:
        _loadgen_entry(a.loadgen)
        return
    parts = a.parts.split(",")
    quick = a.quick
    results: dict[str, Any] = {}
    P = Procs()
    try:
        if "overhead" in parts:
            results["overhead"] = part_overhead(
                P, [20.0, 100.0, 500.0], 4.0 if quick else 10.0, not a.no_litellm
            )
            P.close()
        if "maxrps" in parts:
            results["maxrps"] = part_maxrps(P, 5000 if quick else 20_000)
            P.close()
        if "routing" in parts:
            results["routing"] = part_routing(
                P,
                10.0 if quick else 30.0,
                0.8,
                ["round_robin", "least_cost", "least_requests", "power_of_two"],
            )
            P.close()
        if "streams" in parts:
            results["streams"] = part_streams(P, 1000)
            P.close()
        if "rss" in parts:
            results["rss"] = part_rss(P, 20_000 if quick else 100_000)
            P.close()
        if "kill" in parts:
            results["kill"] = part_kill(P, 100.0, 6.0, 2.0)
            P.close()
    finally:
        P.close()
    if a.json:
        print(json.dumps(results, indent=2))
    else:
        render(results)


def render(res: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(width=150)
    ms = 1e3
    if "overhead" in res:
        o = res["overhead"]
        t = Table(
            title="Added latency vs calling the instant backend directly (open loop, "
            "each proxy interleaved with direct calls)"
        )
        cols = (
            "req/s",
            "path",
            "direct p50",
            "direct p99",
            "p50 ms",
            "p99 ms",
            "added p50 ms",
            "added p99 ms",
            "errors",
            "achieved req/s",
        )
        for c in cols:
            t.add_column(c, justify="right")
        floor = 5e-5  # 0.05 ms: below what this shared machine resolves
        for rate, row in o["rates"].items():
            for name, v in row.items():
                if name == "direct":
                    continue
                t.add_row(
                    rate,
                    name,
                    f"{v['direct_p50_s'] * ms:.2f}",
                    f"{v['direct_p99_s'] * ms:.2f}",
                    f"{v['p50_s'] * ms:.2f}",
                    f"{v['p99_s'] * ms:.2f}",
                    f"{v['added_p50_s'] * ms:.2f}",
                    f"{v['added_p99_s'] * ms:.2f}",
                    str(v["errors"]),
                    f"{v['achieved_rps']:.0f}",
                )
            if "litellm" in row and "gpubalance" in row:
                g, lt = row["gpubalance"], row["litellm"]
                r50 = lt["added_p50_s"] / max(g["added_p50_s"], floor)
                r99 = lt["added_p99_s"] / max(g["added_p99_s"], floor)
                con.print(
                    f"{rate} req/s: LiteLLM added latency / gpubalance added latency "
                    f"(ours floored at 0.05 ms): p50 {r50:.0f}x, p99 {r99:.0f}x"
                )
        con.print(t)
        if o.get("litellm_missing"):
            con.print(f"LiteLLM not measured: {o['litellm_missing']}")
    if "maxrps" in res:
        m = res["maxrps"]
        con.print(
            f"Max req/s (closed loop, 64 connections, instant backend): direct "
            f"{m['direct']['rps']:.0f}, through gateway {m['gpubalance']['rps']:.0f} "
            f"(errors {m['gpubalance']['errors']})"
        )
    if "routing" in res:
        r = res["routing"]
        t = Table(
            title=f"Routing quality: trace x{r['scale']:.1f} faster, {r['requests']} requests, "
            f"4 emulated H100 llama-3.1-8b, simulated busy {r['sim_busy']:.2f}"
        )
        cols = ("policy", "p50 e2e s", "p99 e2e s", "p99 / round_robin", "errors")
        cols += ("sim p99 e2e s", "sim p99 / rr", "sim p99 TTFT s", "sim TTFT / rr")
        for c in cols:
            t.add_column(c, justify="right")
        base = r["policies"].get("round_robin", {}).get("p99_s", float("nan"))
        sim = r.get("sim", {})
        nan = {"p99_s": float("nan"), "ttft_p99_s": float("nan")}
        sb = sim.get("round_robin", nan)
        for pol, v in r["policies"].items():
            sv = sim.get(pol, nan)
            t.add_row(
                pol,
                f"{v['p50_s']:.2f}",
                f"{v['p99_s']:.2f}",
                f"{v['p99_s'] / base:.2f}",
                str(v["errors"]),
                f"{sv['p99_s']:.2f}",
                f"{sv['p99_s'] / sb['p99_s']:.2f}",
                f"{sv['ttft_p99_s']:.2f}",
                f"{sv['ttft_p99_s'] / sb['ttft_p99_s']:.2f}",
            )
        if "pooled_4x" in sim:
            sv = sim["pooled_4x"]
            t.add_row(
                "ideal: 1 replica 4x (sim)",
                "",
                "",
                "",
                "",
                f"{sv['p99_s']:.2f}",
                f"{sv['p99_s'] / sb['p99_s']:.2f}",
                f"{sv['ttft_p99_s']:.2f}",
                f"{sv['ttft_p99_s'] / sb['ttft_p99_s']:.2f}",
            )
        con.print(t)
    if "streams" in res:
        s = res["streams"]
        con.print(
            f"{s['n']} concurrent streams: {s['ok']} complete, {s['errors']} errors, "
            f"{s['events']} SSE events in {s['took_s']:.1f} s"
        )
    if "rss" in res:
        s = res["rss"]
        con.print(
            f"RSS over {s['requests']:,} requests: {s['rss_start_bytes'] / 2**20:.1f} MiB -> "
            f"{s['rss_end_bytes'] / 2**20:.1f} MiB ({s['growth'] * 100:+.1f}%), "
            f"errors {s['errors']}"
        )
    if "kill" in res:
        k = res["kill"]
        con.print(
            f"Backend killed mid-run: {k['failures']} of {k['requests']} requests failed; dead "
            f"backend got its last request {k['stopped_receiving_after_s']:.2f} s after the kill"
        )


if __name__ == "__main__":
    main()
