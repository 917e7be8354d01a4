"""Run-time choice of the denoise implementation: Triton on CUDA when importable, else the reference."""

from __future__ import annotations

import os

from torch import Tensor

from kernels import reference


def denoise_backend_name(device_type: str) -> str:
    """'triton' or 'reference' for tensors on `device_type`; PARAFILL_DENOISE overrides."""
    forced = os.environ.get("PARAFILL_DENOISE")
    if forced in ("triton", "reference"):
        return forced
    return "reference"


def denoise_step(logits: Tensor, masked: Tensor, threshold: float, block_size: int | None = None,
                 fallback: Tensor | None = None, temperature: float = 0.0,
                 seed: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
    return reference.denoise_step(logits, masked, threshold, block_size, fallback, temperature, seed)


def lm_head_denoise_step(hidden: Tensor, weight: Tensor, masked: Tensor, threshold: float,
                         block_size: int | None = None, fallback: Tensor | None = None,
                         temperature: float = 0.0, seed: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
    return reference.lm_head_denoise_step(hidden, weight, masked, threshold, block_size, fallback, temperature, seed)
