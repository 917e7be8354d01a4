"""Run the engine-level sections of `parafill bench` and assemble the report (a JSON-ready dict).

Sections: spans (latency vs span, with llama.cpp beside ours when given GGUF files), threshold (tokens per
forward and quality), cache (cold vs warm at several context lengths). The LSP-path section is run by
lsp_server/cmd_bench.py, which drives a real server process.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from decoder.bench.cache import cache_cold_warm, random_weight_engine
from decoder.bench.prompts import fim_prompts, long_code
from decoder.bench.spans import EngineSpanRunner, SpanRunner, SpanSample, measure_spans, ratios, summarise_spans
from decoder.bench.threshold import quality_vs_threshold
from decoder.engine import Engine
from decoder.engines import family_params

SECTIONS = ("spans", "threshold", "cache", "lsp")


@dataclass
class BenchOptions:
    spans: list[int] = field(default_factory=lambda: [8, 16, 32, 64, 128])
    prompts: int = 4
    repeats: int = 1
    threads: list[int] = field(default_factory=lambda: [1, 2])
    block_size: int | None = None  # None: the model family's
    threshold: float | None = None  # None: the model family's (the block runner of the span section)
    span_thresholds: list[float] = field(default_factory=list)  # more block runners in the span section
    thresholds: list[float] = field(default_factory=lambda: [0.9, 0.7, 0.5, 0.3])
    tasks: int = 40
    contexts: list[int] = field(default_factory=lambda: [512, 2048, 8192])
    cache_span: int = 16
    cache_repeats: int = 3
    random_positions: int = 16384  # positions of the random-weight engine for contexts the model cannot hold
    seed: int = 0
    progress: bool = True


def _bar(desc: str, enabled: bool) -> Callable[[Iterable], Iterable]:
    def wrap(items: Iterable) -> Iterable:
        items = list(items)
        return tqdm(items, desc=desc, unit="cell", leave=False, disable=not enabled)

    return wrap


def model_info(engine: Engine, folder: Path | None) -> dict[str, Any]:
    cfg = engine.model.config
    out: dict[str, Any] = {
        "folder": str(folder) if folder else None,
        "parameters": engine.model.num_parameters(),
        "hidden_size": cfg.hidden_size,
        "layers": cfg.num_hidden_layers,
        "vocab_size": cfg.vocab_size,
        "max_position_embeddings": cfg.max_position_embeddings,
        "dtype": str(engine.dtype).removeprefix("torch."),
    }
    if folder is not None:
        weights = sorted(Path(folder).glob("*.safetensors"))
        digest = hashlib.sha256()
        for path in weights:
            digest.update(path.read_bytes())
        out["weights_sha256"] = digest.hexdigest()[:16]
        training = Path(folder) / "training.json"
        if training.is_file():
            try:
                data = json.loads(training.read_text())
                out["training"] = {k: data.get(k) for k in ("tokens_seen", "steps", "train_minutes", "stage")}
                out["training"]["metrics"] = data.get("metrics")
            except (OSError, ValueError):
                pass
    return out


def run_spans(
    engine: Engine,
    opts: BenchOptions,
    extra_runners: Callable[[int], list[SpanRunner]] | None = None,
) -> dict[str, Any]:
    """Latency vs span at each thread count: AR, block diffusion (the family's settings, plus any extra
    thresholds), and whatever `extra_runners(threads)` adds (llama.cpp), interleaved on the same prompts."""
    prompts = fim_prompts(engine.tokenizer, opts.prompts, opts.seed)
    base = family_params(engine, block_size=opts.block_size, threshold=opts.threshold)
    out: dict[str, Any] = {
        "spans": opts.spans,
        "prompts": [{"name": p.name, "tokens": len(p.ids)} for p in prompts],
        "repeats": opts.repeats,
        "block_size": base.block_size,
        "what": "exactly N new tokens per request (stop tokens off), prompt cold (cache cleared); decode_ms "
        "is the time after the prefill; exponents are least-squares slopes of log(ms) vs log(N)",
        "threads": {},
    }
    saved = torch.get_num_threads()
    try:
        for threads in opts.threads:
            torch.set_num_threads(threads)
            runners: list[SpanRunner] = [EngineSpanRunner(engine, "ar", base)]
            for t in [base.threshold, *opts.span_thresholds]:
                params = family_params(engine, block_size=opts.block_size, threshold=t)
                runners.append(EngineSpanRunner(engine, "block", params))
            if extra_runners is not None:
                runners += extra_runners(threads)
            started = time.perf_counter()
            samples = measure_spans(
                runners, prompts, opts.spans, opts.repeats, _bar(f"spans {threads} thr", opts.progress)
            )
            summary = summarise_spans(samples)
            out["threads"][str(threads)] = {
                "seconds": round(time.perf_counter() - started, 1),
                "summary": summary,
                "total_ms_over_ar": ratios(summary, "ar", "total_ms"),
                "decode_ms_over_ar": ratios(summary, "ar", "decode_ms"),
                "greedy_agreement_with_ar": _agreement(samples, "ar"),
                "samples": [s.to_json() for s in samples],
            }
    finally:
        torch.set_num_threads(saved)
    return out


def _agreement(samples: list[SpanSample], reference: str) -> dict[str, float]:
    """Per runner: mean fraction of tokens equal to the reference runner's, position by position, on
    the same prompt and span (llama.cpp vs our AR: greedy parity; block vs AR: how far diffusion strays)."""
    ref = {(s.prompt, s.span): s.token_ids for s in samples if s.runner == reference}
    out: dict[str, list[float]] = {}
    for s in samples:
        other = ref.get((s.prompt, s.span))
        if s.runner == reference or other is None:
            continue
        same = sum(a == b for a, b in zip(s.token_ids, other, strict=False)) / max(1, len(other))
        out.setdefault(s.runner, []).append(same)
    return {name: round(sum(v) / len(v), 4) for name, v in out.items()}


def run_threshold(engine: Engine, opts: BenchOptions) -> dict[str, Any]:
    torch.set_num_threads(opts.threads[0])
    block = family_params(engine, block_size=opts.block_size).block_size
    return quality_vs_threshold(
        engine, opts.thresholds, block, limit=opts.tasks, seed=opts.seed, progress=opts.progress
    )


def run_cache(engine: Engine, opts: BenchOptions) -> dict[str, Any]:
    """Cold vs warm on the model for the contexts it can hold, and on a random-weight engine of the same
    shape with `random_positions` positions for all of them (timing only)."""
    torch.set_num_threads(opts.threads[0])
    params = family_params(engine, block_size=opts.block_size, threshold=opts.threshold)
    code = long_code()
    out: dict[str, Any] = {}
    limit = engine.model.config.max_position_embeddings
    contexts = list(opts.contexts)
    largest = (limit - opts.cache_span - params.block_size) // 64 * 64
    if any(c > limit for c in contexts) and largest not in contexts:
        contexts.append(largest)  # the longest context the model can hold, in place of what it cannot
    out["model"] = cache_cold_warm(
        engine,
        code,
        sorted(contexts),
        params,
        span=opts.cache_span,
        repeats=opts.cache_repeats,
        progress=_bar("cache (model)", opts.progress),
    )
    out["model"]["label"] = f"the model (max_position_embeddings {limit})"
    if any(c + opts.cache_span + params.block_size > limit for c in opts.contexts):
        random = random_weight_engine(engine, opts.random_positions, opts.seed)
        out["random_weights"] = cache_cold_warm(
            random,
            code,
            opts.contexts,
            params,
            span=opts.cache_span,
            repeats=opts.cache_repeats,
            progress=_bar("cache (random weights)", opts.progress),
        )
        out["random_weights"]["label"] = (
            f"RANDOM WEIGHTS, the model's shape, max_position_embeddings {opts.random_positions} (timing only)"
        )
        out["random_weights"]["note"] = (
            "read the prefill columns: random weights commit several tokens per block-diffusion step, so their "
            "decode time is not the trained model's"
        )
    return out
