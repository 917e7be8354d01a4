"""Model sizes by name. All are Qwen2-style (q/k/v bias, GQA, SwiGLU, RoPE) with tied embeddings:
for a small model with an 8k vocabulary an untied head would be a third of the parameters."""

from __future__ import annotations

from decoder.config import ModelConfig
from decoder.training.tokenizer_train import SPECIAL_IDS

SIZES: dict[str, dict[str, int]] = {
    # name: hidden, layers, heads, kv heads, intermediate
    "tiny": dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128
    ),
    "5m": dict(
        hidden_size=256, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2, intermediate_size=704
    ),
    "8m": dict(
        hidden_size=256, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2, intermediate_size=768
    ),
    "20m": dict(
        hidden_size=384, num_hidden_layers=10, num_attention_heads=6, num_key_value_heads=2, intermediate_size=1024
    ),
    "40m": dict(
        hidden_size=512, num_hidden_layers=12, num_attention_heads=8, num_key_value_heads=4, intermediate_size=1408
    ),
    "60m": dict(
        hidden_size=640, num_hidden_layers=12, num_attention_heads=10, num_key_value_heads=2, intermediate_size=1728
    ),
}


def model_config(size: str, vocab_size: int, max_positions: int = 4096) -> ModelConfig:
    if size not in SIZES:
        raise ValueError(f"unknown model size {size!r}; choose from {', '.join(SIZES)}")
    return ModelConfig(
        vocab_size=vocab_size,
        max_position_embeddings=max_positions,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        mask_token_id=SPECIAL_IDS["<|mask|>"],
        eos_token_id=SPECIAL_IDS["<|endoftext|>"],
        bos_token_id=None,
        model_type="qwen2",
        **SIZES[size],
    )
