"""Float64 oracle for the denoise step and shared helpers for the kernel tests."""

from __future__ import annotations

import torch
from torch import Tensor

from parafill_kernels import reference


def scaled_fp32(logits: Tensor, temperature: float) -> Tensor:
    """The spec's fp32 temperature scaling: x * fp32(1 / T), with NaN read as -inf."""
    x = logits.float()
    x = x.masked_fill(x.isnan(), float("-inf"))
    return x * (1.0 / temperature) if temperature > 0 else x


def confidence64(scaled: Tensor) -> Tensor:
    """Max softmax probability in float64; 0 for rows without a finite logit."""
    x = scaled.double()
    m = x.amax(dim=-1, keepdim=True)
    conf = 1.0 / torch.exp(x - m).sum(dim=-1)
    return torch.where(torch.isfinite(m.squeeze(-1)), conf, torch.zeros_like(conf))


def check_tokens_are_argmax(tokens: Tensor, values: Tensor) -> None:
    """tokens[i] is the lowest index holding the row maximum of `values` (compared in float64)."""
    v = values.double()
    top = v.amax(dim=-1)
    first = (v == top[:, None]).double().argmax(dim=-1)  # first True
    assert torch.equal(tokens, first), f"tokens {tokens.tolist()} != lowest argmax {first.tolist()}"


def check_step(
    out: tuple[Tensor, Tensor, Tensor],
    logits: Tensor,
    masked: Tensor,
    threshold: float,
    block_size: int | None,
    fallback: Tensor | None,
    temperature: float = 0.0,
    seed: int | None = None,
    conf_rtol: float = 2e-6,
) -> None:
    """Kernel outputs against float64 (confidence), the exact spec (tokens), and the commit rule applied
    to the kernel's own confidences (plus the reference's commits where no confidence is near the
    threshold)."""
    tokens, conf, commit = out
    n = logits.shape[0]
    assert tokens.dtype == torch.int64 and conf.dtype == torch.float32 and commit.dtype == torch.bool
    assert tokens.shape == conf.shape == commit.shape == (n,)
    scaled = scaled_fp32(logits, temperature)
    want_conf = confidence64(scaled)
    assert not torch.isnan(conf).any(), "unwritten (poisoned) confidence"
    torch.testing.assert_close(conf.double(), want_conf, rtol=conf_rtol, atol=1e-7)
    values = scaled
    if temperature > 0 and seed is not None:
        values = scaled + reference.gumbel_noise(tuple(scaled.shape), seed, scaled.device)
    check_tokens_are_argmax(tokens, values)
    bs = block_size or n
    fb = masked if fallback is None else fallback
    assert torch.equal(commit, reference.select_commits(conf, masked, fb, threshold, bs))
    near = (want_conf - threshold).abs() < 1e-4
    if not near.any():
        ref = reference.denoise_step(logits, masked, threshold, block_size, fallback, temperature, seed)
        assert torch.equal(commit, ref[2])
        assert torch.equal(tokens, ref[0])


def random_logits(n: int, v: int, dtype: torch.dtype, gen: torch.Generator, scale: float = 3.0) -> Tensor:
    """Random logits with a spread of confidences (a few rows sharply peaked); never all zeros."""
    x = torch.randn(n, v, generator=gen) * scale
    peaks = torch.randint(0, v, (n,), generator=gen)
    x[torch.arange(n), peaks] += torch.linspace(0.0, 12.0, n)
    return x.to(dtype)
