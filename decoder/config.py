"""Model configuration read from a Hugging Face `config.json` (Llama / Qwen2 family)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Architectures whose math our model implements. Anything else is refused with a clear error.
SUPPORTED_MODEL_TYPES = {"qwen2", "llama"}


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
    model_type: str = "qwen2"
    head_dim: int | None = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    attention_bias: bool = True  # Qwen2 always has q/k/v bias; Llama only when attention_bias is set
    mask_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # fields we carry but do not interpret

    def __post_init__(self) -> None:
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ModelConfigError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )

    @property
    def kv_groups(self) -> int:
        return self.num_attention_heads // self.num_key_value_heads

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ModelConfig:
        model_type = raw.get("model_type", "")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ModelConfigError(
                f"unsupported model_type {model_type!r}: parafill supports {sorted(SUPPORTED_MODEL_TYPES)}"
            )
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
        rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise ModelConfigError(f"unsupported rope_type {rope_type!r}: only 'default' RoPE is implemented")
        # transformers 5 stores theta in rope_parameters; older checkpoints keep it at the top level.
        rope_theta = float(rope.get("rope_theta", raw.get("rope_theta", 10000.0)))
        known = {f for f in cls.__dataclass_fields__ if f not in ("extra", "rope_theta", "attention_bias")}
        kwargs = {k: raw[k] for k in known if k in raw}
        kwargs["num_key_value_heads"] = raw.get("num_key_value_heads", raw["num_attention_heads"])
        kwargs["attention_bias"] = True if model_type == "qwen2" else bool(raw.get("attention_bias", False))
        extra = {k: v for k, v in raw.items() if k not in known}
        return cls(rope_theta=rope_theta, extra=extra, **kwargs)

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
        """The config.json a transformers 5 `Qwen2ForCausalLM` / `LlamaForCausalLM` understands."""
        out = {k: v for k, v in asdict(self).items() if k not in ("extra", "rope_theta") and v is not None}
        out.update(self.extra)
        out["model_type"] = self.model_type
        out["architectures"] = ["Qwen2ForCausalLM" if self.model_type == "qwen2" else "LlamaForCausalLM"]
        out["hidden_act"] = "silu"
        out["rope_parameters"] = {"rope_type": "default", "rope_theta": self.rope_theta}
        if self.model_type == "qwen2":
            out.pop("attention_bias", None)
        return out
