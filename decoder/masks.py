"""Attention masks: the one place that says who may attend to whom (True = may attend).

Committed tokens are always encoded causally, exactly as an AR model encodes them. Only a still-noisy
block attends bidirectionally within itself, plus to everything committed before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def step_mask(past_len: int, n_causal: int, n_block: int, device: torch.device | str = "cpu") -> Tensor:
    """Mask [n_causal + n_block, past_len + n_causal + n_block] for one engine pass.

    The pass holds `n_causal` tokens being committed (each sees the cache and the committed tokens up
    to itself) followed by `n_block` tokens of a noisy block (each sees the cache, all committed tokens
    of this pass and the whole block).
    """
    rows = n_causal + n_block
    mask = torch.ones(rows, past_len + rows, dtype=torch.bool, device=device)
    if n_causal:
        causal = torch.ones(n_causal, n_causal, dtype=torch.bool, device=device).tril()
        mask[:n_causal, past_len : past_len + n_causal] = causal
        mask[:n_causal, past_len + n_causal :] = False
    return mask


def training_mask(seq_len: int, block_size: int, device: torch.device | str = "cpu") -> Tensor:
    """Mask [2L, 2L] over the training input [noisy x_t (L) ; clean x_0 (L)] (after BD3-LM).

    - noisy token of block b: its own noisy block (bidirectional) and clean tokens of blocks < b;
    - clean token i: clean tokens j <= i (causal, so its keys/values match an AR model's).
    """
    if seq_len % block_size:
        raise ValueError(f"sequence length {seq_len} is not a multiple of block size {block_size}")
    idx = torch.arange(seq_len, device=device)
    block = idx // block_size
    noisy_to_noisy = block[:, None] == block[None, :]
    noisy_to_clean = block[:, None] > block[None, :]
    clean_to_clean = idx[:, None] >= idx[None, :]
    clean_to_noisy = torch.zeros(seq_len, seq_len, dtype=torch.bool, device=device)
    top = torch.cat((noisy_to_noisy, noisy_to_clean), dim=1)
    bottom = torch.cat((clean_to_noisy, clean_to_clean), dim=1)
    return torch.cat((top, bottom), dim=0)


@dataclass(frozen=True)
class JointMask:
    """`training_mask` as attention can use it best. Its clean half (rows L..2L) is plain causal over the clean
    keys and sees no noisy key, so attention runs those rows as a causal pass (no mask to read, the upper half
    skipped) and reads a mask for the noisy rows only: a CPU training step 1.04-1.05x as fast (docs/training.md),
    the same result (values and gradients checked equal in tests/training/test_objective.py)."""

    noisy_rows: Tensor  # bool [L, 2L]: what each noisy query may attend to, over [noisy keys ; clean keys]

    @property
    def seq_len(self) -> int:
        return self.noisy_rows.shape[0]

    def dense(self) -> Tensor:
        """The whole [2L, 2L] mask, as `training_mask` gives it."""
        L = self.seq_len
        clean_rows = torch.zeros(L, 2 * L, dtype=torch.bool, device=self.noisy_rows.device)
        clean_rows[:, L:] = torch.ones(L, L, dtype=torch.bool, device=self.noisy_rows.device).tril()
        return torch.cat((self.noisy_rows, clean_rows), dim=0)


def joint_training_mask(seq_len: int, block_size: int, device: torch.device | str = "cpu") -> JointMask:
    """`training_mask(seq_len, block_size)`, structured for attention (JointMask)."""
    return JointMask(training_mask(seq_len, block_size, device)[:seq_len])
