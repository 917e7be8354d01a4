"""The PyTorch reference (the CPU production path and the kernels' oracle) against float64."""

from __future__ import annotations

import pytest
import torch

from parafill_kernels import reference
from tests.kernels.oracle import check_step, random_logits


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("temperature", [0.0, 0.6])
def test_reference_matches_float64(dtype: torch.dtype, temperature: float) -> None:
    gen = torch.Generator().manual_seed(0)
    logits = random_logits(8, 1000, dtype, gen)
    logits[3, :500] = float("-inf")
    logits[6] = float("-inf")
    masked = torch.tensor([1, 1, 1, 0, 1, 0, 1, 1], dtype=torch.bool)
    out = reference.denoise_step(logits, masked, 0.5, 4, None, temperature)
    check_step(out, logits, masked, 0.5, 4, None, temperature)
    assert out[1][6] == 0.0 and out[0][6] == 0


def test_temperature_scaling_is_a_reciprocal_multiply() -> None:
    # x * fp32(1/T), the same on every device and in the kernels (x / T on CPU differs in the last bit).
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 4096, generator=gen)
    t = 0.7
    tokens, _, _ = reference.denoise_step(logits, torch.ones(2, dtype=torch.bool), 0.5, None, None, t, 5)
    scaled = logits * torch.tensor(1.0 / t, dtype=torch.float32)
    noisy = scaled + reference.gumbel_noise((2, 4096), 5, logits.device)
    assert torch.equal(tokens, noisy.argmax(dim=-1))


def test_gumbel_noise_known_values() -> None:
    # Pin the hash: the Triton kernels reproduce these bits, so a change here must change them too.
    noise = reference.gumbel_noise((4,), 123, torch.device("cpu"))
    again = reference.gumbel_noise((2, 2), 123, torch.device("cpu"))
    assert torch.equal(noise.view(2, 2), again)
    assert noise.tolist() == pytest.approx(PINNED, abs=0.0)


def test_zero_rows() -> None:
    tokens, conf, commit = reference.denoise_step(torch.zeros(0, 5), torch.zeros(0, dtype=torch.bool), 0.5)
    assert tokens.shape == conf.shape == commit.shape == (0,)


# Recorded from the hash as of this commit: a change detector, not an independent oracle.
PINNED = [-0.2237565964460373, -1.0352048873901367, 2.1713128089904785, 0.7177613973617554]
