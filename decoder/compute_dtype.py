"""Which floating-point type computes fastest here: bf16 on CUDA and on CPUs with native bf16, else fp32.

Without native bf16 (an AVX2-only CPU), oneDNN emulates it and every matmul pays for conversions: one joint
training step of the 5m model took 100.6 s in bf16 autocast against 4.4 s in fp32 on an AVX2 AMD EPYC
(`benchmarks/bench_train_step.py --compare dtype`). Inference and training both choose through here."""

from __future__ import annotations

import torch

COMPUTE_DTYPES = ("auto", "bf16", "fp32")


# /proc/cpuinfo flags of bf16 arithmetic: x86 AVX512-BF16 and AMX, Arm's BF16 ("Features: ... bf16").
_NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def native_bf16_from_cpuinfo(cpuinfo: str) -> bool | None:
    """Whether /proc/cpuinfo's flags name bf16 arithmetic; None when the text has no flags line."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return bool(flags & _NATIVE_BF16_FLAGS) if flags else None


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (AVX512-BF16, AMX, Arm BF16).

    The CPU's own flags decide where they can be read: oneDNN's "bf16 supported" is also true on AVX512 CPUs
    without AVX512-BF16 (Skylake to Ice Lake), where it emulates bf16. Elsewhere oneDNN's answer is used.

    Measured on an AMD EPYC with AVX512-BF16 (benchmarks/bench_cpu_dtype.py, shipped model, 40 held-out line
    tasks): inline completions 0.73x the fp32 time cold and 0.82x after a keystroke, the same text 40/40; an
    AR token 1.27x (explanations stream a little slower)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            from_flags = native_bf16_from_cpuinfo(f.read())
    except OSError:
        from_flags = None
    if from_flags is not None:
        return from_flags
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
