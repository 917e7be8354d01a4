"""Next-token choice for the AR decoder: greedy, or temperature + top-p from a seeded generator."""

from __future__ import annotations

import torch
from torch import Tensor

from decoder.generation import GenerationParams


def make_generator(params: GenerationParams) -> torch.Generator | None:
    if params.temperature <= 0:
        return None
    gen = torch.Generator(device="cpu")
    gen.manual_seed(params.seed if params.seed is not None else torch.seed())
    return gen


def choose_token(logits: Tensor, params: GenerationParams, generator: torch.Generator | None) -> int:
    """Greedy (lowest id on ties) when temperature is 0; else nucleus sampling on the CPU generator."""
    if params.temperature <= 0 or generator is None:
        return int(logits.argmax())
    probs = torch.softmax(logits.float().cpu() / params.temperature, dim=-1)
    if params.top_p < 1.0:
        sorted_probs, order = probs.sort(descending=True)
        # Keep the smallest set of tokens whose mass reaches top_p (the first token always stays).
        drop = sorted_probs.cumsum(-1) - sorted_probs >= params.top_p
        sorted_probs[drop] = 0.0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return int(torch.multinomial(probs, 1, generator=generator))
