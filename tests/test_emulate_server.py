"""The emulator drives the simulator's replica in real time: timings by hand from a
LinearStepTime, continuous batching visible over HTTP, vLLM metric names, instant mode."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import time

import aiohttp

from gateway_testkit import chat, emulator, free_port, post, run
from gpubalance.emulate import Engine
from gpubalance.sim.replica import Replica
from gpubalance.sim.step import LinearStepTime


def test_engine_timing_matches_iterations() -> None:
    # 50 ms per iteration: 4 output tokens = prefill iteration (token 1) + 3 decodes = 0.2 s.
    async def go() -> tuple[float, float, float]:
        eng = Engine(Replica(LinearStepTime(base_s=0.05), 1 << 16, 8, 8192))
        await eng.start()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        a = eng.submit(10, 4, stream=False)
        b = eng.submit(10, 4, stream=False)  # batched with a: same iterations
        await asyncio.gather(a.done, b.done)
        t_ab = loop.time() - t0
        ttft = a.first_token_s - t0
        t1 = loop.time()
        c = eng.submit(10, 0, stream=False)  # prefill only: 1 iteration
        await c.done
        await eng.stop()
        return t_ab, ttft, loop.time() - t1

    t_ab, ttft, t_c = run(go())
    assert 0.19 <= t_ab <= 0.3
    assert 0.045 <= ttft <= 0.1
    assert 0.045 <= t_c <= 0.1


def test_max_num_seqs_one_serialises_requests_over_http() -> None:
    # with one sequence at a time, two 4-token requests take 2 x 4 x 50 ms = 0.4 s.
    with emulator(base_s=0.05, max_num_seqs=1) as emu:

        async def go() -> float:
            async with aiohttp.ClientSession() as s:
                t0 = time.perf_counter()
                res = await asyncio.gather(
                    *(post(s, emu.url + "/v1/chat/completions", chat(max_tokens=4)) for _ in "ab")
                )
                assert [r[0] for r in res] == [200, 200]
                return time.perf_counter() - t0

        assert 0.38 <= run(go()) <= 0.6


def test_stream_tokens_arrive_one_per_iteration_and_vllm_metrics() -> None:
    with emulator(base_s=0.04) as emu:

        async def go() -> tuple[list[float], str]:
            async with aiohttp.ClientSession() as s:
                t0 = time.perf_counter()
                times = []
                body = chat(max_tokens=5, stream=True, stream_options={"include_usage": True})
                async with s.post(emu.url + "/v1/chat/completions", json=body) as r:
                    data = b""
                    async for chunk in r.content.iter_any():
                        data += chunk
                        times.extend(time.perf_counter() - t0 for _ in range(chunk.count(b"hi ")))
                assert data.endswith(b"data: [DONE]\n\n")
                assert b'"completion_tokens":5' in data
                async with s.get(emu.url + "/metrics") as r:
                    return times, await r.text()

        times, metrics = run(go())
        assert len(times) == 5
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert min(gaps) >= 0.025 and times[0] >= 0.03  # one token per 40 ms iteration
        for name in (
            "vllm:num_requests_running",
            "vllm:num_requests_waiting",
            "vllm:gpu_cache_usage_perc",
            "vllm:kv_cache_usage_perc",
            "vllm:time_to_first_token_seconds_bucket",
            "vllm:e2e_request_latency_seconds_bucket",
            "vllm:generation_tokens_total",
        ):
            assert name in metrics
        assert 'vllm:generation_tokens_total{model_name="m"} 5.0' in metrics


def test_too_large_request_is_400_and_instant_mode_is_fast() -> None:
    with emulator(base_s=0.01, kv_tokens=64) as emu, emulator() as inst:

        async def go() -> None:
            async with aiohttp.ClientSession() as s:
                st, _, body = await post(
                    s,
                    emu.url + "/v1/completions",
                    {"model": "m", "prompt": "x" * 400, "max_tokens": 8},
                )
                assert st == 400 and body["error"]["code"] == "context_length_exceeded"
                t0 = time.perf_counter()
                st, _, body = await post(s, inst.url + "/v1/chat/completions", chat(max_tokens=500))
                assert st == 200 and body["usage"]["completion_tokens"] == 500
                assert time.perf_counter() - t0 < 0.5

        run(go())


def test_emulate_cli_with_catalog_gpu_and_model() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpubalance.cli.main",
            "emulate",
            "--gpu",
            "H100",
            "--model",
            "llama-3.1-8b",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        async def go() -> None:
            async with aiohttp.ClientSession() as s:
                for _ in range(100):
                    try:
                        async with s.get(url + "/v1/models") as r:
                            assert (await r.json())["data"][0]["id"] == "llama-3.1-8b"
                            break
                    except aiohttp.ClientConnectorError:
                        await asyncio.sleep(0.1)
                t0 = time.perf_counter()
                st, _, body = await post(
                    s, url + "/v1/chat/completions", chat("llama-3.1-8b", max_tokens=50)
                )
                dt = time.perf_counter() - t0
                assert st == 200 and body["usage"]["completion_tokens"] == 50
                # an 8B model on an H100 decodes one sequence at a few ms per token
                assert 0.05 < dt < 2.0

        run(go())
    finally:
        proc.terminate()
        proc.wait(timeout=10)
