"""The shared engine for checkpoints trained with a block-causal context (Fast-dLLM v2, SDAR).

Those models never saw a token-causal context: blocks of `block_size` tokens are aligned on absolute
position 0, and a committed token attends to every token of its own block and of the blocks before it.
The prompt is encoded the same way, so only its whole blocks can be prefilled; the tokens of its last,
partial block stay "open" and are decoded together with the first generated tokens.

Everything else is the ordinary engine: one model, one radix prefix cache, per-request KV buffers.
Committed KV is appended one whole block at a time (`step` refuses anything else, so the AR decoder, which
commits one token per pass, fails with a clear message instead of silently mixing layouts). Cached pages
hold whole blocks (the cache's page is a multiple of the block size), because a token's keys depend on the
rest of its block: a page's KV then depends only on the tokens on its own path in the tree.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from decoder.engine import Engine, EngineOptions, PrefillInterrupted, Sequence
from decoder.model import CausalLM
from decoder.tokenizer import TextTokenizer


class BlockLayoutError(ValueError):
    """A request that would break the block-causal layout (e.g. AR decoding one token at a time)."""


@dataclass
class BlockSequence(Sequence):
    open_tokens: list[int] = field(default_factory=list)  # prompt tokens of the current, unfinished block


def block_causal_mask(
    past_len: int, n_commit: int, n_block: int, block_size: int, device: torch.device | str = "cpu"
) -> Tensor:
    """Mask [n_commit + n_block, past_len + n_commit + n_block] (True = may attend) for one pass.

    `past_len` cached tokens and the `n_commit` committed tokens of this pass sit on the aligned block grid:
    each committed token sees every token whose block is not later than its own. The `n_block` tokens of
    the noisy block see everything, themselves included.
    """
    rows = n_commit + n_block
    mask = torch.ones(rows, past_len + rows, dtype=torch.bool, device=device)
    if n_commit:
        pos = torch.arange(past_len, past_len + n_commit, device=device) // block_size
        cols = torch.arange(past_len + rows, device=device) // block_size
        mask[:n_commit] = cols[None, :] <= pos[:, None]
        mask[:n_commit, past_len + n_commit :] = False
    return mask


class BlockCausalEngine(Engine):
    kv_layout = "block_causal"

    def __init__(
        self,
        model: CausalLM,
        tokenizer: TextTokenizer,
        options: EngineOptions | None = None,
        *args: Any,
        block_size: int | None = None,
        token_shift: bool | None = None,
        **kwargs: Any,
    ) -> None:
        from decoder.families import family_of  # local: families is data, kept free of engine imports

        family = family_of(model.config)
        self.block_size = block_size or family.block_size_for(model.config.extra)  # before Engine sizes its cache
        self.token_shift = family.token_shift if token_shift is None else token_shift
        if self.block_size < 1:
            raise ValueError("block_size must be >= 1")
        super().__init__(model, tokenizer, options, *args, **kwargs)  # extra arguments: Engine's own

    def cache_page_size(self, options: EngineOptions) -> int:
        # Pages of whole blocks. On a finer grid, a path could join one request's first page (its KV computed
        # with that request's later tokens of the block) to another request's next page.
        return math.lcm(options.page_size, self.block_size)

    # -- requests -------------------------------------------------------------------------------------

    def start(
        self, prompt_ids: list[int], reserve: int, interrupt: Callable[[], str | None] | None = None
    ) -> BlockSequence:
        """Prefill the prompt's whole blocks (reusing cached ones); its last partial block stays open.
        As in Engine.start, the lock is held per chunk and `interrupt` is checked before each."""
        if not prompt_ids:
            raise ValueError("empty prompt: there is no token to predict from")
        bsz = self.block_size
        aligned = len(prompt_ids) // bsz * bsz
        with self.lock, torch.inference_mode():
            seq = self._new_block_sequence(len(prompt_ids) + reserve + bsz)
            reused = self._load_cached_blocks(seq, prompt_ids[:aligned])
        seq.prompt_tokens, seq.cached_prompt_tokens = len(prompt_ids), reused
        chunk_len = max(bsz, self.options.prefill_chunk // bsz * bsz)
        rest = prompt_ids[reused:aligned]
        for start in range(0, len(rest), chunk_len):
            if interrupt is not None and (reason := interrupt()):
                raise PrefillInterrupted(reason)
            chunk = rest[start : start + chunk_len]
            with self.lock, torch.inference_mode():
                hidden = self._forward(seq, chunk, n_causal=len(chunk))
            seq.tokens.extend(chunk)
            seq.last_hidden = hidden[-1]
        seq.forward_passes = 1 if rest else 0
        seq.open_tokens = list(prompt_ids[aligned:])
        if self.options.use_prefix_cache and rest:
            with self.lock, torch.inference_mode():
                self._cache_tokens(seq)
        return seq

    def step(self, seq: Sequence, commit_ids: list[int], block_ids: list[int]) -> Tensor:
        """One pass: commit whole blocks (block-causally) and/or look at the open block (bidirectional)."""
        bsz = self.block_size
        if commit_ids and (seq.length % bsz or len(commit_ids) % bsz):
            raise BlockLayoutError(
                f"this checkpoint's KV layout is block-causal (blocks of {bsz}): tokens are committed a whole "
                "block at a time, so AR decoding (one token per pass) is not available; use block decoding"
            )
        if block_ids and seq.length % bsz:
            raise BlockLayoutError("the open block must start on the block grid")
        return super().step(seq, commit_ids, block_ids)

    def verify(self, seq: Sequence, ids: list[int]) -> Tensor:
        raise BlockLayoutError(
            f"this checkpoint's KV layout is block-causal (blocks of {self.block_size}): tokens cannot be "
            "appended one at a time, so AR decoding (speculative or not) is not available; use block decoding"
        )

    def next_token_logits(self, seq: Sequence) -> Tensor:
        if getattr(seq, "open_tokens", None):
            raise BlockLayoutError(
                "the prompt ends inside a block: its last tokens are decoded with the block, not predicted "
                "one at a time (AR decoding is not available for block-causal checkpoints)"
            )
        return super().next_token_logits(seq)

    # -- internals ------------------------------------------------------------------------------------

    def _new_block_sequence(self, capacity: int) -> BlockSequence:
        plain = self._new_sequence(capacity)
        return BlockSequence(kv=plain.kv, capacity=plain.capacity)

    def _forward(self, seq: Sequence, ids: list[int], n_causal: int) -> Tensor:
        past = seq.length
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        positions = torch.arange(past, past + len(ids), device=self.device)[None]
        mask = block_causal_mask(past, n_causal, len(ids) - n_causal, self.block_size, self.device)
        return self.runner.forward(seq.kv, input_ids, positions, mask, past)[0]

    def _load_cached_blocks(self, seq: Sequence, aligned_prompt: list[int]) -> int:
        """Copy the longest cached prefix (whole pages, so whole blocks).

        At least one block is left to prefill, so the last prompt block's output is computed.
        """
        if not self.options.use_prefix_cache or len(aligned_prompt) <= self.block_size:
            return 0
        page = self.cache.page_size
        match = self.cache.match(aligned_prompt)
        n = min(len(match.pages) * page, len(aligned_prompt) - self.block_size) // page * page
        if n == 0:
            return 0
        stacked = torch.cat(match.pages[: n // page], dim=3)  # [layers, 2, kv_heads, n, head_dim]
        for layer, kv in enumerate(seq.kv):
            kv.keys[0, :, :n] = stacked[layer, 0]
            kv.values[0, :, :n] = stacked[layer, 1]
        seq.tokens.extend(aligned_prompt[:n])
        return n
