"""GGUF export of a Qwen2 checkpoint (needs the `gguf` package) and, when llama-cpp-python is installed
(benchmarks/llamacpp/install.sh; CI does not build it), parity of llama.cpp with our engine on it."""

from __future__ import annotations

import json

import pytest

gguf = pytest.importorskip("gguf")

from decoder.bench.gguf_export import GGUFExportError, export_gguf, pre_tokenizer_name  # noqa: E402
from decoder.engine import EngineOptions  # noqa: E402
from decoder.engines import open_family_engine  # noqa: E402
from tests.tiny_models import write_tiny_qwen2  # noqa: E402


@pytest.fixture(scope="module")
def tied_model(tmp_path_factory):
    return write_tiny_qwen2(tmp_path_factory.mktemp("tiny-tied"), tie=True)


def _field(reader, name):
    field = reader.fields[name]
    return field.contents()


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_export_writes_qwen2_metadata_tokenizer_and_tensors(tied_model, tmp_path, dtype):
    info = export_gguf(tied_model, tmp_path / "m.gguf", dtype)
    assert info["tokenizer_pre"] == "gpt-2" and info["tied_embeddings"] and info["control_tokens"] == list(range(8))
    reader = gguf.GGUFReader(str(tmp_path / "m.gguf"))
    assert _field(reader, "general.architecture") == "qwen2"
    assert _field(reader, "tokenizer.ggml.model") == "gpt2" and _field(reader, "tokenizer.ggml.pre") == "gpt-2"
    tok = json.loads((tied_model / "tokenizer.json").read_text())
    tokens = _field(reader, "tokenizer.ggml.tokens")
    assert tokens[0] == "<|endoftext|>" and len(tokens) == info["vocab"]
    assert tokens[tok["model"]["vocab"]["Ġ"]] == "Ġ"
    types = _field(reader, "tokenizer.ggml.token_type")
    assert types[:8] == [int(gguf.TokenType.CONTROL)] * 8 and types[100] == int(gguf.TokenType.NORMAL)
    assert _field(reader, "tokenizer.ggml.add_bos_token") is False
    names = {t.name: t for t in reader.tensors}
    assert "output.weight" not in names  # tied: llama.cpp falls back to the embedding
    assert {"token_embd.weight", "blk.0.attn_q.bias", "blk.1.ffn_down.weight", "output_norm.weight"} <= set(names)
    expected = gguf.GGMLQuantizationType.F16 if dtype == "f16" else gguf.GGMLQuantizationType.F32
    assert names["blk.0.attn_q.weight"].tensor_type == expected
    assert names["blk.0.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32


def test_untied_model_keeps_its_output_head(tiny_model_dir, tmp_path):
    export_gguf(tiny_model_dir, tmp_path / "u.gguf")
    names = {t.name for t in gguf.GGUFReader(str(tmp_path / "u.gguf")).tensors}
    assert "output.weight" in names


def test_unknown_pre_tokenizers_are_refused():
    assert pre_tokenizer_name({"pre_tokenizer": {"type": "ByteLevel", "use_regex": True}}) == "gpt-2"
    with pytest.raises(GGUFExportError):
        pre_tokenizer_name({"pre_tokenizer": {"type": "Whitespace"}})
    with pytest.raises(GGUFExportError):
        pre_tokenizer_name({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True}})


def test_llamacpp_matches_our_engine_on_the_converted_model(tied_model, tmp_path):
    pytest.importorskip("llama_cpp")
    from decoder.bench.llamacpp import LlamaCppSpanRunner, parity

    path = tmp_path / "p.gguf"
    export_gguf(tied_model, path, "f32")
    engine = open_family_engine(tied_model, EngineOptions(threads=1))
    p = parity(engine, path, prompts=2, new_tokens=16)
    assert p["tokenization_identical"].split("/")[0] == p["tokenization_identical"].split("/")[1]
    assert p["prompt_logits_max_abs_diff"] < 1e-2 and p["prompt_argmax_agreement"] == "2/2"
    assert p["greedy_identical"] == "2/2", p
    runner = LlamaCppSpanRunner(path, threads=1, n_ctx=2048)
    sample = runner.run(engine.tokenizer.encode("def add(a, b):\n    return"), 8)
    assert sample.tokens == 8 and sample.decode_passes == 7 and sample.prefill_ms > 0
