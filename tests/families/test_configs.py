"""config.json of each published family -> ModelConfig, and clear refusals for what we cannot run."""

from __future__ import annotations

import copy

import pytest

from decoder.config import ModelConfig, ModelConfigError
from decoder.families import family_of
from tests.families.replicas import (
    FAST_DLLM_V2_1_5B,
    FAST_DLLM_V2_7B,
    QWEN25_CODER_1_5B,
    QWEN25_CODER_7B_INSTRUCT_T5,
    SDAR_1_7B_CHAT,
    SDAR_4B_CHAT,
)


def test_fast_dllm_v2_reads_as_qwen2_with_its_block_settings():
    cfg = ModelConfig.from_dict(FAST_DLLM_V2_7B)
    assert (cfg.model_type, cfg.architecture) == ("Fast_dLLM_Qwen", "qwen2")
    assert cfg.attention_bias and not cfg.attention_out_bias and not cfg.qk_norm
    assert cfg.head_dim == 3584 // 28 and cfg.num_key_value_heads == 4
    assert cfg.rope_theta == 1e6 and not cfg.tie_word_embeddings and cfg.vocab_size == 152064
    fam = family_of(cfg)
    assert fam.name == "fast-dllm-v2" and fam.kv_layout == "block_causal" and fam.token_shift
    assert (fam.block_size_for(cfg.extra), fam.sub_block_size, fam.mask_token_id) == (32, 8, 151665)
    assert ModelConfig.from_dict({**FAST_DLLM_V2_7B, "bd_size": 16}).extra["bd_size"] == 16
    assert family_of(ModelConfig.from_dict(FAST_DLLM_V2_1_5B)).name == "fast-dllm-v2"
    assert ModelConfig.from_dict(FAST_DLLM_V2_1_5B).tie_word_embeddings


def test_sdar_reads_as_qwen3_with_qk_norm_and_explicit_head_dim():
    cfg = ModelConfig.from_dict(SDAR_4B_CHAT)
    assert (cfg.model_type, cfg.architecture) == ("sdar", "qwen3")
    assert cfg.qk_norm and not cfg.attention_bias and not cfg.attention_out_bias
    assert cfg.head_dim == 128 and cfg.hidden_size == 2560  # 32 heads x 128 = 4096 != hidden
    fam = family_of(cfg)
    assert fam.name == "sdar" and fam.kv_layout == "block_causal" and not fam.token_shift
    assert fam.block_size_for(cfg.extra) == 4 and fam.mask_token_id == 151669
    assert fam.block_size_for({"block_size": 8}) == 8  # variants that write block_size
    assert ModelConfig.from_dict({**SDAR_4B_CHAT, "attention_bias": True}).attention_out_bias
    assert ModelConfig.from_dict(SDAR_1_7B_CHAT).tie_word_embeddings


def test_qwen25_coder_layouts_old_and_transformers5():
    old = ModelConfig.from_dict(QWEN25_CODER_1_5B)  # rope_theta at top level, "rope_scaling": null
    new = ModelConfig.from_dict(QWEN25_CODER_7B_INSTRUCT_T5)  # rope_parameters, dtype, layer_types
    assert old.rope_theta == new.rope_theta == 1e6
    assert old.architecture == new.architecture == "qwen2" and old.attention_bias
    assert family_of(old).name == family_of(new).name == "causal"
    assert family_of(old).mode_for("inline", has_mask=False) == "ar"
    assert family_of(old).mode_for("inline", has_mask=True) == "block"


def test_qwen3_head_dim_defaults_like_transformers():
    raw = {k: v for k, v in SDAR_4B_CHAT.items() if k != "head_dim"}
    assert ModelConfig.from_dict({**raw, "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}).head_dim == 128
    qwen2 = {k: v for k, v in QWEN25_CODER_1_5B.items()}
    assert ModelConfig.from_dict(qwen2).head_dim == 1536 // 12


def test_base_class_only_or_architectures_only_are_enough():
    no_type = {k: v for k, v in SDAR_4B_CHAT.items() if k != "model_type"}
    assert ModelConfig.from_dict(no_type).architecture == "qwen3"
    plain = {**QWEN25_CODER_1_5B, "model_type": "", "architectures": ["Qwen3ForCausalLM"]}
    assert ModelConfig.from_dict(plain).architecture == "qwen3"


def test_to_hf_dict_names_the_base_architecture():
    out = ModelConfig.from_dict(SDAR_4B_CHAT).to_hf_dict()
    assert out["model_type"] == "qwen3" and out["architectures"] == ["Qwen3ForCausalLM"]
    assert "auto_map" not in out and out["head_dim"] == 128 and out["attention_bias"] is False
    assert out["rope_parameters"] == {"rope_type": "default", "rope_theta": 1e6}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"use_sliding_window": True, "max_window_layers": 21, "sliding_window": 4096}, "sliding-window"),
        ({"layer_types": ["full_attention"] * 27 + ["sliding_attention"], "sliding_window": 4096}, "sliding-window"),
        ({"rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}, "'yarn'"),
        ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6}}, "'linear'"),
        ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
        ({"num_key_value_heads": 5}, "multiple of num_key_value_heads"),
        ({"model_type": "mistral", "architectures": ["MistralForCausalLM"]}, "unsupported model_type 'mistral'"),
        ({"model_type": "sdar_moe", "architectures": ["SDARMoeForCausalLM"]}, "mixture-of-experts"),
    ],
)
def test_refusals_name_the_field(change, message):
    raw = copy.deepcopy(QWEN25_CODER_1_5B)
    raw.update(change)
    with pytest.raises(ModelConfigError, match=message) as info:
        ModelConfig.from_dict(raw)
    if "unsupported model_type" in message or "mixture" in message:
        assert "Fast_dLLM_QwenForCausalLM" in str(info.value) and "sdar" in str(info.value)


def test_inert_sliding_window_fields_are_accepted():
    # Every Qwen2/Qwen3 config carries these; they only matter when use_sliding_window is on.
    ModelConfig.from_dict({**QWEN25_CODER_1_5B, "use_sliding_window": False, "sliding_window": 4096})
    ModelConfig.from_dict({**QWEN25_CODER_1_5B, "use_sliding_window": True, "max_window_layers": 28})
    ModelConfig.from_dict(
        {**QWEN25_CODER_1_5B, "use_sliding_window": True, "max_window_layers": 3, "sliding_window": 32768}
    )  # the window covers max_position_embeddings
    ModelConfig.from_dict({**QWEN25_CODER_1_5B, "use_sliding_window": True, "sliding_window": None})
