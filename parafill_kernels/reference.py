"""PyTorch reference of the fused denoise step: the CPU production path and the kernels' oracle.

Rows are grouped into consecutive blocks of `block_size` rows. For every row:
  token      = argmax of the (temperature-scaled, optionally Gumbel-perturbed) logits, lowest index on ties
  confidence = max softmax probability of the temperature-scaled logits (before Gumbel noise)
  commit     = masked and confidence >= threshold
and, for every block where no masked row passes, the most confident row among `fallback` (a subset of
the masked rows: the decoder passes the leftmost few) is committed, lowest row on ties.
Everything stays on the device: no host synchronisation.
"""

from __future__ import annotations

import torch
from torch import Tensor


def gumbel_noise(shape: tuple[int, ...], seed: int, device: torch.device) -> Tensor:
    """Gumbel(0, 1) noise from a counter-based hash of (seed, element index): the same on every device
    and reproducible by the Triton kernels, which cannot share torch's generator."""
    n = 1
    for s in shape:
        n *= s
    idx = torch.arange(n, device=device, dtype=torch.int64)
    seed_term = ((seed & 0x7FFFFFFF) * 0x85EBCA77) & 0xFFFFFFFF
    x = (((idx * 0x9E3779B1) & 0xFFFFFFFF) + seed_term + 0x165667B1) & 0xFFFFFFFF
    x = ((x ^ (x >> 15)) * 0x2C1B3C6D) & 0xFFFFFFFF
    x = ((x ^ (x >> 12)) * 0x297A2D39) & 0xFFFFFFFF
    x = x ^ (x >> 15)
    u = (x.double() + 0.5) / 4294967296.0  # in (0, 1)
    return (-torch.log(-torch.log(u))).float().view(shape)


def select_commits(confidence: Tensor, masked: Tensor, fallback: Tensor, threshold: float, block_size: int) -> Tensor:
    """Commit mask [N] from per-row confidence: threshold, plus at least one row per block with work left."""
    n = confidence.shape[0]
    if n % block_size:
        raise ValueError(f"{n} rows do not split into blocks of {block_size}")
    commit = masked & (confidence >= threshold)
    blocks = n // block_size
    candidates = (fallback & masked).view(blocks, block_size)
    by_block = confidence.view(blocks, block_size).float()
    scored = torch.where(candidates, by_block, torch.full_like(by_block, -1.0))
    best = scored.argmax(dim=1)  # lowest row on ties
    need = ~commit.view(blocks, block_size).any(dim=1) & candidates.any(dim=1)
    extra = torch.zeros(blocks, block_size, dtype=torch.bool, device=confidence.device)
    extra[torch.arange(blocks, device=confidence.device), best] = True
    return commit | (extra & need[:, None]).view(n)


def token_and_confidence(logits: Tensor, temperature: float = 0.0, seed: int | None = None) -> tuple[Tensor, Tensor]:
    """Per row: chosen token id (int64) and its max softmax probability (fp32)."""
    scaled = logits.float()
    # NaN counts as -inf: never chosen, no probability mass. It does reach here: a +inf logit on a banned
    # token plus its -inf bias is NaN, and so is an overflowing model's output.
    scaled = scaled.masked_fill(scaled.isnan(), float("-inf"))
    if temperature > 0:
        # Multiply by fp32(1 / T) rather than divide: torch's CUDA division by a Python scalar is itself a
        # reciprocal multiply while the CPU one divides, so dividing gave device-dependent last bits (and
        # tokens, on near-ties); the Triton kernels multiply the same way.
        scaled = scaled * (1.0 / temperature)
    confidence = torch.softmax(scaled, dim=-1).amax(dim=-1)
    # A row of all -inf has no probability mass: confidence 0, token 0 (argmax's answer), never committed
    # by threshold alone.
    confidence = torch.nan_to_num(confidence, nan=0.0)
    if temperature > 0 and seed is not None:
        scaled = scaled + gumbel_noise(tuple(scaled.shape), seed, scaled.device)
    return scaled.argmax(dim=-1), confidence


def denoise_step(
    logits: Tensor,
    masked: Tensor,
    threshold: float,
    block_size: int | None = None,
    fallback: Tensor | None = None,
    temperature: float = 0.0,
    seed: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """(token ids [N], confidence [N], commit mask [N]) for logits [N, V] and masked rows [N]."""
    if logits.shape[0] == 0:  # nothing to decide (and block_size would default to 0)
        return (
            torch.zeros(0, dtype=torch.int64, device=logits.device),
            torch.zeros(0, dtype=torch.float32, device=logits.device),
            masked.clone(),
        )
    block_size = block_size or logits.shape[0]
    tokens, confidence = token_and_confidence(logits, temperature, seed)
    fallback = masked if fallback is None else fallback
    commit = select_commits(confidence, masked, fallback, threshold, block_size)
    return tokens, confidence, commit


def lm_head_denoise_step(
    hidden: Tensor,
    weight: Tensor,
    masked: Tensor,
    threshold: float,
    block_size: int | None = None,
    fallback: Tensor | None = None,
    temperature: float = 0.0,
    seed: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The same step from hidden states [N, D] and the LM-head weight [V, D]."""
    logits = hidden.float() @ weight.float().t()
    return denoise_step(logits, masked, threshold, block_size, fallback, temperature, seed)
