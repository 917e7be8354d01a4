"""Tiny checkpoints for tests: random weights saved by transformers itself, with a small real tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|mask|>",
    "<|explain_code|>",
    "<|explain_text|>",
]

SAMPLE_CODE = '''
def add(a, b):
    """Return the sum of a and b."""
    return a + b


class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)

    def pop(self):
        return self.items.pop()


for i in range(10):
    print(i, add(i, i))
'''


def train_tiny_tokenizer(vocab_size: int = 384) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([SAMPLE_CODE] * 20, trainer=trainer)
    return tok


def write_tiny_qwen2(
    folder: Path, *, seed: int = 0, tie: bool = False, with_mask: bool = True, endless: bool = False, **overrides
) -> Path:
    """Write config.json + model.safetensors (via transformers' Qwen2ForCausalLM) + tokenizer.json.

    `endless`: a model that never ends an answer by itself (see `_silence_endings`)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = train_tiny_tokenizer()
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    params = dict(
        vocab_size=tok.get_vocab_size(),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=tie,
        eos_token_id=tok.token_to_id("<|endoftext|>"),
        bos_token_id=None,
    )
    params.update(overrides)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(Qwen2Config(**params))
    # Random init is near-uniform; scale the head up so greedy decoding is decisive and varied.
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
        if endless:
            _silence_endings(model, tok)
    model.save_pretrained(str(folder), safe_serialization=True)
    if with_mask:
        cfg_path = folder / "config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["mask_token_id"] = tok.token_to_id("<|mask|>")
        cfg_path.write_text(json.dumps(cfg, indent=2))
    return folder


def _silence_endings(model: torch.nn.Module, tok: Tokenizer) -> None:
    """Zero the output rows of the special tokens and of every token with a quote character in it: their logit
    is then exactly 0 while the largest of the other few hundred random logits is positive, so greedy decoding
    never picks one. Without end-of-text and without closing docstring quotes, an explanation runs until its
    token limit (or a loop, where the loop rule is on): the VS Code test clicks Cancel on one mid-stream."""
    silenced = [i for text, i in tok.get_vocab().items() if text in SPECIAL_TOKENS or '"' in text or "'" in text]
    model.get_output_embeddings().weight[silenced] = 0.0
