"""Errors of the ONNX Runtime backend; the CLI turns them into one clear line (exit 2)."""

from __future__ import annotations

INSTALL_HINT = (
    "install one of the extras: pip install 'parafill[onnx]' (CPU) or 'parafill[onnx-gpu]' (CUDA); "
    "never both: onnxruntime and onnxruntime-gpu overwrite each other"
)


class OnnxBackendError(RuntimeError):
    """The ONNX backend cannot run this model here (export failed, wrong device or dtype, ...)."""


class BackendUnavailableError(OnnxBackendError):
    """A package the ONNX backend needs (onnxruntime; onnx and onnxscript to export) is not installed."""
