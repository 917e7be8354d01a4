"""Run infill and explain tasks through the decoders and aggregate quality, parallelism and latency."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import torch
from tqdm import tqdm

from decoder.engine import Engine
from decoder.evaluation.metrics import (
    confidence_coverage,
    edit_similarity,
    exact_match,
    leftmost_commit_fraction,
    position_order_tau,
    stutter,
)
from decoder.evaluation.tasks import ExplainTask, InfillTask
from decoder.generation import GenerationControl, GenerationParams, GenerationResult, decoder_label
from decoder.infill import completion_stop_rule, infill
from decoder.prompts import build_explain_prompt, explain_stop_rule
from decoder.router import generate

K = TypeVar("K")  # what names a text in bits_by_file (a held-out file's name)


@dataclass(frozen=True)
class DecodeConfig:
    mode: str  # "ar" or "block"
    threshold: float = 0.9
    block_size: int = 8
    lookup_tokens: int = 0  # prompt-lookup drafts (decoder/lookup.py): AR checks them, block commits agreeing ones

    @property
    def label(self) -> str:
        return decoder_label(self.mode, self.block_size, self.threshold, self.lookup_tokens)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)] if ordered else float("nan")


def decode_task(
    engine: Engine,
    task: InfillTask | ExplainTask,
    config: DecodeConfig,
    max_new_tokens: int,
    token_healing: bool = True,
    fallback_window: int = 2,
    defer_repeats: bool = False,
) -> tuple[str, GenerationResult]:
    """One task through one configuration, as the server would answer it: the prediction and the generation."""
    params = GenerationParams(
        max_new_tokens=max_new_tokens,
        block_size=config.block_size,
        threshold=config.threshold,
        fallback_window=fallback_window,
        lookup_tokens=config.lookup_tokens,
        defer_repeats=defer_repeats,
    )
    if isinstance(task, ExplainTask):
        return _explain(engine, task, config.mode, params)
    rule = completion_stop_rule(multiline=task.kind != "line", indent=task.indent, max_lines=16)
    res = infill(engine, task.prefix, task.suffix, config.mode, params, rule, token_healing=token_healing)
    return res.text, res.generation


def run_configs(
    engine: Engine,
    tasks: list[InfillTask] | list[ExplainTask],
    configs: list[DecodeConfig],
    max_new_tokens: dict[str, int],
    token_healing: bool = True,
    fallback_window: int = 2,
    progress: bool = True,
    defer_repeats: bool = False,
) -> list[dict]:
    """One row per configuration over `tasks`, task by task: each task's prompt is prefilled once and every
    configuration then decodes it warm, the prompt in the prefix cache (as one keystroke later in the editor).

    Why: a cold request per task and configuration spent most of an eval on prefilling the same prompts again.
    The cache is cleared before each task and primed by an untimed one-token request, so every timed request
    finds the same cached prompt whatever ran before it; in fp32 the scores are those of cold requests."""
    decoded: list[list[tuple[str, GenerationResult]]] = [[] for _ in configs]
    desc = configs[0].label if len(configs) == 1 else f"{len(configs)} configurations"
    for task in tqdm(tasks, desc=desc, disable=not progress, leave=False):
        engine.clear_prefix_cache()
        decode_task(engine, task, configs[0], 1, token_healing, fallback_window, defer_repeats)  # primes the cache
        for out, config in zip(decoded, configs, strict=True):
            out.append(
                decode_task(
                    engine, task, config, max_new_tokens[task.kind], token_healing, fallback_window, defer_repeats
                )
            )
    return [summarize(tasks, config, out) for config, out in zip(configs, decoded, strict=True)]


def summarize(
    tasks: list[InfillTask] | list[ExplainTask], config: DecodeConfig, decoded: list[tuple[str, GenerationResult]]
) -> dict:
    """A report row: quality, parallelism and latency of one configuration over its tasks."""
    em, es, stutters, latency, tokens, passes, arness, taus, samples = [], [], [], [], 0, 0, [], [], []
    confidences: list[float | None] = []
    stutter_samples: list[dict] = []
    cached = 0  # prompt tokens served from the prefix cache
    for task, (prediction, gen) in zip(tasks, decoded, strict=True):
        em.append(exact_match(prediction, task.target))
        es.append(edit_similarity(prediction, task.target))
        stutters.append(stutter(prediction, task.target))
        confidences.append(gen.confidence)
        latency.append(gen.latency_ms)
        tokens += len(gen.token_ids)
        cached += gen.cached_prompt_tokens
        passes += gen.forward_passes  # the prefill counts as one: AR's gives the first token, block's is its first step
        if config.mode == "block" and gen.commit_steps:
            arness.append(leftmost_commit_fraction(gen.commit_steps, config.block_size))
            tau = position_order_tau(gen.commit_steps, config.block_size)
            if not math.isnan(tau):
                taus.append(tau)
        if len(samples) < 5:
            samples.append({"task": task.name, "target": task.target, "prediction": prediction})
        if stutters[-1] and len(stutter_samples) < 5:
            stutter_samples.append({"task": task.name, "target": task.target, "prediction": prediction})
    mean = statistics.fmean
    return {
        "config": config.label,
        "mode": config.mode,
        "threshold": config.threshold,
        "block_size": config.block_size,
        "lookup_tokens": config.lookup_tokens,
        "tasks": len(tasks),
        "exact_match": round(mean(em), 4) if em else None,
        # Binomial standard error of the exact-match rate.
        "exact_match_se": round(math.sqrt(mean(em) * (1 - mean(em)) / len(em)), 4) if em else None,
        "edit_similarity": round(mean(es), 4) if es else None,
        # Standard error of the mean edit similarity: differences well inside ~2 of these are noise.
        "edit_similarity_se": round(statistics.stdev(es) / math.sqrt(len(es)), 4) if len(es) > 1 else None,
        # Tokens of the completion per forward pass, the prefill counted as one pass per request. Tokens decoded
        # past the stop rule's cut (a block step commits several at once) are not part of it and not counted.
        "tokens_per_forward": round(tokens / max(1, passes), 4),
        # Completions that repeat a word back to back ("in in") more often than their target: degenerate output.
        "stutter_rate": round(mean(stutters), 4) if stutters else None,
        "stutter_rate_se": round(math.sqrt(mean(stutters) * (1 - mean(stutters)) / len(stutters)), 4)
        if stutters
        else None,
        "ar_ness_leftmost_fraction": round(mean(arness), 4) if arness else None,
        "ar_ness_kendall_tau": round(mean(taus), 4) if taus else None,
        "cached_prompt_tokens": cached,
        "latency_ms_p50": round(statistics.median(latency), 2) if latency else None,
        "latency_ms_p90": round(_percentile(latency, 0.9), 2) if latency else None,
        # What a ghost-text confidence gate (the minConfidence setting) would keep, and how good that is.
        "confidence_coverage": confidence_coverage(confidences, em, es),
        # In task order (the report's task_names): what `parafill report compare` pairs between two models.
        "task_scores": {
            "exact_match": [int(x) for x in em],
            "edit_similarity": [round(x, 4) for x in es],
            "stutter": [int(x) for x in stutters],
        },
        "samples": samples,
        "stutter_samples": stutter_samples,
    }


def _explain(engine: Engine, task: ExplainTask, mode: str, params: GenerationParams) -> tuple[str, GenerationResult]:
    """The explain route on one function, ended as the server ends it; the prediction is the first line."""
    prompt = build_explain_prompt(engine.tokenizer, task.code)
    eot = engine.tokenizer.special.end_of_text
    params.stop_token_ids = params.stop_token_ids | ({eot} if eot is not None else set())
    gen = generate(engine, prompt.ids, mode, params, GenerationControl(stop_at=explain_stop_rule(engine.tokenizer)))
    first_line = next((line for line in gen.text.split("\n") if line.strip()), "")
    return first_line, gen


def equal_shares(lengths: list[int], budget: int) -> list[int]:
    """How much of each length to take so that the takes sum to at most `budget`, as equal as the lengths
    allow: the shortest are taken whole when their share covers them, and what they leave goes to the rest."""
    shares = [0] * len(lengths)
    for done, i in enumerate(sorted(range(len(lengths)), key=lengths.__getitem__)):
        shares[i] = min(lengths[i], budget // (len(lengths) - done))
        budget -= shares[i]
    return shares


def aggregate_bits_per_byte(counts: Iterable[tuple[float, int]]) -> float:
    """Bits per byte of the (bits, bytes) pairs taken together."""
    pairs = list(counts)
    n_bytes = sum(b for _, b in pairs)
    return sum(bits for bits, _ in pairs) / n_bytes if n_bytes else float("nan")


def bits_by_file(
    engine: Engine, texts: Mapping[K, str], max_tokens: int = 40_000, window: int = 512
) -> dict[K, tuple[float, int]]:
    """(bits, bytes) of each text's first tokens under the causal next-token loss, `max_tokens` in all.

    Every text gets an equal share of the budget (the first tokens of each; a short text's unused share goes
    to the others), so one long file, such as a table of HTML entities, cannot stand for the whole set. Kept
    per file so two models can be compared file by file (`reports.compare_bits_per_byte`)."""
    model, tok = engine.model, engine.tokenizer
    eot = tok.special.end_of_text
    encoded = {key: tok.encode(text) for key, text in texts.items()}
    shares = equal_shares([len(ids) for ids in encoded.values()], max_tokens)
    out: dict[K, tuple[float, int]] = {}
    with torch.inference_mode():
        for (key, ids), share in zip(encoded.items(), shares, strict=True):
            ids = ids[:share]
            if len(ids) < 2:
                continue
            ids = [eot, *ids] if eot is not None else ids
            nll_bits = 0.0
            for start in range(0, len(ids) - 1, window):
                chunk = torch.tensor([ids[start : start + window + 1]], device=engine.device)
                positions = torch.arange(chunk.shape[1] - 1, device=engine.device)[None]
                logits = model.logits(model(chunk[:, :-1], positions)).float()
                nll = torch.nn.functional.cross_entropy(logits[0], chunk[0, 1:], reduction="sum")
                nll_bits += float(nll) / math.log(2)
            out[key] = (nll_bits, len(tok.decode(ids[1:] if eot is not None else ids).encode("utf-8")))
    return out
