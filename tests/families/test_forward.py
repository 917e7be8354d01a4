"""Our causal forward against transformers' base architecture on every replica, and how each opens."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from decoder.block_causal_engine import BlockCausalEngine
from decoder.checkpoint import CheckpointError, load_model
from decoder.engine import Engine, EngineOptions
from decoder.engines import open_family_engine
from tests.families.replicas import REPLICAS, reference_model


@pytest.mark.parametrize("name", sorted(REPLICAS))
def test_causal_logits_match_transformers_base_architecture(replica, name):
    folder = replica(name)
    ours, ref = load_model(folder), reference_model(folder, REPLICAS[name]["base"])
    ids = torch.randint(0, 151643, (2, 37), generator=torch.Generator().manual_seed(0))
    ids[0, 5:9] = torch.arange(151643, 151647)  # special tokens too
    positions = torch.arange(37).expand(2, -1)
    with torch.no_grad():
        diff = (ours.logits(ours(ids, positions)) - ref(ids).logits).abs().max().item()
    assert diff <= 1e-4


@pytest.mark.parametrize(
    ("name", "engine_class", "mask_id", "chat"),
    [
        ("fast_dllm_v2_7b", BlockCausalEngine, 151665, True),
        ("sdar_4b_chat", BlockCausalEngine, 151669, True),
        ("qwen2_5_coder_1_5b", Engine, None, False),
        ("qwen2_5_coder_7b_instruct", Engine, None, True),
    ],
)
def test_each_family_opens_as_its_engine(replica, name, engine_class, mask_id, chat):
    folder = replica(name)
    assert ("model.safetensors.index.json" in {p.name for p in folder.iterdir()}) == bool(REPLICAS[name].get("sharded"))
    engine = open_family_engine(folder, EngineOptions(use_prefix_cache=False))
    assert type(engine) is engine_class
    assert engine.mask_token_id == mask_id
    assert (engine.tokenizer.chat_template is not None) == chat
    assert {151643, 151645} <= engine.stop_token_ids  # end of text, end of turn (generation_config)
    sp = engine.tokenizer.special
    assert (sp.end_of_text, sp.fim_prefix, sp.fim_middle, sp.fim_suffix) == (151643, 151659, 151660, 151661)
    if mask_id is not None:
        assert torch.isinf(engine.logit_bias[mask_id])


def test_tied_checkpoint_with_a_stored_head_and_rope_buffers_loads(replica, tmp_path):
    src = replica("qwen2_5_coder_1_5b")  # tie_word_embeddings: true, no lm_head.weight in the file
    state = load_file(str(src / "model.safetensors"))
    assert "lm_head.weight" not in state
    state["lm_head.weight"] = state["model.embed_tokens.weight"].clone()
    state["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(16)
    for f in ("config.json", "tokenizer.json"):
        (tmp_path / f).write_bytes((src / f).read_bytes())
    save_file(state, str(tmp_path / "model.safetensors"))
    model = load_model(tmp_path)
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_untied_checkpoint_without_head_and_missing_shard_fail_clearly(replica, tmp_path):
    src = replica("qwen2_5_coder_1_5b")
    raw = json.loads((src / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**raw, "tie_word_embeddings": False}))
    (tmp_path / "model.safetensors").write_bytes((src / "model.safetensors").read_bytes())
    with pytest.raises(CheckpointError, match=r"lm_head\.weight"):
        load_model(tmp_path)
    sharded = replica("sdar_4b_chat")
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in ("config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors"):
        (broken / f).write_bytes((sharded / f).read_bytes())
    with pytest.raises(CheckpointError, match="shards listed in the index are missing"):
        load_model(broken)
    for bad_index in ('{"weight_map": ["model-00001-of-00002.safetensors"]}', "[1]", '{"weight_map": {"x": 3}}'):
        (broken / "model.safetensors.index.json").write_text(bad_index)
        with pytest.raises(CheckpointError, match=r"cannot read .*index"):
            load_model(broken)


def test_unsupported_architecture_names_what_is_missing(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "vocab_size": 10})
    )
    with pytest.raises(CheckpointError) as info:
        load_model(tmp_path)
    text = str(info.value)
    assert "unsupported model_type 'gemma2'" in text and "Gemma2ForCausalLM" in text
    assert "qwen3" in text and "SDARForCausalLM" in text
