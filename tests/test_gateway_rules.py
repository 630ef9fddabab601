"""Pure routing pieces of the gateway: pool rules, admission caps, token estimate, scrape
parser, embedding split, memory cache bounds — values worked out by hand."""

from __future__ import annotations

import orjson
import pytest

from gpubalance.gateway.batcher import batch_inputs, split_embedding_response
from gpubalance.gateway.cache import MemoryCache, cache_key, is_deterministic
from gpubalance.gateway.config import GatewayConfig
from gpubalance.gateway.scrape import parse_vllm_metrics
from gpubalance.gateway.tokens import TokenEstimator
from gpubalance.route.admission import Admission, AdmissionCaps
from gpubalance.route.rules import PoolRule, PoolRules


def test_rules_first_match_by_model_size_header_tenant() -> None:
    rules = PoolRules(
        [
            PoolRule("vip", tenants=("acme",)),
            PoolRule("batch", header="x-priority", header_values=("low",)),
            PoolRule("long", models=("llama-*",), min_input_tokens=2001),
            PoolRule("short", models=("llama-*", "mistral")),
        ],
        default_pool="other",
    )
    assert rules.select("llama-3", 2000) == "short"  # 2000 is not > 2000
    assert rules.select("llama-3", 2001) == "long"
    assert rules.select("mistral", 5000) == "short"
    assert rules.select("mistral-x", 5) == "other"
    assert rules.select("llama-3", 10, {"x-priority": "low"}) == "batch"
    assert rules.select("llama-3", 10, {"x-priority": "high"}) == "short"
    assert rules.select("gpt", 10, None, tenant="acme") == "vip"
    assert rules.header_names == {"x-priority"}


def test_rule_max_input_is_inclusive_and_header_presence() -> None:
    r = PoolRule("p", max_input_tokens=100, header="X-Team")
    assert r.header == "x-team"
    assert r.matches("m", 100, {"x-team": "anything"})
    assert not r.matches("m", 101, {"x-team": "anything"})
    assert not r.matches("m", 10, {})


def test_admission_caps_and_retry_after() -> None:
    adm = Admission(AdmissionCaps(max_queued=2, max_in_flight_cost_s=10.0), capacity=2.0)
    assert adm.try_admit(3.0) is None
    assert adm.try_admit(3.0) is None
    # queue full: excess 1 request x mean 3 s / capacity 2 = 1.5 s -> ceil 2
    assert adm.try_admit(1.0) == 2.0
    adm.release(3.0)
    # 3 + 8 = 11 > 10: excess 1 s / 2 = 0.5 -> at least 1 s
    assert adm.try_admit(8.0) == 1.0
    assert adm.try_admit(7.0) is None  # 3 + 7 = 10 fits exactly
    adm.release(3.0)
    adm.release(7.0)
    assert (adm.queued, adm.in_flight_cost_s) == (0, 0.0)
    # an empty pool admits a request larger than the cost cap (it could never run otherwise)
    assert adm.try_admit(50.0) is None


def test_token_estimate_chars_over_four() -> None:
    est = TokenEstimator()
    chat = {
        "messages": [
            {"role": "user", "content": "x" * 10},
            {"role": "user", "content": [{"type": "text", "text": "y" * 8}]},
        ]
    }
    assert est.input_tokens("chat", chat) == (4 + 3) + (4 + 2)  # ceil(10/4)=3, 8/4=2
    assert est.input_tokens("completions", {"prompt": [1, 2, 3, 4, 5]}) == 5
    assert est.input_tokens("embeddings", {"input": ["abcd", "abcde"]}) == 1 + 2


def test_token_count_with_local_tokenizer_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = Tokenizer(WordLevel({"hello": 0, "world": 1, "[UNK]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    est = TokenEstimator.from_file(path)
    assert est.count_text("hello world hello zzz") == 4
    assert est.input_tokens("completions", {"prompt": "hello world"}) == 2


def test_scrape_parser_reads_vllm_gauges() -> None:
    text = """# HELP vllm:num_requests_waiting x
vllm:num_requests_waiting{model_name="a"} 3.0
vllm:num_requests_waiting{model_name="b"} 2.0
vllm:num_requests_running{model_name="a"} 7.0
vllm:gpu_cache_usage_perc{model_name="a"} 0.25
vllm:kv_cache_usage_perc{model_name="a"} 0.5 1700000000
other_metric 99
"""
    load = parse_vllm_metrics(text)
    assert (load.waiting, load.running, load.kv_usage) == (5, 7, 0.5)


def test_embedding_split_reindexes_and_shares_usage() -> None:
    upstream = {
        "data": [{"index": i, "embedding": [float(i)]} for i in (2, 0, 1)],
        "model": "e",
        "usage": {"prompt_tokens": 10},
    }
    parts = [orjson.loads(p) for p in split_embedding_response(upstream, [["aaaa"], ["b", "c"]])]
    assert [r["embedding"] for r in parts[0]["data"]] == [[0.0]]
    assert [(r["index"], r["embedding"]) for r in parts[1]["data"]] == [(0, [1.0]), (1, [2.0])]
    # chars 4 : 2 -> 10 * 4/6 = 6.67 -> 7 ; the rest 3
    assert [p["usage"]["prompt_tokens"] for p in parts] == [7, 3]
    with pytest.raises(ValueError):
        split_embedding_response(upstream, [["a"]])
    assert batch_inputs({"model": "e", "input": "x"}) == ["x"]
    assert batch_inputs({"model": "e", "input": [1, 2]}) is None
    assert batch_inputs({"model": "e", "input": "x", "user": "u"}) is None


def test_memory_cache_ttl_lru_and_byte_bounds() -> None:
    c = MemoryCache(ttl_s=10.0, max_entries=2, max_bytes=1000)
    c.put("a", b"1" * 100, now=0.0)
    c.put("b", b"2" * 100, now=0.0)
    assert c.get("a", now=1.0) == b"1" * 100  # a becomes most recent
    c.put("c", b"3" * 100, now=1.0)  # evicts b (least recent)
    assert c.get("b", now=1.0) is None
    assert c.get("a", now=10.5) is None  # expired at 10
    assert c.get("c", now=10.5) is not None  # expires at 11
    big = MemoryCache(ttl_s=10.0, max_entries=100, max_bytes=250)
    for k in "xyz":
        big.put(k, b"0" * 100, now=0.0)
    assert (len(big), big.bytes) == (2, 200)


def test_cache_key_ignores_key_order_and_determinism_rules() -> None:
    assert cache_key("chat", {"a": 1, "b": 2}) == cache_key("chat", {"b": 2, "a": 1})
    assert cache_key("chat", {"a": 1}) != cache_key("completions", {"a": 1})
    assert is_deterministic("embeddings", {})
    assert is_deterministic("chat", {"temperature": 0})
    assert not is_deterministic("chat", {})  # default temperature is 1
    assert not is_deterministic("chat", {"temperature": 0, "stream": True})
    assert not is_deterministic("chat", {"temperature": 0, "n": 2})


def test_config_rejects_unknown_pool_policy_and_bad_hash(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gpubalance.errors import UserInputError
    from gpubalance.gateway.config import load_gateway_config

    p = tmp_path / "gw.yaml"
    p.write_text(
        "pools:\n  - name: a\n    policy: least_costs\n"
        "    backends: [{name: x, url: 'http://h:1'}]\n"
    )
    with pytest.raises(UserInputError) as e:
        load_gateway_config(p)
    assert "gw.yaml:3" in str(e.value) and "least_cost" in str(e.value)
    p.write_text(
        "pools:\n  - name: a\n    backends: [{name: x, url: 'http://h:1'}]\nrules:\n  - {pool: b}\n"
    )
    with pytest.raises(UserInputError, match="unknown pool 'b'"):
        load_gateway_config(p)
    with pytest.raises(ValueError):
        GatewayConfig.model_validate(
            {"pools": [{"name": "a", "backends": [{"name": "x", "url": "h:1"}]}]}
        )
