"""Time the denoise step: PyTorch reference (unfused) vs the fused Triton kernels, bf16, on CUDA.

Two variants:
  logits   logits [N, V] -> token, confidence, commit. Reference: parafill_kernels.reference.denoise_step (fp32
           cast, softmax, amax, argmax, commit ops); fused: parafill_kernels.triton_denoise.denoise_step.
  lm_head  hidden [N, D], weight [V, D] -> the same. Reference: the realistic unfused sequence, a bf16
           cuBLAS matmul writing [N, V] logits, then reference.denoise_step; fused:
           parafill_kernels.triton_denoise.lm_head_denoise_step (the logits never reach memory).

Times are medians over iterations timed with CUDA events, after warmup, with the L2 cache flushed before
every iteration (the inputs of the small shapes would otherwise sit in L2 and overstate bandwidth). The
events measure GPU time from the first kernel of a call to its last: host launch overhead shows only where
the GPU waits for the host (the untimed flush before each call gives the host a head start).
GB/s = bytes the step must read (logits, or weight + hidden) / time; %peak against the device's memory
bandwidth from its name (H200 4.8 TB/s, H100 3.35 TB/s, A100 2.0 TB/s, ...) or --peak-gbps.
Each configuration is also checked: share of tokens equal to the reference (fp32 logits for lm_head)
and the largest confidence difference.

Without CUDA it says so and times only the reference on CPU at one small shape (a smoke test).

    python benchmarks/bench_denoise.py [--json OUT] [--peak-gbps 4800] [--sample]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

# Run as a script from anywhere: make the repository root importable.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from decoder.machine import machine_info  # noqa: E402
from parafill_kernels import dispatch, reference  # noqa: E402

# Memory bandwidth in GB/s by device-name substring; first match wins, so specific names come first.
PEAK_GBPS: list[tuple[str, float]] = [
    ("H200", 4800.0),
    ("H100 NVL", 3900.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),  # SXM5 80 GB
    ("H800", 3350.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB PCIe", 1935.0),
    ("A100", 1555.0),  # 40 GB parts
    ("L40S", 864.0),
    ("L40", 864.0),
    ("L4", 300.0),
    ("A10G", 600.0),
    ("A10", 600.0),
    ("RTX 4090", 1008.0),
    ("RTX 3090", 936.0),
]

Step = Callable[[], Any]


def peak_gbps_for(name: str) -> float | None:
    for key, gbps in PEAK_GBPS:
        if key.lower() in name.lower():
            return gbps
    return None


def time_cuda(fn: Step, warmup: int, iters: int, flush: torch.Tensor) -> float:
    """Median microseconds per call, CUDA events around each call, L2 flushed (untimed) before each."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)) * 1e3


def time_cpu(fn: Step, warmup: int, iters: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def make_step_inputs(n: int, device: torch.device, gen: torch.Generator) -> dict[str, Any]:
    """masked (about half the rows), decoder-like fallback (leftmost 2 masked rows per block), blocks of
    at most 32 rows."""
    block = 32 if n % 32 == 0 else n
    masked = torch.rand(n, generator=gen, device=device) < 0.5
    per_block = masked.view(-1, block)
    fallback = (per_block & (per_block.cumsum(dim=1) <= 2)).view(n)
    return {"masked": masked, "threshold": 0.9, "block_size": block, "fallback": fallback}


def compare(got: tuple[torch.Tensor, ...], want: tuple[torch.Tensor, ...], threshold: float) -> dict[str, float]:
    """Agreement with the reference. Commits may differ only where a confidence sits within rounding of
    the threshold (the kernel's exp and summation order are not the reference's); any other difference
    is a bug, counted in `commits_differing`."""
    clear = (want[1] - threshold).abs() > 1e-5
    return {
        "tokens_equal": float((got[0] == want[0]).float().mean()),
        "max_conf_diff": float((got[1] - want[1]).abs().max()),
        "commits_differing": int(((got[2] != want[2]) & clear).sum()),
    }


def bench_config(
    variant: str,
    n: int,
    v: int,
    d: int | None,
    device: torch.device,
    args: argparse.Namespace,
    timer: Callable[[Step], float],
    run_fused: bool,
) -> dict[str, Any]:
    """One configuration: time the reference (and the fused kernels when `run_fused`), check agreement."""
    gen = torch.Generator(device=device).manual_seed(0)
    step = make_step_inputs(n, device, gen)
    temperature, seed = (0.8, 1234) if args.sample else (0.0, None)
    extra = (step["masked"], step["threshold"], step["block_size"], step["fallback"], temperature, seed)
    fused: Step | None = None
    check: Callable[[], dict[str, float]] | None = None
    if variant == "logits":
        logits = (torch.randn(n, v, generator=gen, device=device) * 3).to(torch.bfloat16)
        nbytes = logits.numel() * logits.element_size()

        def ref() -> Any:
            return reference.denoise_step(logits, *extra)

        if run_fused:
            from parafill_kernels import triton_denoise

            def fused() -> Any:
                return triton_denoise.denoise_step(logits, *extra)

            def check() -> dict[str, float]:
                return compare(fused(), ref(), step["threshold"])
    else:
        assert d is not None
        hidden = torch.randn(n, d, generator=gen, device=device).to(torch.bfloat16)
        weight = (torch.randn(v, d, generator=gen, device=device) * d**-0.5 * 4).to(torch.bfloat16)
        nbytes = (weight.numel() + hidden.numel()) * weight.element_size()

        def ref() -> Any:
            return reference.denoise_step(hidden @ weight.t(), *extra)  # cuBLAS bf16, then the unfused step

        if run_fused:
            from parafill_kernels import triton_denoise

            def fused() -> Any:
                return triton_denoise.lm_head_denoise_step(hidden, weight, *extra)

            def check() -> dict[str, float]:
                # Against fp32 logits: the fused kernel accumulates in fp32 and never rounds to bf16.
                tf32 = torch.backends.cuda.matmul.allow_tf32
                torch.backends.cuda.matmul.allow_tf32 = False
                try:
                    logits32 = hidden.float() @ weight.float().t()
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = tf32
                return compare(fused(), reference.denoise_step(logits32, *extra), step["threshold"])

    row: dict[str, Any] = {"variant": variant, "N": n, "V": v, "D": d, "bytes": nbytes, "sample": args.sample}
    row["ref_us"] = timer(ref)
    row["fused_us"] = None
    if run_fused:
        assert fused is not None and check is not None
        row["fused_us"] = timer(fused)
        row.update(check())
    return row


def fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def print_table(rows: list[dict[str, Any]], peak: float | None) -> None:
    head = (
        f"{'variant':8} {'N':>4} {'V':>7} {'D':>5} {'ref us':>10} {'fused us':>10} {'speedup':>8} "
        f"{'fused GB/s':>10} {'%peak':>6} {'ref GB/s':>9} {'tok eq':>7} {'max dconf':>9} {'commit !=':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['variant']:8} {r['N']:>4} {r['V']:>7} {fmt(r['D'], 'd'):>5} {fmt(r['ref_us'], '.1f'):>10} "
            f"{fmt(r['fused_us'], '.1f'):>10} {fmt(r.get('speedup'), '.2f'):>8} "
            f"{fmt(r.get('fused_gbps'), '.1f'):>10} {fmt(r.get('fused_peak_frac'), '.0%'):>6} "
            f"{fmt(r.get('ref_gbps'), '.1f'):>9} {fmt(r.get('tokens_equal'), '.3f'):>7} "
            f"{fmt(r.get('max_conf_diff'), '.1e'):>9} {fmt(r.get('commits_differing'), 'd'):>9}"
            + (f"  error: {r['error']}" if r.get("error") else "")
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, nargs="+", default=[8, 32, 128], help="rows per step")
    p.add_argument("--v", type=int, nargs="+", default=[32000, 152064], help="vocabulary sizes")
    p.add_argument("--d", type=int, nargs="+", default=[896, 1536, 4096], help="hidden sizes (lm_head)")
    p.add_argument("--variants", nargs="+", choices=["logits", "lm_head"], default=["logits", "lm_head"])
    p.add_argument("--sample", action="store_true", help="temperature 0.8 with a seed (Gumbel sampling)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--peak-gbps", type=float, default=None, help="device memory bandwidth, GB/s")
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    args = p.parse_args(argv)

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    run_fused = cuda and dispatch.triton_available()
    if cuda and not run_fused:
        print("triton is not importable: timing only the PyTorch reference (pip install 'parafill[triton]')")
    flush: torch.Tensor | None = None
    if cuda:
        name = torch.cuda.get_device_name(device)
        peak = args.peak_gbps or peak_gbps_for(name)
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        flush = torch.empty(max(256 << 20, 4 * l2), dtype=torch.uint8, device=device)
        configs = [
            (var, n, v, d)
            for var in args.variants
            for n in args.n
            for v in args.v
            for d in ([None] if var == "logits" else args.d)
        ]
        print(
            f"device: {name}; peak memory bandwidth: {fmt(peak, '.0f')} GB/s"
            + ("" if peak else " (unknown: pass --peak-gbps)")
        )
    else:
        name, peak = "cpu", None
        args.warmup, args.iters = min(args.warmup, 2), min(args.iters, 5)
        configs = [("logits", 8, 32000, None), ("lm_head", 8, 32000, 896)]
        print(
            "CUDA is not available: the fused Triton kernels need a GPU. Timing only the PyTorch reference "
            "on CPU at small shapes (a smoke test, not a benchmark)."
        )

    def timer(fn: Step) -> float:
        if flush is not None:
            return time_cuda(fn, args.warmup, args.iters, flush)
        return time_cpu(fn, args.warmup, args.iters)

    meta = {
        "device": name,  # where the timings ran; machine_info() says what the machine has, torch version included
        "machine": machine_info(),
        "peak_gbps": peak,
        "triton": _triton_version(),
        "timing": "median of CUDA-event times, L2 flushed" if cuda else "CPU perf_counter median",
        "warmup": args.warmup,
        "iters": args.iters,
    }
    rows: list[dict[str, Any]] = []
    for i, (var, n, v, d) in enumerate(configs, 1):
        try:
            row = bench_config(var, n, v, d, device, args, timer, run_fused)
        except Exception as exc:  # one failing configuration must not cost the others' figures
            row = {"variant": var, "N": n, "V": v, "D": d, "ref_us": None, "fused_us": None, "error": repr(exc)}
        for key, us in (("ref", row["ref_us"]), ("fused", row["fused_us"])):
            row[f"{key}_gbps"] = None if us is None else row["bytes"] / (us * 1e-6) / 1e9
            row[f"{key}_peak_frac"] = None if us is None or peak is None else row[f"{key}_gbps"] / peak
        row["speedup"] = None if row["fused_us"] is None or row["ref_us"] is None else row["ref_us"] / row["fused_us"]
        rows.append(row)
        print(f"[{i}/{len(configs)}] {var} N={n} V={v} D={d}" + (f": {row['error']}" if "error" in row else ""))
        if args.json is not None:  # after every row: a run stopped by a time limit keeps what it measured
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
        if cuda:
            torch.cuda.empty_cache()
    print_table(rows, peak)
    if args.json is not None:
        print(f"wrote {args.json}")
    return 1 if any("error" in r or r.get("commits_differing") for r in rows) else 0


def _triton_version() -> str | None:
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return None
    import triton

    return triton.__version__


if __name__ == "__main__":
    raise SystemExit(main())
