"""Prompt-lookup drafts (decoder/lookup.py): the AR decoder checks them (same tokens, fewer passes); the block
decoder commits the masked positions whose argmax agrees with them."""

from __future__ import annotations

import pytest
import torch

from decoder.block_decoder import LookupAgreement
from decoder.engine import Engine, EngineOptions
from decoder.generation import GenerationControl, GenerationParams
from decoder.lookup import PromptLookup
from decoder.router import generate

# A random tiny model soon repeats itself, which is what drafts are for; the prompt repeats itself too.
PROMPT = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n"


@pytest.fixture(scope="module")
def engine(tiny_model_dir) -> Engine:
    return Engine.from_folder(tiny_model_dir, EngineOptions(use_prefix_cache=False))


def test_draft_is_what_followed_the_latest_earlier_occurrence():
    lookup = PromptLookup([1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 0, 2, 3])
    assert lookup.draft(2) == [7, 8]  # (2, 3) last came before 7 8, not before 4 5
    assert lookup.draft(10) == [7, 8, 0, 2, 3]  # up to the end of the context
    lookup.extend([7])
    assert lookup.draft(3) == [8, 0, 2]


def test_longest_matching_ngram_wins_and_single_tokens_are_no_cue():
    lookup = PromptLookup([5, 1, 2, 3, 6, 0, 2, 3, 9, 1, 2, 3])
    assert lookup.draft(1) == [6]  # (1, 2, 3) beats the later (2, 3) -> 9
    assert PromptLookup([4, 7, 5, 4]).draft(3) == []  # only (4) matches: below min_ngram
    assert PromptLookup([4, 7, 5, 4], min_ngram=1).draft(3) == [7, 5, 4]
    assert PromptLookup([1, 2, 3]).draft(4) == [] and PromptLookup([1, 2, 1, 2]).draft(0) == []


def test_extending_equals_indexing_at_once():
    tokens = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5]
    whole = PromptLookup(tokens)
    grown = PromptLookup(tokens[:5])
    for t in tokens[5:]:
        grown.extend([t])
    assert grown.index == whole.index and grown.draft(4) == whole.draft(4)
    with pytest.raises(ValueError):
        PromptLookup([], max_ngram=1, min_ngram=2)


@pytest.mark.parametrize("draft", [1, 4, 8])
def test_lookup_gives_greedy_tokens_in_fewer_passes(engine, draft):
    ids = engine.tokenizer.encode(PROMPT)
    plain = generate(engine, ids, "ar", GenerationParams(max_new_tokens=48))
    fast = generate(engine, ids, "ar", GenerationParams(max_new_tokens=48, lookup_tokens=draft))
    assert fast.token_ids == plain.token_ids and len(plain.token_ids) == 48
    assert fast.token_confidences == pytest.approx(plain.token_confidences, abs=1e-5)
    assert fast.forward_passes < plain.forward_passes == 48
    assert fast.tokens_per_forward > 1
    # Every token is committed by a pass that ran, in order; tokens checked in one pass share its number.
    assert fast.commit_steps == sorted(fast.commit_steps)
    assert fast.commit_steps[0] == 1 and fast.commit_steps[-1] == fast.forward_passes
    assert len(set(fast.commit_steps)) == fast.forward_passes


def test_stop_rules_streaming_and_limits_hold_with_drafts(engine):
    ids = engine.tokenizer.encode(PROMPT)
    plain_run = generate(engine, ids, "ar", GenerationParams(max_new_tokens=40))
    stop_token = plain_run.token_ids[17]  # a token the output reaches: it must end generation there
    first = plain_run.token_ids.index(stop_token)

    def run(lookup: int) -> tuple[list[int], list[int], str, list[int], str]:
        streamed: list[int] = []
        params = GenerationParams(max_new_tokens=40, lookup_tokens=lookup, stop_token_ids=frozenset({stop_token}))
        by_token = generate(engine, ids, "ar", params, GenerationControl(on_tokens=streamed.extend))
        cut = GenerationControl(stop_at=lambda out: 11 if len(out) >= 13 else None)
        by_rule = generate(engine, ids, "ar", GenerationParams(max_new_tokens=40, lookup_tokens=lookup), cut)
        return by_token.token_ids, streamed, by_token.stop_reason, by_rule.token_ids, by_rule.stop_reason

    plain, fast = run(0), run(8)
    assert fast == plain
    tokens, streamed, reason, cut, cut_reason = fast
    assert tokens == plain_run.token_ids[:first] == streamed and reason == "stop_token"
    assert cut == plain_run.token_ids[:11] and cut_reason == "stop_rule"
    for limit in (1, 2, 9):  # a draft never runs past the span limit
        short = generate(engine, ids, "ar", GenerationParams(max_new_tokens=limit, lookup_tokens=8))
        assert short.token_ids == plain_run.token_ids[:limit] and short.stop_reason == "length"


def test_sampling_ignores_drafts(engine):
    ids = engine.tokenizer.encode(PROMPT)
    sampled = [
        generate(
            engine, ids, "ar", GenerationParams(max_new_tokens=24, temperature=0.8, seed=3, lookup_tokens=n)
        ).forward_passes
        for n in (0, 8)
    ]
    assert sampled == [24, 24]
    with pytest.raises(ValueError, match="lookup_tokens"):
        GenerationParams(lookup_tokens=-1).validate()


def test_the_prefix_cache_keeps_only_checked_tokens(tiny_model_dir):
    cached = Engine.from_folder(tiny_model_dir, EngineOptions(page_size=4))
    ids = cached.tokenizer.encode(PROMPT)
    params = GenerationParams(max_new_tokens=48, lookup_tokens=8)
    first = generate(cached, ids, "ar", params)
    # The next request continues the first one's output: its prompt is served from the cache that the
    # first request's sequence (drafts rejected and truncated away) left behind.
    follow = [*ids, *first.token_ids]
    warm = generate(cached, follow, "ar", params)
    cold = generate(Engine.from_folder(tiny_model_dir, EngineOptions(use_prefix_cache=False)), follow, "ar", params)
    assert warm.cached_prompt_tokens >= len(follow) - 4 - 1
    assert warm.token_ids == cold.token_ids


# -- block diffusion: commit the leading masked positions whose argmax agrees with the draft --------------


class _Final:
    def __init__(self, token_ids: list[int]) -> None:
        self.token_ids = token_ids


def _agreeing(prompt, out, block, masked, argmax, final=0, active=None, limit=8):
    masked = torch.tensor(masked)
    active = masked.clone() if active is None else torch.tensor(active)
    drafts = LookupAgreement(prompt, _Final(out))
    return drafts.agreeing(block, masked, active, torch.tensor(argmax), final, limit).tolist()


def test_block_agreement_is_the_leading_run_of_masked_positions_that_spell_the_draft():
    prompt = [1, 2, 3, 4, 5, 6, 9, 1, 2]  # (1, 2) was followed by 3 4 5 6: the draft
    m = 0  # the mask token
    assert _agreeing(prompt, [], [m] * 5, [True] * 5, [3, 4, 7, 6, 1]) == [True, True, False, False, False]
    # A committed position that spells the draft lets the run go on; one that does not ends it.
    assert _agreeing(prompt, [], [m, 4, m, m], [True, False, True, True], [3, 0, 5, 6]) == [True, False, True, True]
    assert _agreeing(prompt, [], [m, 8, m, m], [True, False, True, True], [3, 0, 5, 6]) == [True, False, False, False]
    # Positions outside the active window (sub-blocks) never commit; the draft is at most `limit` long.
    assert _agreeing(prompt, [], [m] * 4, [True] * 4, [3, 4, 5, 6], active=[True, False, True, True]) == [
        True,
        False,
        False,
        False,
    ]
    assert _agreeing(prompt, [], [m] * 4, [True] * 4, [3, 4, 5, 6], limit=2) == [True, True, False, False]


def test_block_agreement_drafts_from_the_output_so_far():
    # The output (final tokens, the block's leading ones among them) extends the context the draft comes from.
    prompt, out = [7, 1, 2, 8, 9], [5, 1, 2]  # now ends in (1, 2): draft 8 9
    block = [5, 1, 2, 0, 0]  # positions 0-2 final already (`final` = 3)
    masked = [False, False, False, True, True]
    assert _agreeing(prompt, out, block, masked, [5, 1, 2, 8, 9], final=3) == [False, False, False, True, True]
    assert _agreeing(prompt, [], [0] * 3, [True] * 3, [8, 9, 4]) == [False, False, False]  # no n-gram match


def test_block_lookup_commits_more_per_pass_and_sampling_ignores_it(engine):
    ids = engine.tokenizer.encode(PROMPT)

    def block(lookup: int, **kw):
        # Threshold 1.0 and a fallback window of 1: without drafts exactly one token per pass.
        params = GenerationParams(max_new_tokens=48, threshold=1.0, fallback_window=1, lookup_tokens=lookup, **kw)
        return generate(engine, ids, "block", params)

    plain, fast = block(0), block(8)
    assert len(plain.token_ids) == len(fast.token_ids) == 48
    assert plain.tokens_per_forward <= 1.0 < fast.tokens_per_forward
    assert fast.commit_steps == sorted(fast.commit_steps)
    sampled = [block(n, temperature=0.8, seed=3).forward_passes for n in (0, 8)]
    assert sampled[0] == sampled[1]
