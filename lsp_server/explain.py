"""Explain a piece of code: explain prompt -> router (AR by default) -> text streamed as it is decoded."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lsp_server.answers import numbers_from, numbers_json
from lsp_server.settings import Settings

if TYPE_CHECKING:
    from decoder.engines import ModelRoutes
    from decoder.prompts import Prompt

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
    confidence: float | None = None  # geometric mean of the token confidences (decoder.generation)
    truncated_input: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            **numbers_json(self),
            "truncated_input": self.truncated_input,
            **self.extra,  # e.g. "remote": the remote server's finish reason, usage and timings
        }


_QUOTE_CHARACTERS = "\"'"


class TextStream:
    """Turn streamed token ids into text deltas that the final answer will not take back.

    Byte-level BPE can split a character across tokens, so a trailing U+FFFD (half a character) is held back
    until the next token completes it. And the explain stop rule (`stop_before_closing_quotes`) drops the
    token a docstring's closing quotes start in, text before the quotes included (`."` then `""`): so a
    trailing run of quote characters is held back with the whole token it starts in, until a later token
    shows it was not the start of closing quotes (an apostrophe, a quoted word)."""

    def __init__(self, decode: Callable[[list[int]], str], on_text: Callable[[str], None] | None) -> None:
        self._decode, self._on_text = decode, on_text
        self.ids: list[int] = []
        self.emitted = ""

    def push(self, ids: list[int]) -> None:
        self.ids.extend(ids)
        self._emit(self._decode(self.ids[: self._final_tokens()]).rstrip("\ufffd"))

    def _final_tokens(self) -> int:
        """How many leading tokens are final: all but those from the one a trailing quote run starts in."""
        text = self._decode(self.ids)
        run_start = len(text.rstrip(_QUOTE_CHARACTERS))
        if run_start == len(text):
            return len(self.ids)
        first_held = len(self.ids) - 1
        while first_held > 0 and len(self._decode(self.ids[:first_held])) > run_start:
            first_held -= 1
        return first_held

    def finish(self, final_text: str) -> None:
        self._emit(final_text)

    def _emit(self, text: str) -> None:
        if len(text) > len(self.emitted) and text.startswith(self.emitted):
            delta, self.emitted = text[len(self.emitted) :], text
            if self._on_text is not None:
                self._on_text(delta)


def run_explain(
    routes: ModelRoutes,
    code: str,
    settings: Settings,
    interrupt: Callable[[], str | None] | None = None,
    on_text: Callable[[str], None] | None = None,
) -> ExplainAnswer:
    from decoder.generation import GenerationControl
    from decoder.prompts import explain_stop_rule
    from decoder.router import generate

    engine = routes.explain
    truncated = len(code) > settings.explain_max_chars
    prompt, cut = _fitted_prompt(routes, code[: settings.explain_max_chars], settings.explain_max_tokens)
    params = routes.params_for(
        "explain", max_new_tokens=settings.explain_max_tokens, lookup_tokens=settings.lookup_tokens
    )
    eot = engine.tokenizer.special.end_of_text
    params.stop_token_ids = params.stop_token_ids | ({eot} if eot is not None else set())
    mode = routes.mode_for("explain", params)
    stream = TextStream(engine.tokenizer.decode, on_text)
    control = GenerationControl(
        interrupt=interrupt,
        on_tokens=stream.push,
        stop_at=explain_stop_rule(engine.tokenizer, stop_on_loops=settings.explain_stop_on_loop),
        deadline=time.monotonic() + settings.explain_time_budget_ms / 1000,
    )
    result = generate(engine, prompt.ids, mode, params, control)
    stream.finish(result.text)
    return ExplainAnswer(
        text=result.text,
        route=mode,
        stop_reason=result.stop_reason,
        **numbers_from(result),
        truncated_input=truncated or cut,
    )


def _fitted_prompt(routes: ModelRoutes, code: str, max_new_tokens: int) -> tuple[Prompt, bool]:
    """The route's explain prompt (explain tokens, chat template or a comment cue), with the code cut at
    its end until prompt and answer fit the model's positions. The start of the code stays: that is
    where its name and signature are."""
    from decoder.prompts import PromptFormatError

    tok = routes.explain.tokenizer
    room = routes.explain.model.config.max_position_embeddings - max_new_tokens - 2
    try:
        prompt = routes.explain_prompt(code)
        if len(prompt.ids) <= room:
            return prompt, False
        code_ids = tok.encode(code)
        keep = room - (len(prompt.ids) - len(code_ids))  # what the format itself takes stays
        while keep >= 8:
            prompt = routes.explain_prompt(tok.decode(code_ids[:keep]))
            if len(prompt.ids) <= room:
                return prompt, True
            keep -= len(prompt.ids) - room  # decoding and re-encoding can merge tokens differently
        raise ExplainError("the model's context is too short for explain with this explainMaxTokens")
    except PromptFormatError as exc:
        raise ExplainError(str(exc)) from exc
