"""Triton kernels for the fused denoise step (semantics: parafill_kernels/reference.py).

Two launches per step, no host synchronisation:

1. a *partial* kernel: each program streams one slice of the vocabulary for one row (logits variant) or
   computes one slice of the logits from hidden x weight tiles (LM-head variant, the [N, V] logits never
   reach memory) and writes, per (row, slice), the running max m, the sum of exp(x - m), and the best
   (value, index) for the token choice;
2. a *combine + commit* kernel, one program per decoder block: merges the slices of each row into token
   and confidence, then applies the threshold and the per-block fallback.

Splitting the vocabulary over several programs per row keeps the whole GPU busy when N is small (8 rows
of a 152k vocabulary are 8 programs otherwise).

Bit-for-bit agreement with the reference for the token choice needs the same fp32 roundings: the
temperature is applied as a multiplication by fp32(1 / T) (as the reference does), and launches pass
enable_fp_fusion=False so that x * inv_t + noise is not contracted into one FMA.

Under TRITON_INTERPRET=1 (set before triton is imported) the same kernels run on CPU tensors; that is
how tests/kernels checks them on machines without a GPU. It is slow: correctness only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import nullcontext
from typing import ParamSpec, TypeVar

import torch
import triton
import triton.language as tl
from torch import Tensor

# Tests replace this with an allocator that fills buffers with sentinels, so that any element a kernel
# fails to write shows up.
_empty: Callable[..., Tensor] = torch.empty

P = ParamSpec("P")
R = TypeVar("R")

_SEED_MUL = 0x85EBCA77
_SEED_ADD = 0x165667B1


def is_interpreted() -> bool:
    """True when the kernels were defined under TRITON_INTERPRET=1 (they then run on CPU tensors)."""
    return type(_logits_partial_kernel).__name__ == "InterpretedFunction"


def _seed_word(seed: int | None) -> int:
    """The seed's additive term of the reference hash, as a signed int32 (the kernel bitcasts it back to
    uint32): a Python int in [2**31, 2**32) would be passed as int64 by the JIT but as uint32 by the
    interpreter."""
    if seed is None:
        return 0
    word = (((int(seed) & 0x7FFFFFFF) * _SEED_MUL) + _SEED_ADD) & 0xFFFFFFFF
    return word - (1 << 32) if word >= (1 << 31) else word


@triton.jit
def _gumbel(idx, seed_word):
    """Gumbel(0, 1) noise for uint32 element indices: the reference's hash in wrapping uint32 arithmetic,
    then the double-precision transform, rounded to fp32 like the reference."""
    x = idx * 0x9E3779B1 + seed_word.to(tl.uint32, bitcast=True)
    x = (x ^ (x >> 15)) * 0x2C1B3C6D
    x = (x ^ (x >> 12)) * 0x297A2D39
    x = x ^ (x >> 15)
    u = (x.to(tl.float64) + 0.5) / 4294967296.0
    return (-tl.log(-tl.log(u))).to(tl.float32)


@triton.jit(do_not_specialize=["seed_word"])
def _gumbel_kernel(out_ptr, n, seed_word, BLOCK: tl.constexpr):
    """Test hook: the kernels' noise for element indices 0..n-1, to compare bit for bit with the reference."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _gumbel(offs.to(tl.uint32), seed_word), mask=offs < n)


@triton.jit(do_not_specialize=["seed_word"])
def _logits_partial_kernel(
    logits_ptr, stride_row, V, tiles_per_split, inv_t, seed_word,
    part_m_ptr, part_s_ptr, part_v_ptr, part_i_ptr, n_splits,
    BLOCK_V: tl.constexpr, SCALE: tl.constexpr, SAMPLE: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    split = tl.program_id(1)
    lanes = tl.arange(0, BLOCK_V)
    row_ptr = logits_ptr + row.to(tl.int64) * stride_row
    start = split * tiles_per_split * BLOCK_V
    # Per-lane running state, reduced across lanes once at the end: no cross-thread reduction in the loop.
    m = tl.full([BLOCK_V], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_V], tl.float32)
    best_v = tl.full([BLOCK_V], float("-inf"), tl.float32)
    best_i = tl.zeros([BLOCK_V], tl.int32) + V  # V = "none yet"; a lane's later columns only win if strictly larger
    end = tl.minimum(start + tiles_per_split * BLOCK_V, V)
    # Software prefetch: the next tile's load is issued before this tile's arithmetic, so two tiles per
    # program are in flight (the lane state's registers cap how many programs share a multiprocessor).
    cols = start + lanes
    raw = tl.load(row_ptr + cols, mask=cols < end, other=float("-inf"))
    for _ in range(0, tiles_per_split):
        next_cols = cols + BLOCK_V
        next_raw = tl.load(row_ptr + next_cols, mask=next_cols < end, other=float("-inf"))
        x = raw.to(tl.float32)
        x = tl.where(x != x, float("-inf"), x)  # NaN counts as -inf (the reference's contract)
        if SCALE:
            x = x * inv_t
        # Online max / sum-of-exp with one exp per element: e = exp(-|x - m|) rescales the old sum when x
        # is the new max, and is x's own term otherwise. -inf entries contribute nothing (and would give
        # -inf - -inf = nan).
        e = tl.exp(-tl.abs(x - m))
        e = tl.where(x == float("-inf"), 0.0, e)
        s = tl.where(x > m, s * e + 1.0, s + e)
        m = tl.maximum(m, x)
        if SAMPLE:
            idx = row.to(tl.uint32) * V + cols.to(tl.uint32)  # wraps like the reference's & 0xFFFFFFFF
            val = x + _gumbel(idx, seed_word)
        else:
            val = x
        take = val > best_v
        best_v = tl.where(take, val, best_v)
        best_i = tl.where(take, cols, best_i)
        cols = next_cols
        raw = next_raw
    row_m = tl.max(m, axis=0)
    row_s = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - row_m)), axis=0)
    row_v = tl.max(best_v, axis=0)
    row_i = tl.min(tl.where(best_v == row_v, best_i, V), axis=0)  # lowest index among the lanes' maxima
    out = row * n_splits + split
    tl.store(part_m_ptr + out, row_m)
    tl.store(part_s_ptr + out, row_s)
    tl.store(part_v_ptr + out, row_v)
    tl.store(part_i_ptr + out, row_i)


@triton.jit(do_not_specialize=["seed_word"])
def _lm_head_partial_kernel(
    h_ptr, w_ptr, N, V, D, stride_hn, stride_hd, stride_wv, stride_wd, tiles_per_split, inv_t, seed_word,
    part_m_ptr, part_s_ptr, part_v_ptr, part_i_ptr, n_splits,
    BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_D: tl.constexpr,
    SCALE: tl.constexpr, SAMPLE: tl.constexpr, DOT_FP32: tl.constexpr,
):  # fmt: skip
    # Logits are computed transposed, [BLOCK_V, BLOCK_N] = W_tile @ H^T, so that the large vocabulary
    # dimension is the MMA's M side and a handful of rows still fills the tensor cores.
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < N
    dd = tl.arange(0, BLOCK_D)
    m = tl.full([BLOCK_N], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_N], tl.float32)
    best_v = tl.full([BLOCK_N], float("-inf"), tl.float32)
    best_i = tl.zeros([BLOCK_N], tl.int32) + V
    for t in range(0, tiles_per_split):
        cols = (split * tiles_per_split + t) * BLOCK_V + tl.arange(0, BLOCK_V)
        col_ok = cols < V
        w_rows = w_ptr + cols.to(tl.int64)[:, None] * stride_wv  # int64: V * D may pass 2**31
        acc = tl.zeros([BLOCK_V, BLOCK_N], tl.float32)
        for d0 in range(0, D, BLOCK_D):
            d = d0 + dd
            d_ok = d < D
            w_offs = d.to(tl.int64)[None, :] * stride_wd  # int64: a transposed weight's stride is V
            w = tl.load(w_rows + w_offs, mask=col_ok[:, None] & d_ok[None, :], other=0.0)
            h = tl.load(
                h_ptr + rows.to(tl.int64)[None, :] * stride_hn + d.to(tl.int64)[:, None] * stride_hd,
                mask=row_ok[None, :] & d_ok[:, None],
                other=0.0,
            )
            if DOT_FP32:
                acc = tl.dot(w.to(tl.float32), h.to(tl.float32), acc, input_precision="ieee")
            else:
                acc = tl.dot(w, h, acc)
        x = acc
        if SCALE:
            x = x * inv_t
        x = tl.where(col_ok[:, None] & (x == x), x, float("-inf"))  # past V, and NaN, count as -inf
        tile_m = tl.max(x, axis=0)
        new_m = tl.maximum(m, tile_m)
        p = tl.where(x == float("-inf"), 0.0, tl.exp(x - new_m[None, :]))
        s = tl.where(m == float("-inf"), 0.0, s * tl.exp(m - new_m)) + tl.sum(p, axis=0)
        m = new_m
        if SAMPLE:
            idx = rows.to(tl.uint32)[None, :] * V + cols.to(tl.uint32)[:, None]
            val = x + _gumbel(idx, seed_word)
        else:
            val = x
        tile_v = tl.max(val, axis=0)
        tile_i = tl.min(tl.where(val == tile_v[None, :], cols[:, None], V), axis=0)
        take = tile_v > best_v  # earlier tiles hold lower columns: keep them on ties
        best_v = tl.where(take, tile_v, best_v)
        best_i = tl.where(take, tile_i, best_i)
    out = rows * n_splits + split
    tl.store(part_m_ptr + out, m, mask=row_ok)
    tl.store(part_s_ptr + out, s, mask=row_ok)
    tl.store(part_v_ptr + out, best_v, mask=row_ok)
    tl.store(part_i_ptr + out, best_i, mask=row_ok)


@triton.jit
def _combine_commit_kernel(
    part_m_ptr, part_s_ptr, part_v_ptr, part_i_ptr, n_splits, V,
    masked_ptr, fallback_ptr, threshold, block_size,
    tok_ptr, conf_ptr, commit_ptr,
    BLOCK_R: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    blk = tl.program_id(0)
    r = tl.arange(0, BLOCK_R)
    rows = blk * block_size + r
    row_ok = r < block_size
    m = tl.full([BLOCK_R], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_R], tl.float32)
    best_v = tl.full([BLOCK_R], float("-inf"), tl.float32)
    best_i = tl.zeros([BLOCK_R], tl.int32) + V
    for s0 in range(0, n_splits, BLOCK_S):
        sp = s0 + tl.arange(0, BLOCK_S)
        ok = row_ok[:, None] & (sp < n_splits)[None, :]
        offs = rows[:, None] * n_splits + sp[None, :]
        pm = tl.load(part_m_ptr + offs, mask=ok, other=float("-inf"))
        ps = tl.load(part_s_ptr + offs, mask=ok, other=0.0)
        pv = tl.load(part_v_ptr + offs, mask=ok, other=float("-inf"))
        pi = tl.load(part_i_ptr + offs, mask=ok, other=V)
        new_m = tl.maximum(m, tl.max(pm, axis=1))
        scaled = tl.where(pm == float("-inf"), 0.0, ps * tl.exp(pm - new_m[:, None]))
        s = tl.where(m == float("-inf"), 0.0, s * tl.exp(m - new_m)) + tl.sum(scaled, axis=1)
        m = new_m
        chunk_v = tl.max(pv, axis=1)
        chunk_i = tl.min(tl.where(pv == chunk_v[:, None], pi, V), axis=1)
        take = chunk_v > best_v  # slices are in column order: earlier chunks win ties
        best_v = tl.where(take, chunk_v, best_v)
        best_i = tl.where(take, chunk_i, best_i)
    # The max's own term is exp(0) = 1, so max softmax probability = 1 / sum. A row with no finite logit
    # has no probability mass (confidence 0, like the reference's nan_to_num), and its token is 0.
    # NaN logits were read as -inf by the partial kernels, as the reference reads them.
    # +inf logits get confidence 0 like the reference (its softmax is nan there), and nan -> 0 as well.
    conf = tl.where((m == float("-inf")) | (m == float("inf")), 0.0, 1.0 / s)
    conf = tl.where(conf == conf, conf, 0.0)
    tokens = tl.where(best_i >= V, 0, best_i).to(tl.int64)

    masked = tl.load(masked_ptr + rows, mask=row_ok, other=0) != 0
    fallback = tl.load(fallback_ptr + rows, mask=row_ok, other=0) != 0
    commit = masked & (conf >= threshold)
    cand = fallback & masked
    scored = tl.where(cand, conf, -1.0)
    top = tl.max(scored, axis=0)
    top_r = tl.min(tl.where(scored == top, r, BLOCK_R), axis=0)  # lowest row on ties
    n_commit = tl.sum(commit.to(tl.int32), axis=0)
    n_cand = tl.sum(cand.to(tl.int32), axis=0)
    commit = commit | ((r == top_r) & (n_commit == 0) & (n_cand > 0))

    tl.store(tok_ptr + rows, tokens, mask=row_ok)
    tl.store(conf_ptr + rows, conf, mask=row_ok)
    tl.store(commit_ptr + rows, commit.to(tl.uint8), mask=row_ok)


# --------------------------------------------------------------------------------------------- host side

_SM_COUNT: dict[int, int] = {}


def _sm_count(device: torch.device) -> int:
    """Multiprocessors on the device (cached: no driver call per step); a small number on CPU so that the
    interpreter still exercises several slices per row."""
    if device.type != "cuda":
        return 2
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _SM_COUNT:
        _SM_COUNT[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _SM_COUNT[index]


def _on_input_device(launcher: Callable[P, R]) -> Callable[P, R]:
    """Run `launcher` with its first tensor's GPU as the current device: Triton launches on the current
    device and its stream, which on a multi-GPU machine need not be the one the tensors are on."""

    @functools.wraps(launcher)
    def launch(*args: P.args, **kwargs: P.kwargs) -> R:
        where = next(a for a in (*args, *kwargs.values()) if isinstance(a, (Tensor, torch.device)))
        device = where.device if isinstance(where, Tensor) else where
        with torch.cuda.device(device) if device.type == "cuda" else nullcontext():
            return launcher(*args, **kwargs)

    return launch


def _launch_opts(num_warps: int, num_stages: int | None = None) -> dict[str, object]:
    """Compile options: fixed warps/stages, and no FP contraction (exact fp32 roundings, see module doc)."""
    opts: dict[str, object] = {"num_warps": num_warps, "enable_fp_fusion": False}
    if num_stages is not None:
        opts["num_stages"] = num_stages
    return opts


def _check_rows(n: int, device: torch.device, masked: Tensor, fallback: Tensor | None, block_size: int | None) -> int:
    """Shape / dtype / device checks (host-side metadata only, no sync); returns the block size."""
    for name, mask in (("masked", masked), ("fallback", fallback)):
        if mask is None:
            continue
        if mask.shape != (n,) or mask.dtype != torch.bool:
            raise ValueError(f"{name} must be a bool tensor of shape ({n},), got {mask.dtype} {tuple(mask.shape)}")
        if mask.device != device:
            raise ValueError(f"{name} is on {mask.device}, the logits on {device}")
    block_size = block_size or n
    if n and n % block_size:
        raise ValueError(f"{n} rows do not split into blocks of {block_size}")
    return block_size


def _as_bytes(mask: Tensor) -> Tensor:
    """Zero-copy uint8 view of a bool mask (the kernels read bytes)."""
    return mask.contiguous().view(torch.uint8)


def _empty_outputs(n: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    return (
        _empty(n, dtype=torch.int64, device=device),
        _empty(n, dtype=torch.float32, device=device),
        _empty(n, dtype=torch.bool, device=device),
    )


def _partials(n: int, n_splits: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    shape = (n, n_splits)
    f32 = torch.float32
    return (
        _empty(shape, dtype=f32, device=device),
        _empty(shape, dtype=f32, device=device),
        _empty(shape, dtype=f32, device=device),
        _empty(shape, dtype=torch.int32, device=device),
    )


def _combine(
    parts: tuple[Tensor, Tensor, Tensor, Tensor],
    n: int,
    V: int,
    masked: Tensor,
    fallback: Tensor | None,
    threshold: float,
    block_size: int,
    combine_splits: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    device = masked.device
    tokens, confidence, commit = _empty_outputs(n, device)
    n_splits = parts[0].shape[1]
    masked_b = _as_bytes(masked)
    fallback_b = masked_b if fallback is None else _as_bytes(fallback)
    block_r = max(2, triton.next_power_of_2(block_size))
    # Slices merged per loop step: bounded so that a [rows, slices] chunk stays in registers (1024 elements
    # at 4 warps compiles without spills for sm_90).
    block_s = max(1, min(triton.next_power_of_2(n_splits), 1024 // block_r))
    if combine_splits is not None:
        block_s = min(block_s, triton.next_power_of_2(combine_splits))
    _combine_commit_kernel[(n // block_size,)](
        *parts,
        n_splits,
        V,
        masked_b,
        fallback_b,
        float(threshold),
        block_size,
        tokens,
        confidence,
        commit.view(torch.uint8),
        BLOCK_R=block_r,
        BLOCK_S=block_s,
        **_launch_opts(8 if block_r >= 2048 else 4),
    )
    return tokens, confidence, commit


def _temperature_args(temperature: float, seed: int | None) -> tuple[bool, bool, float, int]:
    scale = temperature > 0
    sample = scale and seed is not None
    inv_t = 1.0 / temperature if scale else 1.0
    return scale, sample, inv_t, _seed_word(seed if sample else None)


def _empty_result(device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    return (
        torch.zeros(0, dtype=torch.int64, device=device),
        torch.zeros(0, dtype=torch.float32, device=device),
        torch.zeros(0, dtype=torch.bool, device=device),
    )


@_on_input_device
def denoise_step(
    logits: Tensor,
    masked: Tensor,
    threshold: float,
    block_size: int | None = None,
    fallback: Tensor | None = None,
    temperature: float = 0.0,
    seed: int | None = None,
    *,
    block_v: int | None = None,
    n_splits: int | None = None,
    combine_splits: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Triton version of reference.denoise_step. The keyword-only arguments override the tiling (tests):
    vocabulary tile, slices per row, slices merged per step of the combine kernel (a power of two)."""
    if logits.dim() != 2:
        raise ValueError(f"logits must be [N, V], got {tuple(logits.shape)}")
    n, V = logits.shape
    block_size = _check_rows(n, logits.device, masked, fallback, block_size)
    if n == 0:
        return _empty_result(logits.device)
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    if block_v is None:
        block_v = 1024 if logits.device.type == "cuda" else 128
    n_tiles = triton.cdiv(V, block_v)
    if n_splits is None:
        # Enough programs for a few waves over the GPU, each streaming at least a couple of tiles.
        n_splits = max(1, min(triton.cdiv(8 * _sm_count(logits.device), n), n_tiles // 2))
    tiles_per_split = triton.cdiv(n_tiles, n_splits)
    n_splits = triton.cdiv(n_tiles, tiles_per_split)
    scale, sample, inv_t, seed_word = _temperature_args(temperature, seed)
    parts = _partials(n, n_splits, logits.device)
    _logits_partial_kernel[(n, n_splits)](
        logits,
        logits.stride(0),
        V,
        tiles_per_split,
        inv_t,
        seed_word,
        *parts,
        n_splits,
        BLOCK_V=block_v,
        SCALE=scale,
        SAMPLE=sample,
        **_launch_opts(4 if block_v <= 1024 else 8),
    )
    return _combine(parts, n, V, masked, fallback, threshold, block_size, combine_splits)


@_on_input_device
def lm_head_denoise_step(
    hidden: Tensor,
    weight: Tensor,
    masked: Tensor,
    threshold: float,
    block_size: int | None = None,
    fallback: Tensor | None = None,
    temperature: float = 0.0,
    seed: int | None = None,
    *,
    block_v: int | None = None,
    block_d: int | None = None,
    tiles_per_split: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Triton version of reference.lm_head_denoise_step: hidden [N, D] x weight [V, D] without writing the
    [N, V] logits. Accumulates in fp32; bf16/fp16 pairs use the tensor cores, anything else fp32 FMA."""
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(f"hidden [N, D] and weight [V, D] expected, got {tuple(hidden.shape)}, {tuple(weight.shape)}")
    n, D = hidden.shape
    V = weight.shape[0]
    if weight.device != hidden.device:
        raise ValueError(f"weight is on {weight.device}, hidden on {hidden.device}")
    block_size = _check_rows(n, hidden.device, masked, fallback, block_size)
    if n == 0:
        return _empty_result(hidden.device)
    half = (torch.bfloat16, torch.float16)
    # The interpreter's tl.dot multiplies bf16 tiles as their raw uint16 bits: upcast there (exact).
    dot_fp32 = not (hidden.dtype == weight.dtype and hidden.dtype in half) or is_interpreted()
    # Up to 128 rows share one pass over the weight (the bytes that matter); tile sizes and warps chosen so
    # that the sm_90 build neither spills (greedy) nor runs out of shared memory.
    block_n = min(128, max(16, triton.next_power_of_2(n)))
    on_gpu = hidden.device.type == "cuda"
    if block_v is None:
        block_v = (64 if block_n == 128 else 128) if on_gpu else 32
    if block_d is None:
        block_d = 64 if on_gpu else 32
    num_warps = 4 if block_n <= 32 else 8
    num_stages = 3 if dot_fp32 else 4
    n_row_tiles = triton.cdiv(n, block_n)
    n_tiles = triton.cdiv(V, block_v)
    if tiles_per_split is None:
        tiles_per_split = max(1, n_tiles * n_row_tiles // (4 * _sm_count(hidden.device)))
    n_splits = triton.cdiv(n_tiles, tiles_per_split)
    scale, sample, inv_t, seed_word = _temperature_args(temperature, seed)
    parts = _partials(n, n_splits, hidden.device)
    _lm_head_partial_kernel[(n_row_tiles, n_splits)](
        hidden,
        weight,
        n,
        V,
        D,
        hidden.stride(0),
        hidden.stride(1),
        weight.stride(0),
        weight.stride(1),
        tiles_per_split,
        inv_t,
        seed_word,
        *parts,
        n_splits,
        BLOCK_N=block_n,
        BLOCK_V=block_v,
        BLOCK_D=block_d,
        SCALE=scale,
        SAMPLE=sample,
        DOT_FP32=dot_fp32,
        **_launch_opts(num_warps, num_stages),
    )
    return _combine(parts, n, V, masked, fallback, threshold, block_size)


@_on_input_device
def gumbel_noise(n: int, seed: int, device: torch.device) -> Tensor:
    """The kernels' Gumbel noise for element indices 0..n-1 (test hook; compare with reference.gumbel_noise)."""
    out = _empty(n, dtype=torch.float32, device=device)
    block = 256
    _gumbel_kernel[(triton.cdiv(n, block),)](out, n, _seed_word(seed), BLOCK=block, **_launch_opts(4))
    return out
