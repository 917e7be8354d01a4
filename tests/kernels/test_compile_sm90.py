"""Compile the kernels for sm_90 (H100/H200) ahead of time, without a GPU.

The interpreter runs the kernels' semantics but never lowers them; this catches what only the compiler
sees (types of constexpr branches, fp64 log lowering, bf16 tl.dot, register spills) on CPU-only machines,
and checks two properties the exactness argument relies on: no FMA contraction in the sampling path and
libdevice's fp64 log for the Gumbel transform.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

triton = pytest.importorskip("triton")

PART = {"part_m_ptr": "*fp32", "part_s_ptr": "*fp32", "part_v_ptr": "*fp32", "part_i_ptr": "*i32", "n_splits": "i32"}


def compile_sm90(
    kernel: Any,
    types: dict[str, str],
    constexprs: dict[str, Any],
    num_warps: int,
    num_stages: int = 3,
    aligned: tuple[str, ...] = (),
) -> Any:
    from triton.backends.compiler import GPUTarget

    if "nvidia" not in triton.backends.backends:
        pytest.skip("triton's NVIDIA backend is not installed")
    target = GPUTarget("cuda", 90, 32)
    backend = triton.compiler.make_backend(target)
    signature = {name: "constexpr" if name in constexprs else types[name] for name in kernel.arg_names}
    attrs = {(kernel.arg_names.index(name),): [["tt.divisibility", 16]] for name in aligned}
    src = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    options = backend.parse_options({"num_warps": num_warps, "num_stages": num_stages, "enable_fp_fusion": False})
    return triton.compile(src, target=target, options=options.__dict__)


@pytest.fixture(scope="module")
def tdn() -> Any:  # the compiled-mode module (this process never sets TRITON_INTERPRET)
    from parafill_kernels import triton_denoise

    assert not triton_denoise.is_interpreted()
    return triton_denoise


def test_logits_kernel_sampling_build(tdn: Any) -> None:
    types = {
        "logits_ptr": "*bf16",
        "stride_row": "i32",
        "V": "i32",
        "tiles_per_split": "i32",
        "inv_t": "fp32",
        "seed_word": "i32",
        **PART,
    }
    cc = compile_sm90(
        tdn._logits_partial_kernel,
        types,
        {"BLOCK_V": 1024, "SCALE": True, "SAMPLE": True},
        4,
        aligned=("logits_ptr", "stride_row", "V"),
    )
    ptx = cc.asm["ptx"]
    assert "ld.global.v4" in ptx  # 16-byte loads of the logits
    assert "__nv_log" in ptx  # fp64 log from libdevice, not an fp32 approximation
    assert not re.search(r"\bfma\.rn\.f32", ptx)  # x * inv_t + noise rounded twice, like the reference


@pytest.mark.parametrize(("block_n", "block_v", "num_warps"), [(16, 128, 4), (128, 64, 8)])
def test_lm_head_kernel_build(tdn: Any, block_n: int, block_v: int, num_warps: int) -> None:
    types = {
        "h_ptr": "*bf16",
        "w_ptr": "*bf16",
        "N": "i32",
        "V": "i32",
        "D": "i32",
        "stride_hn": "i32",
        "stride_hd": "i32",
        "stride_wv": "i32",
        "stride_wd": "i32",
        "tiles_per_split": "i32",
        "inv_t": "fp32",
        "seed_word": "i32",
        **PART,
    }
    consts = {
        "BLOCK_N": block_n,
        "BLOCK_V": block_v,
        "BLOCK_D": 64,
        "SCALE": False,
        "SAMPLE": False,
        "DOT_FP32": False,
        "stride_hd": 1,
        "stride_wd": 1,
    }
    cc = compile_sm90(
        tdn._lm_head_partial_kernel,
        types,
        consts,
        num_warps,
        4,
        aligned=("h_ptr", "w_ptr", "D", "stride_hn", "stride_wv"),
    )
    assert "wgmma" in cc.asm["ptx"]  # Hopper tensor cores, with the vocabulary as the MMA's M side
    assert cc.metadata.shared <= 200 * 1024


def test_combine_and_noise_build(tdn: Any) -> None:
    types = {
        **PART,
        "V": "i32",
        "masked_ptr": "*u8",
        "fallback_ptr": "*u8",
        "threshold": "fp32",
        "block_size": "i32",
        "tok_ptr": "*i64",
        "conf_ptr": "*fp32",
        "commit_ptr": "*u8",
    }
    compile_sm90(tdn._combine_commit_kernel, types, {"BLOCK_R": 32, "BLOCK_S": 32}, 4)
    compile_sm90(tdn._gumbel_kernel, {"out_ptr": "*fp32", "n": "i32", "seed_word": "i32"}, {"BLOCK": 256}, 4)
