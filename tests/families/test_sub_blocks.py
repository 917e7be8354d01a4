"""Sub-block decoding in the causal block decoder (a parameter; off by default)."""

from __future__ import annotations

import pytest

from decoder.engine import Engine, EngineOptions
from decoder.generation import GenerationParams
from decoder.router import generate

PROMPT = "class Stack:\n    def push(self, item):\n        self."


@pytest.fixture(scope="module")
def engine(tiny_model_dir) -> Engine:
    return Engine.from_folder(tiny_model_dir, EngineOptions(use_prefix_cache=False))


def test_sub_blocks_commit_left_to_right(engine):
    ids = engine.tokenizer.encode(PROMPT)
    params = GenerationParams(max_new_tokens=32, block_size=16, sub_block_size=4, threshold=0.3, fallback_window=4)
    res = generate(engine, ids, "block", params)
    assert len(res.token_ids) == 32
    where = [(i // 16, i % 16 // 4, step) for i, step in enumerate(res.commit_steps)]
    for block_a, sub_a, step_a in where:
        for block_b, sub_b, step_b in where:
            if block_a == block_b and sub_a < sub_b:
                assert step_a <= step_b
    # A sub-block as large as the block is the plain decoder.
    whole = GenerationParams(max_new_tokens=32, block_size=16, sub_block_size=16, threshold=0.3, fallback_window=4)
    plain = GenerationParams(max_new_tokens=32, block_size=16, threshold=0.3, fallback_window=4)
    assert generate(engine, ids, "block", whole).token_ids == generate(engine, ids, "block", plain).token_ids


def test_sub_block_size_is_validated():
    with pytest.raises(ValueError, match="sub_block_size"):
        GenerationParams(block_size=8, sub_block_size=16).validate()
