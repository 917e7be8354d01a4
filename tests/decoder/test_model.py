"""Our PyTorch model against transformers' Qwen2ForCausalLM on the same random checkpoint."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2ForCausalLM

from decoder.checkpoint import CheckpointError, load_model, save_model
from decoder.masks import step_mask
from decoder.model import LayerKV, attention
from tests.tiny_models import write_tiny_qwen2


def _reference(folder):
    return Qwen2ForCausalLM.from_pretrained(str(folder)).eval()


@pytest.mark.parametrize("tie", [False, True])
def test_causal_logits_match_transformers(tmp_path, tie):
    folder = write_tiny_qwen2(tmp_path / "m", tie=tie, seed=3)
    ours, ref = load_model(folder), _reference(folder)
    ids = torch.randint(0, ours.config.vocab_size, (2, 37), generator=torch.Generator().manual_seed(0))
    positions = torch.arange(37).expand(2, -1)
    with torch.no_grad():
        diff = (ours.logits(ours(ids, positions)) - ref(ids).logits).abs().max().item()
    assert diff <= 1e-4


def test_cached_forward_equals_full_causal_forward(tiny_model_dir):
    """Prefill in two chunks through KV buffers with an explicit mask == one causal pass."""
    model = load_model(tiny_model_dir)
    cfg = model.config
    ids = torch.randint(0, cfg.vocab_size, (1, 20), generator=torch.Generator().manual_seed(1))
    shape = (1, cfg.num_key_value_heads, 32, cfg.head_dim)
    kv = [LayerKV(torch.zeros(shape), torch.zeros(shape)) for _ in range(cfg.num_hidden_layers)]
    with torch.no_grad():
        full = model(ids, torch.arange(20)[None])
        first = model(ids[:, :12], torch.arange(12)[None], kv=kv, kv_start=0)
        second = model(ids[:, 12:], torch.arange(12, 20)[None], attn_mask=step_mask(12, 8, 0), kv=kv, kv_start=12)
    assert torch.allclose(torch.cat((first, second), dim=1), full, atol=1e-5)


def test_bf16_forward_runs_close_to_fp32(tiny_model_dir):
    fp32 = load_model(tiny_model_dir)
    bf16 = load_model(tiny_model_dir, dtype=torch.bfloat16)
    assert bf16.lm_head.weight.dtype == torch.bfloat16
    ids = torch.arange(16)[None]
    with torch.no_grad():
        a = fp32.logits(fp32(ids, ids)).float()
        b = bf16.logits(bf16(ids, ids)).float()
    assert (a - b).abs().max() / a.abs().max() < 0.1
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.7


def test_save_then_load_is_bit_identical(tiny_model_dir, tmp_path):
    model = load_model(tiny_model_dir)
    save_model(model, tmp_path / "copy", dtype=torch.float32)
    (tmp_path / "copy" / "tokenizer.json").write_bytes((tiny_model_dir / "tokenizer.json").read_bytes())
    again = load_model(tmp_path / "copy")
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_missing_and_corrupt_weights_raise_clear_errors(tiny_model_dir, tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_model(tmp_path / "nowhere")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((tiny_model_dir / "config.json").read_text())
    with pytest.raises(CheckpointError, match=r"no \*\.safetensors"):
        load_model(broken)
    (broken / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(CheckpointError, match="corrupt"):
        load_model(broken)
    (broken / "model.bin").write_bytes(b"pickle")
    (broken / "config.json").write_text('{"model_type": "gpt2"}')
    with pytest.raises(CheckpointError, match="unsupported model_type"):
        load_model(broken)


@pytest.mark.parametrize("causal", [True, False])
def test_expanded_key_value_heads_give_the_same_attention(causal):
    # The CUDA path repeats grouped key/value heads when a mask is given (so a fused kernel can take it).
    gen = torch.Generator().manual_seed(3)
    q, k, v = (
        torch.randn(2, 6, 10, 16, generator=gen),
        torch.randn(2, 2, 10, 16, generator=gen),
        torch.randn(2, 2, 10, 16, generator=gen),
    )
    mask = None if causal else torch.rand(1, 1, 10, 10, generator=gen) > 0.3
    mask = mask if mask is None else mask | torch.eye(10, dtype=torch.bool)  # every row sees something
    grouped = attention(q, k, v, mask, causal, expand_groups=False)
    expanded = attention(q, k, v, mask, causal, expand_groups=True)
    torch.testing.assert_close(expanded, grouped, rtol=1e-5, atol=1e-6)
    manual_k = k.repeat_interleave(3, dim=1)  # query head h reads key/value head h // 3, as GQA defines it
    manual = torch.nn.functional.scaled_dot_product_attention(
        q, manual_k, v.repeat_interleave(3, dim=1), mask, is_causal=causal
    )
    torch.testing.assert_close(expanded, manual, rtol=1e-5, atol=1e-6)
