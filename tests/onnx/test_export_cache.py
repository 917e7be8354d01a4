"""The export cache: reused while config, weights and code are unchanged, rebuilt when they change."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from decoder.checkpoint import load_model
from decoder.engine import Engine, EngineOptions
from decoder.onnx_backend import cache
from decoder.onnx_backend.export import GRAPH_FILE
from tests.tiny_models import write_tiny_qwen2


def fake_export(calls: list[Path]):
    def export(model, path: Path, target: str) -> dict:
        calls.append(path)
        path.write_bytes(b"graph")
        return {"kv": "append-only", "export_seconds": 0.0}

    return export


@pytest.fixture()
def model_copy(tiny_model_dir, tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv("PARAFILL_ONNX_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return Path(shutil.copytree(tiny_model_dir, tmp_path / "model", ignore=shutil.ignore_patterns(cache.FOLDER_CACHE)))


def test_reused_until_the_weights_change_then_rebuilt_and_the_old_export_removed(model_copy):
    calls: list[Path] = []
    model = load_model(model_copy)
    first, record = cache.cached_export(model, model_copy, "cpu", fake_export(calls))
    assert not record["reused"] and len(calls) == 1
    assert first.parent.parent == model_copy / cache.FOLDER_CACHE and first.name == GRAPH_FILE
    assert (model_copy / cache.FOLDER_CACHE / ".gitignore").read_text().strip().endswith("*")
    again, record = cache.cached_export(load_model(model_copy), model_copy, "cpu", fake_export(calls))
    assert again == first and record["reused"] and len(calls) == 1

    write_tiny_qwen2(model_copy, seed=1)  # new weights (and config) in the same folder
    rebuilt, record = cache.cached_export(load_model(model_copy), model_copy, "cpu", fake_export(calls))
    assert not record["reused"] and len(calls) == 2 and rebuilt != first
    assert not first.parent.exists()  # the stale export is gone
    assert [p.name for p in (model_copy / cache.FOLDER_CACHE).iterdir() if p.is_dir()] == [rebuilt.parent.name]


def test_exports_for_the_two_providers_live_side_by_side(model_copy):
    # Two environments sharing a model folder (CPU and CUDA): neither removes the other's export.
    calls: list[Path] = []
    cpu, _ = cache.cached_export(load_model(model_copy), model_copy, "cpu", fake_export(calls))
    cuda, _ = cache.cached_export(load_model(model_copy), model_copy, "cuda", fake_export(calls))
    assert cpu != cuda and cpu.is_file() and cuda.is_file()
    again, record = cache.cached_export(load_model(model_copy), model_copy, "cpu", fake_export(calls))
    assert again == cpu and record["reused"] and len(calls) == 2


def test_weights_in_memory_are_keyed_by_their_values(model_copy):
    model = load_model(model_copy)
    key = cache.export_key(model, None)
    assert cache.export_key(load_model(model_copy), None) == key
    with torch.no_grad():
        model.model.norm.weight[0] += 1
    assert cache.export_key(model, None) != key


def test_read_only_model_folder_falls_back_to_the_user_cache(model_copy, tmp_path):
    (model_copy / cache.FOLDER_CACHE).write_text("not a folder")  # root may write anywhere; this blocks it
    calls: list[Path] = []
    graph, _ = cache.cached_export(load_model(model_copy), model_copy, "cpu", fake_export(calls))
    assert graph.is_relative_to(tmp_path / "xdg" / "parafill" / "onnx")
    again, record = cache.cached_export(load_model(model_copy), model_copy, "cpu", fake_export(calls))
    assert again == graph and record["reused"] and len(calls) == 1


def test_a_real_engine_reuses_its_export_and_follows_new_weights(tiny_model_dir, tmp_path, onnx_available):
    onnx_engine_first = Engine.from_folder(tiny_model_dir, EngineOptions(backend="onnx"))  # exported by now
    folder = Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))  # copy2 keeps mtimes: same key
    engine = Engine.from_folder(folder, EngineOptions(backend="onnx", use_prefix_cache=False))
    assert engine.runner.export_record["reused"]
    assert engine.runner.export_record["key"] == onnx_engine_first.runner.export_record["key"]

    write_tiny_qwen2(folder, seed=2)
    engine = Engine.from_folder(folder, EngineOptions(backend="onnx", use_prefix_cache=False))
    assert not engine.runner.export_record["reused"]
    reference = Engine.from_folder(folder, EngineOptions(use_prefix_cache=False))
    ids = reference.tokenizer.encode("def pop(self):\n    return")
    got = engine.next_token_logits(engine.start(ids, reserve=1))
    want = reference.next_token_logits(reference.start(ids, reserve=1))
    finite = torch.isfinite(want)
    assert float((got[finite] - want[finite]).abs().max()) <= 1e-4
