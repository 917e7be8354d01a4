"""Prefix cache: request latency with a cold cache vs after a keystroke (warm), at several context lengths.

cold: the cache is cleared, the whole prompt is prefilled, then a `span`-token inline completion decodes.
warm: one character typed at the cursor. With the suffix first (SPM), only the tail of the prompt
changes: the radix cache supplies the rest (in whole pages) and the engine prefills tens of tokens.

Contexts longer than the model's positions are not run on it; `random_weight_engine` gives an engine of
the same shape with more positions, for timing only (its output is noise), labelled as such in the report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import torch

from decoder.bench.prompts import context_prompt
from decoder.bench.spans import EngineSpanRunner
from decoder.bench.stats import median
from decoder.config import ModelConfig
from decoder.engine import Engine
from decoder.generation import GenerationParams
from decoder.model import CausalLM

TYPED = "xyzwvu"  # one character per repeat, so no warm request repeats an earlier prompt


def random_weight_engine(engine: Engine, max_positions: int, seed: int = 0) -> Engine:
    """An engine with `engine`'s shape and tokenizer but random weights and `max_positions` positions."""
    cfg = engine.model.config
    fields = {k: getattr(cfg, k) for k in ModelConfig.__dataclass_fields__ if k not in ("extra", "architecture")}
    fields["max_position_embeddings"] = max_positions
    torch.manual_seed(seed)
    model = CausalLM(ModelConfig(**fields)).to(engine.dtype).eval()
    options = replace(engine.options, use_prefix_cache=True)
    return Engine(model, engine.tokenizer, options)


def cache_cold_warm(
    engine: Engine,
    code: str,
    contexts: list[int],
    params: GenerationParams,
    mode: str = "block",
    span: int = 16,
    repeats: int = 3,
    progress: Callable[[Iterable], Iterable] | None = None,
) -> dict[str, Any]:
    """Cold and warm latency per context length (medians over `repeats`), with the prompt tokens the cache
    supplied. Contexts that do not fit the model's positions are listed under `skipped`."""
    limit = engine.model.config.max_position_embeddings
    fits = [c for c in contexts if c + span + params.block_size <= limit]
    runner = EngineSpanRunner(engine, mode, params)
    tok = engine.tokenizer
    prompts = {c: context_prompt(tok, code, c) for c in fits}
    samples: dict[tuple[int, str], list] = {(c, k): [] for c in fits for k in ("cold", "warm")}
    if fits:
        runner.run(prompts[fits[0]].ids, span)  # warm-up (Python, allocator), not measured
    cells = [(r, c) for r in range(repeats) for c in fits]
    for r, c in progress(cells) if progress else cells:
        samples[(c, "cold")].append(runner.run(prompts[c].ids, span, cold=True))
        typed = context_prompt(tok, code, c, typed=TYPED[r % len(TYPED)])
        samples[(c, "warm")].append(runner.run(typed.ids, span, cold=False))
    rows = []
    for c in fits:
        cold, warm = samples[(c, "cold")], samples[(c, "warm")]
        cold_ms, warm_ms = median([s.total_ms for s in cold]), median([s.total_ms for s in warm])
        rows.append(
            {
                "context_tokens": len(prompts[c].ids),
                "target": c,
                "n": len(cold),
                "cold_ms": round(cold_ms, 2),
                "warm_ms": round(warm_ms, 2),
                "cold_prefill_ms": round(median([s.prefill_ms for s in cold]), 2),
                "warm_prefill_ms": round(median([s.prefill_ms for s in warm]), 2),
                "decode_ms": round(median([s.decode_ms for s in cold + warm]), 2),
                "warm_cached_prompt_tokens": round(median([s.cached_prompt_tokens for s in warm])),
                "warm_prompt_tokens": round(median([s.prompt_tokens for s in warm])),
                "cold_over_warm": round(cold_ms / warm_ms, 2) if warm_ms else None,
            }
        )
    return {
        "mode": mode,
        "span": span,
        "max_position_embeddings": limit,
        "rows": rows,
        "skipped": [
            {"target": c, "reason": f"exceeds max_position_embeddings ({limit}) with a {span}-token span"}
            for c in contexts
            if c not in fits
        ],
    }
