"""The radix prefix cache driven by token lists alone (pages are small tensors), then through the engine."""

from __future__ import annotations

import torch

from decoder.engine import Engine, EngineOptions
from decoder.generation import GenerationParams
from decoder.prefix_cache import RadixPrefixCache
from decoder.router import generate


def page_maker(tokens):
    # A page's payload records which tokens it covers, so a match can be checked for the right pages.
    return lambda i: torch.tensor(tokens[i * 4 : (i + 1) * 4], dtype=torch.int64)


def test_longest_prefix_on_the_page_grid():
    cache = RadixPrefixCache(page_size=4, byte_budget=1 << 20)
    a = list(range(14))
    assert cache.insert(a, page_maker(a)) == 3  # 14 tokens -> 3 whole pages
    m = cache.match(a)
    assert m.length == 12 and torch.equal(torch.cat(m.pages), torch.tensor(a[:12]))
    assert cache.match([0, 1, 2, 3, 4, 5, 99]).length == 4
    assert cache.match([7, 1, 2, 3]).length == 0
    assert cache.stats.lookups == 3 and cache.stats.hits == 2


def test_branching_insert_splits_and_reuses_shared_pages():
    cache = RadixPrefixCache(page_size=4, byte_budget=1 << 20)
    a = list(range(16))
    b = list(range(8)) + [50 + i for i in range(8)]
    cache.insert(a, page_maker(a))
    made = []
    new = cache.insert(b, lambda i: made.append(i) or page_maker(b)(i))
    assert new == 2 and made == [2, 3]  # the two shared pages were not rebuilt
    assert cache.cached_pages == 6
    mb = cache.match([*b, 1, 2, 3])
    assert mb.length == 16 and torch.equal(torch.cat(mb.pages), torch.tensor(b))
    assert cache.match(a).length == 16


def test_lru_eviction_keeps_bytes_under_budget_and_drops_oldest():
    page_bytes = 4 * 8
    cache = RadixPrefixCache(page_size=4, byte_budget=5 * page_bytes)
    seqs = [[k * 100 + i for i in range(8)] for k in range(4)]  # 2 pages each
    for s in seqs[:2]:
        cache.insert(s, page_maker(s))
    cache.match(seqs[0])  # touch: seqs[1] is now the least recently used
    cache.insert(seqs[2], page_maker(seqs[2]))
    assert cache.bytes_used <= cache.byte_budget
    assert cache.match(seqs[1]).length == 0
    assert cache.match(seqs[0]).length == 8 and cache.match(seqs[2]).length == 8
    assert cache.stats.evicted_pages == 2


def test_a_prompt_longer_than_the_budget_caches_its_start_within_the_budget():
    page_bytes = 4 * 8
    cache = RadixPrefixCache(page_size=4, byte_budget=5 * page_bytes)
    short = list(range(8))  # 2 pages
    cache.insert(short, page_maker(short))
    built: list[int] = []

    def counting(i: int):
        built.append(i)
        return page_maker(long)(i)

    long = short + list(range(100, 200))  # 27 pages, sharing the first 2 with `short`
    assert cache.insert(long, counting) == 3  # 5 pages fit: the 2 it shares, and 3 more
    assert cache.bytes_used == cache.byte_budget and built == [2, 3, 4]  # no page built to be dropped
    assert cache.match(long).length == 20 and cache.match(short).length == 8
    other = list(range(500, 600))  # unrelated and too long: the older pages go, its start stays
    cache.insert(other, page_maker(other))
    assert cache.bytes_used <= cache.byte_budget and cache.match(other).length == 20


def test_engine_cache_on_and_off_give_identical_tokens_and_reuse_prefixes(tiny_model_dir):
    on = Engine.from_folder(tiny_model_dir, EngineOptions(page_size=4))
    off = Engine.from_folder(tiny_model_dir, EngineOptions(use_prefix_cache=False))
    base = "def add(a, b):\n    return a + b\n\n\nclass Stack:\n    def push(self, item):\n"
    for mode in ("block", "ar"):
        for suffix in ("        self.items", "        self.items.append(", "        return"):
            ids = on.tokenizer.encode(base + suffix)
            p = GenerationParams(max_new_tokens=12, block_size=4, threshold=0.5)
            a, b = generate(on, ids, mode, p), generate(off, ids, mode, p)
            assert a.token_ids == b.token_ids
            assert b.cached_prompt_tokens == 0
    ids = on.tokenizer.encode(base + "        x")
    res = generate(on, ids, "block", GenerationParams(max_new_tokens=4, block_size=4))
    assert res.cached_prompt_tokens >= len(on.tokenizer.encode(base)) - 8
    assert res.cached_prompt_tokens < res.prompt_tokens


def test_engine_prefills_only_the_uncached_rest(tiny_model_dir):
    eng = Engine.from_folder(tiny_model_dir, EngineOptions(page_size=4))
    ids = eng.tokenizer.encode("for i in range(10):\n    print(i, add(i, i))\n" * 3)
    seen = []
    original = eng._forward
    eng._forward = lambda seq, chunk, n_causal: seen.append(len(chunk)) or original(seq, chunk, n_causal)
    eng.start(ids, reserve=4)
    seq = eng.start(ids + ids[:3], reserve=4)
    assert seen[0] == len(ids)
    assert seq.cached_prompt_tokens == (len(ids) // 4) * 4
    assert seen[1] == len(ids) + 3 - seq.cached_prompt_tokens


def test_a_deferred_prompt_tail_is_committed_by_the_first_step(tiny_model_dir):
    eng = Engine.from_folder(tiny_model_dir, EngineOptions(page_size=4))
    ids = eng.tokenizer.encode("for i in range(10):\n    print(i, add(i, i))\n" * 3)
    eng.start(ids, reserve=4)
    prompt = ids + ids[:5]
    seq = eng.start(prompt, reserve=8, defer_tail=True)
    assert seq.forward_passes == 0 and seq.tokens == prompt[: seq.cached_prompt_tokens]
    assert seq.deferred == prompt[seq.cached_prompt_tokens :]
    eng.step(seq, seq.deferred, [eng.mask_token_id] * 4)  # the tail and a block in one pass
    assert seq.forward_passes == 1 and seq.tokens == prompt
    plain = eng.start(prompt, reserve=8)
    torch.testing.assert_close(eng.next_token_logits(seq), eng.next_token_logits(plain), rtol=1e-4, atol=1e-4)


def test_engine_cache_respects_byte_budget(tiny_model_dir):
    probe = Engine.from_folder(tiny_model_dir)
    budget = probe.kv_bytes_per_token() * 64
    eng = Engine.from_folder(tiny_model_dir, EngineOptions(page_size=4, cache_bytes=budget))
    for k in range(10):
        ids = eng.tokenizer.encode(f"value_{k} = {k}\n" * 6)
        generate(eng, ids, "ar", GenerationParams(max_new_tokens=2))
        assert eng.cache.bytes_used <= budget
    assert eng.cache.stats.evicted_pages > 0


def test_clearing_the_prefix_cache_makes_the_next_request_cold(tiny_model_dir):
    eng = Engine.from_folder(tiny_model_dir, EngineOptions(page_size=4))
    ids = eng.tokenizer.encode("for i in range(10):\n    print(i, add(i, i))\n" * 3)
    generate(eng, ids, "ar", GenerationParams(max_new_tokens=2))
    assert generate(eng, ids, "ar", GenerationParams(max_new_tokens=2)).cached_prompt_tokens > 0
    eng.clear_prefix_cache()
    assert generate(eng, ids, "ar", GenerationParams(max_new_tokens=2)).cached_prompt_tokens == 0
