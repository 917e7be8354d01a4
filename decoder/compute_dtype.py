"""Which floating-point type computes fastest here: bf16 on CUDA and on CPUs with native bf16, else fp32.

Without native bf16 (an AVX2-only CPU), oneDNN emulates it and every matmul pays for conversions: one joint
training step of the 5m model took 100.6 s in bf16 autocast against 4.4 s in fp32 on an AVX2 AMD EPYC
(`benchmarks/bench_train_step.py --compare dtype`). Inference and training both choose through here."""

from __future__ import annotations

import torch

COMPUTE_DTYPES = ("auto", "bf16", "fp32")


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (AVX512-BF16, AMX, Arm BF16).

    Measured on an AMD EPYC with AVX512-BF16 (benchmarks/bench_cpu_dtype.py, shipped model, 40 held-out line
    tasks): inline completions 0.73x the fp32 time cold and 0.82x after a keystroke, the same text 40/40; an
    AR token 1.27x (explanations stream a little slower)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_compute_dtype(name: str, device: str | torch.device) -> str:
    """'bf16' or 'fp32' for a requested name: 'auto' picks the fast one for `device`, the others pass through."""
    if name not in COMPUTE_DTYPES:
        raise ValueError(f"unknown compute dtype {name!r}: expected one of {', '.join(COMPUTE_DTYPES)}")
    if name != "auto":
        return name
    kind = torch.device(device).type
    return "bf16" if kind == "cuda" or (kind == "cpu" and cpu_has_native_bf16()) else "fp32"
