"""Shared fixtures: a tiny random Qwen2 checkpoint written by transformers to a temp folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tiny_models import write_tiny_qwen2


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_qwen2(tmp_path_factory.mktemp("tiny-qwen2"))
