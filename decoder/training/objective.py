"""Training objectives: AR next-token loss, and the vectorised block-diffusion objective (after BD3-LM).

Block diffusion in ONE forward over [x_t ; x_0] (2L tokens), positions arange(L) for both copies, with
`masks.training_mask` (as a `JointMask`): a noisy block sees itself bidirectionally and the clean tokens of
earlier blocks; clean tokens see clean tokens causally (so their keys/values are exactly an AR model's).
Token shift, as at inference: the output at position j predicts token j+1. So
  - token t with in-block offset > 0 is predicted by the NOISY output at t-1 (same block), and is a
    target only where x_t[t] is masked (masked-token CE, mean over those positions);
  - every token t >= 1 is predicted by the CLEAN output at t-1 (ordinary next-token CE). For a block's
    first token this is exactly how the decoder predicts it (from the last committed token).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from decoder.masks import joint_training_mask
from decoder.model import CausalLM

# Mask-rate range per block size: small blocks are decoded from mostly-masked states (a block of 4 spends
# most steps with 2-3 masks), large blocks pass through every rate, so they get the wider, lower range.
MASK_RATES: dict[int, tuple[float, float]] = {4: (0.45, 0.95), 8: (0.4, 0.9), 16: (0.35, 0.85), 32: (0.3, 0.8)}
# Every block's first decoding step is fully masked; clipped uniform rates rarely produce that, so a share
# of blocks is masked completely.
FULL_MASK_RATE = 0.1


@dataclass
class LossOut:
    loss: Tensor
    ar: Tensor  # next-token CE (nats/token) on the clean stream
    masked: Tensor | None  # masked-token CE (nats/token) on the noisy stream
    n_masked: int = 0
    certainty: Tensor | None = None  # certainty-forcing entropy (nats) on the correctly predicted masked tokens


# Certainty forcing (after dParallel): the entropy is taken at this temperature, so the term keeps pushing
# on a prediction that is right and already fairly sure, where the plain CE gradient has nearly vanished.
CERTAINTY_TEMPERATURE = 0.5


def mask_rates(block_size: int) -> tuple[float, float]:
    if block_size in MASK_RATES:
        return MASK_RATES[block_size]
    lo = 0.3 if block_size > 32 else 0.45
    return lo, lo + 0.5


def ar_loss(model: CausalLM, x: Tensor) -> LossOut:
    """Plain causal next-token loss (no doubled sequence): the cheap first stage."""
    B, L = x.shape
    pos = torch.arange(L, device=x.device).expand(B, L)
    hidden = model(x, pos)
    logits = model.logits(hidden[:, :-1])
    ce = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
    return LossOut(ce, ce.detach(), None)


def certainty_entropy(logits: Tensor, targets: Tensor, temperature: float = CERTAINTY_TEMPERATURE) -> Tensor:
    """Mean entropy of softmax(logits / T) over the rows whose argmax is the target (0 when none is).

    Only right predictions are sharpened: making a wrong guess surer would teach confident mistakes, which
    a threshold decoder commits in parallel."""
    right = (logits.argmax(-1) == targets).float()
    logp = F.log_softmax(logits / temperature, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return (entropy * right).sum() / right.sum().clamp(min=1.0)  # no host sync: a GPU step need not wait


def noise(x0: Tensor, block_size: int, mask_id: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """(x_t, masked): each (row, block) draws a rate in the clipped range, each token is masked with it."""
    B, L = x0.shape
    n_blocks = L // block_size
    lo, hi = mask_rates(block_size)
    dev = x0.device
    rate = lo + (hi - lo) * torch.rand(B, n_blocks, generator=generator, device=dev)
    full = torch.rand(B, n_blocks, generator=generator, device=dev) < FULL_MASK_RATE
    rate = torch.where(full, torch.ones_like(rate), rate)
    rate = rate.repeat_interleave(block_size, dim=1)
    masked = torch.rand(B, L, generator=generator, device=dev) < rate
    return torch.where(masked, torch.full_like(x0, mask_id), x0), masked


def diffusion_targets(masked: Tensor, block_size: int) -> Tensor:
    """bool [B, L-1]: noisy output at j is scored (predicts token j+1) iff token j+1 is masked and not a
    block's first token (those are predicted from the clean stream)."""
    L = masked.shape[1]
    offset = torch.arange(1, L, device=masked.device) % block_size
    return masked[:, 1:] & (offset > 0)


def block_diffusion_loss(
    model: CausalLM,
    x0: Tensor,
    block_size: int,
    mask_id: int,
    generator: torch.Generator | None = None,
    ar_weight: float = 1.0,
    ar_scored: Tensor | None = None,
    certainty_weight: float = 0.0,
) -> LossOut:
    """ar_scored: bool [B, L-1], the clean outputs whose next-token loss counts (default: all of them).
    certainty_weight: adds that times `certainty_entropy` of the masked predictions (self-distillation rows,
    whose targets are the model's own greedy choices: certainty forcing, after dParallel)."""
    B, L = x0.shape
    xt, masked = noise(x0, block_size, mask_id, generator)
    attn = joint_training_mask(L, block_size, device=x0.device)
    pos = torch.arange(L, device=x0.device).repeat(2).expand(B, 2 * L)
    hidden = model(torch.cat((xt, x0), dim=1), pos, attn_mask=attn)
    h_noisy, h_clean = hidden[:, :L], hidden[:, L:]
    targets = x0[:, 1:]
    sel = diffusion_targets(masked, block_size)
    n_masked = int(sel.sum())
    # Only the scored positions go through the LM head: the vocabulary projection is a large share of a
    # small model's compute.
    if n_masked:
        m_logits = model.logits(h_noisy[:, :-1][sel]).float()
        masked_ce = F.cross_entropy(m_logits, targets[sel])
        certainty = certainty_entropy(m_logits, targets[sel]) if certainty_weight else None
    else:
        masked_ce = h_noisy.sum() * 0.0
        certainty = None
    if ar_scored is None:
        a_logits = model.logits(h_clean[:, :-1]).float()
        ar_ce = F.cross_entropy(a_logits.reshape(-1, a_logits.shape[-1]), targets.reshape(-1))
    else:
        ar_ce = F.cross_entropy(model.logits(h_clean[:, :-1][ar_scored]).float(), targets[ar_scored])
    loss = masked_ce + ar_weight * ar_ce
    if certainty is not None:
        loss = loss + certainty_weight * certainty
        certainty = certainty.detach()
    return LossOut(loss, ar_ce.detach(), masked_ce.detach(), n_masked, certainty)
