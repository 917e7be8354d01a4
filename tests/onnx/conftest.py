"""Engines on the tiny checkpoint, one per backend, with the prefix cache off so every pass is compared."""

from __future__ import annotations

import pytest

from decoder.engine import Engine, EngineOptions


@pytest.fixture(scope="session")
def onnx_available() -> None:
    for name in ("onnxruntime", "onnx", "onnxscript"):
        pytest.importorskip(name)


@pytest.fixture(scope="session")
def torch_engine(tiny_model_dir) -> Engine:
    return Engine.from_folder(tiny_model_dir, EngineOptions(use_prefix_cache=False))


@pytest.fixture(scope="session")
def onnx_engine(tiny_model_dir, onnx_available) -> Engine:
    return Engine.from_folder(tiny_model_dir, EngineOptions(use_prefix_cache=False, backend="onnx"))
