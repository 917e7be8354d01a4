"""Child-process side of the kernel tests: runs parafill_kernels/triton_denoise.py in Triton's CPU interpreter.

TRITON_INTERPRET must be set before triton is first imported (triton.language's own helpers are
@triton.jit functions, decided at import), and it is process-wide; so the interpreted kernels live in a
spawned child that sets it first thing, and the pytest process itself never runs in interpreter mode.
Import nothing from triton at module level here: the child unpickles this module before `init` runs.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import torch


def init() -> None:
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ.pop("PARAFILL_DENOISE", None)


def poisoned_empty(*size: Any, dtype: torch.dtype = torch.float32, device: Any = None) -> torch.Tensor:
    """torch.empty, but filled with values no correct kernel writes there (NaN, -7, True)."""
    out = torch.empty(*size, dtype=dtype, device=device)
    if dtype.is_floating_point:
        return out.fill_(float("nan"))
    if dtype == torch.bool:
        return out.fill_(True)
    return out.fill_(-7)


def call(module: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], env: dict[str, str]) -> Any:
    """module.name(*args, **kwargs) with `env` set for the call, and the kernels' buffers poisoned."""
    assert os.environ.get("TRITON_INTERPRET") == "1"
    tdn = importlib.import_module("parafill_kernels.triton_denoise")
    assert tdn.is_interpreted()
    tdn._empty = poisoned_empty
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
