"""The block decoder on the Fast-dLLM v2 and SDAR replicas, with their published block settings, against
an independent uncached re-statement of each reference decoder (tests/families/oracle.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from decoder.block_causal_engine import BlockCausalEngine, BlockLayoutError
from decoder.engine import EngineOptions
from decoder.engines import family_params, open_family_engine
from decoder.generation import GenerationControl, GenerationParams
from decoder.lookup import PromptLookup
from decoder.router import generate
from tests.families import oracle

CODE = "class Stack:\n    def push(self, item):\n        self.items.append(item)\n\n    def pop(self):\n"


@pytest.fixture(scope="module")
def fast_dllm(replica) -> BlockCausalEngine:
    return open_family_engine(replica("fast_dllm_v2_1_5b"), EngineOptions(use_prefix_cache=False))


@pytest.fixture(scope="module")
def sdar(replica) -> BlockCausalEngine:
    return open_family_engine(replica("sdar_1_7b_chat"), EngineOptions(use_prefix_cache=False))


def _prompt(engine, length: int) -> list[int]:
    ids = engine.tokenizer.encode(CODE * 8)
    assert len(ids) >= length
    return ids[:length]


def test_published_block_settings_are_the_defaults(fast_dllm, sdar):
    p = family_params(fast_dllm)
    assert (fast_dllm.block_size, p.sub_block_size, p.threshold) == (32, 8, 0.9)
    assert fast_dllm.token_shift and fast_dllm.mask_token_id == 151665
    p = family_params(sdar)
    assert (sdar.block_size, p.sub_block_size, p.threshold) == (4, None, 0.9)
    assert not sdar.token_shift and sdar.mask_token_id == 151669


# The prompt ends inside a block, or exactly on the block grid; the published threshold, and a lower one
# under which most steps commit several positions at once.
@pytest.mark.parametrize(("length", "threshold"), [(45, 0.9), (64, 0.9), (45, 0.5)])
def test_fast_dllm_v2_matches_the_reference_decoder(fast_dllm, length, threshold):
    prompt = _prompt(fast_dllm, length)
    params = family_params(fast_dllm, max_new_tokens=40, threshold=threshold)
    ours = generate(fast_dllm, prompt, "block", params)
    stops = set(params.stop_token_ids)
    ref = oracle.fast_dllm_v2(fast_dllm.model, prompt, 151665, 32, 8, threshold, 40, stops, fast_dllm.logit_bias)
    assert ours.token_ids == ref[:40]
    assert len(ours.token_ids) == 40 or ours.stop_reason == "stop_token"
    # Sub-blocks are decided left to right: nothing in sub-block k+1 is committed before sub-block k is done.
    where = [((length + i) // 32, (length + i) % 32 // 8, step) for i, step in enumerate(ours.commit_steps)]
    for block_a, sub_a, step_a in where:
        for block_b, sub_b, step_b in where:
            if block_a == block_b and sub_a < sub_b:
                assert step_a <= step_b


@pytest.mark.parametrize(("length", "threshold"), [(30, 0.9), (32, 0.9), (30, 0.5)])
def test_sdar_matches_the_reference_decoder(sdar, length, threshold):
    prompt = _prompt(sdar, length)
    params = family_params(sdar, max_new_tokens=14, threshold=threshold)
    ours = generate(sdar, prompt, "block", params)
    ref = oracle.sdar(sdar.model, prompt, 151669, 4, threshold, 14, set(params.stop_token_ids), sdar.logit_bias)
    assert ours.token_ids == ref[:14]
    assert len(ours.token_ids) == 14 or ours.stop_reason == "stop_token"
    assert all(s <= 4 for s in ours.steps_per_block)
    # One pass per block step plus the prefill: finished blocks are committed inside the next block's step.
    assert ours.forward_passes == 1 + sum(ours.steps_per_block)


def test_block_causal_prefix_cache_reuses_whole_blocks_only(replica):
    engine = open_family_engine(replica("fast_dllm_v2_1_5b"), EngineOptions(use_prefix_cache=True))
    prompt = _prompt(engine, 120)
    params = family_params(engine, max_new_tokens=8)
    cold = generate(engine, prompt, "block", params)
    warm = generate(engine, prompt, "block", params)
    edited = generate(engine, [*prompt[:70], 11, *prompt[71:]], "block", params)
    assert warm.token_ids == cold.token_ids
    assert cold.cached_prompt_tokens == 0
    assert warm.cached_prompt_tokens == 64  # whole 32-blocks on the 16-page grid, one block left to prefill
    assert edited.cached_prompt_tokens == 64  # the edit at 70 is in block [64, 96): blocks before it reused
    uncached = open_family_engine(replica("fast_dllm_v2_1_5b"), EngineOptions(use_prefix_cache=False))
    edited_cold = generate(uncached, [*prompt[:70], 11, *prompt[71:]], "block", params)
    assert edited.token_ids == edited_cold.token_ids


def test_block_causal_cache_never_joins_pages_of_different_requests(replica):
    # Blocks of 32 over a 16-token page option. B shares only its first 16 tokens with A, so on 16-token pages
    # a repeat of B would match A's first page (keys computed with A's tokens 16-31 of the same block) joined
    # to B's second page: wrong KV. Whole-block pages keep each page's KV on its own path.
    cached = open_family_engine(replica("fast_dllm_v2_1_5b"), EngineOptions(use_prefix_cache=True, page_size=16))
    uncached = open_family_engine(replica("fast_dllm_v2_1_5b"), EngineOptions(use_prefix_cache=False))
    a = _prompt(cached, 96)
    b = a[:16] + [token + 1 for token in a[16:]]
    for prompt in (a, b):
        cached.finish(cached.start(prompt, reserve=8))
    warm, cold = cached.start(b, reserve=8), uncached.start(b, reserve=8)
    assert warm.cached_prompt_tokens == 64  # B's own two blocks; the last block is prefilled
    torch.testing.assert_close(cached.next_token_logits(warm), uncached.next_token_logits(cold), rtol=0, atol=1e-5)


def test_ar_decoding_is_refused_on_a_block_causal_layout(sdar):
    with pytest.raises(BlockLayoutError, match="block-causal"):
        generate(sdar, _prompt(sdar, 32), "ar", GenerationParams(max_new_tokens=4))
    with pytest.raises(BlockLayoutError, match="inside a block"):
        generate(sdar, _prompt(sdar, 30), "ar", GenerationParams(max_new_tokens=4))


def test_stop_rules_and_limits_end_the_span(fast_dllm):
    prompt = _prompt(fast_dllm, 40)
    params = family_params(fast_dllm, max_new_tokens=5)
    res = generate(fast_dllm, prompt, "block", params)
    assert len(res.token_ids) == 5 and res.stop_reason == "length"
    full = generate(fast_dllm, prompt, "block", family_params(fast_dllm, max_new_tokens=20))
    stop_at = full.token_ids[3]
    params = family_params(fast_dllm, max_new_tokens=20, stop_token_ids=frozenset({stop_at}))
    res = generate(fast_dllm, prompt, "block", params)
    assert res.stop_reason == "stop_token"
    assert res.token_ids == full.token_ids[: full.token_ids.index(stop_at)]


@pytest.mark.parametrize(("family", "length"), [("fast", 45), ("fast", 64), ("sdar", 30), ("sdar", 32)])
def test_token_healing_constrains_the_first_output_token(fast_dllm, sdar, family, length):
    engine = fast_dllm if family == "fast" else sdar
    allowed = torch.zeros(engine.model.config.vocab_size, dtype=torch.bool)
    allowed[[100, 101]] = True
    control = GenerationControl(first_token_allowed=allowed)
    res = generate(engine, _prompt(engine, length), "block", family_params(engine, max_new_tokens=6), control)
    assert res.token_ids[0] in (100, 101) and len(res.token_ids) == 6


def test_infill_with_stop_rules_runs_on_a_block_causal_model(fast_dllm):
    from decoder.infill import infill, stop_at_line_end

    res = infill(
        fast_dllm,
        CODE + "        return self.",
        "\n",
        "block",
        family_params(fast_dllm, max_new_tokens=12),
        stop_at_line_end,
    )
    assert "\n" not in res.text and res.generation.stop_reason in ("stop_rule", "stop_token", "length")
    assert res.generation.forward_passes >= 1


@pytest.mark.parametrize("family", ["fast_dllm", "sdar"])
def test_lookup_agreement_on_aligned_blocks_commits_only_drafted_runs(family, request):
    # Threshold 1.0 and a fallback window of 1: without drafts one token per pass. With them, a pass that
    # commits several tokens committed exactly what followed the latest earlier occurrence of the output's last
    # 2-3 tokens: checked against a fresh PromptLookup, in output coordinates (the prompt ends inside a block).
    engine = request.getfixturevalue(family)
    prompt = _prompt(engine, 45)
    params = family_params(engine, max_new_tokens=40, threshold=1.0, fallback_window=1, lookup_tokens=8)
    out = generate(engine, prompt, "block", params)
    runs: dict[int, list[int]] = {}
    for i, step in enumerate(out.commit_steps):
        runs.setdefault(step, []).append(i)
    several = [idx for idx in runs.values() if len(idx) > 1]
    for idx in several:
        start = idx[0]
        assert idx == list(range(start, start + len(idx)))
        draft = PromptLookup([*prompt, *out.token_ids[:start]]).draft(len(idx))
        assert out.token_ids[start : start + len(idx)] == draft
    if family == "sdar":  # this replica's masked predictions agree with its drafts now and then
        assert several
    if not several:  # (the fast_dllm replica's never do here): then the drafts must have changed nothing
        plain = generate(engine, prompt, "block", replace(params, lookup_tokens=0))
        assert (out.token_ids, out.commit_steps) == (plain.token_ids, plain.commit_steps)
