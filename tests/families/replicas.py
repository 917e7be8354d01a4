"""Random-weight replicas of published checkpoints, written to a temp folder by the tests.

Each replica keeps its family's published config.json (field names and values) except the size: 2 layers,
hidden 64, 4 attention heads, 2 KV heads, intermediate 128 (and head_dim 32 where the config gives one;
layer_types cut to 2 entries). vocab_size stays as published, and the tokenizer places every special token
on its published id: a small byte-level BPE trained on sample code, padded with never-produced filler
tokens up to 151643, then the Qwen special tokens in their published order.

Sources (read through the search tools; no file copied): the config.json pages of
Efficient-Large-Model/Fast_dLLM_v2_7B (head of the file up to num_key_value_heads / pad_token_id) and
JetLM/SDAR-4B-Chat (whole file); Fast-dLLM v2's modeling code (mask id 151665 "|<MASK>|", bd_size 32,
small_block_size 8, threshold 0.9, stop <|im_end|> 151645); SDAR's README and generate.py (mask
<|MASK|> 151669, block_length 4, denoising_steps 4, dynamic threshold 0.9); Qwen2.5-Coder config.json pages.
Not found, so built from the closest documented facts: the tail of Fast_dLLM_v2_7B's config.json (taken
from its base, Qwen2.5-7B-Instruct: rms_norm_eps, rope_theta 1e6, sliding_window 131072, vocab 152064),
Fast_dLLM_v2_1.5B's config.json (Qwen2.5-1.5B-Instruct's fields plus the Fast-dLLM fields of the 7B),
SDAR-1.7B-Chat's config.json (SDAR-4B-Chat's fields with Qwen3-1.7B's sizes, tied embeddings). The chat
templates are our own minimal ChatML templates, not the published ones.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer

from tests.tiny_models import train_tiny_tokenizer

FIRST_SPECIAL_ID = 151643

# (content, special) in id order from 151643: the Qwen2.5 added tokens.
QWEN25_SPECIALS = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
]
QWEN3_EXTRA = [("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False)]

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

FAST_DLLM_V2_7B = {
    "architectures": ["Fast_dLLM_QwenForCausalLM"],
    "attention_dropout": 0.0,
    "auto_map": {
        "AutoConfig": "configuration.Fast_dLLM_QwenConfig",
        "AutoModel": "modeling.Fast_dLLM_QwenModel",
        "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM",
    },
    "bd_size": 32,
    "bos_token_id": 151643,
    "conplemenrary_mask": True,
    "eos_token_id": 151645,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "layer_types": ["full_attention"] * 28,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "Fast_dLLM_Qwen",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "pad_token_id": 151645,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.53.1",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 152064,
}

FAST_DLLM_V2_1_5B = {
    **FAST_DLLM_V2_7B,
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "max_window_layers": 21,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "sliding_window": 32768,
    "tie_word_embeddings": True,
    "vocab_size": 151936,
}

SDAR_4B_CHAT = {
    "architectures": ["SDARForCausalLM"],
    "auto_map": {
        "AutoConfig": "configuration_sdar.SDARConfig",
        "AutoModel": "modeling_sdar.SDARModel",
        "AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM",
    },
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attn_implementation": "flex_attention",
    "bos_token_id": 151643,
    "debug": False,
    "eos_token_id": 151643,
    "ep_size": 1,
    "fuse_cross_entropy": True,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2560,
    "initializer_range": 0.02,
    "intermediate_size": 9728,
    "max_position_embeddings": 32768,
    "max_window_layers": 36,
    "micro_forward": False,
    "model_type": "sdar",
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "skip_checkpoint": False,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.52.4",
    "use_cache": False,
    "use_deepep": False,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

SDAR_1_7B_CHAT = {
    **SDAR_4B_CHAT,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "max_window_layers": 28,
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "tie_word_embeddings": True,
}

# Qwen2.5-Coder base (older layout: top-level rope_theta, "rope_scaling": null, torch_dtype).
QWEN25_CODER_1_5B = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "hidden_act": "silu",
    "hidden_size": 1536,
    "initializer_range": 0.02,
    "intermediate_size": 8960,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 12,
    "num_hidden_layers": 28,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

# Qwen2.5-Coder-7B-Instruct, re-saved by transformers 5 (rope_parameters, dtype, layer_types).
QWEN25_CODER_7B_INSTRUCT_T5 = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "dtype": "bfloat16",
    "eos_token_id": 151645,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "layer_types": ["full_attention"] * 28,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
    "sliding_window": None,
    "tie_word_embeddings": False,
    "transformers_version": "5.0.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 152064,
}

QWEN_GENERATION_CONFIG = {"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643}

# name -> (published config, base architecture, specials, extra tokenizer_config, chat template file?, shards?)
REPLICAS: dict[str, dict] = {
    "fast_dllm_v2_7b": dict(
        config=FAST_DLLM_V2_7B,
        base="qwen2",
        specials=[*QWEN25_SPECIALS, ("|<MASK>|", True)],
        tokenizer_config={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "chat_template": CHATML},
        sharded=True,
    ),
    "fast_dllm_v2_1_5b": dict(
        config=FAST_DLLM_V2_1_5B,
        base="qwen2",
        specials=[*QWEN25_SPECIALS, ("|<MASK>|", True)],
        tokenizer_config={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "chat_template": CHATML},
    ),
    "sdar_4b_chat": dict(
        config=SDAR_4B_CHAT,
        base="qwen3",
        specials=[*QWEN25_SPECIALS, *QWEN3_EXTRA, ("<|MASK|>", True)],
        tokenizer_config={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "mask_token": "<|MASK|>"},
        chat_template_file=CHATML,
        sharded=True,
    ),
    "sdar_1_7b_chat": dict(
        config=SDAR_1_7B_CHAT,
        base="qwen3",
        specials=[*QWEN25_SPECIALS, *QWEN3_EXTRA, ("<|MASK|>", True)],
        tokenizer_config={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "mask_token": "<|MASK|>"},
        chat_template_file=CHATML,
    ),
    "qwen2_5_coder_1_5b": dict(
        config=QWEN25_CODER_1_5B,
        base="qwen2",
        specials=QWEN25_SPECIALS,
        tokenizer_config={"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"},
    ),
    "qwen2_5_coder_7b_instruct": dict(
        config=QWEN25_CODER_7B_INSTRUCT_T5,
        base="qwen2",
        specials=QWEN25_SPECIALS,
        tokenizer_config={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "chat_template": CHATML},
    ),
}

SMALL = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4}


def shrink(published: dict) -> dict:
    """The published config with a small size; every other field and value kept."""
    raw = copy.deepcopy(published)
    raw.update(SMALL)
    raw["num_key_value_heads"] = 2
    if raw.get("head_dim") is not None:
        raw["head_dim"] = 32  # explicit, and != hidden / heads: the projections are wider than the model
    if raw.get("layer_types") is not None:
        raw["layer_types"] = raw["layer_types"][: SMALL["num_hidden_layers"]]
    return raw


@cache
def _padded_bpe_json() -> str:
    """A small trained byte-level BPE whose vocabulary is padded to FIRST_SPECIAL_ID entries."""
    raw = json.loads(train_tiny_tokenizer().to_str())
    raw["added_tokens"] = []
    learned = {k: v for k, v in raw["model"]["vocab"].items() if not k.startswith("<|")}
    vocab = {token: i for i, token in enumerate(sorted(learned, key=learned.get))}
    for i in range(FIRST_SPECIAL_ID - len(vocab)):
        vocab[f"<filler_{i}>"] = len(vocab)
    raw["model"]["vocab"] = vocab
    return json.dumps(raw)


def build_tokenizer(specials: list[tuple[str, bool]]) -> Tokenizer:
    tok = Tokenizer.from_str(_padded_bpe_json())
    for content, special in specials:
        added = AddedToken(content, special=special, normalized=False)
        (tok.add_special_tokens if special else tok.add_tokens)([added])
    return tok


def reference_config(raw: dict, base: str):
    """transformers' own config for the base architecture, built from the raw published-style fields."""
    from transformers import LlamaConfig, Qwen2Config, Qwen3Config

    drop = ("model_type", "architectures", "auto_map", "attn_implementation", "torch_dtype", "dtype")
    kwargs = {k: v for k, v in raw.items() if k not in drop}
    cls = {"qwen2": Qwen2Config, "qwen3": Qwen3Config, "llama": LlamaConfig}[base]
    return cls(**kwargs)


def reference_model(folder: Path, base: str):
    """transformers' Qwen2ForCausalLM / Qwen3ForCausalLM on the replica's weights, fp32, eval mode."""
    from transformers import LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM

    raw = json.loads((folder / "config.json").read_text())
    cls = {"qwen2": Qwen2ForCausalLM, "qwen3": Qwen3ForCausalLM, "llama": LlamaForCausalLM}[base]
    return cls.from_pretrained(str(folder), config=reference_config(raw, base), dtype=torch.float32).eval()


def learned_vocab_size() -> int:
    """How many ids the small BPE actually produces (the rest up to FIRST_SPECIAL_ID are fillers)."""
    return sum(1 for token in json.loads(_padded_bpe_json())["model"]["vocab"] if not token.startswith("<filler_"))


def write_replica(name: str, folder: Path, seed: int = 0, head_scale: float = 12.0) -> Path:
    """config.json (published layout), safetensors (sharded for some), tokenizer files, generation config."""
    from transformers import LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM

    spec = REPLICAS[name]
    raw = shrink(spec["config"])
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    cls = {"qwen2": Qwen2ForCausalLM, "qwen3": Qwen3ForCausalLM, "llama": LlamaForCausalLM}[spec["base"]]
    model = cls(reference_config(raw, spec["base"]))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
        # Sharp output distributions over the tokens the small BPE produces, so that some positions pass a
        # 0.9 threshold (random weights are otherwise near-uniform over 150k tokens); fillers get ~0 logits.
        learned = learned_vocab_size()
        model.lm_head.weight[:learned].mul_(head_scale)
        model.lm_head.weight[learned:FIRST_SPECIAL_ID].mul_(0.01)
    model = model.to(torch.bfloat16)
    model.save_pretrained(str(folder), max_shard_size="20MB" if spec.get("sharded") else "2GB")
    (folder / "config.json").write_text(json.dumps(raw, indent=2))
    (folder / "generation_config.json").write_text(json.dumps(QWEN_GENERATION_CONFIG, indent=2))
    tok = build_tokenizer(spec["specials"])
    tok.save(str(folder / "tokenizer.json"))
    added = {
        str(FIRST_SPECIAL_ID + i): {"content": c, "special": s, "lstrip": False, "rstrip": False, "normalized": False}
        for i, (c, s) in enumerate(spec["specials"])
    }
    tok_cfg = {"added_tokens_decoder": added, "tokenizer_class": "Qwen2Tokenizer", **spec["tokenizer_config"]}
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2))
    if spec.get("chat_template_file"):
        (folder / "chat_template.jinja").write_text(spec["chat_template_file"])
    return folder
