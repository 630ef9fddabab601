"""Response cache: in memory, and shared by two gateway instances through a real Redis."""

from __future__ import annotations

import aiohttp

from gateway_testkit import chat, emulator, gateway, post, run


def _cfg(url: str, **cache: object) -> dict[str, object]:
    return {
        "pools": [{"name": "p", "models": ["m"], "backends": [{"name": "a", "url": url}]}],
        "cache": {"enabled": True, **cache},
    }


def test_memory_cache_serves_deterministic_requests_only() -> None:
    with emulator() as emu, gateway(_cfg(emu.url)) as gw:

        async def go() -> None:
            url = gw.url + "/v1/chat/completions"
            async with aiohttp.ClientSession() as s:
                st, h1, b1 = await post(s, url, chat(temperature=0))
                n = emu.app.engine.completed
                st2, h2, b2 = await post(s, url, dict(reversed(chat(temperature=0).items())))
                assert (st, st2) == (200, 200) and b1 == b2
                assert "x-gpubalance-cache" not in h1 and h2["x-gpubalance-cache"] == "hit"
                assert emu.app.engine.completed == n  # backend not called again
                await post(s, url, chat(temperature=0.7))
                await post(s, url, chat(temperature=0.7))
                assert emu.app.engine.completed == n + 2  # sampled requests are not cached
                e1 = await post(s, gw.url + "/v1/embeddings", {"model": "m", "input": "z"})
                e2 = await post(s, gw.url + "/v1/embeddings", {"model": "m", "input": "z"})
                assert e2[1]["x-gpubalance-cache"] == "hit" and e1[2] == e2[2]
                text = await (await s.get(gw.url + "/metrics")).text()
                assert 'gpubalance_cache_lookups_total{endpoint="chat",result="hit"} 1.0' in text
                assert 'gpubalance_cache_lookups_total{endpoint="chat",result="miss"} 1.0' in text

        run(go())


def test_two_gateways_share_a_hit_through_redis(redis_url: str) -> None:
    cfg_kw = {"redis_url": redis_url, "namespace": "gpb-test-share:"}
    with (
        emulator() as emu,
        gateway(_cfg(emu.url, **cfg_kw)) as g1,
        gateway(_cfg(emu.url, **cfg_kw)) as g2,
    ):

        async def go() -> None:
            body = chat(temperature=0, max_tokens=3)
            async with aiohttp.ClientSession() as s:
                st1, h1, b1 = await post(s, g1.url + "/v1/chat/completions", body)
                n = emu.app.engine.completed
                st2, h2, b2 = await post(s, g2.url + "/v1/chat/completions", body)
                assert (st1, st2) == (200, 200) and b1 == b2
                assert "x-gpubalance-cache" not in h1 and h2["x-gpubalance-cache"] == "hit"
                assert emu.app.engine.completed == n

        run(go())
        assert g2.app.cache.redis_errors == 0
