"""Explain a piece of code: explain prompt -> router (AR by default) -> text streamed as it is decoded."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lsp_server.settings import Settings

if TYPE_CHECKING:
    from decoder.engine import Engine

log = logging.getLogger("parafill.explain")


class ExplainError(Exception):
    """The request cannot be served as asked (e.g. the model has no explain format)."""


@dataclass
class ExplainAnswer:
    text: str
    route: str
    stop_reason: str
    forward_passes: int = 0
    latency_ms: float = 0.0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    tokens: int = 0
    truncated_input: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "route": self.route,
            "stop_reason": self.stop_reason,
            "forward_passes": self.forward_passes,
            "latency_ms": round(self.latency_ms, 3),
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "tokens": self.tokens,
            "truncated_input": self.truncated_input,
        }


class TextStream:
    """Turn streamed token ids into text deltas. Byte-level BPE can split a character across tokens, so a
    trailing U+FFFD (half a character) is held back until the next token completes it."""

    def __init__(self, decode: Callable[[list[int]], str], on_text: Callable[[str], None] | None) -> None:
        self._decode, self._on_text = decode, on_text
        self.ids: list[int] = []
        self.emitted = ""

    def push(self, ids: list[int]) -> None:
        self.ids.extend(ids)
        text = self._decode(self.ids)
        stable = text.rstrip("\ufffd")
        self._emit(stable)

    def finish(self, final_text: str) -> None:
        self._emit(final_text)

    def _emit(self, text: str) -> None:
        if len(text) > len(self.emitted) and text.startswith(self.emitted):
            delta, self.emitted = text[len(self.emitted) :], text
            if self._on_text is not None:
                self._on_text(delta)


def run_explain(
    engine: Engine,
    code: str,
    settings: Settings,
    interrupt: Callable[[], str | None] | None = None,
    on_text: Callable[[str], None] | None = None,
) -> ExplainAnswer:
    from decoder.generation import GenerationControl, GenerationParams
    from decoder.prompts import PromptFormatError, explain_prompt
    from decoder.router import RoutingRules, generate

    tok = engine.tokenizer
    truncated = len(code) > settings.explain_max_chars
    code = code[: settings.explain_max_chars]
    try:
        prompt = explain_prompt(tok, code)
    except PromptFormatError as exc:
        raise ExplainError(str(exc)) from exc
    room = engine.model.config.max_position_embeddings - settings.explain_max_tokens - 2
    if len(prompt.ids) > room:  # keep the start of the code: that is where its name and signature are
        if room < 8:
            raise ExplainError("the model's context is too short for explain with this explainMaxTokens")
        prompt.ids = [*prompt.ids[: room - 1], prompt.ids[-1]]
        truncated = True
    eot = tok.special.end_of_text
    params = GenerationParams(
        max_new_tokens=settings.explain_max_tokens, stop_token_ids=frozenset({eot} if eot is not None else ())
    )
    mode = RoutingRules().choose("explain", params)
    stream = TextStream(tok.decode, on_text)
    control = GenerationControl(
        interrupt=interrupt,
        on_tokens=stream.push,
        deadline=time.monotonic() + settings.explain_time_budget_ms / 1000,
    )
    result = generate(engine, prompt.ids, mode, params, control)
    stream.finish(result.text)
    return ExplainAnswer(
        text=result.text,
        route=mode,
        stop_reason=result.stop_reason,
        forward_passes=result.forward_passes,
        latency_ms=result.latency_ms,
        prompt_tokens=result.prompt_tokens,
        cached_prompt_tokens=result.cached_prompt_tokens,
        tokens=len(result.token_ids),
        truncated_input=truncated,
    )
