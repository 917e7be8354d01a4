"""Backend choice: Triton on CUDA when importable, the reference otherwise, PARAFILL_DENOISE overrides."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import parafill_kernels
from parafill_kernels import dispatch, reference
from tests.kernels.conftest import Interpreted

ROOT = Path(__file__).resolve().parents[2]


def test_backend_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARAFILL_DENOISE", raising=False)
    assert parafill_kernels.denoise_backend_name("cpu") == "reference"
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)
    monkeypatch.setattr(dispatch, "triton_launches", lambda device: True)
    assert parafill_kernels.denoise_backend_name("cuda") == "triton"
    monkeypatch.setattr(dispatch, "triton_launches", lambda device: False)  # imports, but cannot launch
    assert parafill_kernels.denoise_backend_name("cuda") == "reference"
    monkeypatch.setattr(dispatch, "triton_available", lambda: False)
    assert parafill_kernels.denoise_backend_name("cuda") == "reference"
    monkeypatch.setenv("PARAFILL_DENOISE", "triton")
    assert parafill_kernels.denoise_backend_name("cpu") == "triton"
    monkeypatch.setenv("PARAFILL_DENOISE", "Reference")
    assert parafill_kernels.denoise_backend_name("cuda") == "reference"
    monkeypatch.setenv("PARAFILL_DENOISE", "cuda")
    with pytest.raises(ValueError, match="PARAFILL_DENOISE"):
        parafill_kernels.denoise_backend_name("cuda")


def test_cpu_default_is_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARAFILL_DENOISE", raising=False)
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 50, generator=gen)
    masked = torch.ones(4, dtype=torch.bool)
    got = parafill_kernels.denoise_step(logits, masked, 0.2, 2, None, 0.5, 3)
    want = reference.denoise_step(logits, masked, 0.2, 2, None, 0.5, 3)
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)


def test_forced_triton_errors_are_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARAFILL_DENOISE", "triton")
    logits, masked = torch.randn(2, 8), torch.ones(2, dtype=torch.bool)
    if dispatch.triton_available():  # the real module, compiled (this process never sets TRITON_INTERPRET)
        with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
            parafill_kernels.denoise_step(logits, masked, 0.5)
    monkeypatch.setattr(dispatch, "triton_available", lambda: False)  # as on a machine without triton
    with pytest.raises(RuntimeError, match="not importable"):
        parafill_kernels.denoise_step(logits, masked, 0.5)


def test_a_triton_that_cannot_launch_is_reported_and_not_used(caplog: pytest.LogCaptureFixture) -> None:
    # This process has triton but no GPU and no interpreter: a real launch fails, as it does on a CUDA
    # machine without a C compiler for triton's driver stub.
    pytest.importorskip("triton")
    dispatch.triton_launches.cache_clear()
    with caplog.at_level("WARNING", logger="parafill.kernels"):
        assert dispatch.triton_launches(torch.device("cpu")) is False
    assert "cannot launch on cpu" in caplog.text and "using the PyTorch reference" in caplog.text


def test_forced_triton_runs_interpreted_kernels_on_cpu(tdn: Interpreted) -> None:
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(4, 300, generator=gen) * 2
    hidden, weight = torch.randn(4, 32, generator=gen), torch.randn(70, 32, generator=gen)
    masked = torch.tensor([1, 0, 1, 1], dtype=torch.bool)
    forced = tdn.with_env("parafill_kernels", PARAFILL_DENOISE="triton")
    assert forced.denoise_backend_name("cpu") == "triton"
    tokens, conf, commit = forced.denoise_step(logits, masked, 0.4, 2, None, 0.9, 17)
    want = reference.denoise_step(logits, masked, 0.4, 2, None, 0.9, 17)
    assert torch.equal(tokens, want[0]) and torch.equal(commit, want[2])
    torch.testing.assert_close(conf, want[1], rtol=1e-5, atol=1e-7)
    tokens, conf, commit = forced.lm_head_denoise_step(hidden, weight, masked, 0.4, 2)
    want = reference.lm_head_denoise_step(hidden, weight, masked, 0.4, 2)
    assert torch.equal(tokens, want[0]) and torch.equal(commit, want[2])
    torch.testing.assert_close(conf, want[1], rtol=1e-5, atol=1e-7)
    # and the worker's TRITON_INTERPRET never reached this process
    assert "TRITON_INTERPRET" not in __import__("os").environ


def test_package_imports_and_runs_without_triton() -> None:
    code = """
import sys
class NoTriton:
    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            raise ImportError("triton blocked for this test")
sys.meta_path.insert(0, NoTriton())
import torch, parafill_kernels as pk
from parafill_kernels import dispatch
assert pk.denoise_backend_name("cuda") == "reference"
t, c, m = pk.denoise_step(torch.randn(4, 10), torch.ones(4, dtype=torch.bool), 0.5, 2)
t, c, m = pk.lm_head_denoise_step(torch.randn(4, 6), torch.randn(10, 6), torch.ones(4, dtype=torch.bool), 0.5)
assert "triton" not in sys.modules and m.shape == (4,)
print("ok")
"""
    env = {k: v for k, v in __import__("os").environ.items() if k != "PARAFILL_DENOISE"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
