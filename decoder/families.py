"""Checkpoint families parafill can run, and what each needs: architecture, KV layout, block settings, routes.

A family is recognised from `model_type` / `architectures` in config.json; no remote code is ever run
(the `auto_map` entries of custom checkpoints are ignored). Each family names the base architecture whose
math it uses, and how it decodes:

- kv_layout "causal": committed tokens are encoded causally, exactly as an AR model encodes them (our own
  models, Qwen2.5-Coder and any Qwen2/Qwen3/Llama checkpoint).
- kv_layout "block_causal": blocks of `block_size` tokens aligned on absolute position 0; a token sees every
  token of its own block and of the blocks before it. The prompt is prefilled that way too, and its last,
  partial block is decoded together with the first generated tokens (Fast-dLLM v2, SDAR).
- token_shift: the output at position j predicts token j + 1 (AR models, Fast-dLLM v2); without it the
  output at a masked position predicts that position itself (SDAR).

The published settings (block size, sub-block size, threshold, mask token) are defaults: every one can be
overridden per request. A checkpoint's config.json may name its own measured threshold (`block_threshold`,
written by `decoder.training.ship` from the model's evaluation), which replaces the family's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BASE_ARCHITECTURES = ("qwen2", "qwen3", "llama")
THRESHOLD_FIELD = "block_threshold"


@dataclass(frozen=True)
class Family:
    name: str
    title: str
    base: str  # the architecture whose math the checkpoint uses: qwen2, qwen3 or llama
    model_types: tuple[str, ...]
    architectures: tuple[str, ...]
    kv_layout: str = "causal"  # "causal" or "block_causal"
    token_shift: bool = True
    # q/k/v projection bias: None reads `attention_bias` (Qwen2 always has it; the custom Fast-dLLM v2
    # modeling code hard-wires it on whatever config.json says).
    qkv_bias: bool | None = None
    block_size: int = 8
    block_size_field: str | None = None  # config.json field that overrides block_size
    sub_block_size: int | None = None  # commit sub-blocks of the block left to right (Fast-dLLM v2)
    threshold: float = 0.9
    fallback_window: int = 2
    mask_token_id: int | None = None  # published id, used when neither config nor tokenizer names one
    mask_token: str | None = None
    # Routes for one model serving both: inline completion and explain. "auto": block diffusion when the
    # checkpoint has a mask token, else AR.
    inline_mode: str = "auto"
    explain_mode: str = "ar"
    stop_tokens: tuple[str, ...] = ("<|endoftext|>",)
    notes: str = ""

    def block_size_for(self, extra: dict[str, Any]) -> int:
        if self.block_size_field and isinstance(extra.get(self.block_size_field), int):
            return int(extra[self.block_size_field])
        return self.block_size

    def threshold_for(self, extra: dict[str, Any]) -> float:
        value = extra.get(THRESHOLD_FIELD)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 < value <= 1.0:
            return float(value)
        return self.threshold

    def mode_for(self, kind: str, has_mask: bool) -> str:
        """Decoding mode ("block" or "ar") this family uses for a request kind ("inline" or "explain")."""
        if kind not in ("inline", "explain"):
            raise ValueError(f"unknown request kind {kind!r}")
        mode = self.inline_mode if kind == "inline" else self.explain_mode
        if mode == "auto":
            return "block" if has_mask else "ar"
        return mode


CAUSAL = Family(
    name="causal",
    title="Qwen2 / Qwen2.5-Coder / Qwen3 / Llama (causal KV)",
    base="",  # the model_type itself
    model_types=BASE_ARCHITECTURES,
    architectures=("Qwen2ForCausalLM", "Qwen3ForCausalLM", "LlamaForCausalLM"),
    notes="AR checkpoints (Qwen2.5-Coder base/instruct) and parafill's own block-diffusion models.",
    stop_tokens=("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "</s>"),
    # When no position passes the threshold, commit the leftmost one. `parafill eval --limit 60 --thresholds 0.9
    # --fallback-window 1` vs 2, edit similarity, rest of line / block: 0.162 vs 0.147 / 0.077 vs 0.073 on a
    # snapshot of the model shipped on 2026-11-30, 0.147 vs 0.151 / 0.081 vs 0.079 on the one before (noise):
    # the wider window commits later tokens that a stop then throws away. Measure again for a model that
    # commits several tokens per step.
    fallback_window=1,
)

FAST_DLLM_V2 = Family(
    name="fast-dllm-v2",
    title="Fast-dLLM v2 (NVIDIA, Qwen2.5-Instruct fine-tune)",
    base="qwen2",
    model_types=("fast_dllm_qwen",),
    architectures=("Fast_dLLM_QwenForCausalLM",),
    kv_layout="block_causal",
    token_shift=True,
    qkv_bias=True,
    block_size=32,
    block_size_field="bd_size",
    sub_block_size=8,
    threshold=0.9,
    fallback_window=8,  # the reference commits the most confident position of the sub-block
    mask_token_id=151665,
    mask_token="|<MASK>|",
    inline_mode="block",
    explain_mode="block",
    stop_tokens=("<|im_end|>", "<|endoftext|>"),
    notes="Blocks of 32 (bd_size) decoded in sub-blocks of 8 with threshold 0.9; block-causal KV; token shift.",
)

SDAR = Family(
    name="sdar",
    title="SDAR (JetAstra, Qwen3 fine-tune)",
    base="qwen3",
    model_types=("sdar",),
    architectures=("SDARForCausalLM",),
    kv_layout="block_causal",
    token_shift=False,
    block_size=4,
    block_size_field="block_size",
    threshold=0.9,
    fallback_window=4,  # the reference's dynamic rule commits the most confident position of the block
    mask_token_id=151669,
    mask_token="<|MASK|>",
    inline_mode="block",
    explain_mode="block",
    stop_tokens=("<|im_end|>", "<|endoftext|>"),
    notes="Blocks of 4, up to 4 denoising steps, threshold 0.9; block-causal KV; no token shift.",
)

FAMILIES = (FAST_DLLM_V2, SDAR, CAUSAL)

# Known checkpoints we do not run, with the reason (the error names it instead of a bare "unsupported").
REFUSED = {
    "sdar_moe": "SDAR MoE checkpoints (e.g. SDAR-30B-A3B) need mixture-of-experts layers, which are not implemented",
    "qwen2_moe": "mixture-of-experts layers are not implemented",
    "qwen3_moe": "mixture-of-experts layers are not implemented",
    "llada": "LLaDA uses a full-attention (non-causal) masked diffusion model without a KV-cacheable layout",
    "dream": "Dream uses full-sequence diffusion decoding, not block diffusion over a KV cache",
}


def detect(model_type: str, architectures: list[str] | None) -> Family | None:
    """The family of a config.json by its model_type, then by its architectures; None if unknown."""
    mt = (model_type or "").lower()
    archs = [a for a in (architectures or []) if isinstance(a, str)]
    for fam in FAMILIES:
        if mt and mt in fam.model_types:
            return fam
    for fam in FAMILIES:
        if any(a in fam.architectures for a in archs):
            return fam
    return None


def base_architecture(model_type: str, architectures: list[str] | None) -> str:
    """qwen2 / qwen3 / llama for a config.json, or ValueError naming what is missing."""
    fam = detect(model_type, architectures)
    if fam is None:
        known = sorted({t for f in FAMILIES for t in f.model_types})
        archs = sorted({a for f in FAMILIES for a in f.architectures})
        reason = REFUSED.get((model_type or "").lower())
        detail = f" ({reason})" if reason else ""
        raise ValueError(
            f"unsupported model_type {model_type!r}{detail} with architectures {architectures or []}: "
            f"parafill runs model_type in {known} or architectures in {archs}"
        )
    if fam is CAUSAL:
        mt = (model_type or "").lower()
        if mt in BASE_ARCHITECTURES:
            return mt
        for arch in architectures or []:
            for base in BASE_ARCHITECTURES:
                if arch.lower() == f"{base}forcausallm":
                    return base
    return fam.base


def family_of(config: Any) -> Family:
    """The family of a loaded ModelConfig (duck-typed: model_type, extra["architectures"])."""
    fam = detect(config.model_type, config.extra.get("architectures"))
    return fam or CAUSAL
