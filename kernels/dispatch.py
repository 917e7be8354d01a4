"""Run-time choice of the denoise implementation: Triton on CUDA when importable, else the reference.

PARAFILL_DENOISE=triton|reference forces one (read at every call, so it can be changed at run time).
Forcing `triton` for CPU tensors only works when TRITON_INTERPRET=1 was set before triton was first
imported (the kernels then run in Triton's slow CPU interpreter: for tests, not production).
Triton is imported lazily, on the first call that needs it: the package imports without triton.
"""

from __future__ import annotations

import functools
import importlib
import os
from types import ModuleType

from torch import Tensor

from kernels import reference

_ENV = "PARAFILL_DENOISE"
_BACKENDS = ("triton", "reference")


@functools.cache
def triton_available() -> bool:
    """Whether triton can be imported (cached: the answer does not change within a process)."""
    try:
        importlib.import_module("triton")
    except ImportError:
        return False
    return True


def _forced() -> str | None:
    value = os.environ.get(_ENV, "").strip().lower()
    if not value:
        return None
    if value not in _BACKENDS:
        raise ValueError(f"{_ENV} must be one of {_BACKENDS} (or unset), got {value!r}")
    return value


def denoise_backend_name(device_type: str) -> str:
    """'triton' or 'reference' for tensors on `device_type`; PARAFILL_DENOISE overrides."""
    forced = _forced()
    if forced is not None:
        return forced
    if device_type == "cuda" and triton_available():
        return "triton"
    return "reference"


def _triton_module(device_type: str) -> ModuleType:
    """kernels.triton_denoise, checked usable for `device_type`. Looked up in sys.modules on every call
    (import_module is a dict lookup once loaded), so tests can substitute an interpreted copy."""
    if not triton_available():
        raise RuntimeError(f"{_ENV}=triton but triton is not importable (pip install 'parafill[triton]')")
    module = importlib.import_module("kernels.triton_denoise")
    if device_type != "cuda" and not module.is_interpreted():
        raise RuntimeError(
            f"the Triton denoise kernels need CUDA tensors, got {device_type!r}; to run them on CPU set "
            "TRITON_INTERPRET=1 before triton is imported (slow: for tests only)"
        )
    return module


def denoise_step(
    logits: Tensor,
    masked: Tensor,
    threshold: float,
    block_size: int | None = None,
    fallback: Tensor | None = None,
    temperature: float = 0.0,
    seed: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """(token ids [N], confidence [N], commit mask [N]); see kernels/reference.py for the semantics."""
    device_type = logits.device.type
    if denoise_backend_name(device_type) == "triton":
        return _triton_module(device_type).denoise_step(
            logits, masked, threshold, block_size, fallback, temperature, seed
        )
    return reference.denoise_step(logits, masked, threshold, block_size, fallback, temperature, seed)


def lm_head_denoise_step(
    hidden: Tensor,
    weight: Tensor,
    masked: Tensor,
    threshold: float,
    block_size: int | None = None,
    fallback: Tensor | None = None,
    temperature: float = 0.0,
    seed: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The same step from hidden states [N, D] and the LM-head weight [V, D], without the [N, V] logits
    in memory on the Triton path."""
    device_type = hidden.device.type
    if denoise_backend_name(device_type) == "triton":
        return _triton_module(device_type).lm_head_denoise_step(
            hidden, weight, masked, threshold, block_size, fallback, temperature, seed
        )
    return reference.lm_head_denoise_step(hidden, weight, masked, threshold, block_size, fallback, temperature, seed)
