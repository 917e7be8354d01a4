"""Training computes in bf16 only where the CPU has it natively (emulated bf16 made a CPU step ~20x slower)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from decoder.compute_dtype import cpu_has_native_bf16, resolve_compute_dtype
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


def test_trainer_resolves_auto_and_the_run_records_what_ran(tiny_corpus: Path, tmp_path: Path) -> None:
    trainer = Trainer(tiny_cfg(tiny_corpus, tmp_path / "run", max_steps=2, export_dir=str(tmp_path / "export")))
    expected = resolve_compute_dtype("auto", "cpu")
    assert trainer.cfg.dtype == expected
    assert trainer.autocast_dtype == (torch.bfloat16 if expected == "bf16" else None)
    trainer.fit()
    recorded = json.loads((tmp_path / "export" / "training.json").read_text())["train_config"]["dtype"]
    assert recorded == expected


def test_train_step_benchmark_times_both_dtypes(tiny_corpus: Path, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_train_step", REPO / "benchmarks" / "bench_train_step.py")
    bench = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(bench)  # type: ignore[union-attr]
    base = tiny_cfg(tiny_corpus, tmp_path / "unused", max_steps=10**6)
    medians = bench.compare(base, bench.COMPARISONS["dtype"], rounds=2, steps_per_round=1, warmup_steps=1)
    assert set(medians) == {"bf16", "fp32"} and all(s > 0 for s in medians.values())
