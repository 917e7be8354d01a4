"""The block decoder gives identical tokens and commit order with the reference and the Triton kernels."""

from __future__ import annotations

import pytest

from tests.kernels.conftest import Interpreted
from tests.kernels.decode_helper import decode

PROMPT = "class Stack:\n    def push(self, item):\n        self."


@pytest.mark.parametrize(
    ("block_size", "threshold", "temperature", "seed"),
    [(4, 0.9, 0.0, None), (8, 0.3, 0.0, None), (8, 0.5, 0.8, 11)],
)
def test_block_decoder_same_tokens_with_reference_and_interpreted_kernels(
    interp_pool, tiny_model_dir, block_size, threshold, temperature, seed
):
    ref_tokens, ref_steps, ref_backend = decode(str(tiny_model_dir), PROMPT, block_size, threshold, temperature, seed)
    triton = Interpreted(interp_pool, "tests.kernels.decode_helper", {"PARAFILL_DENOISE": "triton"})
    tri_tokens, tri_steps, tri_backend = triton.decode(
        str(tiny_model_dir), PROMPT, block_size, threshold, temperature, seed
    )
    assert (ref_backend, tri_backend) == ("reference", "triton")
    assert len(ref_tokens) == 16
    assert tri_tokens == ref_tokens
    assert tri_steps == ref_steps
