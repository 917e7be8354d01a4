"""ONNX Runtime and PyTorch on the same tiny checkpoint: the same logits (1e-4), KV and greedy tokens."""

from __future__ import annotations

import pytest
import torch

from decoder.engine import Engine, EngineOptions
from decoder.generation import GenerationParams
from decoder.onnx_backend.export import ForwardGraph, example_inputs, output_names
from decoder.router import generate

PROMPT = "class Stack:\n    def push(self, item):\n        self.items.append(item)\n\n    def pop(self):\n"
ATOL = 1e-4


def assert_close(a: torch.Tensor, b: torch.Tensor) -> None:
    a, b = a.float(), b.float()
    assert torch.equal(torch.isinf(a), torch.isinf(b))  # the never-generated tokens' -inf bias
    finite = torch.isfinite(a)
    diff = float((a[finite] - b[finite]).abs().max())
    assert diff <= ATOL, diff


def assert_same_kv(a, b, length: int) -> None:
    for x, y in zip(a.kv, b.kv, strict=True):
        assert_close(x.keys[:, :, :length], y.keys[:, :, :length])
        assert_close(x.values[:, :, :length], y.values[:, :, :length])


def test_prefill_ar_step_and_block_step_logits_match(torch_engine: Engine, onnx_engine: Engine):
    assert onnx_engine.runner.description.startswith("onnxruntime CPUExecutionProvider")
    ids = torch_engine.tokenizer.encode(PROMPT)
    mask = torch_engine.mask_token_id
    seqs = [e.start(ids, reserve=24) for e in (torch_engine, onnx_engine)]
    assert_close(torch_engine.next_token_logits(seqs[0]), onnx_engine.next_token_logits(seqs[1]))  # prefill
    assert_same_kv(*seqs, len(ids))
    # AR step, block step (a noisy block alone), then commit + block in one pass, as the decoders do.
    for commit, block in (([17], []), ([], [mask] * 8), ([30, 31, 32], [40, mask, mask, 41, mask])):
        hidden = [e.step(s, commit, block) for e, s in zip((torch_engine, onnx_engine), seqs, strict=True)]
        assert_close(torch_engine.next_token_logits(seqs[0]), onnx_engine.next_token_logits(seqs[1]))
        if block:
            assert_close(torch_engine.logits(hidden[0]), onnx_engine.logits(hidden[1]))
        assert_same_kv(*seqs, seqs[0].length)
    assert seqs[0].tokens == seqs[1].tokens


@pytest.mark.parametrize(
    ("mode", "block_size", "threshold"),
    [("ar", 1, 0.9), ("block", 1, 1.0), ("block", 4, 0.5), ("block", 8, 0.9), ("block", 16, 0.0)],
)
def test_greedy_tokens_are_identical(torch_engine: Engine, onnx_engine: Engine, mode, block_size, threshold):
    ids = torch_engine.tokenizer.encode(PROMPT)
    params = dict(max_new_tokens=32, block_size=block_size, threshold=threshold)
    ours = generate(onnx_engine, ids, mode, GenerationParams(**params))
    ref = generate(torch_engine, ids, mode, GenerationParams(**params))
    assert ours.token_ids == ref.token_ids and len(ref.token_ids) == 32
    assert ours.commit_steps == ref.commit_steps
    assert ours.forward_passes == ref.forward_passes


def test_lookup_drafts_over_onnx_give_the_torch_tokens(torch_engine: Engine, onnx_engine: Engine):
    ids = torch_engine.tokenizer.encode(PROMPT)
    ours = generate(onnx_engine, ids, "ar", GenerationParams(max_new_tokens=32, lookup_tokens=8))
    ref = generate(torch_engine, ids, "ar", GenerationParams(max_new_tokens=32))
    assert ours.token_ids == ref.token_ids


def test_prefix_cache_works_over_onnx_kv_buffers(tiny_model_dir, torch_engine: Engine, onnx_available):
    """The radix cache copies pages out of and into the runner's (token-major) buffers."""
    engine = Engine.from_folder(tiny_model_dir, EngineOptions(backend="onnx", page_size=4))
    ids = torch_engine.tokenizer.encode(PROMPT)
    params = GenerationParams(max_new_tokens=12, block_size=4, threshold=0.5)
    first = generate(engine, ids, "block", params)
    again = generate(engine, ids, "block", params)
    ref = generate(torch_engine, ids, "block", params)
    assert first.cached_prompt_tokens == 0 and again.cached_prompt_tokens > len(ids) // 2
    assert first.token_ids == again.token_ids == ref.token_ids


def test_graph_has_dynamic_batch_query_and_past(onnx_engine: Engine):
    model = onnx_engine.model
    session = onnx_engine.runner.session
    for batch, query, past in ((3, 2, 5), (1, 1, 0), (2, 9, 1)):
        args = example_inputs(model, batch, query, past, causal=query < 3)
        ids, positions, block_mask, keys, values = args
        feed = {"input_ids": ids, "positions": positions, "block_mask": block_mask}
        feed.update({f"past_key_{i}": k for i, k in enumerate(keys)})
        feed.update({f"past_value_{i}": v for i, v in enumerate(values)})
        got = session.run(None, {k: v.numpy() for k, v in feed.items()})
        with torch.no_grad():
            hidden, new_keys, new_values = ForwardGraph(model, append_only=False)(*args)
        for name, want, have in zip(output_names(len(keys)), [hidden, *new_keys, *new_values], got, strict=True):
            assert tuple(have.shape) == tuple(want.shape), name
            assert_close(torch.from_numpy(have), want)


def test_a_mask_that_hides_past_tokens_is_refused(onnx_engine: Engine):
    seq = onnx_engine.start([5, 6, 7], reserve=2)
    ids, positions = torch.tensor([[8]]), torch.tensor([[3]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    mask[0, 0] = False
    with pytest.raises(ValueError, match="past"):
        onnx_engine.runner.forward(seq.kv, ids, positions, mask, past=3)
