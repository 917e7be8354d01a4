"""Latency vs span length: each decoder produces exactly N tokens from the same prompt ids.

A span runner answers one request with a cold prompt (nothing cached) and reports the prefill and the
decoding apart: decoding (prompt in the KV cache -> N tokens final) is what block diffusion changes, and
its log-log exponent is the number to read (1.0: linear, as AR must be; below 1: sublinear). The first
token comes from the prefill's last hidden state in every runner, as in llama.cpp.

Stop tokens are off, so every runner decodes the whole span whatever the model says.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from decoder.bench.prompts import BenchPrompt
from decoder.bench.stats import loglog_fit, median
from decoder.engine import Engine
from decoder.generation import GenerationParams, decoder_label
from decoder.router import generate


@dataclass
class SpanSample:
    runner: str
    span: int
    prompt: str
    prompt_tokens: int
    prefill_ms: float
    decode_ms: float  # after the prefill, until `tokens` tokens are final
    tokens: int
    decode_passes: int  # forward passes after the prefill (llama.cpp: tokens - 1)
    token_ids: list[int]
    cached_prompt_tokens: int = 0  # prompt tokens the prefix cache supplied

    @property
    def total_ms(self) -> float:
        return self.prefill_ms + self.decode_ms

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("token_ids")
        for key in ("prefill_ms", "decode_ms"):
            out[key] = round(out[key], 3)
        out["total_ms"] = round(self.total_ms, 3)
        return out


class SpanRunner(Protocol):
    name: str

    def run(self, prompt_ids: list[int], span: int) -> SpanSample: ...


class _PrefillClock:
    """Stands in for the engine: delegates everything, notes when `start` (the prefill) returns.

    The block decoder defers the prompt's last prefill chunk into its first step, so its time "after the
    prefill" includes that chunk: compare whole requests across decoders, decode times within one."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.prefill_done: float | None = None

    def start(self, *args: Any, **kwargs: Any) -> Any:
        seq = self._engine.start(*args, **kwargs)
        self.prefill_done = time.perf_counter()
        return seq

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


class EngineSpanRunner:
    """Our engine with one decoder ("block" or "ar"); the prefix cache is cleared before each request."""

    def __init__(self, engine: Engine, mode: str, params: GenerationParams, name: str | None = None) -> None:
        self.engine, self.mode = engine, mode
        self.params = replace(params, stop_token_ids=frozenset(), temperature=0.0)
        self.name = name or decoder_label(mode, params.block_size, params.threshold, params.lookup_tokens)

    def run(self, prompt_ids: list[int], span: int, cold: bool = True) -> SpanSample:
        """One request of exactly `span` new tokens; `cold`: clear the prefix cache first."""
        if cold:
            self.engine.clear_prefix_cache()
        clock = _PrefillClock(self.engine)
        params = replace(self.params, max_new_tokens=span)
        started = time.perf_counter()
        result = generate(clock, prompt_ids, self.mode, params)  # type: ignore[arg-type]
        ended = time.perf_counter()
        prefill_done = clock.prefill_done or started
        return SpanSample(
            runner=self.name,
            span=span,
            prompt="",
            prompt_tokens=len(prompt_ids),
            prefill_ms=(prefill_done - started) * 1000,
            decode_ms=(ended - prefill_done) * 1000,
            tokens=len(result.token_ids),
            decode_passes=result.forward_passes - 1,
            token_ids=result.token_ids,
            cached_prompt_tokens=result.cached_prompt_tokens,
        )


def measure_spans(
    runners: list[SpanRunner],
    prompts: list[BenchPrompt],
    spans: list[int],
    repeats: int = 1,
    progress: Callable[[Iterable], Iterable] | None = None,
) -> list[SpanSample]:
    """Every (prompt, span) on every runner, interleaved: the runner order rotates from one measurement
    to the next, so a load drifting over the run favours none of them. One unmeasured warm-up each."""
    for runner in runners:
        runner.run(prompts[0].ids, min(spans))
    cells = [(r, p, s) for r in range(repeats) for p in prompts for s in spans]
    samples = []
    for n, (_, prompt, span) in enumerate(progress(cells) if progress else cells):
        shift = n % len(runners)
        for runner in runners[shift:] + runners[:shift]:
            sample = runner.run(prompt.ids, span)
            sample.prompt = prompt.name
            samples.append(sample)
    return samples


def summarise_spans(samples: list[SpanSample]) -> dict[str, Any]:
    """Per runner: medians per span, ms per token, tokens per decoding pass, and the log-log exponents of
    decode and total (cold prompt) latency vs span."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(s.runner for s in samples):
        mine = [s for s in samples if s.runner == name]
        rows = []
        for span in sorted({s.span for s in mine}):
            cell = [s for s in mine if s.span == span]
            passes = sum(s.decode_passes for s in cell)
            rows.append(
                {
                    "span": span,
                    "n": len(cell),
                    "prefill_ms": round(median([s.prefill_ms for s in cell]), 3),
                    "decode_ms": round(median([s.decode_ms for s in cell]), 3),
                    "total_ms": round(median([s.total_ms for s in cell]), 3),
                    "decode_ms_per_token": round(median([s.decode_ms / max(1, s.tokens - 1) for s in cell]), 4),
                    "decode_ms_per_pass": round(median([s.decode_ms / max(1, s.decode_passes) for s in cell]), 4),
                    # tokens after the first (which the prefill gives) per decoding pass
                    "tokens_per_decode_pass": round(sum(s.tokens - 1 for s in cell) / passes, 3) if passes else None,
                }
            )
        xs = [r["span"] for r in rows]
        out[name] = {
            "rows": rows,
            "fit_decode": loglog_fit(xs, [r["decode_ms"] for r in rows]).to_json(),
            "fit_total": loglog_fit(xs, [r["total_ms"] for r in rows]).to_json(),
        }
    return out


def ratios(summary: dict[str, Any], reference: str, key: str = "total_ms") -> dict[str, dict[int, float]]:
    """Each runner's `key` over the reference runner's, per span (above 1: slower than the reference)."""
    ref = {r["span"]: r[key] for r in summary[reference]["rows"]}
    out: dict[str, dict[int, float]] = {}
    for name, entry in summary.items():
        out[name] = {r["span"]: round(r[key] / ref[r["span"]], 3) for r in entry["rows"] if ref.get(r["span"])}
    return out
