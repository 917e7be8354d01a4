"""Autoregressive decoding on the shared engine: one token per forward pass, streamed as it comes."""

from __future__ import annotations

import time

from decoder.engine import Engine, PrefillInterrupted
from decoder.generation import GenerationControl, GenerationParams, GenerationResult
from decoder.sampling import choose_token, make_generator


def decode_ar(
    engine: Engine, prompt_ids: list[int], params: GenerationParams, control: GenerationControl | None = None
) -> GenerationResult:
    params.validate()
    control = control or GenerationControl()
    started = time.perf_counter()
    try:
        seq = engine.start(prompt_ids, reserve=params.max_new_tokens, interrupt=control.check)
    except PrefillInterrupted as stop:
        return GenerationResult.interrupted_prefill("ar", stop.reason, len(prompt_ids), started)
    generator = make_generator(params)
    out: list[int] = []
    steps: list[int] = []
    stop_reason = "length"
    while len(out) < params.max_new_tokens:
        logits = engine.next_token_logits(seq)
        if not out and control.first_token_allowed is not None:
            logits = logits.masked_fill(~control.first_token_allowed.to(logits.device), float("-inf"))
        token = choose_token(logits, params, generator)
        if token in params.stop_token_ids:
            stop_reason = "stop_token"
            break
        out.append(token)
        steps.append(seq.forward_passes)
        if control.on_tokens is not None:
            control.on_tokens([token])
        if control.stop_at is not None and (keep := control.stop_at(out)) is not None:
            del out[keep:], steps[keep:]
            stop_reason = "stop_rule"
            break
        if len(out) == params.max_new_tokens:
            break
        if reason := control.check():
            stop_reason = reason
            break
        engine.step(seq, [token], [])
    engine.finish(seq)
    return GenerationResult(
        mode="ar",
        token_ids=out,
        text=engine.tokenizer.decode(out),
        commit_steps=steps,
        forward_passes=seq.forward_passes,
        prompt_tokens=seq.prompt_tokens,
        cached_prompt_tokens=seq.cached_prompt_tokens,
        latency_ms=(time.perf_counter() - started) * 1000,
        stop_reason=stop_reason,
    )
