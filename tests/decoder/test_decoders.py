"""AR and block-diffusion decoders on a tiny random checkpoint."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
import torch
from transformers import Qwen2ForCausalLM

from decoder.block_decoder import NoMaskTokenError, defer_repeats
from decoder.engine import Engine, EngineOptions
from decoder.generation import GenerationControl, GenerationParams
from decoder.router import RoutingRules, generate
from tests.tiny_models import write_tiny_qwen2

PROMPT = "class Stack:\n    def push(self, item):\n        self."


@pytest.fixture(scope="module")
def engine(tiny_model_dir) -> Engine:
    return Engine.from_folder(tiny_model_dir, EngineOptions(use_prefix_cache=False))


def test_ar_greedy_equals_transformers_generate(engine, tiny_model_dir):
    ids = engine.tokenizer.encode(PROMPT)
    ours = generate(engine, ids, "ar", GenerationParams(max_new_tokens=24))
    ref = Qwen2ForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    banned = torch.isinf(engine.logit_bias).nonzero().flatten().tolist()
    with torch.no_grad():
        out = ref.generate(
            torch.tensor([ids]),
            max_new_tokens=24,
            do_sample=False,
            suppress_tokens=banned,
            eos_token_id=None,
            pad_token_id=0,
        )
    assert ours.token_ids == out[0, len(ids) :].tolist()
    assert ours.commit_steps == list(range(1, 25))
    assert ours.forward_passes == 24


def test_block_of_one_at_threshold_one_is_exactly_ar(engine):
    ids = engine.tokenizer.encode(PROMPT)
    ar = generate(engine, ids, "ar", GenerationParams(max_new_tokens=20))
    block = generate(engine, ids, "block", GenerationParams(max_new_tokens=20, block_size=1, threshold=1.0))
    assert block.token_ids == ar.token_ids
    assert block.forward_passes == ar.forward_passes
    assert block.commit_steps == ar.commit_steps
    assert block.token_confidences == pytest.approx(ar.token_confidences, abs=1e-5)


def test_token_confidences_are_the_probabilities_of_the_committed_tokens(engine, tiny_model_dir):
    ids = engine.tokenizer.encode(PROMPT)
    ar = generate(engine, ids, "ar", GenerationParams(max_new_tokens=12))
    ref = Qwen2ForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    with torch.no_grad():
        logits = ref(torch.tensor([ids + ar.token_ids])).logits[0, len(ids) - 1 : -1] + engine.logit_bias
    expected = torch.softmax(logits, -1)[torch.arange(12), torch.tensor(ar.token_ids)].tolist()
    assert ar.token_confidences == pytest.approx(expected, abs=1e-5)
    mean_log = sum(math.log(c) for c in expected) / 12
    assert ar.confidence == pytest.approx(math.exp(mean_log), rel=1e-4)
    assert ar.to_json()["confidence"] == round(ar.confidence, 4)
    # Block: a token below the threshold is only ever a step's one fallback commit; the rest reached it.
    block = generate(engine, ids, "block", GenerationParams(max_new_tokens=32, block_size=8, threshold=0.02))
    assert len(block.token_confidences) == len(block.token_ids) == 32
    assert all(0 < c <= 1 for c in block.token_confidences)
    below = sum(c < 0.02 for c in block.token_confidences)
    assert below <= sum(block.steps_per_block) < 32 - below, "threshold 0.02 commits several tokens per step"


@pytest.mark.parametrize("block_size", [2, 4, 8, 16])
@pytest.mark.parametrize("threshold", [0.0, 0.5, 1.0])
def test_block_never_needs_more_than_block_size_passes_per_block(engine, block_size, threshold):
    ids = engine.tokenizer.encode(PROMPT)
    res = generate(
        engine, ids, "block", GenerationParams(max_new_tokens=32, block_size=block_size, threshold=threshold)
    )
    assert len(res.token_ids) == 32
    assert all(1 <= s <= block_size for s in res.steps_per_block)
    # No pass of its own for the prompt: its uncached tail rides along in the first block's first pass,
    # which already commits.
    assert res.forward_passes <= sum(res.steps_per_block)
    assert min(res.commit_steps) == 1
    # Every token was committed by a pass that happened, and no pass commits into an earlier block.
    assert all(1 <= s <= res.forward_passes for s in res.commit_steps)
    per_block = [res.commit_steps[i : i + block_size] for i in range(0, 32, block_size)]
    assert all(max(a) <= min(b) for a, b in itertools.pairwise(per_block))
    if threshold == 0.0:  # everything passes: one pass per block
        assert res.steps_per_block == [1] * (32 // block_size)


def test_defer_repeats_holds_back_a_token_its_open_left_neighbour_also_predicts():
    tokens = torch.tensor([5, 7, 7, 7, 9, 9, 3, 3])
    everything = torch.ones(8, dtype=torch.bool)
    commit = torch.tensor([1, 1, 1, 1, 1, 1, 0, 1], dtype=torch.bool)
    # The first of each run commits; the 3 at the end waits for its neighbour, open and predicting 3 too.
    assert defer_repeats(tokens, everything, commit).tolist() == [1, 1, 0, 0, 1, 0, 0, 0]
    # A neighbour already committed (not active) was seen: the repeat is the model's own choice.
    later = torch.tensor([0, 0, 1, 1, 1, 1, 1, 1], dtype=torch.bool)
    assert defer_repeats(tokens, later, later & commit).tolist() == [0, 0, 1, 0, 1, 0, 0, 0]
    # Were every commit deferred, the leftmost open position commits: the block never stands still.
    open_from_1 = torch.tensor([0, 1, 1, 1, 1, 1, 1, 1], dtype=torch.bool)
    only_2 = torch.tensor([0, 0, 1, 0, 0, 0, 0, 0], dtype=torch.bool)
    repeated = torch.tensor([1, 4, 4, 2, 2, 2, 2, 2])
    assert defer_repeats(repeated, open_from_1, only_2).tolist() == [0, 1, 0, 0, 0, 0, 0, 0]
    assert not defer_repeats(repeated, open_from_1, torch.zeros(8, dtype=torch.bool)).any()


@pytest.mark.parametrize("block_size", [4, 8])
def test_no_token_repeats_a_neighbour_it_did_not_see(engine, block_size):
    # At threshold 0 every position commits in the first step: the random tiny model then repeats tokens whose
    # neighbours it never saw (the check below fails without the deferral). With it, every token equal to its
    # left neighbour was committed after that neighbour.
    ids = engine.tokenizer.encode(PROMPT)

    def unseen_repeats(defer: bool) -> list[int]:
        params = GenerationParams(max_new_tokens=32, block_size=block_size, threshold=0.0, defer_repeats=defer)
        res = generate(engine, ids, "block", params)
        toks, steps = res.token_ids, res.commit_steps
        return [i for i in range(1, len(toks)) if toks[i] == toks[i - 1] and steps[i] <= steps[i - 1]]

    assert unseen_repeats(defer=False)
    assert unseen_repeats(defer=True) == []


def test_threshold_one_with_leftmost_fallback_commits_left_to_right(engine):
    ids = engine.tokenizer.encode(PROMPT)
    res = generate(
        engine, ids, "block", GenerationParams(max_new_tokens=16, block_size=8, threshold=1.0, fallback_window=1)
    )
    assert res.commit_steps == sorted(res.commit_steps)
    assert len(set(res.commit_steps)) == 16


def test_stop_token_and_stop_rule_end_generation_early(engine):
    ids = engine.tokenizer.encode(PROMPT)
    free = generate(engine, ids, "block", GenerationParams(max_new_tokens=16, block_size=4))
    stop = free.token_ids[5]
    first = free.token_ids.index(stop)
    res = generate(
        engine, ids, "block", GenerationParams(max_new_tokens=16, block_size=4, stop_token_ids=frozenset({stop}))
    )
    assert res.stop_reason == "stop_token" and res.token_ids == free.token_ids[:first]
    free_ar = generate(engine, ids, "ar", GenerationParams(max_new_tokens=16))
    ruled = generate(
        engine,
        ids,
        "ar",
        GenerationParams(max_new_tokens=16),
        GenerationControl(stop_at=lambda t: 3 if len(t) >= 5 else None),
    )
    assert ruled.stop_reason == "stop_rule"
    assert ruled.token_ids == free_ar.token_ids[:3]
    assert ruled.forward_passes == 5  # stopped as soon as the rule fired, not at the span limit


def test_streaming_callback_sees_every_final_token_in_order(engine):
    ids = engine.tokenizer.encode(PROMPT)
    for mode in ("ar", "block"):
        seen: list[int] = []
        res = generate(
            engine,
            ids,
            mode,
            GenerationParams(max_new_tokens=12, block_size=4),
            GenerationControl(on_tokens=seen.extend),
        )
        assert seen == res.token_ids
        # Tokens a stop rule cuts off were never final: they are not streamed either (here the rule ends the
        # answer before a token that block decoding makes final together with the ones before it).
        seen.clear()
        marker = res.token_ids[3]
        first = res.token_ids.index(marker)
        cut = generate(
            engine,
            ids,
            mode,
            GenerationParams(max_new_tokens=12, block_size=4),
            GenerationControl(on_tokens=seen.extend, stop_at=lambda t, m=marker: t.index(m) if m in t else None),
        )
        assert seen == cut.token_ids == res.token_ids[:first]


def test_prompt_format_tokens_are_never_generated(engine):
    special = engine.tokenizer.special
    for token in (special.mask, special.fim_prefix, special.fim_middle, special.explain_code, special.explain_text):
        assert torch.isinf(engine.logit_bias[token])
    assert not torch.isinf(engine.logit_bias[special.end_of_text])  # it ends an answer: a stop token


def test_interrupt_stops_between_passes(engine):
    ids = engine.tokenizer.encode(PROMPT)
    calls = {"n": 0}

    def interrupt():
        calls["n"] += 1
        return "cancelled" if calls["n"] > 3 else None

    res = generate(
        engine,
        ids,
        "block",
        GenerationParams(max_new_tokens=64, block_size=8, threshold=1.0),
        GenerationControl(interrupt=interrupt),
    )
    assert res.stop_reason == "cancelled"
    assert res.forward_passes <= 4


@pytest.mark.parametrize("mode", ["ar", "block"])
def test_sampling_is_reproducible_with_a_seed_and_random_without(engine, mode):
    ids = engine.tokenizer.encode(PROMPT)
    top_p = 0.9 if mode == "ar" else 1.0
    p = GenerationParams(max_new_tokens=16, block_size=4, temperature=1.0, top_p=top_p, seed=7)
    a, b = generate(engine, ids, mode, p), generate(engine, ids, mode, p)
    assert a.token_ids == b.token_ids
    c = generate(engine, ids, mode, replace(p, seed=8))
    assert c.token_ids != a.token_ids
    # No seed: a fresh one per request (block decoding's noise is a hash of the seed; it was greedy without).
    unseeded = {tuple(generate(engine, ids, mode, replace(p, seed=None)).token_ids) for _ in range(3)}
    greedy = tuple(generate(engine, ids, mode, GenerationParams(max_new_tokens=16, block_size=4)).token_ids)
    assert len(unseeded) > 1 and unseeded != {greedy}


def test_block_decoding_refuses_top_p_instead_of_ignoring_it(engine):
    ids = engine.tokenizer.encode(PROMPT)
    with pytest.raises(ValueError, match="top_p < 1 needs AR decoding"):
        generate(engine, ids, "block", GenerationParams(max_new_tokens=4, temperature=1.0, top_p=0.9))


def test_checkpoint_without_mask_token_is_ar_only(tmp_path):
    folder = write_tiny_qwen2(tmp_path / "nomask", with_mask=False)
    tok = folder / "tokenizer.json"
    tok.write_text(tok.read_text().replace("<|mask|>", "<|unused|>"))
    eng = Engine.from_folder(folder)
    ids = eng.tokenizer.encode("def f():")
    assert generate(eng, ids, "ar", GenerationParams(max_new_tokens=4)).token_ids
    with pytest.raises(NoMaskTokenError, match="only be used with --mode ar"):
        generate(eng, ids, "block", GenerationParams(max_new_tokens=4))


def test_router_sends_inline_to_block_and_explain_and_long_outputs_to_ar():
    rules = RoutingRules()
    assert rules.choose("inline", GenerationParams(max_new_tokens=32, block_size=8)) == "block"
    assert rules.choose("explain", GenerationParams(max_new_tokens=32)) == "ar"
    assert rules.choose("inline", GenerationParams(max_new_tokens=512, block_size=8)) == "ar"
    assert RoutingRules(explain="block").choose("explain", GenerationParams(max_new_tokens=16)) == "block"
    with pytest.raises(ValueError):
        rules.choose("chat", GenerationParams())


def test_interrupt_during_a_long_prefill_stops_between_chunks(tiny_model_dir):
    eng = Engine.from_folder(tiny_model_dir, EngineOptions(use_prefix_cache=False, prefill_chunk=16))
    ids = eng.tokenizer.encode("for i in range(10):\n    print(i, add(i, i))\n" * 8)
    assert len(ids) > 64
    checks = {"n": 0}

    def interrupt():
        checks["n"] += 1
        return "cancelled" if checks["n"] > 2 else None

    for mode in ("ar", "block"):
        checks["n"] = 0
        res = generate(
            eng, ids, mode, GenerationParams(max_new_tokens=8, block_size=4), GenerationControl(interrupt=interrupt)
        )
        assert res.stop_reason == "cancelled"
        assert res.token_ids == [] and res.forward_passes == 0
        assert checks["n"] == 3  # two chunks ran, the third was refused
