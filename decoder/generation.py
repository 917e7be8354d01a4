"""What a decoder is asked for (params, control hooks) and what it answers (result with a commit trace)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TypeVar

import torch


@dataclass
class GenerationParams:
    max_new_tokens: int = 64
    # block diffusion
    block_size: int = 8
    threshold: float = 0.9
    fallback_window: int = 2  # when nothing passes the threshold: most confident of the leftmost N masked
    # Commit only inside the leftmost sub-block that still has masks (Fast-dLLM v2: 8 of a 32 block);
    # the forward still covers the whole block. None: the whole block at once.
    sub_block_size: int | None = None
    # sampling (temperature 0 = greedy)
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop_token_ids: frozenset[int] = frozenset()
    # Greedy only: draft up to this many tokens by prompt lookup (decoder/lookup.py). AR checks them in the same
    # pass as the next token (the output is the same as without); block diffusion also commits the masked
    # positions, from the leftmost on, whose argmax agrees with the draft, whatever their confidence. 0: off.
    lookup_tokens: int = 0
    # Block diffusion: a position committing the token its left neighbour also predicts, while that neighbour is
    # still open, waits a step (decoder/block_decoder.defer_repeats): neither saw the other's choice. Measured on
    # the shipped model, not adopted: a higher threshold buys the same fewer stutters for less (docs/training.md).
    defer_repeats: bool = False

    def validate(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if self.block_size < 1:
            raise ValueError("block_size must be >= 1")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError("threshold must be in [0, 1]")
        if self.fallback_window < 1:
            raise ValueError("fallback_window must be >= 1")
        if self.sub_block_size is not None and not 1 <= self.sub_block_size <= self.block_size:
            raise ValueError("sub_block_size must be in [1, block_size]")
        if self.lookup_tokens < 0:
            raise ValueError("lookup_tokens must be >= 0")
        if self.temperature < 0 or not 0.0 < self.top_p <= 1.0:
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")


def decoder_label(mode: str, block_size: int, threshold: float, lookup_tokens: int = 0) -> str:
    """How a decode was set up, as reports, the CLI and the server name it: "block B=8 t=0.3", "ar lookup 8", "ar"."""
    if mode == "block":
        return f"block B={block_size} t={threshold:g}" + (f" lookup {lookup_tokens}" if lookup_tokens else "")
    return f"ar lookup {lookup_tokens}" if lookup_tokens else "ar"


@dataclass
class GenerationControl:
    """Hooks the caller passes in; all optional. Checked between forward passes."""

    # Returns a reason ("cancelled", "time_budget") to stop now, or None to go on.
    interrupt: Callable[[], str | None] | None = None
    # Streaming: called with the newly final tokens (a contiguous extension of the output).
    on_tokens: Callable[[list[int]], None] | None = None
    # Inline rules: given the tokens so far, return how many to keep if generation should stop here. Checked
    # before streaming: tokens it cuts off are never passed to on_tokens.
    stop_at: Callable[[list[int]], int | None] | None = None
    # Token healing: ids allowed as the first generated token (None: any).
    first_token_allowed: torch.Tensor | None = None
    deadline: float | None = None  # time.monotonic() value after which we stop with what is committed

    def check(self) -> str | None:
        if self.interrupt is not None:
            reason = self.interrupt()
            if reason:
                return reason
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "time_budget"
        return None


def fit_allowed(allowed: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """A token-healing mask as wide as the logits (rows past the tokenizer's vocabulary: not allowed)."""
    width = logits.shape[-1]
    allowed = allowed.to(logits.device)[:width]
    if allowed.shape[0] < width:
        allowed = torch.cat((allowed, allowed.new_zeros(width - allowed.shape[0])))
    return allowed


@dataclass
class GenerationResult:
    mode: str  # "block" or "ar"
    token_ids: list[int]
    text: str
    commit_steps: list[int]  # per generated token: the 1-based forward pass whose output committed it
    forward_passes: int  # a prefill counts as one (block mode runs the prompt's uncached tail in its first step)
    prompt_tokens: int
    cached_prompt_tokens: int
    latency_ms: float
    stop_reason: str  # "stop_token", "stop_rule", "length", "cancelled", "time_budget"
    steps_per_block: list[int] = field(default_factory=list)
    # Per generated token: the probability the decoder gave it when it committed it (the winning row's
    # softmax maximum for a block step; the model's probability of the chosen token for AR). Empty where a
    # backend does not report it (a remote server).
    token_confidences: list[float] = field(default_factory=list)

    @classmethod
    def interrupted_prefill(cls, mode: str, reason: str, prompt_tokens: int, started: float) -> GenerationResult:
        """Nothing generated: the request was stopped while its prompt was being prefilled."""
        latency = (time.perf_counter() - started) * 1000
        return cls(mode, [], "", [], 0, prompt_tokens, 0, latency, reason)

    @property
    def tokens_per_forward(self) -> float:
        return len(self.token_ids) / self.forward_passes if self.forward_passes else 0.0

    @property
    def confidence(self) -> float | None:
        """Geometric mean of the token confidences: how sure the decoder was of the span as a whole (None
        when nothing was generated or the backend does not report confidences)."""
        return mean_confidence(self.token_confidences)

    def to_json(self) -> dict:
        out = asdict(self)
        out["token_confidences"] = [round(c, 4) for c in self.token_confidences]
        out["confidence"] = None if self.confidence is None else round(self.confidence, 4)
        out["tokens_per_forward"] = round(self.tokens_per_forward, 4)
        out["latency_ms"] = round(self.latency_ms, 3)
        return out


def mean_confidence(confidences: list[float]) -> float | None:
    """exp(mean log p): one unsure token pulls the span's confidence down more than an arithmetic mean would."""
    if not confidences:
        return None
    return math.exp(sum(math.log(max(c, 1e-12)) for c in confidences) / len(confidences))


StopAt = Callable[[list[int]], int | None]
Seen = TypeVar("Seen")  # what a stop rule reads: the token ids so far (stop_at), or the text (decoder/infill.py)


def earliest_stop(*rules: Callable[[Seen], int | None] | None) -> Callable[[Seen], int | None] | None:
    """A rule that stops where the first of `rules` would (None entries are skipped; None if none)."""
    active = [r for r in rules if r is not None]
    if len(active) <= 1:
        return active[0] if active else None

    def stop_at(seen: Seen) -> int | None:
        cuts = [cut for r in active if (cut := r(seen)) is not None]
        return min(cuts) if cuts else None

    return stop_at
