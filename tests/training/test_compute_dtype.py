"""Training computes in bf16 only where the CPU has it natively (emulated bf16 made a CPU step ~20x slower)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from decoder.compute_dtype import cpu_has_native_bf16, native_bf16_from_cpuinfo, resolve_compute_dtype
from decoder.masks import joint_training_mask
from decoder.training import objective as O
from decoder.training.trainer import Trainer
from tests.training.test_train import tiny_cfg

REPO = Path(__file__).resolve().parents[2]


def test_auto_is_bf16_on_cuda_and_on_native_bf16_cpus_only() -> None:
    assert resolve_compute_dtype("auto", "cuda") == "bf16"
    assert resolve_compute_dtype("auto", "cuda:1") == "bf16"
    assert resolve_compute_dtype("auto", "cpu") == ("bf16" if cpu_has_native_bf16() else "fp32")
    assert resolve_compute_dtype("fp32", "cuda") == "fp32"  # a choice is kept
    assert resolve_compute_dtype("bf16", "cpu") == "bf16"
    with pytest.raises(ValueError, match="fp16"):
        resolve_compute_dtype("fp16", "cpu")


SKYLAKE_SP = "flags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni\n"
ZEN4 = "flags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512_bf16 avx512_vnni\n"
SAPPHIRE_RAPIDS = "flags\t\t: avx2 avx512f avx512bw avx512vl amx_bf16 amx_tile amx_int8\n"
NEOVERSE_V1 = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes sha2 crc32 atomics asimddp sve bf16 i8mm\n"
NEOVERSE_N1 = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics asimddp\n"
AVX2_EPYC = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma bmi2\n\n" * 2


def test_native_bf16_is_read_from_the_cpu_flags_not_from_avx512() -> None:
    # AVX512 without AVX512-BF16 emulates bf16 (oneDNN calls it supported): not native.
    assert native_bf16_from_cpuinfo(SKYLAKE_SP) is False
    assert native_bf16_from_cpuinfo(AVX2_EPYC) is False
    assert native_bf16_from_cpuinfo(NEOVERSE_N1) is False
    assert native_bf16_from_cpuinfo(ZEN4) is True
    assert native_bf16_from_cpuinfo(SAPPHIRE_RAPIDS) is True
    assert native_bf16_from_cpuinfo(NEOVERSE_V1) is True
    assert native_bf16_from_cpuinfo("model name\t: something\n") is None  # no flags: oneDNN decides
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file() and (here := native_bf16_from_cpuinfo(cpuinfo.read_text(errors="replace"))) is not None:
        assert cpu_has_native_bf16() is here


def test_trainer_resolves_auto_and_the_run_records_what_ran(tiny_corpus: Path, tmp_path: Path) -> None:
    trainer = Trainer(tiny_cfg(tiny_corpus, tmp_path / "run", max_steps=2, export_dir=str(tmp_path / "export")))
    expected = resolve_compute_dtype("auto", "cpu")
    assert trainer.cfg.dtype == expected
    assert trainer.autocast_dtype == (torch.bfloat16 if expected == "bf16" else None)
    trainer.fit()
    recorded = json.loads((tmp_path / "export" / "training.json").read_text())["train_config"]["dtype"]
    assert recorded == expected


def test_train_step_benchmark_times_both_dtypes_and_both_masks(tiny_corpus: Path, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_train_step", REPO / "benchmarks" / "bench_train_step.py")
    bench = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(bench)  # type: ignore[union-attr]
    base = tiny_cfg(tiny_corpus, tmp_path / "unused", max_steps=10**6)
    medians = bench.compare(base, bench.COMPARISONS["dtype"], rounds=2, steps_per_round=1, warmup_steps=1)
    assert set(medians) == {"bf16", "fp32"} and all(s > 0 for s in medians.values())
    medians = bench.compare(base, bench.COMPARISONS["mask"], rounds=1, steps_per_round=1, warmup_steps=1)
    assert set(medians) == {"dense mask", "joint mask"} and all(s > 0 for s in medians.values())
    assert O.joint_training_mask is joint_training_mask  # put back for the rest of the process
