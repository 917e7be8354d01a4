"""Block diffusion for block-causal checkpoints (Fast-dLLM v2, SDAR), as their authors decode them.

Blocks sit on the absolute grid of the engine's block size. The first block holds the prompt's last,
partial block followed by masks; every later block starts all-mask. Each step is one forward pass over the
whole block (bidirectional within it, seeing every committed block); positions are committed in the
leftmost sub-block that still has masks (all of the block without sub-blocks) when their confidence
reaches the threshold, and at least one: the most confident of the leftmost `fallback_window` masked
positions of that sub-block. With the token shift (Fast-dLLM v2) block position j is read from the output
at j - 1; without it (SDAR) from the output at j. A finished block is committed with a block-causal pass:
for token-shift models that pass also predicts the next block's first token, which is committed at once
(as an AR step: greedy, as the reference decodes it, unless the request samples); for the others it is
fused with the next block's first step. Tokens are final once committed (no remasking), so stopping early
never changes them. With `lookup_tokens`, steps also commit by prompt-lookup agreement
(decoder/block_decoder.py `LookupAgreement`).
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

import parafill_kernels
from decoder.block_causal_engine import BlockCausalEngine, BlockSequence
from decoder.block_decoder import (
    LookupAgreement,
    NoMaskTokenError,
    _Output,
    block_sampling,
    denoise_rows,
    step_seed,
)
from decoder.engine import PrefillInterrupted
from decoder.generation import GenerationControl, GenerationParams, GenerationResult, fit_allowed


def decode_aligned_blocks(
    engine: BlockCausalEngine,
    prompt_ids: list[int],
    params: GenerationParams,
    control: GenerationControl | None = None,
) -> GenerationResult:
    size = engine.block_size  # the checkpoint's grid: a request cannot change it
    params = replace(params, block_size=size)
    params.validate()
    params = block_sampling(params)
    control = control or GenerationControl()
    if engine.mask_token_id is None:
        raise NoMaskTokenError("this checkpoint has no mask token: block diffusion cannot run")
    started = time.perf_counter()
    try:
        seq = engine.start(prompt_ids, reserve=params.max_new_tokens + 2 * size, interrupt=control.check)
    except PrefillInterrupted as stop:
        return GenerationResult.interrupted_prefill("block", stop.reason, len(prompt_ids), started)
    out = _Output(params, control)
    drafts = LookupAgreement.for_output(prompt_ids, out)
    first = len(seq.open_tokens)
    block = [*seq.open_tokens, *[engine.mask_token_id] * (size - first)]
    heal = control.first_token_allowed
    pending: list[int] = []  # a finished block whose commit is fused with the next block's first step
    steps_per_block: list[int] = []
    while out.stop_reason is None and len(out.token_ids) < params.max_new_tokens:
        steps, pending = _decode_block(engine, seq, block, first, pending, heal, params, control, out, drafts)
        steps_per_block.append(steps)
        heal = None
        if out.stop_reason is not None or len(out.token_ids) >= params.max_new_tokens:
            break
        if engine.token_shift:
            if reason := control.check():
                out.stop_reason = reason
                break
            engine.step(seq, block, [])  # its last output predicts the next block's first token
        else:
            pending = block
        seq.open_tokens = []
        block, first = [engine.mask_token_id] * size, 0
    engine.finish(seq)
    return out.result(engine, seq, started, steps_per_block)


def _decode_block(
    engine: BlockCausalEngine,
    seq: BlockSequence,
    block: list[int],
    first: int,
    pending: list[int],
    heal: torch.Tensor | None,
    params: GenerationParams,
    control: GenerationControl,
    out: _Output,
    drafts: LookupAgreement | None = None,
) -> tuple[int, list[int]]:
    """Denoise positions [first, size) of `block` in place; returns (steps taken, still-pending commit)."""
    size = len(block)
    sub = params.sub_block_size or size
    limit = min(size, first + params.max_new_tokens - len(out.token_ids))  # later positions are not needed
    masked = torch.zeros(size, dtype=torch.bool)
    masked[first:] = True
    commit_step = [0] * size
    confidence = [0.0] * size
    final = first  # positions [first, final) are handed to `out`
    steps = 0
    if engine.token_shift and first == 0:
        # Predicted by the last committed token: committed straight away, without a pass.
        row = engine.next_token_logits(seq)[None]
        if heal is not None:
            row = row.masked_fill(~fit_allowed(heal, row), float("-inf"))
            heal = None
        seed = step_seed(params, seq.forward_passes)
        token, token_confidence, _ = parafill_kernels.denoise_step(
            row, torch.ones(1, dtype=torch.bool, device=row.device), 0.0, 1, None, params.temperature, seed
        )
        block[0], commit_step[0], masked[0] = int(token[0]), seq.forward_passes, False
        confidence[0] = float(token_confidence[0])
        final = 1
        if out.extend(block[:1], commit_step[:1], confidence[:1]):
            return steps, pending
    while bool(masked[:limit].any()):
        if reason := control.check():
            out.stop_reason = reason
            break
        left = int(masked.nonzero()[0])
        lo, hi = left // sub * sub, min(left // sub * sub + sub, size)
        hidden = engine.step(seq, pending, block)
        pending = []
        steps += 1
        src = torch.arange(lo, hi) - (1 if engine.token_shift else 0)  # output row that predicts each position
        rows = engine.logits(hidden[src.to(hidden.device)])
        if heal is not None and bool(masked[first]) and lo <= first < hi:
            banned = torch.zeros(rows.shape, dtype=torch.bool, device=rows.device)
            banned[first - lo] = ~fit_allowed(heal, rows)
            rows = rows.masked_fill(banned, float("-inf"))
        active = masked[lo:hi].to(rows.device)
        tokens, row_confidence, commit = denoise_rows(rows, active, params, seq.forward_passes)
        commit = commit.cpu()
        if drafts is not None:  # block coordinates: the prompt's open tokens, then the output up to `final`
            argmax = torch.zeros(size, dtype=torch.long)
            argmax[lo:hi] = tokens.cpu()
            window = torch.zeros_like(masked)
            window[lo:hi] = masked[lo:hi]
            commit |= drafts.agreeing(block, masked, window, argmax, final, params.lookup_tokens)[lo:hi]
        for i in commit.nonzero().flatten().tolist():
            block[lo + i], commit_step[lo + i], masked[lo + i] = int(tokens[i]), seq.forward_passes, False
            confidence[lo + i] = float(row_confidence[i])
        if heal is not None and not bool(masked[first]):
            heal = None
        final = out.advance(block, commit_step, confidence, masked, final, limit)
        if out.stop_reason is not None:
            break
    return steps, pending
