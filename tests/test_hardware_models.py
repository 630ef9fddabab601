"""Model catalog and Hugging Face config.json loading; parameter counts by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpubalance.errors import UserInputError
from gpubalance.hardware import get_model, load_hf_config, load_model_catalog, resolve_model

REQUIRED = [
    "Llama-3.1-8B",
    "Llama-3.1-70B",
    "Qwen2.5-7B",
    "Qwen2.5-14B",
    "Qwen2.5-32B",
    "Qwen2.5-72B",
    "Mistral-7B",
    "Mixtral-8x7B",
]

# Published totals as stated on the model cards, in billions (independent of our formula).
PUBLISHED_B = {
    "Llama-3.1-8B": 8.03,
    "Llama-3.1-70B": 70.6,
    "Qwen2.5-7B": 7.61,
    "Qwen2.5-14B": 14.7,
    "Qwen2.5-32B": 32.5,
    "Qwen2.5-72B": 72.7,
    "Mistral-7B": 7.25,
    "Mixtral-8x7B": 46.7,
}


def test_catalog_has_required_models() -> None:
    cat = load_model_catalog()
    for name in REQUIRED:
        assert cat.get(name).name == name


def test_llama_8b_parameters_from_architecture_by_hand() -> None:
    spec = get_model("llama-3.1-8b")
    c = spec.parameter_counts()
    embed = 128256 * 4096  # 525,336,576
    per_layer_attn = 4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096  # q, k, v, o
    per_layer_mlp = 3 * 4096 * 14336
    assert c.embedding == embed == c.lm_head
    assert c.attention == 32 * per_layer_attn
    assert c.mlp_dense == 32 * per_layer_mlp
    assert c.norms == 65 * 4096
    assert c.total == 8_030_261_248 == spec.total_parameters


@pytest.mark.parametrize("name", list(PUBLISHED_B))
def test_computed_totals_match_published_model_cards(name: str) -> None:
    computed = get_model(name).parameter_counts().total / 1e9
    # model cards round: 32.5B for Qwen2.5-32B (32.76B with embeddings) is the loosest
    assert computed == pytest.approx(PUBLISHED_B[name], rel=0.01)


def test_mixtral_active_versus_total() -> None:
    m = get_model("Mixtral-8x7B")
    assert m.is_moe
    c = m.parameter_counts()
    expert = 3 * 4096 * 14336
    assert c.experts == 32 * 8 * expert
    assert c.active == c.total - 32 * 6 * expert  # 2 of 8 experts per token
    assert m.active_params == 12_879_925_248
    assert m.active_params / 1e9 == pytest.approx(12.9, rel=0.01)  # model card: 12.9B active


def test_tied_embeddings_are_counted_once() -> None:
    m = get_model("Llama-3.2-1B")
    c = m.parameter_counts()
    assert m.tied_embeddings and c.lm_head == 0
    assert c.total == 1_235_814_400  # model card: 1.24B


def test_kv_bytes_per_token_uses_kv_heads() -> None:
    assert get_model("llama-3.1-8b").kv_bytes_per_token(2) == 131_072  # 2*32*8*128*2
    assert get_model("llama-3.1-70b").kv_bytes_per_token(2) == 327_680  # 2*80*8*128*2
    assert get_model("qwen2.5-7b").kv_bytes_per_token(1) == 28_672  # 2*28*4*128*1


def test_unknown_model_suggests_nearest() -> None:
    with pytest.raises(UserInputError, match=re.escape("did you mean 'Llama-3.1-8B'")):
        get_model("lama-3.1-8b")


def _llama8b_config() -> dict[str, object]:
    return {
        "_name_or_path": "meta-llama/Llama-3.1-8B-Instruct",
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "max_position_embeddings": 131072,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
        "vocab_size": 128256,
        "torch_dtype": "bfloat16",
    }


def test_hf_config_from_file_and_folder(tmp_path: Path) -> None:
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_llama8b_config(), indent=2))
    spec = load_hf_config(folder)
    assert spec.name == "Llama-3.1-8B-Instruct"
    assert spec.head_dim == 128  # hidden / heads when absent
    assert spec.total_parameters == 8_030_261_248
    assert resolve_model(str(folder / "config.json")).total_parameters == 8_030_261_248
    assert resolve_model(str(folder)).name == "Llama-3.1-8B-Instruct"
    assert resolve_model("meta-llama/Llama-3.1-8B").name == "Llama-3.1-8B"  # alias, no path


def test_hf_config_moe_and_gqa_defaults(tmp_path: Path) -> None:
    cfg = {
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "vocab_size": 32000,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    }
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    spec = load_hf_config(p, name="mix")
    assert spec.num_kv_heads == 32  # no num_key_value_heads: multi-head attention
    assert spec.moe is not None and spec.moe.num_experts == 8
    # same architecture as Mixtral-8x7B except full KV heads: 3 extra K/V head groups
    extra_kv = 32 * 2 * 4096 * (32 - 8) * 128
    assert spec.total_parameters == 46_702_792_704 + extra_kv


def test_hf_config_missing_or_bad_field_names_it(tmp_path: Path) -> None:
    cfg = _llama8b_config()
    del cfg["num_hidden_layers"]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg, indent=2))
    with pytest.raises(UserInputError) as exc:
        load_hf_config(p)
    assert exc.value.field == "num_hidden_layers" and exc.value.file == str(p)
    cfg = _llama8b_config()
    cfg["num_key_value_heads"] = "eight"
    p.write_text(json.dumps(cfg, indent=2))
    with pytest.raises(UserInputError) as exc:
        load_hf_config(p)
    assert exc.value.field == "num_key_value_heads"
    assert exc.value.line == 12  # its line in the indented JSON ("architectures" spans 3)


def test_hf_config_not_found(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="file not found"):
        load_hf_config(tmp_path / "nope" / "config.json")


def test_user_model_file_adds_and_overrides(tmp_path: Path) -> None:
    p = tmp_path / "models.yaml"
    p.write_text(
        "models:\n"
        "  llama-3.1-8b:\n"
        "    max_context_tokens: 8192\n"
        "  Tiny:\n"
        "    num_layers: 2\n"
        "    hidden_size: 64\n"
        "    num_attention_heads: 4\n"
        "    num_kv_heads: 2\n"
        "    intermediate_size: 128\n"
        "    vocab_size: 1000\n"
        "    max_context_tokens: 512\n"
    )
    cat = load_model_catalog(p)
    assert cat.get("Llama-3.1-8B").max_context_tokens == 8192
    tiny = cat.get("tiny")
    # by hand: embed+head 2*1000*64, attn per layer 64*64*2 + 2*64*32, mlp 3*64*128, norms 5*64
    assert tiny.total_parameters == 2 * 64000 + 2 * (8192 + 4096 + 24576) + 320
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "models:\n  Tiny2:\n    num_layers: 2\n    hidden_size: 64\n"
        "    num_attention_heads: 6\n    num_kv_heads: 4\n    intermediate_size: 8\n"
        "    vocab_size: 10\n    max_context_tokens: 8\n"
    )
    with pytest.raises(UserInputError, match="multiple of num_kv_heads"):
        load_model_catalog(bad)
