"""The decoding numbers that every answer (inline and explain) reports, written once for both."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from decoder.generation import GenerationResult


class Reported(Protocol):
    route: str
    stop_reason: str
    forward_passes: int
    latency_ms: float
    prompt_tokens: int
    cached_prompt_tokens: int
    tokens: int
    confidence: float | None


def numbers_json(answer: Reported) -> dict[str, Any]:
    """The shared part of an answer's JSON record, in the order the records have always had."""
    return {
        "route": answer.route,
        "stop_reason": answer.stop_reason,
        "forward_passes": answer.forward_passes,
        "latency_ms": round(answer.latency_ms, 3),
        "prompt_tokens": answer.prompt_tokens,
        "cached_prompt_tokens": answer.cached_prompt_tokens,
        "tokens": answer.tokens,
        "confidence": None if answer.confidence is None else round(answer.confidence, 4),
    }


def numbers_from(gen: GenerationResult) -> dict[str, Any]:
    """An answer's numbers from a local decoder's result (keyword arguments for the answer classes)."""
    return {
        "forward_passes": gen.forward_passes,
        "latency_ms": gen.latency_ms,
        "prompt_tokens": gen.prompt_tokens,
        "cached_prompt_tokens": gen.cached_prompt_tokens,
        "tokens": len(gen.token_ids),
        "confidence": gen.confidence,
    }
