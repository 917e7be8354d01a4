"""Server settings: defaults, and lenient parsing of `initializationOptions` / `didChangeConfiguration`.

Keys may be camelCase (VS Code style) or snake_case and may sit under a `parafill` section. A bad value
never stops the server: it is reported as a warning and the previous value is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

SECTION = "parafill"


@dataclass(frozen=True)
class Settings:
    enable: bool = True
    # engine (a change here reloads the model)
    model: str | None = None  # model folder; None: the shipped default (models/default or PARAFILL_MODEL)
    explain_model: str | None = None  # a separate model (own engine and cache) for explain; None: `model`
    device: str = "cpu"
    dtype: str | None = None
    backend: str = "torch"  # or "onnx" (see decoder/onnx_backend)
    cache_mb: int = 256  # prefix-cache budget
    # inline completion
    max_tokens_line: int = 32  # span limit for the rest of a line (lsp_server.context.completion_shape)
    max_tokens_block: int = 64  # span limit for a multi-line completion
    max_lines: int = 16  # multi-line completions stop after this many lines
    inline_mode: str | None = None  # "block" or "ar" (to compare); None: the model family's route
    block_size: int | None = None  # None: the model family's published block settings
    threshold: float | None = None
    # Prompt-lookup drafts of up to this many tokens (decoder/lookup.py); 0: off. AR decoding (explain; inline
    # when inline_mode is "ar") checks them in the next token's pass: same output, fewer passes. Block decoding
    # also commits the leading masked positions whose argmax agrees with the draft.
    lookup_tokens: int = 8
    # Hold back ghost text whose confidence (geometric mean of its tokens' probabilities) is below this; 0: show
    # every suggestion. See `parafill eval`'s coverage table for what a value keeps and how good that is.
    min_confidence: float = 0.0
    time_budget_ms: int = 2000  # hard limit per inline request; what is committed by then is answered
    debounce_ms: int = 0  # wait before running the model; a newer request in this window supersedes
    # context window (stable grid, see lsp_server/context.py)
    context_lines_before: int = 128
    context_lines_after: int = 32
    context_grid_lines: int = 32
    context_chars_before: int = 6000
    context_chars_after: int = 2000
    context_tokens: int = 1536  # prompt cap, further limited by the model's max positions
    # explain
    explain_max_tokens: int = 256
    explain_time_budget_ms: int = 60000
    explain_max_chars: int = 8000
    explain_stop_on_loop: bool = True  # end an explanation that repeats itself (decoder/repetition.py)
    # documents
    max_document_kb: int = 1024  # larger documents are not served (logged once)
    # remote backend: an OpenAI-compatible server (vLLM, SGLang, llama.cpp server) instead of the embedded
    # engine for the routes named in remote_routes; only when remote_url is set (see lsp_server/remote.py)
    remote_url: str | None = None  # API base, e.g. http://127.0.0.1:8000/v1
    remote_model: str | None = None  # the request's `model` field
    remote_api_key_env: str | None = "PARAFILL_REMOTE_API_KEY"  # environment variable holding the API key
    remote_routes: str = "explain"  # "explain", "inline" or "both"
    remote_explain_api: str = "chat"  # "chat" (/chat/completions) or "completions" with remote_explain_template
    remote_explain_template: str = "<|explain_code|>{code}<|explain_text|>"
    remote_fim_template: str | None = None  # e.g. "<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>";
    # None: /completions with prompt=prefix and suffix=suffix (servers that build the FIM prompt themselves)
    remote_timeout_ms: int = 30000  # connect, and the longest wait for the next streamed piece

    @property
    def engine_key(self) -> tuple:
        """Settings whose change needs a new engine."""
        return (self.model, self.explain_model, self.device, self.dtype, self.backend, self.cache_mb)


# Per-field validation: (type, minimum, maximum); None bounds are open.
_RULES: dict[str, tuple[type, float | None, float | None]] = {
    "enable": (bool, None, None),
    "model": (str, None, None),
    "explain_model": (str, None, None),
    "device": (str, None, None),
    "dtype": (str, None, None),
    "backend": (str, None, None),
    "cache_mb": (int, 0, 1 << 20),
    "max_tokens_line": (int, 1, 512),
    "max_tokens_block": (int, 1, 1024),
    "max_lines": (int, 1, 200),
    "inline_mode": (str, None, None),
    "block_size": (int, 1, 256),
    "threshold": (float, 0.0, 1.0),
    "lookup_tokens": (int, 0, 64),
    "min_confidence": (float, 0.0, 1.0),
    "time_budget_ms": (int, 1, 600_000),
    "debounce_ms": (int, 0, 10_000),
    "context_lines_before": (int, 1, 100_000),
    "context_lines_after": (int, 0, 100_000),
    "context_grid_lines": (int, 1, 10_000),
    "context_chars_before": (int, 1, 10_000_000),
    "context_chars_after": (int, 0, 10_000_000),
    "context_tokens": (int, 16, 1_000_000),
    "explain_max_tokens": (int, 1, 8192),
    "explain_time_budget_ms": (int, 1, 3_600_000),
    "explain_max_chars": (int, 1, 10_000_000),
    "explain_stop_on_loop": (bool, None, None),
    "max_document_kb": (int, 1, 1 << 22),
    "remote_url": (str, None, None),
    "remote_model": (str, None, None),
    "remote_api_key_env": (str, None, None),
    "remote_routes": (str, None, None),
    "remote_explain_api": (str, None, None),
    "remote_explain_template": (str, None, None),
    "remote_fim_template": (str, None, None),
    "remote_timeout_ms": (int, 100, 3_600_000),
}

_CHOICES = {
    "inline_mode": ("block", "ar"),
    "backend": ("torch", "onnx"),
    "remote_routes": ("explain", "inline", "both"),
    "remote_explain_api": ("chat", "completions"),
}
_NULLABLE = {
    *("model", "explain_model", "dtype", "inline_mode", "block_size", "threshold"),
    *("remote_url", "remote_model", "remote_api_key_env", "remote_fim_template"),
}  # null: the default

# Accepted spellings besides the field name and its camelCase form.
_ALIASES = {
    "modelfolder": "model",
    "modeldir": "model",
    "cachebudgetmb": "cache_mb",
    "cachemb": "cache_mb",
    "maxtokens": "max_tokens_line",
    "maxtokenssingleline": "max_tokens_line",
    "maxtokensmultiline": "max_tokens_block",
    "timebudget": "time_budget_ms",
    "debounce": "debounce_ms",
    "enabled": "enable",
}


def _key(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_BY_KEY = {_key(f.name): f.name for f in fields(Settings)} | _ALIASES
_DEFAULTS = {f.name: f.default for f in fields(Settings)}


def _coerce(name: str, value: Any) -> Any:
    kind, low, high = _RULES[name]
    if value is None and name in _NULLABLE:
        return _DEFAULTS[name]  # not always None: remote_api_key_env names a variable by default
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError("expected true or false")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise ValueError("expected a string")
        value = value.strip()
        if not value and name in _NULLABLE:
            return _DEFAULTS[name]  # "" means "the default"
        if name in _CHOICES and value not in _CHOICES[name]:
            raise ValueError(f"expected one of {', '.join(_CHOICES[name])}")
        if name == "remote_url" and not value.startswith(("http://", "https://")):
            raise ValueError("expected an http:// or https:// URL")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("expected a number")
    if isinstance(value, float) and not math.isfinite(value):  # JSON readers take 1e999 as inf, and NaN
        raise ValueError("expected a finite number")
    if kind is int:
        if value != int(value):
            raise ValueError("expected an integer")
        value = int(value)
    if kind is float and isinstance(value, int):
        value = float(value) if abs(value) < 2**1023 else math.copysign(math.inf, value)  # 400 digits: out of range
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"expected a value in [{low}, {high}]")
    return value


def unwrap_section(raw: Any) -> Any:
    """`{"parafill": {...}}` -> `{...}` (VS Code sends the section it synchronises)."""
    if isinstance(raw, dict) and isinstance(raw.get(SECTION), dict):
        return raw[SECTION]
    return raw


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Apply the keys of `raw` on top of `base`; returns (settings, warnings). Unknown keys are warned about."""
    base = base or Settings()
    raw = unwrap_section(raw)
    if raw is None:
        return base, []
    if not isinstance(raw, dict):
        return base, [f"settings must be a JSON object, got {type(raw).__name__}: ignored"]
    changes: dict[str, Any] = {}
    warnings: list[str] = []
    for key, value in raw.items():
        name = _BY_KEY.get(_key(str(key)))
        if name is None:
            warnings.append(f"unknown setting {key!r}: ignored")
            continue
        try:
            changes[name] = _coerce(name, value)
        except (ValueError, OverflowError, TypeError) as exc:  # one bad key costs only itself
            warnings.append(f"setting {key!r}={value!r}: {exc}; keeping {getattr(base, name)!r}")
    return replace(base, **changes), warnings
