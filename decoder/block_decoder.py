"""Block-diffusion decoding on the shared engine (after BD3-LM, Fast-dLLM, SDAR).

The span is decoded block by block. A block starts all-[MASK]; each step is one forward pass over the
block, after which every masked position whose confidence reaches the threshold is committed (and at
least one: the most confident of the leftmost few masked positions). With the token shift of AR models,
block position 0 is predicted by the last committed token and position j > 0 by block position j - 1.
A finished block is appended to the KV cache causally in the same pass as the next block's first step, and
the prompt's uncached tail in the first block's first pass: no pass is spent on the prompt alone.
With `lookup_tokens`, a step also commits the leading masked positions whose argmax spells a prompt-lookup
draft (`LookupAgreement`).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import replace

import torch

import parafill_kernels
from decoder.engine import Engine, PrefillInterrupted, Sequence
from decoder.generation import GenerationControl, GenerationParams, GenerationResult, fit_allowed
from decoder.lookup import PromptLookup


class NoMaskTokenError(ValueError):
    """The checkpoint has no mask token, so it can only be used for AR decoding."""


class BlockSamplingError(ValueError):
    """Sampling settings that only AR decoding serves (top-p)."""


class _Output:
    """Final tokens so far, their commit steps, and the stop checks run as they become final."""

    def __init__(self, params: GenerationParams, control: GenerationControl) -> None:
        self.params, self.control = params, control
        self.token_ids: list[int] = []
        self.commit_steps: list[int] = []
        self.confidences: list[float] = []
        self.stop_reason: str | None = None

    def extend(self, tokens: list[int], steps: list[int], confidences: list[float]) -> bool:
        """Append newly final tokens (with their commit steps and confidences); True when generation must stop."""
        for i, token in enumerate(tokens):
            if token in self.params.stop_token_ids:
                tokens, steps, confidences = tokens[:i], steps[:i], confidences[:i]
                self.stop_reason = "stop_token"
                break
        before = len(self.token_ids)
        self.token_ids.extend(tokens)
        self.commit_steps.extend(steps)
        self.confidences.extend(confidences)
        if self.control.stop_at is not None and (keep := self.control.stop_at(self.token_ids)) is not None:
            del self.token_ids[keep:], self.commit_steps[keep:], self.confidences[keep:]
            self.stop_reason = "stop_rule"
        # Only what the stop rule keeps is final, and only final tokens are streamed.
        if len(self.token_ids) > before and self.control.on_tokens is not None:
            self.control.on_tokens(self.token_ids[before:])
        return self.stop_reason is not None

    def advance(
        self, block: list[int], steps: list[int], confidences: list[float], masked: torch.Tensor, final: int, limit: int
    ) -> int:
        """Hand over the positions from `final` on (below `limit`) that are final now: committed, with no
        mask before them. Returns the new `final`; stop_reason says whether generation must stop."""
        start = final
        while final < limit and not masked[final]:
            final += 1
        if final > start:
            self.extend(block[start:final], steps[start:final], confidences[start:final])
        return final

    def result(self, engine: Engine, seq: Sequence, started: float, steps_per_block: list[int]) -> GenerationResult:
        """The block decoders' answer once generation has ended (`started`: its time.perf_counter())."""
        return GenerationResult(
            mode="block",
            token_ids=self.token_ids,
            text=engine.tokenizer.decode(self.token_ids),
            commit_steps=self.commit_steps,
            forward_passes=seq.forward_passes,
            prompt_tokens=seq.prompt_tokens,
            cached_prompt_tokens=seq.cached_prompt_tokens,
            latency_ms=(time.perf_counter() - started) * 1000,
            stop_reason=self.stop_reason or "length",
            steps_per_block=steps_per_block,
            token_confidences=self.confidences,
        )


def decode_block(
    engine: Engine, prompt_ids: list[int], params: GenerationParams, control: GenerationControl | None = None
) -> GenerationResult:
    if getattr(engine, "kv_layout", "causal") == "block_causal":
        from decoder.aligned_block_decoder import decode_aligned_blocks  # it builds on this module

        return decode_aligned_blocks(engine, prompt_ids, params, control)  # type: ignore[arg-type]
    params.validate()
    params = block_sampling(params)
    control = control or GenerationControl()
    if engine.mask_token_id is None:
        raise NoMaskTokenError(
            "this checkpoint has no mask token (mask_token_id in config.json or a mask token in the tokenizer): "
            "it can only be used with --mode ar"
        )
    started = time.perf_counter()
    try:
        seq = engine.start(
            prompt_ids, reserve=params.max_new_tokens + params.block_size, interrupt=control.check, defer_tail=True
        )
    except PrefillInterrupted as stop:
        return GenerationResult.interrupted_prefill("block", stop.reason, len(prompt_ids), started)
    out = _Output(params, control)
    drafts = LookupAgreement.for_output(prompt_ids, out)
    # Committed, not yet in the KV cache: the prompt's last chunk at first, then each finished block.
    pending, seq.deferred = seq.deferred, []
    steps_per_block: list[int] = []
    while len(out.token_ids) < params.max_new_tokens and out.stop_reason is None:
        size = min(params.block_size, params.max_new_tokens - len(out.token_ids))
        block, steps = _decode_one_block(engine, seq, pending, size, params, control, out, drafts)
        steps_per_block.append(steps)
        pending = block
    engine.finish(seq)
    return out.result(engine, seq, started, steps_per_block)


def _decode_one_block(
    engine: Engine,
    seq: Sequence,
    pending: list[int],
    size: int,
    params: GenerationParams,
    control: GenerationControl,
    out: _Output,
    drafts: LookupAgreement | None = None,
) -> tuple[list[int], int]:
    """Denoise one block of `size` tokens; returns (its tokens, steps taken). Sets out.stop_reason to stop."""
    assert engine.mask_token_id is not None
    block = [engine.mask_token_id] * size
    commit_step = [0] * size
    confidence = [0.0] * size
    masked = torch.ones(size, dtype=torch.bool)
    first_row = None  # prediction for block position 0: fixed once `pending` is in the cache
    final = 0  # leading positions already handed to `out`
    steps = 0
    heal = control.first_token_allowed if not out.token_ids else None
    while bool(masked.any()):
        if reason := control.check():
            out.stop_reason = reason
            break
        needs_block = bool(masked[1:].any())  # position 0 alone is predicted without a pass
        if pending or needs_block:
            hidden = engine.step(seq, pending, block if needs_block else [])
            pending = []
        if first_row is None:
            first_row = engine.next_token_logits(seq)[None]
            if heal is not None:
                first_row = first_row.masked_fill(~fit_allowed(heal, first_row), float("-inf"))
        rows = first_row
        if needs_block:
            rows = torch.cat((first_row, engine.logits(hidden[: size - 1])), dim=0)
        else:
            rows = torch.cat((first_row, first_row.expand(size - 1, -1)), dim=0)  # unused rows: all committed
        steps += 1
        on_device = _current_sub_block(masked, params.sub_block_size).to(rows.device)
        tokens, row_confidence, commit = denoise_rows(rows, on_device, params, seq.forward_passes)
        commit = commit.cpu()
        if drafts is not None:
            commit |= drafts.agreeing(block, masked, on_device.cpu(), tokens.cpu(), final, params.lookup_tokens)
        for i in commit.nonzero().flatten().tolist():
            block[i] = int(tokens[i])
            commit_step[i] = seq.forward_passes
            confidence[i] = float(row_confidence[i])
            masked[i] = False
        final = out.advance(block, commit_step, confidence, masked, final, size)
        if out.stop_reason is not None:
            break
    return block, steps


class LookupAgreement:
    """Prompt-lookup drafts for the block decoder: code repeats itself, so where the model's argmax at the
    leftmost masked positions spells what followed the same n-gram earlier in the context, those positions
    are committed even below the threshold. Two independent cues agreeing is the evidence."""

    def __init__(self, prompt_ids: list[int], out: _Output) -> None:
        self.index = PromptLookup(list(prompt_ids))
        self.prompt_length, self.out = len(prompt_ids), out

    @classmethod
    def for_output(cls, prompt_ids: list[int], out: _Output) -> LookupAgreement | None:
        """Agreement for a decode whose params ask for drafts; None when they do not, or when sampling (a
        sampled token is no argmax to agree with)."""
        params = out.params
        return cls(prompt_ids, out) if params.lookup_tokens and params.temperature == 0 else None

    def agreeing(
        self, block: list[int], masked: torch.Tensor, active: torch.Tensor, argmax: torch.Tensor, final: int, limit: int
    ) -> torch.Tensor:
        """The masked positions from `final` (the first masked one) on whose argmax matches the draft that
        continues the final output, up to the first mismatch; committed positions must match it too."""
        self.index.extend(self.out.token_ids[len(self.index.tokens) - self.prompt_length :])
        agree = torch.zeros_like(masked)
        for offset, token in enumerate(self.index.draft(min(limit, len(block) - final))):
            i = final + offset
            if not masked[i]:
                if block[i] != token:
                    break
            elif active[i] and int(argmax[i]) == token:
                agree[i] = True
            else:
                break
        return agree


def block_sampling(params: GenerationParams) -> GenerationParams:
    """`params` as block decoding can serve them. Its noise is a hash of the seed (kernels/), so a sampled
    request without one gets a fresh seed, as the AR decoder's generator does (else it would be greedy).
    Top-p would need a sort per position inside the fused denoise step: refused, not silently ignored."""
    if params.top_p < 1.0:
        raise BlockSamplingError(
            "top_p < 1 needs AR decoding (--mode ar): block decoding samples from the full distribution"
        )
    if params.temperature > 0 and params.seed is None:
        return replace(params, seed=secrets.randbits(31))
    return params


def step_seed(params: GenerationParams, forward_passes: int) -> int | None:
    """The sampling seed of one step: the request's seed moved on by the passes so far (fresh noise per step)."""
    return None if params.seed is None else params.seed + forward_passes


def denoise_rows(
    rows: torch.Tensor, active: torch.Tensor, params: GenerationParams, forward_passes: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(tokens, confidence, commit mask) for the rows of one block, `active` the positions that may commit now."""
    # Fallback candidates: the leftmost few candidates, so that a lone fallback commit never
    # lands on a far token (a closing bracket, a newline) that the stop rules then throw away.
    fallback = active & (active.cumsum(0) <= params.fallback_window)
    seed = step_seed(params, forward_passes)
    tokens, confidence, commit = parafill_kernels.denoise_step(
        rows, active, params.threshold, rows.shape[0], fallback, params.temperature, seed
    )
    if params.defer_repeats:
        commit = defer_repeats(tokens, active, commit)
    return tokens, confidence, commit


def defer_repeats(tokens: torch.Tensor, active: torch.Tensor, commit: torch.Tensor) -> torch.Tensor:
    """`commit` less the positions whose token is the one their left neighbour predicts while that neighbour is
    still open (committing in this step too, or not yet): the two were decided without seeing each other, and
    when both are sure of the same token that is parallel decoding's own failure, "for line in in in". Deferred,
    the position decides again next step, seeing its neighbour's token. A true repeat ("))") costs one step.

    Should that defer every commit, the leftmost open position commits instead: its left neighbour is fixed, so
    it is never deferred, and the block moves on. Device tensors in, device tensors out: no host sync."""
    repeat = torch.zeros_like(commit)
    repeat[1:] = commit[1:] & active[:-1] & (tokens[1:] == tokens[:-1])
    kept = commit & ~repeat
    leftmost = active & (active.cumsum(0) == 1)
    return torch.where(kept.any() | ~commit.any(), kept, leftmost)


def _current_sub_block(masked: torch.Tensor, sub_block_size: int | None) -> torch.Tensor:
    """The masked positions of the leftmost sub-block that still has any (all of them without sub-blocks)."""
    if not sub_block_size:
        return masked
    lo = int(masked.nonzero()[0]) // sub_block_size * sub_block_size
    window = torch.zeros_like(masked)
    window[lo : lo + sub_block_size] = True
    return masked & window
