"""One inline completion on the model: the cursor's surroundings, the prompt window, infill, the rule chain."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lsp_server.answers import numbers_from, numbers_json
from lsp_server.context import ContextBudget, Shape, Window, build_window, completion_shape, stop_when_closed
from lsp_server.documents import Document, for_model
from lsp_server.postprocess import Candidate, RuleContext, postprocess
from lsp_server.settings import Settings

if TYPE_CHECKING:
    from decoder.engine import Engine
    from decoder.engines import ModelRoutes
    from decoder.infill import TextStopRule

log = logging.getLogger("parafill.inline")


@dataclass(frozen=True)
class SelectedItem:
    """The item selected in the editor's suggest widget: the completion must start with `text`, which
    replaces the document text [start, end) on the cursor line."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class InlineRequest:
    uri: str
    document: Document
    cursor: int  # document offset
    selected: SelectedItem | None = None


@dataclass(frozen=True)
class Surroundings:
    """Where the completion goes: the replaced span [anchor, cursor_end) and the cursor line around it."""

    anchor: int  # the completion is inserted here (the selected item's start, else the cursor)
    cursor_end: int  # end of the document text the item replaces before any rule extends it
    line_end: int  # end of the cursor line's text
    lead: str  # text the item re-inserts before the completion (the selected item's text)
    line_prefix: str  # the cursor line before the completion, as the model sees it
    line_suffix: str
    next_line: int  # offset where the next line starts (len(text) on the last line)
    shape: Shape


def surroundings(req: InlineRequest) -> Surroundings:
    doc, sel = req.document, req.selected
    line = doc.line_of(req.cursor)
    line_start, line_end = doc.line_starts[line], doc.line_end(line)
    anchor, cursor_end, lead = (sel.start, max(sel.end, req.cursor), sel.text) if sel else (req.cursor, req.cursor, "")
    line_prefix = doc.text[line_start:anchor] + lead
    line_suffix = doc.text[cursor_end:line_end]
    next_line = doc.line_starts[line + 1] if line + 1 < doc.line_count else len(doc.text)
    shape = completion_shape(line_prefix, line_suffix)
    return Surroundings(anchor, cursor_end, line_end, lead, line_prefix, line_suffix, next_line, shape)


@dataclass
class InlineAnswer:
    text: str | None  # insert text (starting with the selected item's text); None: no suggestion
    start: int  # document offsets the item replaces, both on the cursor line
    end: int
    route: str  # "block", "ar", "typed_ahead", or "none"
    stop_reason: str  # the decoder's, or why there is no suggestion
    forward_passes: int = 0
    latency_ms: float = 0.0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    tokens: int = 0
    confidence: float | None = None  # geometric mean of the token confidences (decoder.generation)
    commit_steps: list[int] = field(default_factory=list)
    raw_text: str = ""  # the model's text before the rule chain
    window: tuple[int, int] = (0, 0)
    decoder: str = ""  # the decoding settings used (decoder.generation.decoder_label), e.g. "block B=8 t=0.3"

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text or "",
            **numbers_json(self),
            "commit_steps": self.commit_steps,
            "raw_text": self.raw_text,
            "range": [self.start, self.end],
            "window": list(self.window),
            "decoder": self.decoder,
        }


def answer_for(geo: Surroundings, candidate: Candidate | None, route: str, stop_reason: str, **numbers) -> InlineAnswer:
    if candidate is None:
        return InlineAnswer(None, geo.anchor, geo.cursor_end, route, stop_reason, **numbers)
    end = min(geo.cursor_end + candidate.replace_chars, geo.line_end)  # the range never leaves the line
    return InlineAnswer(geo.lead + candidate.text, geo.anchor, end, route, stop_reason, **numbers)


def budget_from(settings: Settings) -> ContextBudget:
    return ContextBudget(
        lines_before=settings.context_lines_before,
        lines_after=settings.context_lines_after,
        grid=settings.context_grid_lines,
        chars_before=settings.context_chars_before,
        chars_after=settings.context_chars_after,
    )


def fit_window(
    engine: Engine, doc: Document, geo: Surroundings, budget: ContextBudget, max_tokens: int
) -> tuple[Window, str, str]:
    """The grid window whose prompt fits `max_tokens`, halving the window (on the same grid) until it does."""
    count = engine.tokenizer.encode
    for _ in range(16):
        window = build_window(doc.text, doc.line_starts, geo.anchor, geo.cursor_end, budget)
        prefix, suffix = window.prefix(doc.text) + for_model(geo.lead), window.suffix(doc.text)
        if len(count(prefix)) + len(count(suffix)) + 3 <= max_tokens:
            break
        budget = budget.halved()
    return window, prefix, suffix


def stop_rule_for(shape: Shape, settings: Settings) -> TextStopRule:
    """The decoder-side stop rule (no forward pass past it): end of line, or end of the indented block, or
    inside brackets the end of the line that closes them, whichever comes first."""
    from decoder.infill import completion_stop_rule, earliest

    rule = completion_stop_rule(shape.multiline, shape.indent, settings.max_lines)
    if shape.multiline and shape.open_brackets:
        return earliest(rule, stop_when_closed(shape.open_brackets))
    return rule


def candidate_for(
    doc: Document, geo: Surroundings, settings: Settings, prefix: str, window: Window, text: str
) -> Candidate | None:
    """The rule chain on a model's text, whichever backend wrote it (local engine or remote server)."""
    ctx = RuleContext(
        prefix=prefix,
        line_prefix=geo.line_prefix,
        line_suffix=geo.line_suffix,
        next_lines=doc.text[geo.next_line : window.end],
        multiline=geo.shape.multiline,
        indent=geo.shape.indent,
        max_lines=settings.max_lines,
    )
    return postprocess(ctx, text)


def too_unsure(confidence: float | None, settings: Settings) -> bool:
    """Whether to hold back a suggestion the decoder was unsure of (ghost text that is mostly wrong costs the
    user a glance and an Escape). A backend that reports no confidence is never held back."""
    return confidence is not None and confidence < settings.min_confidence


def run_inline(
    routes: ModelRoutes,
    req: InlineRequest,
    geo: Surroundings,
    settings: Settings,
    interrupt: Callable[[], str | None] | None = None,
) -> tuple[InlineAnswer, Candidate | None]:
    from decoder.generation import GenerationControl, decoder_label
    from decoder.infill import infill

    doc, shape, engine = req.document, geo.shape, routes.inline
    params = routes.params_for(  # the family's block settings unless the user set them
        "inline",
        max_new_tokens=settings.max_tokens_block if shape.multiline else settings.max_tokens_line,
        block_size=settings.block_size,
        threshold=settings.threshold,
        lookup_tokens=settings.lookup_tokens,  # drafts: AR checks them, block commits where the argmax agrees
    )
    if params.sub_block_size is not None and params.sub_block_size > params.block_size:
        params.sub_block_size = params.block_size
    mode = routes.mode_for("inline", params, preferred=settings.inline_mode)
    reserve = params.max_new_tokens + params.block_size + 4
    max_tokens = min(settings.context_tokens, engine.model.config.max_position_embeddings - reserve)
    window, prefix, suffix = fit_window(engine, doc, geo, budget_from(settings), max_tokens)
    stop_rule = stop_rule_for(shape, settings)
    control = GenerationControl(interrupt=interrupt, deadline=time.monotonic() + settings.time_budget_ms / 1000)
    result = infill(
        engine, prefix, suffix, mode, params, stop_rule=stop_rule, control=control, order=routes.fim_order()
    )
    candidate = candidate_for(doc, geo, settings, prefix, window, result.text)
    gen = result.generation
    stop_reason = gen.stop_reason
    if candidate is not None and too_unsure(gen.confidence, settings):
        candidate, stop_reason = None, "low_confidence"
    answer = answer_for(
        geo,
        candidate,
        mode,
        stop_reason,
        **numbers_from(gen),
        commit_steps=list(gen.commit_steps),
        raw_text=result.text,
        window=(window.start, window.end),
        decoder=decoder_label(mode, params.block_size, params.threshold, params.lookup_tokens),
    )
    return answer, candidate
