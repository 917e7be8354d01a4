"""Open an engine for a model folder, turning every loading failure into one clear UserError."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import torch

from decoder.checkpoint import CheckpointError
from decoder.compute_dtype import resolve_compute_dtype
from decoder.defaults import default_model_dir
from decoder.engine import BACKENDS, Engine, EngineOptions
from decoder.engines import ModelRoutes, open_family_engine
from decoder.onnx_backend.errors import OnnxBackendError
from decoder.tokenizer import TokenizerError
from lsp_server.errors import UserError

DTYPES = {
    "fp32": torch.float32,
    "float32": torch.float32,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
}


def open_engine(
    model: str | Path | None,
    device: str = "cpu",
    dtype: str | None = None,
    use_cache: bool = True,
    cache_bytes: int = 256 << 20,
    backend: str = "torch",
) -> Engine:
    folder = Path(model) if model else default_model_dir()
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device {device!r} requested but CUDA is not available")
    if dtype is not None and dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}: expected one of {sorted(DTYPES)}")
    if backend not in BACKENDS:
        raise UserError(f"unknown backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if dtype is None and backend == "torch":  # the onnx backend computes in fp32 only
        dtype = resolve_compute_dtype("auto", device)
    options = EngineOptions(
        device=device,
        dtype=DTYPES.get(dtype or ""),
        use_prefix_cache=use_cache,
        cache_bytes=cache_bytes,
        backend=backend,
    )
    if backend == "onnx":
        _show_backend_notices()
    try:
        return open_family_engine(folder, options)  # Engine, or BlockCausalEngine for Fast-dLLM v2 / SDAR
    except (CheckpointError, TokenizerError) as exc:
        raise UserError(f"cannot load model from {folder}: {exc}") from exc
    except OnnxBackendError as exc:  # a missing package, a failed export, an unsupported device or dtype
        raise UserError(f"backend onnx: {exc}") from exc


def open_routes(
    model: str | Path | None,
    explain_model: str | Path | None = None,
    device: str = "cpu",
    dtype: str | None = None,
    use_cache: bool = True,
    cache_bytes: int = 256 << 20,
    backend: str = "torch",
) -> ModelRoutes:
    """One model for both routes, or `explain_model` (e.g. Qwen2.5-Coder-Instruct) for explain. Each
    engine keeps its own prefix cache; `cache_bytes` is the budget of each."""
    inline = open_engine(model, device, dtype, use_cache, cache_bytes, backend)
    if explain_model is None:
        return ModelRoutes.from_engines(inline)
    same = Path(explain_model).resolve() == (Path(model) if model else default_model_dir()).resolve()
    if same:
        return ModelRoutes.from_engines(inline)
    return ModelRoutes.from_engines(inline, open_engine(explain_model, device, dtype, use_cache, cache_bytes, backend))


def _show_backend_notices() -> None:
    """The onnx backend logs its provider choice (and why) and any export: show them on stderr when
    nobody has configured logging (the CLI); a server that has keeps its own handlers."""
    log = logging.getLogger("parafill.onnx")
    if logging.getLogger().handlers or log.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("parafill: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
