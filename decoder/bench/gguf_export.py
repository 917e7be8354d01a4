"""Write a Qwen2-family Hugging Face checkpoint (config.json, safetensors, tokenizer.json) as GGUF for llama.cpp.

Uses the `gguf` package from PyPI (its GGUFWriter and tensor-name map), not llama.cpp's convert script:
that one refuses a self-trained vocabulary (its pre-tokenizer check hashes token ids). Notes:
- qwen2 uses NEOX-style RoPE: q/k are written as they are (no permutation);
- tied embeddings: no `output.weight`, llama.cpp falls back to the embedding;
- the tokenizer is `gpt2` BPE with merges from tokenizer.json; the pre-tokenizer name must be the regex
  the Hugging Face side really uses (`gpt-2` for ByteLevel(use_regex=True), `qwen2` for Qwen2's split);
  a wrong but valid name loads and silently tokenizes differently, so check parity (decoder/bench/llamacpp.py);
- added special tokens are CONTROL tokens, `add_bos_token` is false (our prompts carry no BOS).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

QWEN2_SPLIT = (  # Qwen2's pre-tokenizer Split regex, as its tokenizer.json writes it
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
)
DTYPES = ("f32", "f16")


class GGUFExportError(ValueError):
    """The checkpoint cannot be written as GGUF faithfully (say why rather than write a wrong file)."""


def pre_tokenizer_name(tokenizer_json: dict[str, Any]) -> str:
    """llama.cpp's name for the pre-tokenizer regex of a byte-level BPE tokenizer.json."""
    pre = tokenizer_json.get("pre_tokenizer") or {}
    if pre.get("type") == "ByteLevel":
        if not pre.get("use_regex", True):
            raise GGUFExportError("ByteLevel pre-tokenizer without its regex has no llama.cpp equivalent")
        if pre.get("add_prefix_space"):
            raise GGUFExportError("ByteLevel(add_prefix_space=True) has no llama.cpp equivalent")
        return "gpt-2"
    if pre.get("type") == "Sequence":
        parts = pre.get("pretokenizers", [])
        split = [p for p in parts if p.get("type") == "Split"]
        if split and split[0].get("pattern", {}).get("Regex") == QWEN2_SPLIT:
            return "qwen2"
    raise GGUFExportError(f"unsupported pre-tokenizer {pre.get('type')!r}: only gpt-2 and qwen2 regexes are mapped")


def _vocab(tokenizer_json: dict[str, Any]) -> tuple[list[str], list[int], list[str], dict[str, int]]:
    import gguf

    model = tokenizer_json["model"]
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        raise GGUFExportError("only byte-level BPE tokenizers (no byte fallback) are supported")
    vocab: dict[str, int] = dict(model["vocab"])
    added = {t["content"]: t for t in tokenizer_json.get("added_tokens", [])}
    for text, tok in added.items():
        vocab[text] = tok["id"]
    size = max(vocab.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [int(gguf.TokenType.UNUSED)] * size
    for text, idx in vocab.items():
        tokens[idx] = text
        if text not in added:
            kind = gguf.TokenType.NORMAL
        else:
            kind = gguf.TokenType.CONTROL if added[text].get("special", False) else gguf.TokenType.USER_DEFINED
        types[idx] = int(kind)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    specials = {text: t["id"] for text, t in added.items() if t.get("special")}
    return tokens, types, merges, specials


def export_gguf(folder: str | Path, out: str | Path, dtype: str = "f32") -> dict[str, Any]:
    """Write `folder`'s causal LM as GGUF at `out`; 2-D weights in `dtype` ("f32" or "f16"), norms and
    biases in f32. Returns a summary (architecture, tensors, tokenizer pre-name, bytes)."""
    import gguf
    from safetensors.numpy import load_file

    if dtype not in DTYPES:
        raise GGUFExportError(f"dtype must be one of {DTYPES}")
    folder, out = Path(folder), Path(out)
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if cfg.get("model_type") != "qwen2":
        raise GGUFExportError(f"only qwen2 checkpoints are written (model_type {cfg.get('model_type')!r})")
    tok_json = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    pre = pre_tokenizer_name(tok_json)
    tokens, types, merges, specials = _vocab(tok_json)
    n_layers = int(cfg["num_hidden_layers"])
    heads = int(cfg["num_attention_heads"])
    head_dim = int(cfg.get("head_dim") or cfg["hidden_size"] // heads)
    rope = cfg.get("rope_parameters") or {}
    theta = float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    if rope.get("rope_type", "default") != "default":
        raise GGUFExportError("only plain RoPE is written")
    tied = bool(cfg.get("tie_word_embeddings", False))

    arch = gguf.MODEL_ARCH.QWEN2
    writer = gguf.GGUFWriter(str(out), gguf.MODEL_ARCH_NAMES[arch])
    writer.add_name(folder.resolve().name)
    writer.add_context_length(int(cfg.get("max_position_embeddings", 4096)))
    writer.add_embedding_length(int(cfg["hidden_size"]))
    writer.add_block_count(n_layers)
    writer.add_feed_forward_length(int(cfg["intermediate_size"]))
    writer.add_head_count(heads)
    writer.add_head_count_kv(int(cfg.get("num_key_value_heads") or heads))
    if head_dim * heads != int(cfg["hidden_size"]):
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_rope_freq_base(theta)
    writer.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    eos = cfg.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) else eos
    if eos is None:
        eos = specials.get("<|endoftext|>")
    if eos is not None:
        writer.add_eos_token_id(int(eos))
        writer.add_pad_token_id(int(eos))
    if cfg.get("bos_token_id") is not None:
        writer.add_bos_token_id(int(cfg["bos_token_id"]))
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(False)  # byte-level BPE: no leading space is invented

    state: dict[str, np.ndarray] = {}
    for path in sorted(folder.glob("*.safetensors")):
        state.update(load_file(str(path)))
    names = gguf.get_tensor_name_map(arch, n_layers)
    written = 0
    for name in sorted(state):
        if name.endswith("rotary_emb.inv_freq") or (tied and name == "lm_head.weight"):
            continue
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise GGUFExportError(f"no GGUF name for tensor {name!r}")
        data = state[name].astype(np.float32)
        if dtype == "f16" and data.ndim == 2:
            data = data.astype(np.float16)
        writer.add_tensor(new, data)
        written += 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {
        "path": str(out),
        "architecture": "qwen2",
        "dtype": dtype,
        "tensors": written,
        "tied_embeddings": tied,
        "tokenizer_pre": pre,
        "vocab": len(tokens),
        "merges": len(merges),
        "control_tokens": sorted(specials.values()),
        "bytes": out.stat().st_size,
    }
