"""Run-time choice of the denoise implementation: Triton on CUDA when it imports and launches there,
else the reference.

PARAFILL_DENOISE=triton|reference forces one (read at every call, so it can be changed at run time).
Forcing `triton` for CPU tensors only works when TRITON_INTERPRET=1 was set before triton was first
imported (the kernels then run in Triton's slow CPU interpreter: for tests, not production).
Triton is imported lazily, on the first call that needs it: the package imports without triton.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from collections.abc import Callable
from types import ModuleType
from typing import ParamSpec, TypeVar

import torch

from parafill_kernels import reference

log = logging.getLogger("parafill.kernels")

_ENV = "PARAFILL_DENOISE"
_BACKENDS = ("triton", "reference")

P = ParamSpec("P")
R = TypeVar("R")


@functools.cache
def triton_available() -> bool:
    """Whether triton can be imported (cached: the answer does not change within a process)."""
    try:
        importlib.import_module("triton")
    except ImportError:
        return False
    return True


@functools.cache
def triton_launches(device: torch.device) -> bool:
    """Whether the kernels compile and launch on `device` (checked once per device, with a one-element
    launch): triton imports on machines where its first launch still fails (no C compiler to build its
    driver stub, no libcuda), and the decoder then runs the reference instead of failing every request."""
    try:
        module = importlib.import_module("parafill_kernels.triton_denoise")
        module.gumbel_noise(1, 0, device)
    except Exception as exc:  # whatever the toolchain raises: the reference serves instead
        reason = f"{type(exc).__name__}: {exc}"
        log.warning("Triton denoise kernels cannot launch on %s (%s); using the PyTorch reference", device, reason)
        return False
    return True


def _forced() -> str | None:
    value = os.environ.get(_ENV, "").strip().lower()
    if not value:
        return None
    if value not in _BACKENDS:
        raise ValueError(f"{_ENV} must be one of {_BACKENDS} (or unset), got {value!r}")
    return value


def denoise_backend_name(device: torch.device | str) -> str:
    """'triton' or 'reference' for tensors on `device`; PARAFILL_DENOISE overrides."""
    forced = _forced()
    if forced is not None:
        return forced
    device = torch.device(device)
    if device.type == "cuda" and triton_available() and triton_launches(device):
        return "triton"
    return "reference"


def _triton_module(device_type: str) -> ModuleType:
    """parafill_kernels.triton_denoise, checked usable for `device_type`. Looked up in sys.modules on every call
    (import_module is a dict lookup once loaded), so tests can substitute an interpreted copy."""
    if not triton_available():
        raise RuntimeError(f"{_ENV}=triton but triton is not importable (pip install 'parafill[triton]')")
    module = importlib.import_module("parafill_kernels.triton_denoise")
    if device_type != "cuda" and not module.is_interpreted():
        raise RuntimeError(
            f"the Triton denoise kernels need CUDA tensors, got {device_type!r}; to run them on CPU set "
            "TRITON_INTERPRET=1 before triton is imported (slow: for tests only)"
        )
    return module


def _dispatched(reference_step: Callable[P, R]) -> Callable[P, R]:
    """`reference_step` (same signature, by construction) on the backend chosen for its first argument's
    device: parafill_kernels.triton_denoise's function of the same name, or the reference itself. One helper, so
    that the signatures live only in parafill_kernels/reference.py and the choice is made in one place."""
    name = reference_step.__name__
    first = reference_step.__code__.co_varnames[0]  # logits / hidden: it decides the device

    @functools.wraps(reference_step)
    def step(*args: P.args, **kwargs: P.kwargs) -> R:
        device = (args[0] if args else kwargs[first]).device  # type: ignore[attr-defined]
        if denoise_backend_name(device) == "triton":
            return getattr(_triton_module(device.type), name)(*args, **kwargs)
        return reference_step(*args, **kwargs)

    step.__module__ = __name__  # wraps copied parafill_kernels.reference; this is the dispatching function
    return step


# (token ids [N], confidence [N], commit mask [N]); see parafill_kernels/reference.py for the semantics.
denoise_step = _dispatched(reference.denoise_step)
# The same step from hidden states [N, D] and the LM-head weight [V, D], without the [N, V] logits in
# memory on the Triton path.
lm_head_denoise_step = _dispatched(reference.lm_head_denoise_step)
