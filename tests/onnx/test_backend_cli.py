"""`--backend onnx` end to end, and one clear line (exit 2) when its packages are missing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from decoder.engine import Engine, EngineOptions
from decoder.families import CAUSAL
from decoder.generation import GenerationParams
from decoder.onnx_backend import BackendUnavailableError, cache
from decoder.onnx_backend.errors import OnnxBackendError
from decoder.onnx_backend.session import CPU_EP, CUDA_EP, choose_provider
from decoder.router import generate

# Runs the CLI with the named modules made unimportable (as if the extra were not installed).
WITHOUT = "import sys\nfor m in sys.argv[1].split(','): sys.modules[m] = None\nfrom lsp_server.cli import main\n"
WITHOUT += "raise SystemExit(main(sys.argv[2:]))"


def cli(*args: str, without: str = "") -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", WITHOUT, without] if without else [sys.executable, "-m", "lsp_server.cli"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300)


def test_generate_with_backend_onnx_gives_the_torch_tokens(tiny_model_dir, torch_engine, onnx_engine):
    prompt = "def add(a, b):"
    args = ["--prompt", prompt, "--json", "--backend", "onnx", "--mode", "block", "--max-new-tokens", "16"]
    run = cli("generate", "--model", str(tiny_model_dir), *args, "--block-size", "8", "--threshold", "0.5")
    assert run.returncode == 0, run.stderr
    # The CLI decodes with the model family's settings where none are given (its fallback window here).
    params = GenerationParams(max_new_tokens=16, block_size=8, threshold=0.5, fallback_window=CAUSAL.fallback_window)
    params.stop_token_ids = frozenset({torch_engine.tokenizer.special.end_of_text})
    ref = generate(torch_engine, torch_engine.tokenizer.encode(prompt), "block", params)
    assert json.loads(run.stdout)["token_ids"] == ref.token_ids
    assert "CPUExecutionProvider" in run.stderr and "no CUDA provider" in run.stderr  # the choice and why


def test_missing_onnxruntime_is_one_clear_line_and_exit_2(tiny_model_dir):
    proc = cli("generate", "--model", str(tiny_model_dir), "--prompt", "x", "--backend", "onnx", without="onnxruntime")
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith("parafill: error: backend onnx: the onnx backend needs onnxruntime")
    assert "parafill[onnx]" in lines[0] and "parafill[onnx-gpu]" in lines[0]


@pytest.mark.parametrize("missing", ["onnxruntime", "onnx", "onnxscript"])
def test_missing_package_raises_backend_unavailable(tiny_model_dir, tmp_path, monkeypatch, missing):
    # A fresh copy has no export yet, so the exporter's packages are needed too.
    folder = shutil.copytree(tiny_model_dir, tmp_path / "m", ignore=shutil.ignore_patterns(cache.FOLDER_CACHE))
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(BackendUnavailableError, match=rf"{missing}.*pip install"):
        Engine.from_folder(folder, EngineOptions(backend="onnx"))


def test_unknown_backend_and_non_fp32_dtype_are_refused(tiny_model_dir, onnx_available):
    import torch

    with pytest.raises(ValueError, match="unknown backend"):
        Engine.from_folder(tiny_model_dir, EngineOptions(backend="tensorrt"))
    with pytest.raises(OnnxBackendError, match="fp32"):
        Engine.from_folder(tiny_model_dir, EngineOptions(backend="onnx", dtype=torch.bfloat16))


def test_provider_choice_prefers_cuda_and_says_why():
    gpu = choose_provider([CUDA_EP, CPU_EP], "cuda")
    assert gpu.provider == CUDA_EP and "onnxruntime-gpu" in gpu.reason
    assert "--device cuda" in choose_provider([CUDA_EP, CPU_EP], "cpu").reason
    cpu = choose_provider([CPU_EP], "cpu")
    assert cpu.provider == CPU_EP and "not installed" in cpu.reason
    with pytest.raises(OnnxBackendError, match="onnx-gpu"):
        choose_provider([CPU_EP], "cuda:0")
