"""Autoregressive decoding on the shared engine, streamed as tokens come.

One token per forward pass, or more with prompt lookup (`GenerationParams.lookup_tokens`, greedy only): each
pass appends the next token together with a draft of the tokens after it (decoder/lookup.py), and the
pass's own predictions decide how much of the draft to keep: a drafted token is kept while it is the
token greedy decoding would have chosen there, and the first prediction that disagrees is the next token.
So the output is greedy decoding's; only the number of passes changes.
"""

from __future__ import annotations

import time

import torch

from decoder.engine import Engine, PrefillInterrupted
from decoder.generation import GenerationControl, GenerationParams, GenerationResult, fit_allowed
from decoder.lookup import PromptLookup
from decoder.sampling import choose_token, make_generator
from parafill_kernels.reference import token_and_confidence


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
    # Sampled tokens cannot be checked against a draft by argmax: sampling decodes one token per pass.
    lookup = PromptLookup(prompt_ids) if params.lookup_tokens and generator is None else None
    out: list[int] = []
    steps: list[int] = []
    confidences: list[float] = []

    def take(token: int, confidence: float) -> str | None:
        """Append a final token (committed by the latest pass); a reason to stop, or None."""
        if token in params.stop_token_ids:
            return "stop_token"
        out.append(token)
        steps.append(seq.forward_passes)
        confidences.append(confidence)
        if control.stop_at is not None and (keep := control.stop_at(out)) is not None:
            del out[keep:], steps[keep:], confidences[keep:]  # cut off: never final, never streamed
            return "stop_rule"
        if control.on_tokens is not None:
            control.on_tokens([token])
        return "length" if len(out) == params.max_new_tokens else None

    logits = engine.next_token_logits(seq)
    if control.first_token_allowed is not None:
        logits = logits.masked_fill(~fit_allowed(control.first_token_allowed, logits), float("-inf"))
    token = choose_token(logits, params, generator)
    confidence = probability_of(logits, token)
    while True:
        if (stop_reason := take(token, confidence)) or (stop_reason := control.check()):
            break
        draft: list[int] = []
        if lookup is not None:
            lookup.extend([token])
            draft = lookup.draft(min(params.lookup_tokens, params.max_new_tokens - len(out)))
        hidden = engine.verify(seq, [token, *draft])
        if not draft:
            logits = engine.logits(hidden[-1])
            token = choose_token(logits, params, generator)
            confidence = probability_of(logits, token)
            continue
        # Row i: greedy choice after [token, *draft][i], and how sure the model was of it (the denoise step's
        # own definition: argmax, lowest id on ties, and its softmax probability).
        greedy, best_probability = token_and_confidence(engine.logits(hidden))
        predicted, sureness = greedy.tolist(), best_probability.tolist()
        kept = 0
        while kept < len(draft) and predicted[kept] == draft[kept]:
            kept += 1
        if kept < len(draft):
            engine.truncate(seq, seq.length - len(draft) + kept, hidden[kept])
        for drafted, drafted_confidence in zip(draft[:kept], sureness, strict=False):
            if stop_reason := take(drafted, drafted_confidence):
                break
        if stop_reason:
            break
        lookup.extend(draft[:kept])
        token, confidence = predicted[kept], sureness[kept]
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
        token_confidences=confidences,
    )


def probability_of(logits: torch.Tensor, token: int) -> float:
    """The model's probability of `token` under `logits` (a -inf row gives 0)."""
    return float(torch.softmax(logits.float(), dim=-1)[token].nan_to_num(0.0))
