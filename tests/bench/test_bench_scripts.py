"""The side-by-side benchmark scripts run end to end on a tiny model (so a figure in the README can be rerun)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from decoder.machine import cpu_name

REPO = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, f"benchmarks/{script}", *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_bench_lookup_compares_drafts_with_plain_ar(tiny_model_dir, tmp_path):
    out = tmp_path / "lookup.json"
    printed = _run(
        "bench_lookup.py", "--model", str(tiny_model_dir), "--tasks", "2", "--draft", "4", "--json", str(out)
    )
    report = json.loads(out.read_text())
    for kind in ("explain", "ar_completion"):
        plain, drafted = report[kind]["plain AR"], report[kind]["lookup 4"]
        assert plain["requests"] == drafted["requests"] == 2 and plain["p50_vs_plain"] == 1.0
        assert drafted["same_output"] == 2  # fp32: drafts never change the text
    assert "lookup 4" in printed


def test_bench_prompt_tail_and_cpu_dtype_run(tiny_model_dir):
    assert "p50" in _run("bench_prompt_tail.py", "--model", str(tiny_model_dir), "--tasks", "2", "--repeats", "1")
    assert "bf16" in _run("bench_cpu_dtype.py", "--model", str(tiny_model_dir), "--tasks", "2", "--ar-tokens", "8")


def test_bench_models_pairs_two_folders(tiny_model_dir, tmp_path):
    """The same weights in two folders: every completion and pass count agrees, whatever the timings."""
    copy = tmp_path / "copy"
    shutil.copytree(tiny_model_dir, copy)
    out = tmp_path / "models.json"
    printed = _run("bench_models.py", str(tiny_model_dir), str(copy), "--tasks", "3", "--json", str(out))
    report = json.loads(out.read_text())
    assert report["tasks"] == 3 and report["same"] == 3 and report["machine"]["cpu"] == cpu_name()
    assert report["ratio"]["forward_passes"] == report["ratio"]["tokens"] == 1.0
    first = report["medians"][str(tiny_model_dir)]
    assert first["cold_ms"] > 0 and first["keystroke_ms"] > 0 and first["ms_per_forward"] > 0
    assert "identical completions: 3/3" in printed


def test_bench_explain_pairs_times_both_ways_on_the_same_files(tmp_path):
    out = tmp_path / "explain.json"
    printed = _run("bench_explain_pairs.py", "--files", "300", "--rounds", "1", "--json", str(out))
    figures = json.loads(out.read_text())
    assert figures["files"] == 300 and figures["same_examples"] is True
    assert set(figures["seconds"]) == {"1", "2"} and all(s[0] > 0 for s in figures["seconds"].values())
    assert "same examples in the same order: True" in printed


def test_bench_forward_times_block_steps_against_an_ar_step(tmp_path):
    out = tmp_path / "forward.json"
    _run("bench_forward.py", "--context", "32", "--blocks", "4", "--repeats", "1", "--json", str(out))
    report = json.loads(out.read_text())
    assert report["machine"]["cpu"] == cpu_name()
    assert set(report["models"]) == {"5M", "20M"}
    for model in report["models"].values():
        assert list(model["variants"]) == ["ar", "block4"] and model["variants"]["ar"]["ratio_to_ar"] == 1.0
        assert all(v["median_ms"] > 0 for v in model["variants"].values())


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path: a CUDA machine runs the real benchmark")
@pytest.mark.parametrize("sample", [False, True])
def test_bench_denoise_times_the_reference_step_without_a_gpu(tmp_path, sample):
    """scripts/gpu_train.sh runs this script on the lent GPU: its CPU path must run and write its figures."""
    out = tmp_path / "denoise.json"
    printed = _run("bench_denoise.py", "--json", str(out), *(["--sample"] if sample else []))
    report = json.loads(out.read_text())
    assert report["meta"]["device"] == "cpu" and report["meta"]["machine"]["cpu"] == cpu_name()
    rows = report["results"]
    assert [(r["variant"], r["N"], r["V"], r["D"]) for r in rows] == [
        ("logits", 8, 32000, None),
        ("lm_head", 8, 32000, 896),
    ]
    assert [r["bytes"] for r in rows] == [8 * 32000 * 2, (32000 + 8) * 896 * 2]  # bf16 reads
    for row in rows:
        assert "error" not in row and row["sample"] is sample
        assert row["ref_us"] > 0 and row["ref_gbps"] > 0 and row["fused_us"] is None and row["speedup"] is None
    assert "CUDA is not available" in printed and "wrote" in printed


def test_bench_onnx_without_a_model_times_random_weights_with_the_shipped_tokenizer(tmp_path):
    pytest.importorskip("onnxruntime")
    out = tmp_path / "onnx.json"
    args = ["--threads", "1", "--repeats", "1", "--context", "16", "--blocks", "8", "--new-tokens", "4"]
    _run("bench_onnx.py", "--model", str(tmp_path / "no-model"), *args, "--json", str(out))
    report = json.loads(out.read_text())
    assert report["model_source"] == "random" and report["config"]["vocab_size"] == 8192
    assert report["machine"]["cpu"] == cpu_name() and "onnxruntime" in report["machine"]
    rows = report["threads"]["1"]["rows"]
    assert {"prefill 16", "ar step", "block 8"} <= set(rows)
    completions = [row for name, row in rows.items() if name.startswith("complete")]
    assert len(completions) == 4 and all(row["same_tokens"] for row in completions)  # both backends, same text
