"""The gateway on real loopback servers: emulators, the load tester's echo backend and a
uvicorn-served gateway, talked to with aiohttp."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

from gateway_testkit import chat, echo, emulator, free_port, gateway, post, run
from gpubalance.gateway import hash_key

FAST_HEALTH = {"interval_s": 0.1, "timeout_s": 0.5, "failure_threshold": 2, "eject_s": 30.0}


def pool(name: str, urls: list[str], **kw: object) -> dict[str, object]:
    backends = [{"name": f"{name}{i}", "url": u} for i, u in enumerate(urls)]
    return {"name": name, "models": kw.pop("models", ["m"]), "backends": backends, **kw}


def test_chat_completions_embeddings_models_and_streaming_chunk_by_chunk() -> None:
    # 40 ms per iteration: 5 tokens take 5 iterations = 0.2 s; stream events 40 ms apart.
    with emulator(base_s=0.04) as emu, gateway({"pools": [pool("p", [emu.url])]}) as gw:

        async def go() -> None:
            async with aiohttp.ClientSession() as s:
                st, h, body = await post(s, gw.url + "/v1/chat/completions", chat(max_tokens=5))
                assert st == 200 and h["x-gpubalance-backend"] == "p0"
                assert body["usage"]["completion_tokens"] == 5
                assert body["choices"][0]["message"]["content"] == "hi " * 5
                st, _, body = await post(
                    s, gw.url + "/v1/completions", {"model": "m", "prompt": "abc", "max_tokens": 2}
                )
                assert st == 200 and body["choices"][0]["text"] == "hi hi "
                st, _, body = await post(s, gw.url + "/v1/embeddings", {"model": "m", "input": "q"})
                assert st == 200 and len(body["data"][0]["embedding"]) == 16
                async with s.get(gw.url + "/v1/models") as r:
                    assert [m["id"] for m in (await r.json())["data"]] == ["m"]
                t0 = time.perf_counter()
                arrivals = []
                async with s.post(
                    gw.url + "/v1/chat/completions", json=chat(max_tokens=5, stream=True)
                ) as r:
                    assert r.headers["content-type"].startswith("text/event-stream")
                    async for chunk in r.content.iter_any():
                        if b"hi " in chunk:
                            arrivals.append(time.perf_counter() - t0)
                # the gateway did not buffer: content chunks arrived spread over the ~0.2 s
                assert len(arrivals) >= 4
                assert arrivals[-1] - arrivals[0] >= 0.1

        run(go())


def test_bad_input_gives_openai_errors_and_gateway_keeps_serving() -> None:
    key, admin = "client-secret", "admin-secret"
    cfg = {
        "pools": [pool("p", [])],
        "auth": {
            "api_keys": [{"tenant": "t", "sha256": hash_key(key)}],
            "admin_key_sha256": hash_key(admin),
        },
        "limits": {"max_body_bytes": 2048},
    }
    with emulator() as emu:
        cfg["pools"] = [pool("p", [emu.url])]
        with gateway(cfg) as gw:

            async def go() -> None:
                ok = {"authorization": f"Bearer {key}"}
                url = gw.url + "/v1/chat/completions"
                async with aiohttp.ClientSession() as s:
                    cases = [
                        (b"{not json", ok, 400, "invalid_json"),
                        (b"[1,2]", ok, 400, "missing_model"),
                        (orjson.dumps(chat(model="nope")), ok, 404, "model_not_found"),
                        (orjson.dumps(chat(x="y" * 5000)), ok, 413, "request_too_large"),
                        (orjson.dumps(chat()), {}, 401, "invalid_api_key"),
                        (
                            orjson.dumps(chat()),
                            {"authorization": "Bearer wrong"},
                            401,
                            "invalid_api_key",
                        ),
                        (
                            orjson.dumps(chat()),
                            {"authorization": f"Bearer {admin}"},
                            401,
                            "invalid_api_key",
                        ),
                    ]
                    for raw, hdr, status, code in cases:
                        st, _, body = await post(s, url, raw, hdr)
                        assert (st, body["error"]["code"]) == (status, code), raw[:40]
                        assert set(body["error"]) == {"message", "type", "code"}
                    st, _, body = await post(s, url, chat(), ok)
                    assert st == 200
                    async with s.get(gw.url + "/v1/models") as r:
                        assert r.status == 401
                    async with s.get(gw.url + "/admin/state", headers=ok) as r:
                        assert r.status == 401  # a client key is not the admin key
                    async with s.get(gw.url + "/nowhere") as r:
                        assert r.status == 404

            run(go())


def test_rules_route_by_model_size_header_and_tenant() -> None:
    with emulator() as e1, emulator() as e2, emulator() as e3, emulator() as e4:
        cfg = {
            "pools": [
                pool("small", [e1.url]),
                pool("large", [e2.url], models=[]),
                pool("team", [e3.url], models=[]),
                pool("vip", [e4.url], models=["x"]),
            ],
            "rules": [
                {"pool": "vip", "tenants": ["gold"]},
                {"pool": "team", "header": "x-team", "header_values": ["blue"]},
                {"pool": "large", "models": ["m"], "min_input_tokens": 100},
            ],
            "auth": {
                "api_keys": [
                    {"tenant": "gold", "sha256": hash_key("g")},
                    {"tenant": "plain", "sha256": hash_key("p")},
                ]
            },
        }
        with gateway(cfg) as gw:

            async def go() -> None:
                url = gw.url + "/v1/chat/completions"
                plain = {"authorization": "Bearer p"}
                async with aiohttp.ClientSession() as s:
                    big = {"model": "m", "messages": [{"role": "user", "content": "w" * 400}]}
                    got = [
                        (await post(s, url, chat(), plain))[1]["x-gpubalance-backend"],
                        (await post(s, url, big, plain))[1]["x-gpubalance-backend"],
                        (await post(s, url, chat(), {**plain, "x-team": "blue"}))[1][
                            "x-gpubalance-backend"
                        ],
                        (await post(s, url, chat(), {"authorization": "Bearer g"}))[1][
                            "x-gpubalance-backend"
                        ],
                    ]
                    assert got == ["small0", "large0", "team0", "vip0"]

            run(go())


def test_admission_cap_answers_429_with_retry_after() -> None:
    # each request takes 10 iterations x 50 ms = 0.5 s; the pool holds at most 2.
    with emulator(base_s=0.05) as emu:
        cfg = {"pools": [pool("p", [emu.url], admission={"max_queued": 2})]}
        with gateway(cfg) as gw:

            async def go() -> None:
                async with aiohttp.ClientSession() as s:
                    url = gw.url + "/v1/chat/completions"
                    first = [
                        asyncio.create_task(post(s, url, chat(max_tokens=10))) for _ in range(2)
                    ]
                    await asyncio.sleep(0.15)
                    st, h, body = await post(s, url, chat(max_tokens=10))
                    assert st == 429 and body["error"]["type"] == "rate_limit_error"
                    assert int(h["Retry-After"]) >= 1
                    assert [r[0] for r in await asyncio.gather(*first)] == [200, 200]
                    st, _, _ = await post(s, url, chat(max_tokens=1))
                    assert st == 200

            run(go())


def test_connect_failures_and_5xx_are_retried_and_backends_ejected() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with emulator() as live, echo() as bad:
        cfg = {
            "pools": [pool("p", [dead, bad.url + "/fail500", live.url], policy="round_robin")],
            "health": {**FAST_HEALTH, "active": False},
        }
        with gateway(cfg) as gw:

            async def go() -> None:
                async with aiohttp.ClientSession() as s:
                    url = gw.url + "/v1/chat/completions"
                    for _ in range(12):
                        st, h, _ = await post(s, url, chat())
                        assert st == 200 and h["x-gpubalance-backend"] == "p2"
                    for _ in range(3):  # streams are retried too, before the first byte
                        async with s.post(url, json=chat(stream=True)) as r:
                            assert r.status == 200
                            assert (await r.read()).endswith(b"data: [DONE]\n\n")

            run(go())
            bs = {b.name: b for b in gw.app.runtime.backends()}
            assert not bs["p0"].state.healthy and not bs["p1"].state.healthy
            # ejected after 2 consecutive failures each: they saw exactly 2 requests
            assert (bs["p0"].sent_total, bs["p1"].sent_total) == (2, 2)
            time.sleep(0.05)  # the last stream's bookkeeping ends just after its last byte
            assert bs["p2"].state.in_flight == 0


def test_stream_broken_midway_is_not_retried_and_client_is_told() -> None:
    with echo() as eb, emulator() as other:
        cfg = {"pools": [pool("p", [eb.url + "/disconnect", other.url], policy="round_robin")]}
        with gateway(cfg) as gw:

            async def go() -> bytes:
                async with (
                    aiohttp.ClientSession() as s,
                    s.post(
                        gw.url + "/v1/chat/completions", json=chat(max_tokens=8, stream=True)
                    ) as r,
                ):
                    assert r.status == 200
                    return await r.read()

            data = run(go())
            assert b'"code":"stream_broken"' in data
            bs = {b.name: b for b in gw.app.runtime.backends()}
            assert (bs["p0"].sent_total, bs["p1"].sent_total) == (1, 0)


def test_timeout_gives_504() -> None:
    with echo() as eb:
        cfg = {"pools": [pool("p", [eb.url + "/sleep/1000"])]}
        with gateway(cfg) as gw:

            async def go() -> None:
                async with aiohttp.ClientSession() as s:
                    t0 = time.perf_counter()
                    st, _, body = await post(
                        s,
                        gw.url + "/v1/chat/completions",
                        chat(),
                        {"x-gpubalance-timeout-s": "0.2"},
                    )
                    assert st == 504 and body["error"]["code"] == "timeout"
                    assert time.perf_counter() - t0 < 0.9

            run(go())


def test_active_health_check_ejects_and_readmits() -> None:
    with emulator() as a, emulator() as b:
        cfg = {"pools": [pool("p", [a.url, b.url])], "health": {**FAST_HEALTH, "eject_s": 0.1}}
        with gateway(cfg) as gw:
            bs = gw.app.runtime.backends()
            b.__exit__()  # stop backend 1
            deadline = time.monotonic() + 3
            while bs[1].state.healthy and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not bs[1].state.healthy and bs[0].state.healthy


def test_admin_drain_and_weights() -> None:
    with emulator() as a, emulator() as b:
        cfg = {
            "pools": [pool("p", [a.url, b.url], policy="weighted")],
            "auth": {"admin_key_sha256": hash_key("root")},
        }
        with gateway(cfg) as gw:

            async def go() -> None:
                adm = {"authorization": "Bearer root"}
                url = gw.url + "/v1/chat/completions"
                async with aiohttp.ClientSession() as s:
                    st, _, snap = await post(
                        s,
                        gw.url + "/admin/backend",
                        {"pool": "p", "backend": "p0", "draining": True},
                        adm,
                    )
                    assert st == 200 and snap["pools"]["p"]["backends"][0]["draining"] is True
                    got = [
                        (await post(s, url, chat()))[1]["x-gpubalance-backend"] for _ in range(4)
                    ]
                    assert got == ["p1"] * 4
                    await post(
                        s,
                        gw.url + "/admin/backend",
                        {"pool": "p", "backend": "p0", "draining": False, "weight": 3},
                        adm,
                    )
                    got = [
                        (await post(s, url, chat()))[1]["x-gpubalance-backend"] for _ in range(8)
                    ]
                    assert got.count("p0") == 6 and got.count("p1") == 2  # 3 : 1
                    st, _, _ = await post(
                        s, gw.url + "/admin/backend", {"pool": "p", "backend": "zz"}, adm
                    )
                    assert st == 400

            run(go())


def test_embedding_micro_batching_coalesces_and_splits() -> None:
    with emulator() as emu:
        cfg = {
            "pools": [pool("p", [emu.url])],
            "batching": {"enabled": True, "max_wait_s": 0.05, "max_batch_inputs": 64},
        }
        with gateway(cfg) as gw:

            async def go() -> None:
                async with aiohttp.ClientSession() as s:
                    texts = [f"text {i}" for i in range(8)]
                    direct = [
                        (await post(s, emu.url + "/v1/embeddings", {"model": "m", "input": t}))[2]
                        for t in texts
                    ]
                    before = emu.app.engine.completed
                    res = await asyncio.gather(
                        *(
                            post(s, gw.url + "/v1/embeddings", {"model": "m", "input": t})
                            for t in texts
                        )
                    )
                    for (st, _, body), d in zip(res, direct, strict=True):
                        assert st == 200 and body["data"][0]["index"] == 0
                        assert body["data"][0]["embedding"] == d["data"][0]["embedding"]
                    assert emu.app.engine.completed - before == 8  # 8 sequences ...
                    text = await (await s.get(gw.url + "/metrics")).text()
                    # ... sent in fewer upstream requests than 8
                    line = next(
                        x
                        for x in text.splitlines()
                        if x.startswith("gpubalance_embedding_batch_inputs_count")
                    )
                    assert float(line.split()[-1]) < 8

            run(go())


def test_scrape_fills_waiting_and_kv_usage() -> None:
    # 1 sequence at a time, 200 ms iterations: 2 requests in flight leave 1 waiting.
    with emulator(base_s=0.2, max_num_seqs=1, kv_tokens=4096) as emu:
        cfg = {"pools": [pool("p", [emu.url], scrape={"enabled": True, "interval_s": 0.05})]}
        with gateway(cfg) as gw:

            async def go() -> tuple[int, float]:
                async with aiohttp.ClientSession() as s:
                    tasks = [
                        asyncio.create_task(
                            post(s, emu.url + "/v1/chat/completions", chat(max_tokens=3))
                        )
                        for _ in range(2)
                    ]
                    await asyncio.sleep(0.3)
                    st = gw.app.runtime.pools["p"].backends[0].state
                    seen = (st.waiting, st.kv_usage)
                    await asyncio.gather(*tasks)
                    return seen

            waiting, kv = run(go())
            assert waiting == 1
            # one running sequence holds ceil(9 prompt tokens / 16) = 1 of 256 blocks
            assert kv == 1 / 256


def test_client_leaving_a_stream_releases_the_backend_at_once() -> None:
    # 40 tokens x 50 ms = 2 s of stream; the client reads one chunk and leaves.
    with emulator(base_s=0.05) as emu, gateway({"pools": [pool("p", [emu.url])]}) as gw:

        async def go() -> None:
            async with aiohttp.ClientSession() as s:
                r = await s.post(
                    gw.url + "/v1/chat/completions", json=chat(max_tokens=40, stream=True)
                )
                await r.content.readany()
                r.close()  # drop the connection mid-stream
            st = gw.app.runtime.pools["p"].backends[0].state
            deadline = time.monotonic() + 1
            while st.in_flight and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert st.in_flight == 0 and st.in_flight_cost_s == 0.0

        run(go())
