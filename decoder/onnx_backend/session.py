"""ONNX Runtime sessions: which execution provider, why, and with how many threads."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from decoder.onnx_backend.errors import INSTALL_HINT, BackendUnavailableError, OnnxBackendError

CUDA_EP, CPU_EP = "CUDAExecutionProvider", "CPUExecutionProvider"

log = logging.getLogger("parafill.onnx")


def require_onnxruntime() -> ModuleType:
    try:
        import onnxruntime
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the onnx backend needs onnxruntime, which is not installed ({exc}): {INSTALL_HINT}"
        ) from exc
    return onnxruntime


@dataclass(frozen=True)
class ProviderChoice:
    provider: str
    reason: str


def choose_provider(available: list[str], device: str) -> ProviderChoice:
    """CUDA when this onnxruntime build offers it (onnxruntime-gpu), else CPU; the reason says why.

    A KV cache on a CUDA device needs the CUDA provider: a CPU session cannot read it."""
    if CUDA_EP in available:
        where = "the KV cache stays on the GPU"
        if not device.startswith("cuda"):
            where = "the KV cache is on the CPU and is copied each pass: pass --device cuda to keep it on the GPU"
        return ProviderChoice(CUDA_EP, f"onnxruntime-gpu offers CUDA; {where}")
    if device.startswith("cuda"):
        raise OnnxBackendError(
            f"device {device!r} with the onnx backend needs onnxruntime-gpu (this onnxruntime offers "
            f"{', '.join(available)}): pip install 'parafill[onnx-gpu]' in place of 'parafill[onnx]'"
        )
    return ProviderChoice(CPU_EP, "this onnxruntime has no CUDA provider (onnxruntime-gpu is not installed)")


def session_options(threads: int):
    ort = require_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: its warnings about unused initializers are noise here
    return options


def preferred_provider(device: str) -> ProviderChoice:
    return choose_provider(require_onnxruntime().get_available_providers(), device)


def open_session(path: Path, threads: int, device: str, choice: ProviderChoice):
    """A session on the chosen provider; returns (session, the ProviderChoice actually in use)."""
    ort = require_onnxruntime()
    providers: list = [CPU_EP]
    if choice.provider == CUDA_EP:
        index = int(device.split(":")[1]) if device.startswith("cuda:") else 0
        providers.insert(0, (CUDA_EP, {"device_id": index}))
    session = ort.InferenceSession(str(path), session_options(threads), providers=providers)
    used = session.get_providers()[0]
    if used != choice.provider:  # onnxruntime-gpu without a usable GPU / CUDA libraries falls back quietly
        if device.startswith("cuda"):
            raise OnnxBackendError(f"onnxruntime could not start its CUDA provider (it fell back to {used})")
        choice = ProviderChoice(used, "onnxruntime-gpu is installed but its CUDA provider did not start")
    return session, choice


def cpu_session(path: Path, threads: int = 1):
    ort = require_onnxruntime()
    return ort.InferenceSession(str(path), session_options(threads), providers=[CPU_EP])
