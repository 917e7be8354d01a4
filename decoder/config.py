"""Model configuration read from a Hugging Face `config.json` (Qwen2, Qwen3, Llama and their fine-tunes).

Every family we run (decoder/families.py) maps onto one base architecture: Qwen2 (q/k/v bias), Qwen3
(per-head q/k RMSNorm before RoPE, explicit head_dim) or Llama. Fields that change the math are read here;
what we cannot compute faithfully (sliding-window layers, RoPE scaling, other activations) is refused with
a message naming the field. Everything else is carried in `extra` (bd_size, block_size, auto_map, ...).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from decoder import families

# Base architectures whose math our model implements. Anything else is refused with a clear error.
SUPPORTED_MODEL_TYPES = set(families.BASE_ARCHITECTURES)

_HF_CLASSES = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}

# transformers' default head_dim when a config omits it: hidden/heads, except Qwen3's fixed 128.
_DEFAULT_HEAD_DIM = {"qwen3": 128}


class ModelConfigError(ValueError):
    """The checkpoint's config.json is missing, unreadable or asks for something we do not support."""


@dataclass
class ModelConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    model_type: str = "qwen2"  # as written in config.json ("sdar", "Fast_dLLM_Qwen", ...)
    architecture: str = ""  # base math: qwen2, qwen3 or llama ("": from model_type)
    head_dim: int | None = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    attention_bias: bool = True  # q/k/v bias: Qwen2 always; Llama / Qwen3 when attention_bias is set
    attention_out_bias: bool = False  # o_proj bias: Llama / Qwen3 with attention_bias (never Qwen2)
    mlp_bias: bool = False  # Llama's mlp_bias
    qk_norm: bool = False  # Qwen3: RMSNorm over each head's q and k before RoPE
    mask_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # fields we carry but do not interpret

    def __post_init__(self) -> None:
        if not self.architecture:
            self.architecture = self.model_type
        if self.architecture not in SUPPORTED_MODEL_TYPES:
            raise ModelConfigError(f"unsupported architecture {self.architecture!r}")
        if self.architecture == "qwen3":
            self.qk_norm = True
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ModelConfigError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ModelConfig:
        model_type = raw.get("model_type", "")
        architectures = raw.get("architectures")
        try:
            base = families.base_architecture(model_type, architectures if isinstance(architectures, list) else None)
        except ValueError as exc:
            raise ModelConfigError(str(exc)) from exc
        family = families.detect(model_type, architectures if isinstance(architectures, list) else None)
        required = [
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
        ]
        missing = [k for k in required if k not in raw]
        if missing:
            raise ModelConfigError(f"config.json lacks required fields: {', '.join(missing)}")
        act = raw.get("hidden_act", "silu")
        if act != "silu":
            raise ModelConfigError(f"unsupported hidden_act {act!r}: only 'silu' (SwiGLU) is implemented")
        _check_rope(raw)
        _check_full_attention(raw)
        if raw.get("pretraining_tp", 1) not in (1, None):
            raise ModelConfigError(f"unsupported pretraining_tp {raw['pretraining_tp']!r}: only 1 is implemented")
        # transformers 5 stores theta in rope_parameters; older checkpoints keep it at the top level.
        rope = raw.get("rope_parameters") or {}
        rope_theta = float(rope.get("rope_theta", raw.get("rope_theta", 10000.0)))
        computed = ("extra", "rope_theta", "attention_bias", "attention_out_bias", "mlp_bias", "qk_norm", "model_type")
        known = {f for f in cls.__dataclass_fields__ if f not in computed}
        kwargs = {k: raw[k] for k in known if k in raw}
        kwargs["num_key_value_heads"] = raw.get("num_key_value_heads") or raw["num_attention_heads"]
        if raw.get("head_dim") is None:
            kwargs.pop("head_dim", None)
            if base in _DEFAULT_HEAD_DIM:
                kwargs["head_dim"] = _DEFAULT_HEAD_DIM[base]
        biased = bool(raw.get("attention_bias", False))
        if family is not None and family.qkv_bias is not None:
            qkv_bias = family.qkv_bias
        else:
            qkv_bias = True if base == "qwen2" else biased
        out_bias = False if base == "qwen2" else biased
        mlp_bias = bool(raw.get("mlp_bias", False)) if base == "llama" else False
        extra = {k: v for k, v in raw.items() if k not in known and k != "model_type"}
        return cls(
            model_type=model_type,
            architecture=base,
            rope_theta=rope_theta,
            attention_bias=qkv_bias,
            attention_out_bias=out_bias,
            mlp_bias=mlp_bias,
            extra=extra,
            **kwargs,
        )

    @classmethod
    def from_folder(cls, folder: str | Path) -> ModelConfig:
        path = Path(folder) / "config.json"
        if not path.is_file():
            raise ModelConfigError(f"no config.json in {folder}")
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelConfigError(f"cannot read {path}: {exc}") from exc
        if not isinstance(raw, dict):
            raise ModelConfigError(f"{path} does not hold a JSON object")
        return cls.from_dict(raw)

    def to_hf_dict(self) -> dict[str, Any]:
        """The config.json transformers' own Qwen2/Qwen3/Llama ForCausalLM understands (base architecture)."""
        skip = ("extra", "rope_theta", "architecture", "attention_out_bias", "qk_norm", "model_type")
        out = {k: v for k, v in asdict(self).items() if k not in skip and v is not None}
        out.update({k: v for k, v in self.extra.items() if k not in ("architectures", "auto_map")})
        arch = self.architecture
        out["model_type"] = arch
        out["architectures"] = [_HF_CLASSES[arch]]
        out["hidden_act"] = "silu"
        out["rope_parameters"] = {"rope_type": "default", "rope_theta": self.rope_theta}
        out.pop("rope_theta", None)
        out.pop("rope_scaling", None)
        if arch == "qwen2":
            out.pop("attention_bias", None)
            out.pop("mlp_bias", None)
        elif arch == "qwen3":
            out["attention_bias"] = self.attention_out_bias
            out.pop("mlp_bias", None)
        else:
            out["attention_bias"] = self.attention_out_bias
        return out


def _check_rope(raw: dict[str, Any]) -> None:
    """Only plain RoPE is implemented: refuse linear/dynamic/yarn/llama3/... scaling by name."""
    for key in ("rope_parameters", "rope_scaling"):
        rope = raw.get(key)
        if rope is None:
            continue
        if not isinstance(rope, dict):
            raise ModelConfigError(f"{key} must be an object or null, not {rope!r}")
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise ModelConfigError(
                f"unsupported {key}.rope_type {rope_type!r}: only 'default' RoPE is implemented "
                f"(remove the scaling entry to run within the original context length)"
            )


def _check_full_attention(raw: dict[str, Any]) -> None:
    """Refuse sliding-window layers: every layer must attend to the whole context.

    Qwen2/Qwen3 configs always carry sliding_window / max_window_layers; the window is only in effect when
    use_sliding_window is true (layers at index >= max_window_layers) or when layer_types names
    "sliding_attention". A window no shorter than max_position_embeddings never cuts anything.
    """
    n_layers = int(raw.get("num_hidden_layers", 0))
    layer_types = raw.get("layer_types")
    window = raw.get("sliding_window")
    max_pos = raw.get("max_position_embeddings")
    if layer_types is not None:
        if not isinstance(layer_types, list):
            raise ModelConfigError("layer_types must be a list")
        if len(layer_types) != n_layers:
            raise ModelConfigError(f"layer_types has {len(layer_types)} entries for {n_layers} layers")
        sliding = [i for i, t in enumerate(layer_types) if t != "full_attention"]
        if [t for t in layer_types if t not in ("full_attention", "sliding_attention")]:
            raise ModelConfigError(f"unsupported layer_types {sorted(set(layer_types))}: only 'full_attention'")
    elif raw.get("use_sliding_window") and window is not None:
        first = int(raw.get("max_window_layers", n_layers))
        sliding = list(range(first, n_layers))
    else:
        sliding = []
    if window is None or (max_pos is not None and int(window) >= int(max_pos)):
        sliding = []  # no window, or one that covers every position the model can see
    if sliding:
        raise ModelConfigError(
            f"sliding-window attention is enabled (sliding_window={window}, use_sliding_window="
            f"{raw.get('use_sliding_window')}, max_window_layers={raw.get('max_window_layers')}, layers "
            f"{sliding[:4]}{'...' if len(sliding) > 4 else ''}): parafill implements full attention only; "
            f"set use_sliding_window to false if the checkpoint was trained without it"
        )
